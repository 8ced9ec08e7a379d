// float32 <-> float16 over many values: weight conversion, Cast, and the staging of fp16 tensors
// that kernels compute in float.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::rt {

// floatToHalf (tensor_util.h) over `count` values read from unaligned `src`: IEEE round to nearest
// even, overflow to ±inf, every NaN to the quiet NaN 0x7e00 with its sign. Written so the compiler
// vectorises it.
void floatsToHalves(const uint8_t* src, uint16_t* dst, size_t count);
inline void floatsToHalves(const float* src, uint16_t* dst, size_t count) {
  floatsToHalves(reinterpret_cast<const uint8_t*>(src), dst, count);
}

// halfToFloat (tensor_util.h) over `count` values: exact, NaN payloads kept. Vectorised.
void halvesToFloats(const uint16_t* src, float* dst, size_t count);

// Each of v[0, count) rounded to the nearest float16 value (as floatToHalf) and widened back, in
// place: the float a float16 tensor would hold.
void roundThroughHalves(float* v, size_t count);

#if defined(__x86_64__)
// The CPU features the float16 loops pick their instructions by (read once).
bool haveAvx512();
bool haveF16c();
#endif

} // namespace kiln::rt
