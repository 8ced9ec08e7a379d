// Elementwise kernels: unary math, broadcasting arithmetic/comparison/logic, variadic
// Max/Min/Sum/Mean, Where, Cast and CastLike.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "half_steps.h"
#include "kiln/runtime/half_block.h"
#include "kiln/runtime/kernel.h"
#include "math_util.h"
#include "thread_pool.h"
#include "vec_loops.h"

namespace kiln::rt {
namespace {

using namespace math;

// ---- unary float math ----

Status expKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::exp(v); });
}
Status logKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::log(v); });
}
Status sqrtKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::sqrt(v); });
}
Status reciprocalKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return decltype(v)(1) / v; });
}
Status floorKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::floor(v); });
}
Status ceilKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::ceil(v); });
}
// Half-way cases go to the even neighbour, independent of the FP environment's rounding mode.
// Float32 tensors go through the vector loop (the quantization arithmetic of .om files rounds
// whole activations); it picks the same values as the element formula below.
Status roundKernel(KernelContext& ctx) {
  if (const Tensor& x = ctx.input(0); x.dtype() == DType::Float32) {
    OutTensor out(DType::Float32, x.dims());
    const auto n = static_cast<int64_t>(x.elementCount());
    const float* src = reinterpret_cast<const float*>(x.data());
    float* dst = out.data<float>();
    pool::parallelFor(pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerElement),
                      n, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
                        vec::roundHalfEven(src + i0, dst + i0, i1 - i0);
                      });
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  }
  return unaryFloatKernel(ctx, [](auto v) {
    using T = decltype(v);
    T r = std::round(v); // half away from zero
    if (std::fabs(v - std::trunc(v)) == T(0.5)) r = T(2) * std::round(v / T(2));
    return r;
  });
}
Status sinKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::sin(v); });
}
Status cosKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::cos(v); });
}
Status tanKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::tan(v); });
}
Status asinKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::asin(v); });
}
Status acosKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::acos(v); });
}
Status atanKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::atan(v); });
}
Status sinhKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::sinh(v); });
}
Status coshKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::cosh(v); });
}
Status asinhKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::asinh(v); });
}
Status acoshKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::acosh(v); });
}
Status atanhKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::atanh(v); });
}
Status erfKernel(KernelContext& ctx) {
  return unaryFloatKernel(ctx, [](auto v) { return std::erf(v); });
}

// ---- unary over numbers ----

Status absKernel(KernelContext& ctx) {
  return unaryArithKernel(ctx, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_unsigned_v<T>)
      return v;
    else if constexpr (isFloatT<T>)
      return std::fabs(v);
    else
      return static_cast<T>(v < 0 ? -v : v);
  });
}

Status negKernel(KernelContext& ctx) {
  return unaryArithKernel(ctx, [](auto v) {
    using T = decltype(v);
    if constexpr (std::is_unsigned_v<T>)
      return static_cast<T>(T(0) - v);
    else
      return static_cast<T>(-v);
  });
}

Status signKernel(KernelContext& ctx) {
  return unaryArithKernel(ctx, [](auto v) {
    using T = decltype(v);
    if (v > T(0)) return T(1);
    if constexpr (!std::is_unsigned_v<T>)
      if (v < T(0)) return static_cast<T>(-1);
    return v; // zero (and NaN stays NaN)
  });
}

// Float input → bool output predicate (IsNaN, IsInf).
template <typename Pred> Status floatPredicate(KernelContext& ctx, Pred pred) {
  Tensor x = asComputeTensor(ctx.input(0));
  Tensor r;
  if (!dispatchFloat(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        r = mapUnary<T, bool>(x, DType::Bool, pred);
      }))
    return ctx.unsupported("dtype {} is not supported", dtypeName(ctx.input(0).dtype()));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

Status isNanKernel(KernelContext& ctx) {
  return floatPredicate(ctx, [](auto v) { return std::isnan(v); });
}

Status isInfKernel(KernelContext& ctx) {
  const bool negative = ctx.attrInt("detect_negative", 1) != 0;
  const bool positive = ctx.attrInt("detect_positive", 1) != 0;
  return floatPredicate(
      ctx, [=](auto v) { return std::isinf(v) && ((v > 0 && positive) || (v < 0 && negative)); });
}

Status notKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Bool) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  ctx.setOutput(0, mapUnary<uint8_t, uint8_t>(x, DType::Bool, [](uint8_t v) { return !v; }));
  return Status::ok();
}

Status bitwiseNotKernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor r;
  if (!dispatchInteger(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        r = mapUnary<T, T>(x, x.dtype(), [](T v) { return static_cast<T>(~v); });
      }))
    return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

// ---- binary arithmetic ----

// Float32 Add/Sub/Mul/Div over the shapes real models use (same shape, a scalar, a per-channel
// or trailing-suffix operand) through the ISA-dispatched loops; false leaves the node to the
// generic path. Each output element is the same single operation, so results equal that path's.
// Float16 operands take the same shapes: blocks of the full-size operand are widened in L1, go
// through the same loops and are rounded back (the values of the element path, which widens,
// computes in float and rounds each element).
bool binaryHalfFast(KernelContext& ctx, vec::BinOp op) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::Float16 || b.dtype() != DType::Float16 || ctx.opset() < 7) return false;
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims) return false;
  const uint64_t n = countOf(*dims), na = a.elementCount(), nb = b.elementCount();
  if (n == 0) return false;
  // How the smaller operand meets the output: `Same` both full size; `Block` one value per
  // contiguous block of `inner` elements (a scalar is one block); `Suffix` a repeating run of its
  // own size. `wideIsA` says which operand is full size.
  enum class Pattern { Same, Block, Suffix };
  Pattern pattern;
  bool wideIsA = true;
  uint64_t inner = 0;
  if (na == n && nb == n && a.dims() == b.dims()) {
    pattern = Pattern::Same;
  } else if (na == n && nb == 1) {
    pattern = Pattern::Block, inner = n;
  } else if (nb == n && na == 1) {
    pattern = Pattern::Block, inner = n, wideIsA = false;
  } else if (na == n && blockBroadcast(*dims, b.dims(), inner)) {
    pattern = Pattern::Block;
  } else if (nb == n && blockBroadcast(*dims, a.dims(), inner)) {
    pattern = Pattern::Block, wideIsA = false;
  } else if (na == n && suffixBroadcast(*dims, b.dims())) {
    pattern = Pattern::Suffix;
  } else if (nb == n && suffixBroadcast(*dims, a.dims())) {
    pattern = Pattern::Suffix, wideIsA = false;
  } else {
    return false;
  }
  const auto* pa = reinterpret_cast<const uint16_t*>(a.data());
  const auto* pb = reinterpret_cast<const uint16_t*>(b.data());
  const uint16_t* wide = wideIsA ? pa : pb;
  const uint16_t* small = wideIsA ? pb : pa;
  // A repeating suffix is widened once for the call (it is at most as large as the output).
  Tensor smallFloats;
  if (pattern == Pattern::Suffix) smallFloats = widenToFloat(wideIsA ? b : a);
  const float* suffix =
      pattern == Pattern::Suffix ? reinterpret_cast<const float*>(smallFloats.data()) : nullptr;
  const uint64_t period = wideIsA ? nb : na;
  // Handed to a float16 Conv widened (FusionPlan::handoffTo): each block narrowed and widened
  // back in cache, the values the Conv would widen from the float16 output (floatsToHalves writes
  // no signalling NaN, so the Conv's widening instruction gives the same bits).
  const bool widened =
      ctx.channelsLastOutputAllowed() && ctx.node().output(0)->dtype() == DType::Float16;
  OutTensor out(widened ? DType::Float32 : DType::Float16, *dims);
  uint16_t* po = widened ? nullptr : out.data<uint16_t>();
  float* pw = widened ? out.data<float>() : nullptr;
  const auto len = static_cast<int64_t>(n);
  if (pattern == Pattern::Block) {
    // One small value per run (an SE block's per-channel scale): the wide operand widened, the
    // op done and the result narrowed (or rounded for the widened hand-off) in one pass
    // (binaryScalarHalves); what its vector loop leaves of a run goes through the float loop
    // (floatLoop), the same bits.
    pool::parallelFor(
        pool::threadsFor(ctx.threads(), static_cast<double>(len) * pool::kNsPerElement), len,
        vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
          constexpr int64_t kBlock = 64;
          float x[kBlock], scales[kBlock];
          uint16_t h[kBlock];
          // Values [from, to) of a run whose small value is s, through the float loop.
          auto floatLoop = [&](int64_t from, int64_t to, float s) {
            for (int64_t at = from; at < to; at += kBlock) {
              const int64_t count = std::min(kBlock, to - at);
              vec::widenHalvesAll(wide + at, x, count);
              if (wideIsA)
                vec::binaryScalarRight(op, x, s, x, count);
              else
                vec::binaryScalarLeft(op, s, x, x, count);
              uint16_t* halves = widened ? h : po + at;
              floatsToHalves(x, halves, static_cast<size_t>(count));
              if (widened) halvesToFloats(h, pw + at, static_cast<size_t>(count));
            }
          };
          const auto in = static_cast<int64_t>(inner);
          for (int64_t r0 = i0; r0 < i1;) {
            const int64_t run0 = r0 / in, offset = r0 % in;
            // Whole runs, up to kBlock of them in one call; else the part of a run in range.
            const int64_t runs = offset == 0 ? std::min(kBlock, (i1 - r0) / in) : 0;
            const int64_t span = runs > 0 ? in : std::min(i1 - r0, in - offset);
            const int64_t parts = std::max<int64_t>(runs, 1);
            halvesToFloats(small + run0, scales, static_cast<size_t>(parts));
            const int64_t done =
                vec::binaryScalarHalves(op, wide + r0, scales, parts, span, !wideIsA,
                                        widened ? pw + r0 : nullptr, widened ? nullptr : po + r0);
            for (int64_t q = 0; q < parts; ++q)
              floatLoop(r0 + q * span + done, r0 + (q + 1) * span, scales[q]);
            r0 += parts * span;
          }
        });
    ctx.setOutput(0, std::move(out).finish());
    return true;
  }
  pool::parallelFor(
      pool::threadsFor(ctx.threads(), static_cast<double>(len) * pool::kNsPerElement), len,
      vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
        constexpr int64_t kBlock = 1024;
        float x[kBlock], y[kBlock];
        uint16_t h[kBlock]; // the block narrowed, when the output is handed over widened
        // Operands widened by the conversion instruction (widenHalvesAll), results
        // narrowed in the loop's registers (half_steps.h) and what it leaves by
        // floatsToHalves: a NaN's payload is not seen, every result is written as
        // the float loop and floatsToHalves would write it.
        for (int64_t b0 = i0; b0 < i1; b0 += kBlock) {
          const int64_t count = std::min(kBlock, i1 - b0);
          uint16_t* const halves = widened ? h : po + b0;
          auto finish = [&](int64_t at, int64_t len, int64_t done) {
            floatsToHalves(x + at + done, halves + at + done, static_cast<size_t>(len - done));
          };
          vec::widenHalvesAll(wide + b0, x, count);
          if (pattern == Pattern::Same) {
            vec::widenHalvesAll(pb + b0, y, count);
            const int64_t done = vec::binarySameHalf(op, x, y, x, count, halves);
            vec::binarySame(op, x + done, y + done, x + done, count - done);
            finish(0, count, done);
          }
          // Suffix: runs of the block that share one stretch of the suffix.
          for (int64_t r0 = 0; pattern == Pattern::Suffix && r0 < count;) {
            const auto pos = static_cast<uint64_t>(b0 + r0);
            const uint64_t runEnd = (pos / period + 1) * period;
            const int64_t run = std::min<int64_t>(count - r0, static_cast<int64_t>(runEnd - pos));
            float* xr = x + r0;
            uint16_t* narrow = halves + r0;
            int64_t done = 0;
            const float* sv = suffix + pos % period;
            if (wideIsA) {
              done = vec::binarySameHalf(op, xr, sv, xr, run, narrow);
              vec::binarySame(op, xr + done, sv + done, xr + done, run - done);
            } else {
              done = vec::binarySameHalf(op, sv, xr, xr, run, narrow);
              vec::binarySame(op, sv + done, xr + done, xr + done, run - done);
            }
            finish(r0, run, done);
            r0 += run;
          }
          if (widened) halvesToFloats(h, pw + b0, static_cast<size_t>(count));
        }
      });
  ctx.setOutput(0, std::move(out).finish());
  return true;
}

bool binaryFloatFast(KernelContext& ctx, vec::BinOp op) {
  if (binaryHalfFast(ctx, op)) return true;
  const Tensor& a = ctx.input(0);
  if (a.dtype() != DType::Float32 || ctx.input(1).dtype() != DType::Float32) return false;
  const Tensor b = legacyBroadcastOperand(ctx, a, ctx.input(1));
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims) return false;
  const uint64_t n = countOf(*dims), na = a.elementCount(), nb = b.elementCount();
  const float* pa = reinterpret_cast<const float*>(a.data());
  const float* pb = reinterpret_cast<const float*>(b.data());
  uint64_t inner = 0;
  auto run = [&](auto body) {
    OutTensor out(DType::Float32, *dims);
    body(out.data<float>());
    ctx.setOutput(0, std::move(out).finish());
    return true;
  };
  const auto len = static_cast<int64_t>(n);
  if (n == 0) return false;
  // Large tensors are cut into element ranges over the pool (each element is computed alike).
  const int threads =
      pool::threadsFor(ctx.threads(), static_cast<double>(len) * pool::kNsPerElement);
  if (na == n && nb == n && a.dims() == b.dims())
    return run([&](float* po) {
      pool::parallelFor(threads, len, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
        vec::binarySame(op, pa + i0, pb + i0, po + i0, i1 - i0);
      });
    });
  if (na == n && nb == 1)
    return run([&](float* po) {
      pool::parallelFor(threads, len, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
        vec::binaryScalarRight(op, pa + i0, pb[0], po + i0, i1 - i0);
      });
    });
  if (nb == n && na == 1)
    return run([&](float* po) {
      pool::parallelFor(threads, len, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
        vec::binaryScalarLeft(op, pa[0], pb + i0, po + i0, i1 - i0);
      });
    });
  if (na == n && blockBroadcast(*dims, b.dims(), inner))
    return run([&](float* po) {
      const auto blocks = static_cast<int64_t>(n / inner), in = static_cast<int64_t>(inner);
      pool::parallelFor(threads, blocks, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j)
          vec::binaryScalarRight(op, pa + j * in, pb[j], po + j * in, in);
      });
    });
  if (nb == n && blockBroadcast(*dims, a.dims(), inner))
    return run([&](float* po) {
      const auto blocks = static_cast<int64_t>(n / inner), in = static_cast<int64_t>(inner);
      pool::parallelFor(threads, blocks, 1, [&](int64_t j0, int64_t j1) {
        for (int64_t j = j0; j < j1; ++j)
          vec::binaryScalarLeft(op, pa[j], pb + j * in, po + j * in, in);
      });
    });
  return false;
}

Status addKernel(KernelContext& ctx) {
  if (binaryFloatFast(ctx, vec::BinOp::Add)) return Status::ok();
  return binarySameTypeKernel(ctx, true, [](auto a, auto b) { return a + b; });
}
Status subKernel(KernelContext& ctx) {
  if (binaryFloatFast(ctx, vec::BinOp::Sub)) return Status::ok();
  return binarySameTypeKernel(ctx, true, [](auto a, auto b) { return a - b; });
}
Status mulKernel(KernelContext& ctx) {
  if (binaryFloatFast(ctx, vec::BinOp::Mul)) return Status::ok();
  return binarySameTypeKernel(ctx, true, [](auto a, auto b) { return a * b; });
}

// Integer division truncates toward zero as in C; x/0 gives 0 rather than trapping.
Status divKernel(KernelContext& ctx) {
  if (binaryFloatFast(ctx, vec::BinOp::Div)) return Status::ok();
  return binarySameTypeKernel(ctx, true, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return static_cast<T>(T(0) - a); // avoids the min / -1 trap
    }
    return static_cast<T>(a / b);
  });
}

// fmod=0: result takes the divisor's sign (Python %); fmod=1: the dividend's sign (C fmod).
Status modKernel(KernelContext& ctx) {
  const bool cStyle = ctx.attrInt("fmod", 0) != 0;
  return binarySameTypeKernel(ctx, true, [cStyle](auto a, auto b) {
    using T = decltype(a);
    T r;
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) return T(0);
      if constexpr (std::is_signed_v<T>)
        if (b == T(-1)) return T(0);
      r = static_cast<T>(a % b);
      if constexpr (std::is_signed_v<T>)
        if (!cStyle && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
    } else {
      r = std::fmod(a, b);
      if (!cStyle && r != 0 && ((r < 0) != (b < 0))) r += b;
    }
    return r;
  });
}

// Base and exponent may differ in type; the result has the base's type.
Status powKernel(KernelContext& ctx) {
  const DType baseType = ctx.input(0).dtype();
  Tensor a = asComputeTensor(ctx.input(0));
  Tensor b = asComputeTensor(ctx.input(1));
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims)
    return ctx.fail("shapes {} and {} do not broadcast", dimsText(a.dims()), dimsText(b.dims()));
  Tensor r;
  bool ok = true;
  bool baseOk = dispatchArith(a.dtype(), [&](auto baseTag) {
    using TA = decltype(baseTag);
    ok = dispatchArith(b.dtype(), [&](auto expTag) {
      using TB = decltype(expTag);
      r = mapBinary<TA, TB, TA>(a, b, a.dtype(), *dims, [](TA x, TB y) {
        double p = std::pow(static_cast<double>(x), static_cast<double>(y));
        if constexpr (std::is_integral_v<TA>) {
          if (!(p >= static_cast<double>(std::numeric_limits<TA>::lowest()) &&
                p <= static_cast<double>(std::numeric_limits<TA>::max())))
            return TA(0);
        }
        return static_cast<TA>(p);
      });
    });
  });
  if (!baseOk || !ok)
    return ctx.unsupported("dtypes {} ^ {} are not supported", dtypeName(ctx.input(0).dtype()),
                           dtypeName(ctx.input(1).dtype()));
  ctx.setOutput(0, narrowFromFloat(r, baseType));
  return Status::ok();
}

// Integer-only binary ops (BitShift, Bitwise*).
template <typename Fn> Status integerBinary(KernelContext& ctx, Fn fn) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.fail("inputs have different dtypes");
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims)
    return ctx.fail("shapes {} and {} do not broadcast", dimsText(a.dims()), dimsText(b.dims()));
  Tensor r;
  if (!dispatchInteger(a.dtype(), [&](auto tag) {
        using T = decltype(tag);
        r = mapBinary<T, T, T>(a, b, a.dtype(), *dims, fn);
      }))
    return ctx.unsupported("dtype {}", dtypeName(a.dtype()));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

Status bitShiftKernel(KernelContext& ctx) {
  std::string direction = ctx.attrString("direction", "");
  if (direction != "LEFT" && direction != "RIGHT")
    return ctx.fail("direction must be LEFT or RIGHT, got '{}'", direction);
  const bool left = direction == "LEFT";
  return integerBinary(ctx, [left](auto a, auto b) {
    using T = decltype(a);
    using U = std::make_unsigned_t<T>;
    const uint64_t shift = static_cast<uint64_t>(b);
    if (shift >= sizeof(T) * 8) return T(0);
    U ua = static_cast<U>(a);
    return static_cast<T>(left ? static_cast<U>(ua << shift) : static_cast<U>(ua >> shift));
  });
}

Status bitwiseAndKernel(KernelContext& ctx) {
  return integerBinary(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a & b); });
}
Status bitwiseOrKernel(KernelContext& ctx) {
  return integerBinary(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a | b); });
}
Status bitwiseXorKernel(KernelContext& ctx) {
  return integerBinary(ctx, [](auto a, auto b) { return static_cast<decltype(a)>(a ^ b); });
}

// Bool-only logic ops.
template <typename Fn> Status logicalBinary(KernelContext& ctx, Fn fn) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != DType::Bool || b.dtype() != DType::Bool)
    return ctx.unsupported("dtypes {} and {} (bool expected)", dtypeName(a.dtype()),
                           dtypeName(b.dtype()));
  auto dims = broadcastShapes(a.dims(), b.dims());
  if (!dims)
    return ctx.fail("shapes {} and {} do not broadcast", dimsText(a.dims()), dimsText(b.dims()));
  ctx.setOutput(0, mapBinary<uint8_t, uint8_t, uint8_t>(a, b, DType::Bool, *dims, fn));
  return Status::ok();
}

Status andKernel(KernelContext& ctx) {
  return logicalBinary(ctx, [](uint8_t a, uint8_t b) { return uint8_t(a && b); });
}
Status orKernel(KernelContext& ctx) {
  return logicalBinary(ctx, [](uint8_t a, uint8_t b) { return uint8_t(a || b); });
}
Status xorKernel(KernelContext& ctx) {
  return logicalBinary(ctx, [](uint8_t a, uint8_t b) { return uint8_t((a != 0) != (b != 0)); });
}

// ---- comparisons (bool output) ----

template <typename Fn> Status compareKernel(KernelContext& ctx, Fn fn) {
  const Tensor& ra = ctx.input(0);
  const Tensor& rb = ctx.input(1);
  if (ra.dtype() != rb.dtype())
    return ctx.fail("inputs have different dtypes {} and {}", dtypeName(ra.dtype()),
                    dtypeName(rb.dtype()));
  auto dims = broadcastShapes(ra.dims(), rb.dims());
  if (!dims)
    return ctx.fail("shapes {} and {} do not broadcast", dimsText(ra.dims()), dimsText(rb.dims()));
  if (ra.dtype() == DType::String) {
    const auto& sa = ra.stringValues();
    const auto& sb = rb.stringValues();
    OutTensor out(DType::Bool, *dims);
    bool* po = out.data<bool>();
    forEachBroadcast2(*dims, ra.dims(), rb.dims(), [&](uint64_t o, int64_t ia, int64_t ib) {
      po[o] = fn(sa[static_cast<size_t>(ia)], sb[static_cast<size_t>(ib)]);
    });
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  }
  Tensor a = asComputeTensor(ra);
  Tensor b = asComputeTensor(rb);
  Tensor r;
  if (!dispatchAll(a.dtype(), [&](auto tag) {
        using T = decltype(tag);
        r = mapBinary<T, T, bool>(a, b, DType::Bool, *dims, fn);
      }))
    return ctx.unsupported("dtype {}", dtypeName(ra.dtype()));
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

Status equalKernel(KernelContext& ctx) {
  return compareKernel(ctx, [](const auto& a, const auto& b) { return a == b; });
}
Status lessKernel(KernelContext& ctx) {
  return compareKernel(ctx, [](const auto& a, const auto& b) { return a < b; });
}
Status greaterKernel(KernelContext& ctx) {
  return compareKernel(ctx, [](const auto& a, const auto& b) { return a > b; });
}
Status lessOrEqualKernel(KernelContext& ctx) {
  return compareKernel(ctx, [](const auto& a, const auto& b) { return a <= b; });
}
Status greaterOrEqualKernel(KernelContext& ctx) {
  return compareKernel(ctx, [](const auto& a, const auto& b) { return a >= b; });
}

// ---- variadic ----

enum class Variadic { Max, Min, Sum, Mean };

template <Variadic kind, typename T> T combine(T a, T b) {
  if constexpr (kind == Variadic::Max || kind == Variadic::Min) {
    if constexpr (isFloatT<T>)
      return kind == Variadic::Max ? vec::pickMax(a, b) : vec::pickMin(a, b);
    if constexpr (kind == Variadic::Max)
      return a < b ? b : a;
    else
      return b < a ? b : a;
  } else {
    return static_cast<T>(a + b);
  }
}

template <Variadic kind> Status variadicKernel(KernelContext& ctx) {
  const size_t n = ctx.inputCount();
  if (n == 0 || !ctx.hasInput(0)) return ctx.fail("needs at least one input");
  // Two float32 operands: the vector loops (the same pick as combine; a Conv epilogue runs them
  // too, fusion.h).
  if constexpr (kind == Variadic::Max || kind == Variadic::Min)
    if (n == 2 && ctx.hasInput(1) && !ctx.hasAttr("broadcast") &&
        binaryFloatFast(ctx, kind == Variadic::Max ? vec::BinOp::Max : vec::BinOp::Min))
      return Status::ok();
  const DType dt = ctx.input(0).dtype();
  for (size_t i = 1; i < n; ++i)
    if (ctx.input(i).dtype() != dt) return ctx.fail("inputs have different dtypes");
  Tensor acc = asComputeTensor(ctx.input(0));
  bool ok = dispatchArith(acc.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (size_t i = 1; i < n; ++i) {
      Tensor next = asComputeTensor(ctx.input(i));
      auto dims = broadcastShapes(acc.dims(), next.dims());
      if (!dims) {
        ok = false;
        return;
      }
      acc = mapBinary<T, T, T>(acc, next, acc.dtype(), *dims,
                               [](T a, T b) { return combine<kind, T>(a, b); });
    }
    if constexpr (kind == Variadic::Mean) {
      const T count = static_cast<T>(n);
      acc = mapUnary<T, T>(acc, acc.dtype(), [count](T v) { return static_cast<T>(v / count); });
    }
  });
  if (!ok) {
    for (size_t i = 1; i < n; ++i)
      if (!broadcastShapes(ctx.input(0).dims(), ctx.input(i).dims()))
        return ctx.fail("input shapes do not broadcast");
    return ctx.unsupported("dtype {}", dtypeName(dt));
  }
  ctx.setOutput(0, narrowFromFloat(acc, dt));
  return Status::ok();
}

// ---- Where ----

template <typename T>
Tensor whereTyped(const Tensor& c, const Tensor& x, const Tensor& y, DType dt,
                  const std::vector<int64_t>& dims) {
  OutTensor out(dt, dims);
  const uint8_t* pc = c.data();
  const T* px = reinterpret_cast<const T*>(x.data());
  const T* py = reinterpret_cast<const T*>(y.data());
  T* po = out.data<T>();
  forEachBroadcast3(
      dims, c.dims(), x.dims(), y.dims(),
      [&](uint64_t o, int64_t ic, int64_t ix, int64_t iy) { po[o] = pc[ic] ? px[ix] : py[iy]; });
  return std::move(out).finish();
}

Status whereKernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  if (c.dtype() != DType::Bool) return ctx.fail("condition must be bool");
  if (x.dtype() != y.dtype()) return ctx.fail("X and Y have different dtypes");
  auto xy = broadcastShapes(x.dims(), y.dims());
  std::optional<std::vector<int64_t>> dims;
  if (xy) dims = broadcastShapes(c.dims(), *xy);
  if (!dims) return ctx.fail("shapes do not broadcast");
  if (x.dtype() == DType::String) {
    std::vector<std::string> values(countOf(*dims));
    const uint8_t* pc = c.data();
    const auto& sx = x.stringValues();
    const auto& sy = y.stringValues();
    forEachBroadcast3(
        *dims, c.dims(), x.dims(), y.dims(), [&](uint64_t o, int64_t ic, int64_t ix, int64_t iy) {
          values[o] = pc[ic] ? sx[static_cast<size_t>(ix)] : sy[static_cast<size_t>(iy)];
        });
    ctx.setOutput(0, Tensor::strings(*dims, std::move(values)));
    return Status::ok();
  }
  // Selection copies bits, so only the element width matters.
  Tensor r;
  switch (dtypeBits(x.dtype())) {
  case 8:
    r = whereTyped<uint8_t>(c, x, y, x.dtype(), *dims);
    break;
  case 16:
    r = whereTyped<uint16_t>(c, x, y, x.dtype(), *dims);
    break;
  case 32:
    r = whereTyped<uint32_t>(c, x, y, x.dtype(), *dims);
    break;
  case 64:
    r = whereTyped<uint64_t>(c, x, y, x.dtype(), *dims);
    break;
  default:
    return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  }
  ctx.setOutput(0, std::move(r));
  return Status::ok();
}

// ---- Cast ----

// Older ONNX test data stores bfloat16 tensors as uint16 words; the node's declared input type
// tells them apart from real uint16 data.
Tensor castSource(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Value* declared = ctx.node().input(0);
  if (x.dtype() == DType::UInt16 && declared && declared->dtype() == DType::BFloat16)
    return Tensor(DType::BFloat16, x.dims(), x.buffer());
  return x;
}

// Floats print in their shortest round-trip form for their own width (float32 "0.9767611", not
// the widened double's digits).
std::optional<Tensor> floatToStrings(const Tensor& x) {
  Tensor f = asComputeTensor(x);
  if (f.dtype() != DType::Float32) return std::nullopt;
  const float* p = reinterpret_cast<const float*>(f.data());
  std::vector<std::string> values(f.elementCount());
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(p[i]))
      values[i] = "NaN";
    else if (std::isinf(p[i]))
      values[i] = p[i] > 0 ? "INF" : "-INF";
    else
      values[i] = fmt::format("{}", p[i]);
  }
  return Tensor::strings(x.dims(), std::move(values));
}

Status castTo(KernelContext& ctx, DType to) {
  Tensor x = castSource(ctx);
  std::optional<Tensor> r;
  if (to == DType::String) r = floatToStrings(x);
  if (!r) r = castTensor(x, to);
  if (!r) return ctx.unsupported("cast from {} to {}", dtypeName(x.dtype()), dtypeName(to));
  ctx.setOutput(0, std::move(*r));
  return Status::ok();
}

Status castKernel(KernelContext& ctx) {
  auto to = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("to", 0)));
  if (!to || *to == DType::Undefined) return ctx.fail("bad 'to' attribute");
  const Tensor& x = ctx.input(0);
  if (*to == DType::Float16 && x.dtype() == DType::Float32 && ctx.channelsLastOutputAllowed()) {
    // Float32 to float16 handed to a float16 Conv widened (FusionPlan::handoffTo): rounded
    // through float16 (roundThroughHalves: floatsToHalves then halvesToFloats, in registers), the
    // values the Conv would widen from the Cast's output.
    const auto n = static_cast<int64_t>(x.elementCount());
    OutTensor out(DType::Float32, x.dims());
    const float* src = reinterpret_cast<const float*>(x.data());
    float* dst = out.data<float>();
    pool::parallelFor(pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerElement),
                      n, vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
                        std::copy(src + i0, src + i1, dst + i0);
                        roundThroughHalves(dst + i0, static_cast<size_t>(i1 - i0));
                      });
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  }
  return castTo(ctx, *to);
}

Status castLikeKernel(KernelContext& ctx) {
  DType to = ctx.input(1).dtype();
  const Value* like = ctx.node().input(1);
  if (to == DType::UInt16 && like && like->dtype() == DType::BFloat16) to = DType::BFloat16;
  return castTo(ctx, to);
}

KILN_REGISTER_KERNEL("Exp", expKernel);
KILN_REGISTER_KERNEL("Log", logKernel);
KILN_REGISTER_KERNEL("Sqrt", sqrtKernel);
KILN_REGISTER_KERNEL("Reciprocal", reciprocalKernel);
KILN_REGISTER_KERNEL("Floor", floorKernel);
KILN_REGISTER_KERNEL("Ceil", ceilKernel);
KILN_REGISTER_KERNEL("Round", roundKernel);
KILN_REGISTER_KERNEL("Sin", sinKernel);
KILN_REGISTER_KERNEL("Cos", cosKernel);
KILN_REGISTER_KERNEL("Tan", tanKernel);
KILN_REGISTER_KERNEL("Asin", asinKernel);
KILN_REGISTER_KERNEL("Acos", acosKernel);
KILN_REGISTER_KERNEL("Atan", atanKernel);
KILN_REGISTER_KERNEL("Sinh", sinhKernel);
KILN_REGISTER_KERNEL("Cosh", coshKernel);
KILN_REGISTER_KERNEL("Asinh", asinhKernel);
KILN_REGISTER_KERNEL("Acosh", acoshKernel);
KILN_REGISTER_KERNEL("Atanh", atanhKernel);
KILN_REGISTER_KERNEL("Erf", erfKernel);
KILN_REGISTER_KERNEL("Abs", absKernel);
KILN_REGISTER_KERNEL("Neg", negKernel);
KILN_REGISTER_KERNEL("Sign", signKernel);
KILN_REGISTER_KERNEL("IsNaN", isNanKernel);
KILN_REGISTER_KERNEL("IsInf", isInfKernel);
KILN_REGISTER_KERNEL("Not", notKernel);
KILN_REGISTER_KERNEL("BitwiseNot", bitwiseNotKernel);
KILN_REGISTER_KERNEL("Add", addKernel);
KILN_REGISTER_KERNEL("Sub", subKernel);
KILN_REGISTER_KERNEL("Mul", mulKernel);
KILN_REGISTER_KERNEL("Div", divKernel);
KILN_REGISTER_KERNEL("Mod", modKernel);
KILN_REGISTER_KERNEL("Pow", powKernel);
KILN_REGISTER_KERNEL("BitShift", bitShiftKernel);
KILN_REGISTER_KERNEL("BitwiseAnd", bitwiseAndKernel);
KILN_REGISTER_KERNEL("BitwiseOr", bitwiseOrKernel);
KILN_REGISTER_KERNEL("BitwiseXor", bitwiseXorKernel);
KILN_REGISTER_KERNEL("And", andKernel);
KILN_REGISTER_KERNEL("Or", orKernel);
KILN_REGISTER_KERNEL("Xor", xorKernel);
KILN_REGISTER_KERNEL("Equal", equalKernel);
KILN_REGISTER_KERNEL("Less", lessKernel);
KILN_REGISTER_KERNEL("Greater", greaterKernel);
KILN_REGISTER_KERNEL("LessOrEqual", lessOrEqualKernel);
KILN_REGISTER_KERNEL("GreaterOrEqual", greaterOrEqualKernel);
KILN_REGISTER_KERNEL("Max", variadicKernel<Variadic::Max>);
KILN_REGISTER_KERNEL("Min", variadicKernel<Variadic::Min>);
KILN_REGISTER_KERNEL("Sum", variadicKernel<Variadic::Sum>);
KILN_REGISTER_KERNEL("Mean", variadicKernel<Variadic::Mean>);
KILN_REGISTER_KERNEL("Where", whereKernel);
KILN_REGISTER_KERNEL("Cast", castKernel);
KILN_REGISTER_KERNEL("CastLike", castLikeKernel);

} // namespace
} // namespace kiln::rt
