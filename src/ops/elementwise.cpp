// elementwise ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("Cast", kFp16Never);
KILN_OP_FP16("CastLike", kFp16Never);
KILN_OP_FP16("Erf", kFp16BlockByDefault);
KILN_OP_FP16("Exp", kFp16BlockByDefault);
KILN_OP_FP16("Log", kFp16BlockByDefault);
KILN_OP_FP16("Pow", kFp16BlockByDefault);

} // namespace kiln::ops
