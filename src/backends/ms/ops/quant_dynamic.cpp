// .ms rules of dynamic quantization (converter_lite quant_type=DYNAMIC_QUANT): a DynamicQuant in
// front of each int8 MatMulFusion, both of quantType QUANT_DYNAMIC, and their raising back to IR
// the executor runs in integers.
//
//   lower:  %y = MatMul(%a, DequantizeLinear(%w_q: i8[K,N], %s, 0))
//             →  %a_i8 = DynamicQuant(%a) {ALWC: asymmetric, one range;
//                                          ACWL: symmetric, one range per row of A}
//                %y    = MatMulFusion(%a_i8, %w_q + QuantParams(%s)) quantType=QUANT_DYNAMIC
//   raise:  %q, %qs, %qz = kiln.ms::DynamicQuant(%a)                       (ops/quant.h)
//           %y = Mul(Cast<float>(Sub(MatMulInteger(%q, %w_q), Mul(%qz, colsum(%w_q)))),
//                    Mul(%qs, %s))  [+ bias] [activation]
// The runtime's kernel (MatmulDynamicInt8CPUKernel) reads the weight's QuantParams (one, or one
// per output column), the first zero point only, and the activation's run-time scale and zero
// point; it computes scale_a·scale_w·Σ(a − z_a)(w − z_w) + bias, which the raised form spells out
// with the same int32 sums and float products.
#include <numeric>

#include "backends/ms/ops/quant_dynamic.h"
#include "ops/quant.h"

namespace kiln::ms {

using Strategy = MsWriteOptions::DynamicQuant;

std::optional<uint32_t> dynamicQuantInput(LoweringContext& ctx, const Node& n, uint32_t a,
                                          int64_t rank, uint32_t b, bool transA) {
  const Strategy strategy = ctx.options().dynamicQuant;
  if (strategy == Strategy::Off || transA || rank < 2) return std::nullopt;
  const MsTensor& w = ctx.tensor(b);
  const MsTensor& x = ctx.tensor(a);
  // The kernel takes int8 weights and applies the first zero point to every column: the
  // symmetric codes quantize-weights makes for DYNAMIC_QUANT (zero points 0).
  if (!w.isQuantizedWeight || w.dataType != kTypeInt8 || w.quantParams.empty() ||
      x.nodeType == kNodeValue || x.dataType != kTypeFloat32)
    return std::nullopt;
  for (const MsQuantParam& q : w.quantParams)
    if (q.zeroPoint != 0 || q.numBits != 8 || q.meanCorr != 0) return std::nullopt;

  const bool perRow = strategy == Strategy::ActivationChannelWeightLayer;
  // ACWL: one range per row of A, every batch index apart (the runtime then reads one activation
  // QuantParam per row of each batch).
  std::vector<int32_t> axes;
  if (perRow) {
    for (int64_t i = 0; i + 2 < rank; ++i)
      axes.push_back(static_cast<int32_t>(i));
    axes.push_back(-2);
  }
  MsTensor q;
  q.name = n.output(0)->name() + "_dynamic_quant";
  q.dataType = kTypeInt8;
  q.dims = x.dims;
  q.format = kFormatNCHW;
  const uint32_t quantized = ctx.addTensor(std::move(q));
  ctx.emit(fb::PrimitiveType_DynamicQuant,
           [=](FBB& fbb) {
             return fb::CreateDynamicQuant(fbb, /*symmetric=*/perRow, /*dst_type=*/kTypeInt8,
                                           /*activation_channel=*/perRow,
                                           /*prefer_axis=*/perRow ? -2 : 0, /*transpose=*/false,
                                           perRow ? fbb.CreateVector(axes) : 0)
                 .Union();
           },
           {a}, {quantized});
  ctx.setLastQuantType(fb::QuantType_QUANT_DYNAMIC);
  return quantized;
}

void markDynamicQuantMatMul(LoweringContext& ctx) {
  ctx.setLastQuantType(fb::QuantType_QUANT_DYNAMIC);
}

namespace {

Status raiseDynamicQuant(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::DynamicQuant* q = p.value_as_DynamicQuant();
  if (q->dst_type() != kTypeInt8)
    return ctx.nodeUnsupported(fmt::format("dst_type {} (int8, 32, is read)", q->dst_type()));
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  std::vector<int64_t> axes;
  if (q->prefer_axes())
    for (int32_t a : *q->prefer_axes())
      axes.push_back(a);
  Node::AttributeList attrs = {{"symmetric", Attribute::ofInt(q->symmetric() ? 1 : 0)}};
  if (!axes.empty()) attrs.push_back({"prefer_axes", Attribute::ofInts(axes)});
  Node* node = ctx.emitNode(ops::kMsDynamicQuantOp, {x}, 3, std::move(attrs));
  node->setDomain(ops::kMsDomain);
  node->output(1)->setDType(DType::Float32);
  node->output(2)->setDType(DType::Int32);
  return ctx.bind(0, node->output(0));
}

// The int8 codes of a QUANT_DYNAMIC MatMulFusion's weight as [K, N] (transposed from [N, K]
// when transpose_b), with one scale per column or one for all and the zero point all share.
struct DynamicWeight {
  Tensor codes;              // int8 [K, N]
  std::vector<float> scales; // N or 1
  int32_t zeroPoint = 0;
  std::vector<int32_t> columnSums; // Σ_k (codes[k, n] − zeroPoint)
};

Expected<DynamicWeight> dynamicWeight(RaisingContext& ctx, Value* b, bool transB) {
  const msfb::Tensor* t = ctx.tensor(ctx.inIndex(1));
  if (!b->isInitializer() || b->initializer().dtype() != DType::Int8 ||
      b->initializer().dims().size() != 2)
    return ctx.nodeUnsupported("the weight of a QUANT_DYNAMIC MatMulFusion must be a 2-D int8 "
                               "constant");
  const Tensor& stored = b->initializer();
  const int64_t rows = stored.dims()[0], cols = stored.dims()[1];
  const int64_t k = transB ? cols : rows, n = transB ? rows : cols;
  const auto* params = t->quantParams();
  const size_t count = params ? params->size() : 0;
  if (count != 1 && count != static_cast<size_t>(n))
    return ctx.nodeUnsupported(fmt::format("weight '{}' has {} quant params; the dynamic int8 "
                                           "kernel takes 1 or one per output column ({})",
                                           ctx.tensorName(ctx.inIndex(1)), count, n));
  DynamicWeight w;
  for (size_t i = 0; i < count; ++i) {
    const msfb::QuantParam* qp = params->Get(static_cast<flatbuffers::uoffset_t>(i));
    if (!qp)
      return ctx.invalid("tensor '{}' has a null quant param", ctx.tensorName(ctx.inIndex(1)));
    w.scales.push_back(static_cast<float>(qp->scale()));
    if (i == 0) w.zeroPoint = qp->zeroPoint(); // the kernel reads the first zero point only
  }
  std::vector<int8_t> src = stored.copyValues<int8_t>(), codes(src.size());
  w.columnSums.assign(static_cast<size_t>(n), 0);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c) {
      const int8_t v = src[static_cast<size_t>(transB ? c * k + r : r * n + c)];
      codes[static_cast<size_t>(r * n + c)] = v;
      w.columnSums[static_cast<size_t>(c)] += v - w.zeroPoint;
    }
  w.codes = Tensor::fromValues<int8_t>(DType::Int8, {k, n}, codes);
  return w;
}

} // namespace

Status raiseDynamicQuantMatMul(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::MatMulFusion* m = p.value_as_MatMulFusion();
  if (m->transpose_a())
    return ctx.nodeUnsupported("a QUANT_DYNAMIC MatMulFusion with transpose_a is not read");
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs A and a weight");
  KILN_ASSIGN_OR_RETURN(Value * a, ctx.in(0));
  const Node* quant = a->producer();
  if (!quant || quant->opType() != ops::kMsDynamicQuantOp || quant->domain() != ops::kMsDomain)
    return ctx.nodeUnsupported("a QUANT_DYNAMIC MatMulFusion reads its A from a DynamicQuant "
                               "(its run-time scale and zero point)");
  if (!ctx.isConstant(ctx.inIndex(1)))
    return ctx.nodeUnsupported("the weight of a QUANT_DYNAMIC MatMulFusion must be a constant");
  KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(1));
  KILN_ASSIGN_OR_RETURN(DynamicWeight w, dynamicWeight(ctx, b, m->transpose_b()));
  if (w.zeroPoint != 0)
    return ctx.nodeUnsupported("a QUANT_DYNAMIC weight with a zero point other than 0 is not read");
  const int64_t n = w.codes.dims()[1];
  // A [K, N] weight is read as stored; an [N, K] one (transpose_b) as its transposed copy.
  Value* codes = m->transpose_b() ? ctx.constant(std::move(w.codes), "dynamic_weight") : b;
  Value* product = ctx.emit("MatMulInteger", {a, codes});
  product->setDType(DType::Int32);
  // Σ(a − z_a)·w = Σ a·w − z_a·Σ w: the activation's zero point (scalar, or one per row) times
  // each column's sum, taken away in int32 as the kernel does.
  Value* sums = ctx.constant(Tensor::fromValues<int32_t>(DType::Int32, {n}, w.columnSums),
                             "dynamic_weight_sums");
  Value* correction = ctx.emit("Mul", {quant->output(2), sums});
  correction->setDType(DType::Int32);
  Value* centred = ctx.emit("Sub", {product, correction});
  centred->setDType(DType::Int32);
  Value* wide = ctx.emit("Cast", {centred}, {{"to", Attribute::ofInt(1)}});
  wide->setDType(DType::Float32);
  const int64_t scaleCount = static_cast<int64_t>(w.scales.size());
  Value* weightScale = ctx.constant(
      scaleCount == 1 ? Tensor::fromValues<float>(DType::Float32, {}, w.scales)
                      : Tensor::fromValues<float>(DType::Float32, {scaleCount}, w.scales),
      "dynamic_weight_scale");
  Value* scale = ctx.emit("Mul", {quant->output(1), weightScale});
  scale->setDType(DType::Float32);
  Value* y = ctx.emit("Mul", {wide, scale});
  y->setDType(DType::Float32);
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * bias, ctx.in(2));
    y = ctx.emit("Add", {y, bias});
    y->setDType(DType::Float32);
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(y, m->activation_type()));
  return ctx.bind(0, y);
}

KILN_MS_RAISING(DynamicQuant, raiseDynamicQuant);

} // namespace kiln::ms
