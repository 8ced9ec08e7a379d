// random ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("Bernoulli", kFp16Never);
KILN_OP_FP16("Multinomial", kFp16Never);
KILN_OP_FP16("RandomNormal", kFp16Never);
KILN_OP_FP16("RandomNormalLike", kFp16Never);
KILN_OP_FP16("RandomUniform", kFp16Never);
KILN_OP_FP16("RandomUniformLike", kFp16Never);

} // namespace kiln::ops
