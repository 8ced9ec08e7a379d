// .ms lowering rules of the quant family (DequantizeLinear): quantized weights, made where
// they are read.
#include "../ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// .ms holds a DequantizeLinear only as a quantized constant: codes computed by the graph are
// refused here (decompose-quant then rewrites the node into float ops).
std::string checkDequantizeLinear(const Node& n, const lowering::OpContext&) {
  const Value* codes = n.input(0);
  if (!codes || codes->isInitializer()) return {};
  const Node* p = codes->producer();
  if (p && p->opType() == "Constant") return {};
  return "DequantizeLinear over a non-constant input (.ms has no dequantize op for activations "
         "in a float model)";
}

// A DequantizeLinear over constants becomes a quantized weight (or a dequantized constant) at
// each reader.
Status lowerDequantizeLinear(LoweringContext& ctx, const Node& n) {
  if (ctx.constOf(n.output(0))) return Status::ok();
  // Constant, but not as constOf takes it: say what it got rather than "non-constant".
  auto codes = ctx.constOf(n.input(0));
  auto scale = n.input(1) ? ctx.constOf(n.input(1)) : std::nullopt;
  if (codes && scale)
    return bad("DequantizeLinear over constant {} codes with a {} scale (.ms quantized weights "
               "take int4, uint4, int8, uint8 or int16 codes, a float32 scale and a zero point "
               "of the scale's size)",
               dtypeName(codes->tensor.dtype()), dtypeName(scale->tensor.dtype()));
  return bad("DequantizeLinear over a non-constant input (.ms has no dequantize op for "
             "activations in a float model)");
}

KILN_MS_LOWERING("DequantizeLinear", checkDequantizeLinear, lowerDequantizeLinear);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
