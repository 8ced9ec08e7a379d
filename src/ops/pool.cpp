// pool ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass) and which window attributes are possible (ops/conv.h).
#include "ops/conv.h"
#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("AveragePool", kFp16White);
KILN_OP_FP16("GlobalAveragePool", kFp16White);
KILN_OP_FP16("MaxPool", kFp16White);

namespace {

std::string poolCheck(const NodeFacts& node) { return windowReason(node, 0, std::nullopt, false); }

} // namespace

KILN_OP_CHECK("AveragePool", poolCheck);
KILN_OP_CHECK("MaxPool", poolCheck);
KILN_OP_CHECK("LpPool", poolCheck);
KILN_OP_CHECK("MaxUnpool", poolCheck);
KILN_OP_CHECK("MaxRoiPool", poolCheck);

} // namespace kiln::ops
