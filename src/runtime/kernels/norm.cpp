// Normalization kernels: BatchNormalization, InstanceNormalization, LayerNormalization,
// RMSNormalization, GroupNormalization, LRN,
// MeanVarianceNormalization, and Dropout (inference: identity with an all-true mask).
#include <cmath>
#include <random>

#include "nn_util.h"
#include "ops/norm.h"
#include "vec_loops.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;

Status checkChannelVector(const KernelContext& ctx, size_t i, int64_t channels, const char* what) {
  if (static_cast<int64_t>(ctx.input(i).elementCount()) != channels)
    return ctx.fail("{} has {} elements, expected {}", what, ctx.input(i).elementCount(), channels);
  return Status::ok();
}

Status batchNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  if (xd.size() < 2) return ctx.fail("X must have rank >= 2, got {}", xd.size());
  if (ctx.opset() < 9 && ctx.attrInt("spatial", 1) == 0)
    return ctx.unsupported("spatial=0 (per-activation statistics)");
  const int64_t n = xd[0], c = xd[1], inner = nn::product(xd, 2);
  KILN_TRY(checkChannelVector(ctx, 1, c, "scale"));
  KILN_TRY(checkChannelVector(ctx, 2, c, "B"));
  KILN_TRY(checkChannelVector(ctx, 3, c, "input_mean"));
  KILN_TRY(checkChannelVector(ctx, 4, c, "input_var"));
  const double eps = ctx.attrFloat("epsilon", 1e-5f), momentum = ctx.attrFloat("momentum", 0.9f);
  bool training = ctx.opset() >= 14 && ctx.attrInt("training_mode", 0) != 0;
  if (!training && ctx.opset() < 14 && (ctx.wantsOutput(1) || ctx.wantsOutput(2)))
    return ctx.unsupported("training outputs of opset {} BatchNormalization", ctx.opset());
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    std::vector<float> scale = toFloatVector(ctx.input(1)), bias = toFloatVector(ctx.input(2));
    std::vector<double> mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
    std::vector<float> inMean = toFloatVector(ctx.input(3)), inVar = toFloatVector(ctx.input(4));
    if (training) {
      for (int64_t ch = 0; ch < c; ++ch) {
        double sum = 0, sq = 0;
        for (int64_t b = 0; b < n; ++b) {
          const T* p = xv.data() + (b * c + ch) * inner;
          for (int64_t i = 0; i < inner; ++i) {
            sum += static_cast<double>(p[i]);
            sq += static_cast<double>(p[i]) * static_cast<double>(p[i]);
          }
        }
        const double count = static_cast<double>(n * inner);
        mean[static_cast<size_t>(ch)] = sum / count;
        var[static_cast<size_t>(ch)] = sq / count - (sum / count) * (sum / count);
      }
    } else {
      for (int64_t ch = 0; ch < c; ++ch) {
        mean[static_cast<size_t>(ch)] = inMean[static_cast<size_t>(ch)];
        var[static_cast<size_t>(ch)] = inVar[static_cast<size_t>(ch)];
      }
    }
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        const size_t k = static_cast<size_t>(ch);
        const T mul = nn::batchNormMul<T>(scale[k], var[k], eps);
        const T add = nn::batchNormAdd<T>(bias[k], mean[k], mul);
        const T* p = xv.data() + (b * c + ch) * inner;
        T* q = y.data() + (b * c + ch) * inner;
        if constexpr (std::is_same_v<T, float>) {
          vec::scaleShift(p, mul, add, q, inner);
        } else {
          for (int64_t i = 0; i < inner; ++i)
            q[i] = p[i] * mul + add;
        }
      }
    ctx.setOutput(0, std::move(y).finish());
    if (training) {
      for (size_t out = 1; out <= 2; ++out) {
        if (!ctx.wantsOutput(out)) continue;
        const std::vector<float>& running = out == 1 ? inMean : inVar;
        const std::vector<double>& batch = out == 1 ? mean : var;
        const Tensor& like = ctx.input(out + 2);
        nn::dispatchFloat(like.dtype(), [&](auto tag2) {
          using U = decltype(tag2);
          StagedOut<U> r(like.dtype(), like.dims());
          for (int64_t ch = 0; ch < c; ++ch) {
            const size_t k = static_cast<size_t>(ch);
            r.data()[k] = static_cast<U>(running[k] * momentum + batch[k] * (1.0 - momentum));
          }
          ctx.setOutput(out, std::move(r).finish());
        });
      }
    }
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status instanceNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  if (xd.size() < 2) return ctx.fail("X must have rank >= 2, got {}", xd.size());
  const int64_t n = xd[0], c = xd[1], inner = nn::product(xd, 2);
  KILN_TRY(checkChannelVector(ctx, 1, c, "scale"));
  KILN_TRY(checkChannelVector(ctx, 2, c, "B"));
  const double eps = ctx.attrFloat("epsilon", 1e-5f);
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    std::vector<float> scale = toFloatVector(ctx.input(1)), bias = toFloatVector(ctx.input(2));
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* p = xv.data() + (b * c + ch) * inner;
        T* q = y.data() + (b * c + ch) * inner;
        double sum = 0;
        for (int64_t i = 0; i < inner; ++i)
          sum += static_cast<double>(p[i]);
        const double mean = sum / static_cast<double>(inner);
        double sq = 0;
        for (int64_t i = 0; i < inner; ++i) {
          const double d = static_cast<double>(p[i]) - mean;
          sq += d * d;
        }
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
        const double s = scale[static_cast<size_t>(ch)] * inv, bb = bias[static_cast<size_t>(ch)];
        for (int64_t i = 0; i < inner; ++i)
          q[i] = static_cast<T>((static_cast<double>(p[i]) - mean) * s + bb);
      }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// Offsets into `t` for each element of the trailing `innerDims` block when t broadcasts
// (unidirectionally) to the full shape `fullDims`; nullopt when t varies outside that block.
std::optional<std::vector<int64_t>>
innerBroadcast(const std::vector<int64_t>& td, const std::vector<int64_t>& fullDims, size_t axis) {
  if (td.size() > fullDims.size()) return std::nullopt;
  const size_t lead = fullDims.size() - td.size();
  for (size_t d = 0; d < td.size(); ++d) {
    const size_t fd = d + lead;
    if (td[d] != 1 && td[d] != fullDims[fd]) return std::nullopt;
    if (fd < axis && td[d] != 1) return std::nullopt;
  }
  std::vector<int64_t> innerDims(fullDims.begin() + static_cast<std::ptrdiff_t>(axis),
                                 fullDims.end());
  std::vector<int64_t> tdInner;
  for (size_t d = 0; d < td.size(); ++d)
    if (d + lead >= axis) tdInner.push_back(td[d]);
  std::vector<int64_t> strides = broadcastStrides(tdInner, innerDims);
  const int64_t inner = nn::product(innerDims);
  std::vector<int64_t> offsets(static_cast<size_t>(inner));
  std::vector<int64_t> idx(innerDims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < inner; ++i) {
    offsets[static_cast<size_t>(i)] = off;
    for (size_t d = innerDims.size(); d-- > 0;) {
      ++idx[d];
      off += strides[d];
      if (idx[d] < innerDims[d]) break;
      off -= strides[d] * innerDims[d];
      idx[d] = 0;
    }
  }
  return offsets;
}

Status layerNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  const int64_t rank = static_cast<int64_t>(xd.size());
  auto axisOpt = normalizeAxis(ctx.attrInt("axis", -1), rank);
  if (!axisOpt) return ctx.fail("axis {} out of range for rank {}", ctx.attrInt("axis", -1), rank);
  const size_t axis = static_cast<size_t>(*axisOpt);
  const double eps = ctx.attrFloat("epsilon", 1e-5f);
  auto stash = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("stash_type", 1)));
  if (!stash || !nn::isFloatLike(*stash)) return ctx.unsupported("stash_type");
  const int64_t outer = nn::product(std::vector<int64_t>(xd.begin(), xd.begin() + *axisOpt));
  const int64_t inner = nn::product(xd, axis);
  auto scaleOff = innerBroadcast(ctx.inputDims(1), xd, axis);
  if (!scaleOff) return ctx.fail("Scale does not broadcast over the normalized axes");
  std::optional<std::vector<int64_t>> biasOff;
  if (ctx.hasInput(2)) {
    biasOff = innerBroadcast(ctx.inputDims(2), xd, axis);
    if (!biasOff) return ctx.fail("B does not broadcast over the normalized axes");
  }
  std::vector<int64_t> statDims(xd.begin(), xd.begin() + *axisOpt);
  statDims.resize(xd.size(), 1);
  std::vector<double> means(static_cast<size_t>(outer)), invs(static_cast<size_t>(outer));
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), sv(ctx.input(1));
    std::optional<Staged<T>> bv;
    if (ctx.hasInput(2)) bv.emplace(ctx.input(2));
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t o = 0; o < outer; ++o) {
      const T* p = xv.data() + o * inner;
      T* q = y.data() + o * inner;
      double sum = 0;
      for (int64_t i = 0; i < inner; ++i)
        sum += static_cast<double>(p[i]);
      const double mean = sum / static_cast<double>(inner);
      double sq = 0;
      for (int64_t i = 0; i < inner; ++i) {
        const double d = static_cast<double>(p[i]) - mean;
        sq += d * d;
      }
      const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
      means[static_cast<size_t>(o)] = mean;
      invs[static_cast<size_t>(o)] = inv;
      for (int64_t i = 0; i < inner; ++i) {
        double v = (static_cast<double>(p[i]) - mean) * inv *
                   static_cast<double>(sv[static_cast<uint64_t>((*scaleOff)[i])]);
        if (bv) v += static_cast<double>((*bv)[static_cast<uint64_t>((*biasOff)[i])]);
        q[i] = static_cast<T>(v);
      }
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  for (size_t out = 1; out <= 2; ++out) {
    if (!ctx.wantsOutput(out)) continue;
    const std::vector<double>& v = out == 1 ? means : invs;
    nn::dispatchFloat(*stash, [&](auto tag) {
      using U = decltype(tag);
      StagedOut<U> t(*stash, statDims);
      for (size_t i = 0; i < v.size(); ++i)
        t.data()[i] = static_cast<U>(v[i]);
      ctx.setOutput(out, std::move(t).finish());
    });
  }
  return Status::ok();
}

Status lrnOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  if (xd.size() < 2) return ctx.fail("X must have rank >= 2, got {}", xd.size());
  const int64_t size = ctx.attrInt("size", 0);
  if (size < 1) return ctx.fail("size must be positive");
  const double alpha = ctx.attrFloat("alpha", 1e-4f), beta = ctx.attrFloat("beta", 0.75f);
  const double bias = ctx.attrFloat("bias", 1.0f);
  const int64_t n = xd[0], c = xd[1], inner = nn::product(xd, 2);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), xd);
    std::vector<double> sq(static_cast<size_t>(inner));
    for (int64_t b = 0; b < n; ++b)
      for (int64_t ch = 0; ch < c; ++ch) {
        std::fill(sq.begin(), sq.end(), 0.0);
        const int64_t lo = std::max<int64_t>(0, ch - before), hi = std::min(c - 1, ch + after);
        for (int64_t k = lo; k <= hi; ++k) {
          const T* p = xv.data() + (b * c + k) * inner;
          for (int64_t i = 0; i < inner; ++i)
            sq[static_cast<size_t>(i)] += static_cast<double>(p[i]) * static_cast<double>(p[i]);
        }
        const T* p = xv.data() + (b * c + ch) * inner;
        T* q = y.data() + (b * c + ch) * inner;
        for (int64_t i = 0; i < inner; ++i)
          q[i] = static_cast<T>(
              static_cast<double>(p[i]) /
              std::pow(bias + alpha / static_cast<double>(size) * sq[static_cast<size_t>(i)],
                       beta));
      }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// LpNormalization: x divided by its L1 or L2 norm along `axis` (a zero norm leaves zeros).
Status lpNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  const auto rank = static_cast<int64_t>(xd.size());
  int64_t axis = ctx.attrInt("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ctx.fail("axis {} out of range for rank {}", axis, rank);
  const int64_t p = ctx.attrInt("p", 2);
  if (p != 1 && p != 2) return ctx.fail("p must be 1 or 2, got {}", p);
  const int64_t outer = nn::product(std::vector<int64_t>(xd.begin(), xd.begin() + axis), 0);
  const int64_t len = xd[static_cast<size_t>(axis)];
  const int64_t inner = nn::product(xd, static_cast<size_t>(axis) + 1);
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T* src = xv.data() + o * len * inner + i;
        T* dst = y.data() + o * len * inner + i;
        double norm = 0.0;
        for (int64_t k = 0; k < len; ++k) {
          const double v = static_cast<double>(src[k * inner]);
          norm += p == 1 ? std::abs(v) : v * v;
        }
        if (p == 2) norm = std::sqrt(norm);
        for (int64_t k = 0; k < len; ++k)
          dst[k * inner] =
              static_cast<T>(norm == 0.0 ? 0.0 : static_cast<double>(src[k * inner]) / norm);
      }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status mvnOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  const int64_t rank = static_cast<int64_t>(xd.size());
  std::vector<bool> reduced(xd.size(), false);
  for (int64_t a : ctx.attrInts("axes", {0, 2, 3})) {
    auto ax = normalizeAxis(a, rank);
    if (!ax) return ctx.fail("axis {} out of range for rank {}", a, rank);
    reduced[static_cast<size_t>(*ax)] = true;
  }
  // Strides into the kept-axes statistics; 0 on reduced axes.
  std::vector<int64_t> keptStride(xd.size(), 0);
  int64_t kept = 1;
  for (size_t d = xd.size(); d-- > 0;)
    if (!reduced[d]) {
      keptStride[d] = kept;
      kept *= xd[d];
    }
  const int64_t total = nn::product(xd);
  const int64_t groupSize = kept > 0 ? total / kept : 0;
  std::vector<int64_t> statIndex(static_cast<size_t>(total));
  {
    std::vector<int64_t> idx(xd.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < total; ++i) {
      statIndex[static_cast<size_t>(i)] = off;
      for (size_t d = xd.size(); d-- > 0;) {
        ++idx[d];
        off += keptStride[d];
        if (idx[d] < xd[d]) break;
        off -= keptStride[d] * xd[d];
        idx[d] = 0;
      }
    }
  }
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    std::vector<double> sum(static_cast<size_t>(kept)), sq(static_cast<size_t>(kept));
    for (int64_t i = 0; i < total; ++i) {
      const double v = static_cast<double>(xv[static_cast<uint64_t>(i)]);
      sum[static_cast<size_t>(statIndex[static_cast<size_t>(i)])] += v;
      sq[static_cast<size_t>(statIndex[static_cast<size_t>(i)])] += v * v;
    }
    for (int64_t k = 0; k < kept; ++k) {
      const double mean = sum[static_cast<size_t>(k)] / static_cast<double>(groupSize);
      const double var = sq[static_cast<size_t>(k)] / static_cast<double>(groupSize) - mean * mean;
      sum[static_cast<size_t>(k)] = mean;
      sq[static_cast<size_t>(k)] = std::sqrt(std::max(var, 0.0)) + 1e-9;
    }
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t i = 0; i < total; ++i) {
      const size_t k = static_cast<size_t>(statIndex[static_cast<size_t>(i)]);
      y.data()[i] =
          static_cast<T>((static_cast<double>(xv[static_cast<uint64_t>(i)]) - sum[k]) / sq[k]);
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// RMSNormalization (opset 23): Y = X / sqrt(mean(X^2 over axes axis..) + epsilon) * Scale, the
// statistics in float (stash_type 1) or double.
Status rmsNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  const int64_t rank = static_cast<int64_t>(xd.size());
  auto axisOpt = normalizeAxis(ctx.attrInt("axis", -1), rank);
  if (!axisOpt) return ctx.fail("axis {} out of range for rank {}", ctx.attrInt("axis", -1), rank);
  const size_t axis = static_cast<size_t>(*axisOpt);
  const double eps = ctx.attrFloat("epsilon", 1e-5f);
  const int64_t stash = ctx.attrInt("stash_type", 1);
  if (stash != 1 && stash != 11) return ctx.unsupported("stash_type {}", stash);
  const int64_t outer = nn::product(std::vector<int64_t>(xd.begin(), xd.begin() + *axisOpt));
  const int64_t inner = nn::product(xd, axis);
  auto scaleOff = innerBroadcast(ctx.inputDims(1), xd, axis);
  if (!scaleOff) return ctx.fail("scale does not broadcast over the normalized axes");
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), sv(ctx.input(1));
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t o = 0; o < outer; ++o) {
      const T* p = xv.data() + o * inner;
      T* q = y.data() + o * inner;
      double sq = 0;
      for (int64_t i = 0; i < inner; ++i)
        sq += static_cast<double>(p[i]) * static_cast<double>(p[i]);
      double meanSq = sq / static_cast<double>(inner);
      if (stash == 1) meanSq = static_cast<float>(meanSq);
      const double inv = 1.0 / std::sqrt(meanSq + eps);
      for (int64_t i = 0; i < inner; ++i)
        q[i] = static_cast<T>(static_cast<double>(p[i]) * inv *
                              static_cast<double>(sv[static_cast<uint64_t>((*scaleOff)[i])]));
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// GroupNormalization: the channels of X [N, C, ...] in num_groups groups, each group normalized
// over its channels and spatial positions; scale and bias are per channel from opset 21 and per
// group in opsets 18 to 20.
Status groupNormOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  if (xd.size() < 2) return ctx.fail("X must have rank >= 2, got {}", xd.size());
  const int64_t groups = ctx.attrInt("num_groups", 0);
  const int64_t n = xd[0], c = xd[1], spatial = nn::product(xd, 2);
  if (groups <= 0 || c % groups != 0)
    return ctx.fail("num_groups {} does not divide the {} channels", groups, c);
  const bool perChannel = ctx.opset() >= 21;
  const int64_t params = perChannel ? c : groups;
  KILN_TRY(checkChannelVector(ctx, 1, params, "scale"));
  KILN_TRY(checkChannelVector(ctx, 2, params, "bias"));
  const double eps = ctx.attrFloat("epsilon", 1e-5f);
  const int64_t perGroup = c / groups;
  const int64_t inner = perGroup * spatial;
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), sv(ctx.input(1)), bv(ctx.input(2));
    StagedOut<T> y(x.dtype(), xd);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t base = (b * c + g * perGroup) * spatial;
        const T* p = xv.data() + base;
        T* q = y.data() + base;
        double sum = 0;
        for (int64_t i = 0; i < inner; ++i)
          sum += static_cast<double>(p[i]);
        const double mean = sum / static_cast<double>(inner);
        double sq = 0;
        for (int64_t i = 0; i < inner; ++i)
          sq += (static_cast<double>(p[i]) - mean) * (static_cast<double>(p[i]) - mean);
        const double inv = 1.0 / std::sqrt(sq / static_cast<double>(inner) + eps);
        for (int64_t i = 0; i < inner; ++i) {
          const uint64_t k = static_cast<uint64_t>(perChannel ? g * perGroup + i / spatial : g);
          q[i] =
              static_cast<T>((static_cast<double>(p[i]) - mean) * inv * static_cast<double>(sv[k]) +
                             static_cast<double>(bv[k]));
        }
      }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// Training-mode Dropout keeps x / (1 - ratio) where a uniform [0, 1) draw is >= ratio; the draws
// are ops::dropoutDraws (seeded: reproducible, the ONNX reference generator's convention).
Status trainingDropout(KernelContext& ctx, double ratio) {
  const Tensor& x = ctx.input(0);
  if (ratio < 0.0 || ratio >= 1.0) return ctx.fail("ratio {} outside [0, 1)", ratio);
  OutTensor mask(DType::Bool, x.dims());
  uint8_t* keep = mask.bytes();
  const std::vector<double> draws = ops::dropoutDraws(ctx.attrInt("seed", 0), mask.elementCount());
  for (uint64_t i = 0; i < mask.elementCount(); ++i)
    keep[i] = draws[i] >= ratio ? 1 : 0;
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), x.dims());
    const T scale = static_cast<T>(1.0 / (1.0 - ratio));
    for (uint64_t i = 0; i < y.elementCount(); ++i)
      y.data()[i] = keep[i] ? xv[i] * scale : T{0};
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  if (ctx.wantsOutput(1)) ctx.setOutput(1, std::move(mask).finish());
  return Status::ok();
}

Status dropoutOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  // Before opset 12 there is no training switch: graphs run Dropout in inference mode.
  bool training = false;
  double ratio = ctx.attrFloat("ratio", 0.5f);
  if (ctx.opset() >= 12) {
    if (ctx.hasInput(1)) ratio = toFloatVector(ctx.input(1)).at(0);
    if (ctx.hasInput(2))
      training = ctx.input(2).elementCount() > 0 && ctx.inputData<uint8_t>(2)[0] != 0;
  }
  if (training && ratio != 0.0) return trainingDropout(ctx, ratio);
  ctx.setOutput(0, x);
  if (ctx.wantsOutput(1)) {
    const DType maskType = ctx.opset() >= 10 ? DType::Bool : x.dtype();
    OutTensor mask(maskType, x.dims());
    if (maskType == DType::Bool) {
      std::fill(mask.bytes(), mask.bytes() + mask.byteSize(), uint8_t{1});
    } else {
      bool ok = nn::dispatchFloat(maskType, [&](auto tag) {
        using T = decltype(tag);
        StagedOut<T> m(maskType, x.dims());
        std::fill(m.data(), m.data() + m.elementCount(), T{1});
        ctx.setOutput(1, std::move(m).finish());
      });
      if (!ok) return ctx.unsupported("mask dtype {}", dtypeName(maskType));
      return Status::ok();
    }
    ctx.setOutput(1, std::move(mask).finish());
  }
  return Status::ok();
}

KILN_REGISTER_KERNEL("BatchNormalization", batchNormOp);
KILN_REGISTER_KERNEL("InstanceNormalization", instanceNormOp);
KILN_REGISTER_KERNEL("LayerNormalization", layerNormOp);
KILN_REGISTER_KERNEL("RMSNormalization", rmsNormOp);
KILN_REGISTER_KERNEL("GroupNormalization", groupNormOp);
KILN_REGISTER_KERNEL("LRN", lrnOp);
KILN_REGISTER_KERNEL("LpNormalization", lpNormOp);
KILN_REGISTER_KERNEL("MeanVarianceNormalization", mvnOp);
KILN_REGISTER_KERNEL("Dropout", dropoutOp);

} // namespace
} // namespace kiln::rt
