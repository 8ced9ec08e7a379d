// norm ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("BatchNormalization", kFp16White);
KILN_OP_FP16("InstanceNormalization", kFp16BlockByDefault);
KILN_OP_FP16("LayerNormalization", kFp16BlockByDefault);

} // namespace kiln::ops
