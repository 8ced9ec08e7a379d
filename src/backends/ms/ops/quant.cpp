// .ms lowering rules of the quant family (DequantizeLinear): quantized weights, made where
// they are read.
#include "../ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// A DequantizeLinear over constants becomes a quantized weight (or a dequantized constant) at
// each reader.
Status lowerDequantizeLinear(LoweringContext& ctx, const Node& n) {
  if (ctx.constOf(n.output(0))) return Status::ok();
  return bad("DequantizeLinear over a non-constant input (.ms has no dequantize op for "
             "activations in a float model)");
}

KILN_MS_LOWERING("DequantizeLinear", acceptAll, lowerDequantizeLinear);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
