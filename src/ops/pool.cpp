// pool ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("AveragePool", kFp16White);
KILN_OP_FP16("GlobalAveragePool", kFp16White);
KILN_OP_FP16("MaxPool", kFp16White);

} // namespace kiln::ops
