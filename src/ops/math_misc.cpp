// math misc ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("TopK", kFp16BlockByDefault | kFp16Never);

namespace {

std::string topKCheck(const NodeFacts& node) { return axisAttrReason(node, "axis"); }

} // namespace

KILN_OP_CHECK("TopK", topKCheck);

} // namespace kiln::ops
