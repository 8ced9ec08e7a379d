// Loss kernels: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
#include <cmath>
#include <limits>

#include "misc_util.h"

namespace kiln::rt {
namespace {

// Shared NLL core over log-probabilities laid out (N, C, D) with D the flattened spatial extent.
// Writes per-element losses or a reduced scalar into `out` and the output dims into `outDims`.
Status nllCore(KernelContext& ctx, const std::vector<double>& logp,
               const std::vector<int64_t>& inDims, size_t targetInput, size_t weightInput,
               std::vector<double>& out, std::vector<int64_t>& outDims) {
  if (inDims.size() < 2) return ctx.fail("input must have rank >= 2");
  const int64_t n = inDims[0], c = inDims[1];
  int64_t d = 1;
  for (size_t i = 2; i < inDims.size(); ++i)
    d *= inDims[i];
  std::vector<int64_t> targetDims = ctx.inputDims(targetInput);
  std::vector<int64_t> expected{n};
  expected.insert(expected.end(), inDims.begin() + 2, inDims.end());
  if (targetDims != expected) return ctx.fail("target shape does not match input");
  std::vector<int64_t> target = ctx.inputInts(targetInput);
  std::vector<double> weight;
  if (ctx.hasInput(weightInput)) {
    weight = miscReadReal(ctx.input(weightInput));
    if (static_cast<int64_t>(weight.size()) != c) return ctx.fail("weight must have C elements");
  }
  const bool hasIgnore = ctx.hasAttr("ignore_index");
  const int64_t ignore = ctx.attrInt("ignore_index", 0);
  const std::string reduction = ctx.attrString("reduction", "mean");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    return ctx.fail("unknown reduction '{}'", reduction);

  std::vector<double> loss(static_cast<size_t>(n * d));
  double lossSum = 0, weightSum = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const size_t ti = static_cast<size_t>(i * d + j);
      const int64_t t = target[ti];
      if (hasIgnore && t == ignore) {
        loss[ti] = 0;
        continue;
      }
      if (t < 0 || t >= c) return ctx.fail("target {} out of range [0, {})", t, c);
      const double w = weight.empty() ? 1.0 : weight[static_cast<size_t>(t)];
      loss[ti] = -logp[static_cast<size_t>((i * c + t) * d + j)] * w;
      lossSum += loss[ti];
      weightSum += w;
    }
  }
  if (reduction == "none") {
    out = std::move(loss);
    outDims = targetDims;
  } else {
    out = {reduction == "sum" ? lossSum : lossSum / weightSum};
    outDims = {};
  }
  return Status::ok();
}

Status negativeLogLikelihoodLoss(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!miscIsReal(x.dtype())) return ctx.unsupported("input dtype is not floating point");
  std::vector<double> out;
  std::vector<int64_t> outDims;
  if (Status s = nllCore(ctx, miscReadReal(x), x.dims(), 1, 2, out, outDims); !s.isOk()) return s;
  ctx.setOutput(0, miscMakeReal(x.dtype(), outDims, out));
  return Status::ok();
}

Status softmaxCrossEntropyLoss(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!miscIsReal(x.dtype())) return ctx.unsupported("scores dtype is not floating point");
  const auto& dims = x.dims();
  if (dims.size() < 2) return ctx.fail("scores must have rank >= 2");
  const int64_t n = dims[0], c = dims[1];
  int64_t d = 1;
  for (size_t i = 2; i < dims.size(); ++i)
    d *= dims[i];
  std::vector<double> v = miscReadReal(x);
  // Log-softmax over the class axis, stabilised by the per-position maximum.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      const size_t base = static_cast<size_t>(i * c * d + j);
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < c; ++k)
        mx = std::max(mx, v[base + static_cast<size_t>(k * d)]);
      double sum = 0;
      for (int64_t k = 0; k < c; ++k)
        sum += std::exp(v[base + static_cast<size_t>(k * d)] - mx);
      const double lse = mx + std::log(sum);
      for (int64_t k = 0; k < c; ++k)
        v[base + static_cast<size_t>(k * d)] -= lse;
    }
  }
  std::vector<double> out;
  std::vector<int64_t> outDims;
  if (Status s = nllCore(ctx, v, dims, 1, 2, out, outDims); !s.isOk()) return s;
  ctx.setOutput(0, miscMakeReal(x.dtype(), outDims, out));
  if (ctx.wantsOutput(1)) ctx.setOutput(1, miscMakeReal(x.dtype(), dims, v));
  return Status::ok();
}

KILN_REGISTER_KERNEL("NegativeLogLikelihoodLoss", negativeLogLikelihoodLoss);
KILN_REGISTER_KERNEL("SoftmaxCrossEntropyLoss", softmaxCrossEntropyLoss);

} // namespace
} // namespace kiln::rt
