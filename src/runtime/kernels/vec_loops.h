// Float32 loops of the elementwise and activation kernels, built for AVX-512, AVX2 and the x86-64
// baseline and picked at load time (the binary runs on any x86-64). The file is compiled with
// floating-point contraction off, so every clone rounds each operation alike and results do not
// depend on the machine.
#pragma once

#include <cstdint>
#include <limits>

namespace kiln::rt::vec {

// Tensors large enough to pay for a split (pool::threadsFor) are cut into ranges over the
// executor's pool that are multiples of kParallelGrain elements.
constexpr int64_t kParallelGrain = int64_t{1} << 12;

// Max and Min pick as the Max / Min kernels do: NaN when either operand is NaN, else the larger
// (smaller), the left operand when they compare equal (+0 / -0).
enum class BinOp { Add, Sub, Mul, Div, Max, Min };

// That pick for one pair of a floating type, written as selects (x != x is isnan) so that the
// loops using it vectorize; the elementwise Max / Min kernels of every float type call it too.
template <typename T> inline T pickMax(T x, T y) {
  const T m = x < y ? y : x;
  return (x != x || y != y) ? std::numeric_limits<T>::quiet_NaN() : m;
}
template <typename T> inline T pickMin(T x, T y) {
  const T m = y < x ? y : x;
  return (x != x || y != y) ? std::numeric_limits<T>::quiet_NaN() : m;
}

// out[i] = a[i] op b[i].
void binarySame(BinOp op, const float* a, const float* b, float* out, int64_t n);
// out[i] = a[i] op s.
void binaryScalarRight(BinOp op, const float* a, float s, float* out, int64_t n);
// out[i] = s op b[i].
void binaryScalarLeft(BinOp op, float s, const float* b, float* out, int64_t n);

enum class UnOp { Relu, LeakyRelu, Clip, HardSigmoid, HardSwish };

// out[i] = op(in[i]) with parameters p0, p1 (LeakyRelu: alpha; Clip: lo, hi; HardSigmoid: alpha,
// beta); the per-element formulas are the kernels' own.
void unary(UnOp op, const float* in, float* out, int64_t n, float p0, float p1);

// out[i] = in[i] rounded to the nearest integer, ties to even, whatever the FP environment's
// rounding mode (Round's definition; NaN stays NaN, -0.4 gives -0).
void roundHalfEven(const float* in, float* out, int64_t n);

// out[i] = in[i] * mul + add, rounded after the multiply and after the add (BatchNormalization's
// per-channel form).
void scaleShift(const float* in, float mul, float add, float* out, int64_t n);

} // namespace kiln::rt::vec
