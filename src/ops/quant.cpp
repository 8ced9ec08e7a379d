// quant ops: the decisions every consumer shares: the code ranges (ops/quant.h) and how each
// takes FP16 conversion (read by the convert-fp16 pass).
#include "ops/quant.h"

#include "ops/precision.h"

namespace kiln::ops {

bool quantCodeRange(DType d, int64_t& lo, int64_t& hi) {
  switch (d) {
  case DType::UInt8:
    lo = 0, hi = 255;
    return true;
  case DType::Int8:
    lo = -128, hi = 127;
    return true;
  case DType::UInt16:
    lo = 0, hi = 65535;
    return true;
  case DType::Int16:
    lo = -32768, hi = 32767;
    return true;
  case DType::UInt4:
    lo = 0, hi = 15;
    return true;
  case DType::Int4:
    lo = -8, hi = 7;
    return true;
  default:
    return false;
  }
}

KILN_OP_FP16("DynamicQuantizeLinear", kFp16Never);
// Their scales and float sides stay float32: before opset 19 the schemas take no float16 there
// (a converted QuantizeLinear fails shape inference), and a float16 scale would move the codes.
KILN_OP_FP16("QuantizeLinear", kFp16Never);
KILN_OP_FP16("DequantizeLinear", kFp16Never);
KILN_OP_FP16("QLinearConv", kFp16Never);
KILN_OP_FP16("QLinearMatMul", kFp16Never);

} // namespace kiln::ops
