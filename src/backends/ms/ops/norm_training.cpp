// .ms rules of the norm family, arithmetic half: the BatchNormalization forms FusedBatchNorm cannot
// run, built from ReduceFusion (mean), SubFusion, MulFusion, Sqrt, DivFusion and AddFusion:
// training_mode=1 (the batch's own statistics, running statistics updated beside it) and
// inference whose scale/bias/mean/var are computed at run time (the runtime's FusedBatchNorm
// reads them as weights while building and crashes on tensors without data).
// Lowering only: the ops emitted are read back by the elementwise and reduce files.
#include <fmt/format.h>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {

// Registered by norm.cpp's BatchNormalization rule for training_mode=1 and for run-time
// parameters.
Status lowerBatchNormTraining(LoweringContext& ctx, const Node& n);
Status lowerBatchNormComputedParams(LoweringContext& ctx, const Node& n);

namespace {

// y = (x - mean) / sqrt(var + eps) * scale + bias: `mean` and `var` are the batch statistics in
// training mode, else the node's inputs 3 and 4.
Status lowerBatchNormArithmetic(LoweringContext& ctx, const Node& n, bool batchStatistics) {
  using PT = fb::PrimitiveType;
  auto shape = ctx.staticShape(n.input(0));
  if (!shape || shape->size() < 2)
    return bad("{} over an unknown shape",
               batchStatistics ? "training_mode=1" : "run-time scale/bias/mean/var");
  KILN_ASSIGN_OR_RETURN(const float eps, ops::floatAttr(n, "epsilon", 1e-5f));
  KILN_ASSIGN_OR_RETURN(const float momentum, ops::floatAttr(n, "momentum", 0.9f));
  const int rank = int(shape->size());
  const int64_t channels = (*shape)[1];
  Chain ch(ctx, n);
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  const int type = ch.typeOf(*x);
  std::vector<int64_t> axes{0};
  std::vector<int32_t> statDims(size_t(rank), 1);
  statDims[1] = int32_t(channels);
  for (int a = 2; a < rank; ++a)
    axes.push_back(a);
  auto mean = [&](uint32_t v) {
    uint32_t ta = ctx.intConst(axes, fmt::format("{}_stat_axes", n.output(0)->name()));
    return ch.op(PT::PrimitiveType_ReduceFusion, {v, ta}, ch.tmp(type, statDims), [](FBB& b) {
      return fb::CreateReduceFusion(b, true, fb::ReduceMode_ReduceMean, false, 0.0f).Union();
    });
  };
  // Per-channel parameters [C] viewed as [C, 1, ..] to broadcast against [N, C, ..].
  std::vector<int64_t> paramView(size_t(rank - 1), 1);
  paramView[0] = channels;
  auto param = [&](size_t i, const std::string& tag) -> Expected<uint32_t> {
    auto id = ctx.input(n.input(i), Layout::Onnx);
    if (!id) return id.status();
    if (rank == 2) return *id;
    return ctx.reshapeTensor(*id, paramView, fmt::format("{}_{}", n.output(0)->name(), tag));
  };
  uint32_t mu, var, centered;
  if (batchStatistics) {
    mu = mean(*x);
    centered = ch.binary(PT::PrimitiveType_SubFusion, *x, mu);
    var = mean(ch.binary(PT::PrimitiveType_MulFusion, centered, centered));
  } else {
    KILN_ASSIGN_OR_RETURN(mu, param(3, "mean_view"));
    KILN_ASSIGN_OR_RETURN(var, param(4, "var_view"));
    centered = ch.binary(PT::PrimitiveType_SubFusion, *x, mu);
  }
  uint32_t denom = ch.unary(PT::PrimitiveType_Sqrt,
                            ch.binary(PT::PrimitiveType_AddFusion, var, ch.scalar(eps, type)));
  KILN_ASSIGN_OR_RETURN(uint32_t scale, param(1, "scale_view"));
  KILN_ASSIGN_OR_RETURN(uint32_t bias, param(2, "bias_view"));
  uint32_t normed = ch.binary(PT::PrimitiveType_DivFusion, centered, denom);
  uint32_t scaled = ch.binary(PT::PrimitiveType_MulFusion, normed, scale);
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ch.op(PT::PrimitiveType_AddFusion, {scaled, bias}, *y);
  if (!batchStatistics) return Status::ok();
  // running = input · momentum + batch · (1 − momentum), over [C].
  for (size_t k = 1; k < 3; ++k) {
    if (!outputUsed(n, k)) continue;
    auto running = ctx.input(n.input(2 + k), Layout::Onnx);
    if (!running) return running.status();
    uint32_t stat = ctx.reshapeTensor(k == 1 ? mu : var, {channels},
                                      fmt::format("{}_batch_stat{}", n.output(0)->name(), k));
    uint32_t kept = ch.binary(PT::PrimitiveType_MulFusion, *running, ch.scalar(momentum, type));
    uint32_t fresh = ch.binary(PT::PrimitiveType_MulFusion, stat, ch.scalar(1.0 - momentum, type));
    auto out = ctx.output(n.output(k), Layout::Onnx);
    if (!out) return out.status();
    ch.op(PT::PrimitiveType_AddFusion, {kept, fresh}, *out);
  }
  return Status::ok();
}

} // namespace

Status lowerBatchNormTraining(LoweringContext& ctx, const Node& n) {
  return lowerBatchNormArithmetic(ctx, n, true);
}

Status lowerBatchNormComputedParams(LoweringContext& ctx, const Node& n) {
  return lowerBatchNormArithmetic(ctx, n, false);
}

} // namespace kiln::ms
