// activation ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("LeakyRelu", kFp16White);
KILN_OP_FP16("LogSoftmax", kFp16BlockByDefault);
KILN_OP_FP16("Relu", kFp16White);
KILN_OP_FP16("Softmax", kFp16BlockByDefault);

} // namespace kiln::ops
