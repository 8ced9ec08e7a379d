// reduce ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("CumSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceL1", kFp16BlockByDefault);
KILN_OP_FP16("ReduceL2", kFp16BlockByDefault);
KILN_OP_FP16("ReduceLogSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceLogSumExp", kFp16BlockByDefault);
KILN_OP_FP16("ReduceMean", kFp16BlockByDefault);
KILN_OP_FP16("ReduceProd", kFp16BlockByDefault);
KILN_OP_FP16("ReduceSum", kFp16BlockByDefault);
KILN_OP_FP16("ReduceSumSquare", kFp16BlockByDefault);

} // namespace kiln::ops
