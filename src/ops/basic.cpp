// basic ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include "ops/precision.h"

namespace kiln::ops {

KILN_OP_FP16("Constant", kFp16Never);
KILN_OP_FP16("Shape", kFp16Never);
KILN_OP_FP16("Size", kFp16Never);

} // namespace kiln::ops
