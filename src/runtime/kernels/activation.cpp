// Activation kernels: Relu family, sigmoid/tanh family, Clip, and the axis-wise
// Softmax/LogSoftmax/Hardmax.
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/runtime/kernel.h"
#include "math_util.h"
#include "thread_pool.h"
#include "vec_loops.h"

namespace kiln::rt {
namespace {

using namespace math;

// Float32 input through the ISA-dispatched loop (vec_loops.h); false for other dtypes.
bool unaryFloatFast(KernelContext& ctx, vec::UnOp op, float p0 = 0.0f, float p1 = 0.0f) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::Float16) {
    // Blocks widened in L1, through the same loop, rounded back: the values of the element path.
    OutTensor out(DType::Float16, x.dims());
    const auto n = static_cast<int64_t>(x.elementCount());
    const auto* in = reinterpret_cast<const uint16_t*>(x.data());
    uint16_t* po = out.data<uint16_t>();
    pool::parallelFor(pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerElement),
                      n, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
                        constexpr int64_t kBlock = 1024;
                        float block[kBlock];
                        for (int64_t b0 = i0; b0 < i1; b0 += kBlock) {
                          const int64_t len = std::min(kBlock, i1 - b0);
                          halvesToFloats(in + b0, block, static_cast<size_t>(len));
                          vec::unary(op, block, block, len, p0, p1);
                          floatsToHalves(block, po + b0, static_cast<size_t>(len));
                        }
                      });
    ctx.setOutput(0, std::move(out).finish());
    return true;
  }
  if (x.dtype() != DType::Float32) return false;
  OutTensor out(DType::Float32, x.dims());
  const auto n = static_cast<int64_t>(x.elementCount());
  const float* in = reinterpret_cast<const float*>(x.data());
  float* po = out.data<float>();
  pool::parallelFor(pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerElement),
                    n, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
                      vec::unary(op, in + i0, po + i0, i1 - i0, p0, p1);
                    });
  ctx.setOutput(0, std::move(out).finish());
  return true;
}

Status reluKernel(KernelContext& ctx) {
  if (unaryFloatFast(ctx, vec::UnOp::Relu)) return Status::ok();
  return unaryArithKernel(ctx, [](auto v) { return v > decltype(v)(0) ? v : decltype(v)(0); });
}

Status leakyReluKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 0.01f);
  if (unaryFloatFast(ctx, vec::UnOp::LeakyRelu, alpha)) return Status::ok();
  return unaryFloatKernel(ctx, [alpha](auto v) {
    using T = decltype(v);
    return v < T(0) ? static_cast<T>(T(alpha) * v) : v;
  });
}

// The slope broadcasts onto X (unidirectionally), so the output keeps X's shape. Before opset 7
// a 1-D slope of length C applies along the channel axis (axis 1).
Status preluKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor slope = ctx.input(1);
  const size_t rank = x.dims().size();
  if (ctx.opset() < 7 && slope.dims().size() == 1 && rank >= 2 && slope.dims()[0] == x.dims()[1] &&
      slope.dims()[0] != 1) {
    std::vector<int64_t> dims(rank - 1, 1);
    dims[0] = slope.dims()[0];
    slope = Tensor(slope.dtype(), std::move(dims), slope.buffer());
  }
  return binarySameType(ctx, x, slope, true, [](auto v, auto s) {
    using T = decltype(v);
    return v < T(0) ? static_cast<T>(s * v) : v;
  });
}

Status eluKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 1.0f);
  return unaryFloatKernel(ctx, [alpha](auto v) {
    using T = decltype(v);
    return v < T(0) ? static_cast<T>(T(alpha) * (std::exp(v) - T(1))) : v;
  });
}

// Gelu (opset 20): x·Φ(x), exactly (approximate "none") or with the tanh approximation.
Status geluKernel(KernelContext& ctx) {
  const std::string approximate = ctx.attrString("approximate", "none");
  if (approximate == "tanh")
    return unaryFloatKernel(ctx, [](auto v) {
      using T = decltype(v);
      const T inner = T(0.7978845608028654) * (v + T(0.044715) * v * v * v);
      return static_cast<T>(T(0.5) * v * (T(1) + std::tanh(inner)));
    });
  if (approximate != "none")
    return ctx.fail("approximate must be none or tanh, got '{}'", approximate);
  return unaryFloatKernel(ctx, [](auto v) {
    using T = decltype(v);
    return static_cast<T>(T(0.5) * v * (T(1) + std::erf(v * T(0.7071067811865476))));
  });
}

Status seluKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 1.67326319217681884765625f);
  const float gamma = ctx.attrFloat("gamma", 1.05070102214813232421875f);
  return unaryFloatKernel(ctx, [alpha, gamma](auto v) {
    using T = decltype(v);
    return v > T(0) ? static_cast<T>(T(gamma) * v)
                    : static_cast<T>(T(gamma) * (T(alpha) * std::exp(v) - T(alpha)));
  });
}

Status celuKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 1.0f);
  return unaryFloatKernel(ctx, [alpha](auto v) {
    using T = decltype(v);
    const T a = T(alpha);
    return v > T(0) ? v : static_cast<T>(a * (std::exp(v / a) - T(1)));
  });
}

// Split at zero so exp never overflows.
// Float32 through fn element by element with one libm call each, in ranges over the pool (each
// element is computed alike whatever the split); false for other dtypes.
template <typename Fn> bool mathFloatOnPool(KernelContext& ctx, Fn&& fn) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32) return false;
  OutTensor out(DType::Float32, x.dims());
  const auto n = static_cast<int64_t>(x.elementCount());
  const float* in = reinterpret_cast<const float*>(x.data());
  float* po = out.data<float>();
  pool::parallelFor(pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerMathCall),
                    n, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
                      for (int64_t i = i0; i < i1; ++i)
                        po[i] = fn(in[i]);
                    });
  ctx.setOutput(0, std::move(out).finish());
  return true;
}

Status sigmoidKernel(KernelContext& ctx) {
  auto sigmoid = [](auto v) {
    using T = decltype(v);
    if (v >= T(0)) return static_cast<T>(T(1) / (T(1) + std::exp(-v)));
    const T e = std::exp(v);
    return static_cast<T>(e / (T(1) + e));
  };
  if (mathFloatOnPool(ctx, sigmoid)) return Status::ok();
  return unaryFloatKernel(ctx, sigmoid);
}

Status hardSigmoidKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 0.2f);
  const float beta = ctx.attrFloat("beta", 0.5f);
  if (unaryFloatFast(ctx, vec::UnOp::HardSigmoid, alpha, beta)) return Status::ok();
  return unaryFloatKernel(ctx, [alpha, beta](auto v) {
    using T = decltype(v);
    return std::max(T(0), std::min(T(1), static_cast<T>(T(alpha) * v + T(beta))));
  });
}

Status hardSwishKernel(KernelContext& ctx) {
  if (unaryFloatFast(ctx, vec::UnOp::HardSwish)) return Status::ok();
  return unaryFloatKernel(ctx, [](auto v) {
    using T = decltype(v);
    return static_cast<T>(v * std::max(T(0), std::min(T(1), static_cast<T>(v / T(6) + T(0.5)))));
  });
}

Status tanhKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::tanh(v); });
}

template <typename T> T softplus(T v) {
  return v > T(0) ? static_cast<T>(v + std::log1p(std::exp(-v))) : std::log1p(std::exp(v));
}

Status softplusKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return softplus(v); });
}

Status softsignKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) {
    using T = decltype(v);
    return static_cast<T>(v / (T(1) + std::fabs(v)));
  });
}

Status thresholdedReluKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 1.0f);
  return unaryFloatKernel(ctx, [alpha](auto v) {
    using T = decltype(v);
    return v > T(alpha) ? v : T(0);
  });
}

Status mishKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) {
    using T = decltype(v);
    return static_cast<T>(v * std::tanh(softplus(v)));
  });
}

// Swish (opset 24): x * sigmoid(alpha * x).
Status swishKernel(KernelContext& ctx) {
  const float alpha = ctx.attrFloat("alpha", 1.0f);
  return unaryFloatKernel(ctx, [alpha](auto v) {
    using T = decltype(v);
    return static_cast<T>(v / (T(1) + std::exp(-T(alpha) * v)));
  });
}

Status shrinkKernel(KernelContext& ctx) {
  const double bias = ctx.attrFloat("bias", 0.0f);
  const double lambd = ctx.attrFloat("lambd", 0.5f);
  return unaryArithKernel(ctx, [bias, lambd](auto v) {
    using T = decltype(v);
    const double x = static_cast<double>(v);
    if (x < -lambd) return static_cast<T>(x + bias);
    if (x > lambd) return static_cast<T>(x - bias);
    return T(0);
  });
}

// Bounds are attributes before opset 11 and optional scalar inputs from 11 on.
Status clipKernel(KernelContext& ctx) {
  const Tensor& raw = ctx.input(0);
  const DType dt = raw.dtype();
  Tensor x = asComputeTensor(raw);
  std::optional<Tensor> lo, hi;
  if (ctx.opset() < 11) {
    lo = makeTensor<float>(DType::Float32, {},
                           {ctx.attrFloat("min", std::numeric_limits<float>::lowest())});
    hi = makeTensor<float>(DType::Float32, {},
                           {ctx.attrFloat("max", std::numeric_limits<float>::max())});
  } else {
    if (ctx.hasInput(1)) lo = asComputeTensor(ctx.input(1));
    if (ctx.hasInput(2)) hi = asComputeTensor(ctx.input(2));
  }
  for (const auto* bound : {&lo, &hi}) {
    if (*bound && (*bound)->elementCount() != 1) return ctx.fail("min/max must be scalars");
    if (*bound && (*bound)->dtype() != x.dtype())
      return ctx.fail("min/max dtype differs from input");
  }
  Tensor r;
  if (!dispatchArith(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        T l = std::numeric_limits<T>::lowest(), h = std::numeric_limits<T>::max();
        if (lo) l = *reinterpret_cast<const T*>(lo->data());
        if (hi) h = *reinterpret_cast<const T*>(hi->data());
        // np.clip order: min first, then max (so max wins when min > max).
        if constexpr (std::is_same_v<T, float>) {
          if (dt == DType::Float32) {
            OutTensor out(DType::Float32, x.dims());
            vec::unary(vec::UnOp::Clip, reinterpret_cast<const float*>(x.data()),
                       out.data<float>(), static_cast<int64_t>(x.elementCount()), l, h);
            r = std::move(out).finish();
            return;
          }
        }
        r = mapUnary<T, T>(x, x.dtype(), [l, h](T v) {
          if (v < l) v = l;
          if (v > h) v = h;
          return v;
        });
      }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  ctx.setOutput(0, narrowFromFloat(r, dt));
  return Status::ok();
}

// ---- Softmax family ----

enum class SoftKind { Softmax, LogSoftmax, Hardmax };

// A contiguous vector (the common last-axis case), kept free of the per-column bookkeeping.
template <SoftKind kind, typename T> void softRow(const T* in, T* out, int64_t n) {
  T best = in[0];
  int64_t at = 0;
  for (int64_t k = 1; k < n; ++k)
    if (in[k] > best) { // ties keep the first index
      best = in[k];
      at = k;
    }
  if constexpr (kind == SoftKind::Hardmax) {
    for (int64_t k = 0; k < n; ++k)
      out[k] = k == at ? T(1) : T(0);
  } else {
    double sum = 0;
    for (int64_t k = 0; k < n; ++k) {
      const T e = std::exp(static_cast<T>(in[k] - best));
      if constexpr (kind == SoftKind::Softmax) out[k] = e;
      sum += static_cast<double>(e);
    }
    if constexpr (kind == SoftKind::Softmax) {
      const T scale = static_cast<T>(1.0 / sum);
      for (int64_t k = 0; k < n; ++k)
        out[k] *= scale;
    } else {
      const T shift = static_cast<T>(static_cast<double>(best) + std::log(sum));
      for (int64_t k = 0; k < n; ++k)
        out[k] = static_cast<T>(in[k] - shift);
    }
  }
}

// One [extent x inner] block: columns are independent softmax vectors laid out with stride inner.
template <SoftKind kind, typename T>
void softBlock(const T* in, T* out, int64_t extent, int64_t inner, std::vector<double>& colMax,
               std::vector<double>& colSum, std::vector<int64_t>& colArg) {
  const size_t cols = static_cast<size_t>(inner);
  colMax.assign(cols, -std::numeric_limits<double>::infinity());
  colArg.assign(cols, 0);
  for (int64_t k = 0; k < extent; ++k)
    for (size_t i = 0; i < cols; ++i) {
      const double v = static_cast<double>(in[k * inner + static_cast<int64_t>(i)]);
      if (k == 0 || v > colMax[i]) { // ties keep the first index
        colMax[i] = v;
        colArg[i] = k;
      }
    }
  if constexpr (kind == SoftKind::Hardmax) {
    for (int64_t k = 0; k < extent; ++k)
      for (size_t i = 0; i < cols; ++i)
        out[k * inner + static_cast<int64_t>(i)] = colArg[i] == k ? T(1) : T(0);
    return;
  } else {
    // exp runs in the element type (the shift keeps it in range); the sums are doubles. Softmax
    // keeps the exponentials in `out` and rescales them afterwards.
    colSum.assign(cols, 0.0);
    for (int64_t k = 0; k < extent; ++k)
      for (size_t i = 0; i < cols; ++i) {
        const int64_t at = k * inner + static_cast<int64_t>(i);
        const T e = std::exp(static_cast<T>(in[at] - static_cast<T>(colMax[i])));
        if constexpr (kind == SoftKind::Softmax) out[at] = e;
        colSum[i] += static_cast<double>(e);
      }
    for (size_t i = 0; i < cols; ++i)
      colSum[i] = kind == SoftKind::Softmax ? 1.0 / colSum[i] : std::log(colSum[i]);
    for (int64_t k = 0; k < extent; ++k)
      for (size_t i = 0; i < cols; ++i) {
        const int64_t at = k * inner + static_cast<int64_t>(i);
        if constexpr (kind == SoftKind::Softmax)
          out[at] = static_cast<T>(static_cast<double>(out[at]) * colSum[i]);
        else
          out[at] = static_cast<T>(static_cast<double>(in[at]) - colMax[i] - colSum[i]);
      }
  }
}

// Before opset 13 the input is coerced to 2D at `axis` (default 1); from 13 the op works along
// the single axis (default -1).
template <SoftKind kind> Status softKernel(KernelContext& ctx) {
  const Tensor& raw = ctx.input(0);
  const DType dt = raw.dtype();
  Tensor x = asComputeTensor(raw);
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  const bool legacy = ctx.opset() < 13;
  const int64_t axisAttr = ctx.attrInt("axis", legacy ? 1 : -1);
  // A scalar behaves as a one-element vector.
  auto axis = normalizeAxis(axisAttr, std::max<int64_t>(rank, 1));
  if (!axis) return ctx.fail("axis {} out of range for rank {}", axisAttr, rank);
  AxisSplit s;
  if (rank == 0) {
    s = AxisSplit{};
  } else if (legacy) {
    for (int64_t i = 0; i < rank; ++i)
      (i < *axis ? s.outer : s.extent) *= x.dims()[static_cast<size_t>(i)];
  } else {
    s = splitAtAxis(x.dims(), *axis);
  }
  Tensor r;
  if (!dispatchFloat(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        OutTensor out(x.dtype(), x.dims());
        const T* in = reinterpret_cast<const T*>(x.data());
        T* po = out.data<T>();
        std::vector<double> colMax, colSum;
        std::vector<int64_t> colArg;
        const int64_t block = s.extent * s.inner;
        for (int64_t o = 0; block > 0 && o < s.outer; ++o) {
          if (s.inner == 1)
            softRow<kind, T>(in + o * block, po + o * block, s.extent);
          else
            softBlock<kind, T>(in + o * block, po + o * block, s.extent, s.inner, colMax, colSum,
                               colArg);
        }
        r = std::move(out).finish();
      }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  ctx.setOutput(0, narrowFromFloat(r, dt));
  return Status::ok();
}

KILN_REGISTER_KERNEL("Relu", reluKernel);
KILN_REGISTER_KERNEL("LeakyRelu", leakyReluKernel);
KILN_REGISTER_KERNEL("PRelu", preluKernel);
KILN_REGISTER_KERNEL("Elu", eluKernel);
KILN_REGISTER_KERNEL("Selu", seluKernel);
KILN_REGISTER_KERNEL("Gelu", geluKernel);
KILN_REGISTER_KERNEL("Celu", celuKernel);
KILN_REGISTER_KERNEL("Sigmoid", sigmoidKernel);
KILN_REGISTER_KERNEL("HardSigmoid", hardSigmoidKernel);
KILN_REGISTER_KERNEL("HardSwish", hardSwishKernel);
KILN_REGISTER_KERNEL("Tanh", tanhKernel);
KILN_REGISTER_KERNEL("Softplus", softplusKernel);
KILN_REGISTER_KERNEL("Softsign", softsignKernel);
KILN_REGISTER_KERNEL("ThresholdedRelu", thresholdedReluKernel);
KILN_REGISTER_KERNEL("Mish", mishKernel);
KILN_REGISTER_KERNEL("Swish", swishKernel);
KILN_REGISTER_KERNEL("Shrink", shrinkKernel);
KILN_REGISTER_KERNEL("Clip", clipKernel);
KILN_REGISTER_KERNEL("Softmax", softKernel<SoftKind::Softmax>);
KILN_REGISTER_KERNEL("LogSoftmax", softKernel<SoftKind::LogSoftmax>);
KILN_REGISTER_KERNEL("Hardmax", softKernel<SoftKind::Hardmax>);

} // namespace
} // namespace kiln::rt
