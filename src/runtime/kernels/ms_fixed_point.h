// MindSpore Lite's int8 arithmetic for ops raised from a .ms (fixed-point requantization of
// Conv2D / MatMul sums, QuantDTypeCast's float -> int8 rounding), so kiln's run of an int8 .ms
// gives the runtime's codes rather than ONNX's float-rounded ones.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "kiln/runtime/kernel.h"

namespace kiln::rt::ms_int8 {

// The .ms reader marks the QLinearConv / QLinearMatMul / QuantizeLinear it raises from int8 .ms
// kernels with this string attribute; ops from ONNX keep ONNX's float semantics.
inline constexpr const char* kAttribute = "kiln_requantize";
inline constexpr const char* kFixedPoint = "ms_fixed_point";

inline bool requested(const KernelContext& ctx) {
  return ctx.attrString(kAttribute) == kFixedPoint;
}

// real multiplier ≈ multiplier / 2^31 · 2^leftShift / 2^rightShift (multiplier in [2^30, 2^31)).
struct Multiplier {
  int32_t multiplier = 0;
  int leftShift = 0, rightShift = 0;
};

// The runtime's per-channel multiplier: the input and weight scales (floats) multiplied in
// float, divided by the output scale in double; the double's mantissa rounded half up to 31 bits
// (a carry to 2^31 halves it and raises the exponent); a positive exponent is a left shift of the
// sum, a negative one a rounding right shift of the product.
inline Multiplier multiplierOf(float inputScale, float weightScale, float outputScale) {
  const double real =
      static_cast<double>(inputScale * weightScale) / static_cast<double>(outputScale);
  Multiplier m;
  if (!(real > 0) || !std::isfinite(real)) return m;
  int exponent = 0;
  const double fraction = std::frexp(real, &exponent); // [0.5, 1): exact, and so is + 0.5 below
  int64_t q = static_cast<int64_t>(std::floor(std::ldexp(fraction, 31) + 0.5));
  if (q == (int64_t{1} << 31)) {
    q >>= 1;
    ++exponent;
  }
  m.multiplier = static_cast<int32_t>(q);
  m.leftShift = std::max(exponent, 0);
  // Beyond 31 the runtime's shift is undefined; such multipliers (< 2^-32) give 0 anyway.
  m.rightShift = std::min(std::max(-exponent, 0), 31);
  return m;
}

// acc · multiplier: the sum shifted left (int32, wrapping), the high half of the doubled 64-bit
// product rounded half away from zero (saturating only INT32_MIN · INT32_MIN), then an arithmetic
// right shift rounding half away from zero.
inline int32_t requantize(int32_t acc, const Multiplier& m) {
  const int32_t a = static_cast<int32_t>(static_cast<uint32_t>(acc) << m.leftShift);
  int32_t high;
  if (a == std::numeric_limits<int32_t>::min() && m.multiplier == a) {
    high = std::numeric_limits<int32_t>::max();
  } else {
    const int64_t ab = static_cast<int64_t>(a) * m.multiplier;
    const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : 1 - (int64_t{1} << 30);
    high = static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31)); // truncates toward zero
  }
  const int32_t mask = static_cast<int32_t>((int64_t{1} << m.rightShift) - 1);
  const int32_t remainder = high & mask;
  const int32_t threshold = (mask >> 1) + (high < 0 ? 1 : 0);
  return (high >> m.rightShift) + (remainder > threshold ? 1 : 0);
}

// The output code: requantized sum plus the output zero point, clamped to the code range.
inline int64_t outputCode(int32_t acc, const Multiplier& m, int64_t zeroPoint, int64_t lo,
                          int64_t hi) {
  return std::clamp(static_cast<int64_t>(requantize(acc, m)) + zeroPoint, lo, hi);
}

// QuantDTypeCast float32 -> int8: x · (1 / scale) + zero point in float, rounded half away from
// zero, clamped; ±inf saturate, NaN gives the lowest code (the runtime's int conversion of NaN on
// x86 is INT_MIN, clamped).
inline int64_t quantizeCode(float x, float inverseScale, int64_t zeroPoint, int64_t lo,
                            int64_t hi) {
  if (x == std::numeric_limits<float>::infinity()) return hi;
  if (x == -std::numeric_limits<float>::infinity()) return lo;
  const float shifted = x * inverseScale + static_cast<float>(zeroPoint);
  if (std::isnan(shifted)) return lo;
  return static_cast<int64_t>(
      std::clamp(std::round(shifted), static_cast<float>(lo), static_cast<float>(hi)));
}

} // namespace kiln::rt::ms_int8
