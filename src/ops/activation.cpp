// activation ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("LeakyRelu", kFp16White);
KILN_OP_FP16("LogSoftmax", kFp16BlockByDefault);
KILN_OP_FP16("Relu", kFp16White);
KILN_OP_FP16("Softmax", kFp16BlockByDefault);

namespace {

std::string softmaxCheck(const NodeFacts& node) { return axisAttrReason(node, "axis"); }

} // namespace

KILN_OP_CHECK("Softmax", softmaxCheck);
KILN_OP_CHECK("LogSoftmax", softmaxCheck);
KILN_OP_CHECK("Hardmax", softmaxCheck);

} // namespace kiln::ops
