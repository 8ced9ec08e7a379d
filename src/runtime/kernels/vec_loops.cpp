// Float32 elementwise loops with load-time ISA dispatch (vec_loops.h).
#include "vec_loops.h"

#include <algorithm>

namespace kiln::rt::vec {
namespace {

#define KILN_VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))


template <typename Fn>
inline void loopSame(const float* __restrict a, const float* __restrict b, float* __restrict out,
                     int64_t n, Fn fn) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = fn(a[i], b[i]);
}

} // namespace

// `out` may alias an input exactly (never partially), so no __restrict on the public entry points;
// the aliasing case takes the plain loop.
KILN_VEC_CLONES void binarySame(BinOp op, const float* a, const float* b, float* out, int64_t n) {
  switch (op) {
  case BinOp::Add:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] + b[i];
    break;
  case BinOp::Sub:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] - b[i];
    break;
  case BinOp::Mul:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] * b[i];
    break;
  case BinOp::Div:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] / b[i];
    break;
  case BinOp::Max:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMax<float>(a[i], b[i]);
    break;
  case BinOp::Min:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMin<float>(a[i], b[i]);
    break;
  }
}

KILN_VEC_CLONES void binaryScalarRight(BinOp op, const float* a, float s, float* out, int64_t n) {
  switch (op) {
  case BinOp::Add:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] + s;
    break;
  case BinOp::Sub:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] - s;
    break;
  case BinOp::Mul:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] * s;
    break;
  case BinOp::Div:
    for (int64_t i = 0; i < n; ++i)
      out[i] = a[i] / s;
    break;
  case BinOp::Max:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMax<float>(a[i], s);
    break;
  case BinOp::Min:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMin<float>(a[i], s);
    break;
  }
}

KILN_VEC_CLONES void binaryScalarLeft(BinOp op, float s, const float* b, float* out, int64_t n) {
  switch (op) {
  case BinOp::Add:
    for (int64_t i = 0; i < n; ++i)
      out[i] = s + b[i];
    break;
  case BinOp::Sub:
    for (int64_t i = 0; i < n; ++i)
      out[i] = s - b[i];
    break;
  case BinOp::Mul:
    for (int64_t i = 0; i < n; ++i)
      out[i] = s * b[i];
    break;
  case BinOp::Div:
    for (int64_t i = 0; i < n; ++i)
      out[i] = s / b[i];
    break;
  case BinOp::Max:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMax<float>(s, b[i]);
    break;
  case BinOp::Min:
    for (int64_t i = 0; i < n; ++i)
      out[i] = pickMin<float>(s, b[i]);
    break;
  }
}

// Branch-free forms of the kernels' formulas; each picks the same value (NaN included) as the
// branchy original: a comparison with NaN is false, so the NaN input passes through.
// roundeven is IEEE roundToIntegralTiesToEven: it ignores the dynamic rounding mode and
// compiles to one rounding instruction with the mode in its immediate.
KILN_VEC_CLONES void roundHalfEven(const float* in, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = __builtin_roundevenf(in[i]);
}

KILN_VEC_CLONES void unary(UnOp op, const float* in, float* out, int64_t n, float p0, float p1) {
  switch (op) {
  case UnOp::Relu:
    for (int64_t i = 0; i < n; ++i)
      out[i] = in[i] > 0.0f ? in[i] : 0.0f;
    break;
  case UnOp::LeakyRelu:
    for (int64_t i = 0; i < n; ++i)
      out[i] = in[i] < 0.0f ? p0 * in[i] : in[i];
    break;
  case UnOp::Clip:
    for (int64_t i = 0; i < n; ++i) {
      float v = in[i];
      v = v < p0 ? p0 : v;
      v = v > p1 ? p1 : v;
      out[i] = v;
    }
    break;
  case UnOp::HardSigmoid:
    for (int64_t i = 0; i < n; ++i)
      out[i] = std::max(0.0f, std::min(1.0f, p0 * in[i] + p1));
    break;
  case UnOp::HardSwish:
    for (int64_t i = 0; i < n; ++i) {
      const float v = in[i];
      out[i] = v * std::max(0.0f, std::min(1.0f, v / 6.0f + 0.5f));
    }
    break;
  }
}

KILN_VEC_CLONES void scaleShift(const float* in, float mul, float add, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = in[i] * mul + add;
}

} // namespace kiln::rt::vec
