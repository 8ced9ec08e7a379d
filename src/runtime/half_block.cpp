// Block float32 → float16 conversion (half_block.h).
#include "kiln/runtime/half_block.h"

#include <algorithm>
#include <cstring>

namespace kiln::rt {

// Per value: the sign, then by magnitude: NaN / inf, overflow, float16 subnormals and zero (an
// add of 0.5f makes the FPU round the value to a multiple of 2^-24 under its round-to-nearest-even
// mode), and normal numbers (rebias the exponent, add the rounding bias, shift). Selects rather
// than branches, so each step is one vector instruction over a block.
void floatsToHalves(const uint8_t* src, uint16_t* dst, size_t count) {
  constexpr size_t kBlock = 256;
  uint32_t bits[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    std::memcpy(bits, src + start * 4, n * 4);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t f = bits[i];
      const uint32_t a = f & 0x7fffffffu;
      const uint32_t sign = (f >> 16) & 0x8000u;
      float small;
      std::memcpy(&small, &a, 4);
      small += 0.5f;
      uint32_t smallBits;
      std::memcpy(&smallBits, &small, 4);
      const uint32_t subnormal = smallBits - 0x3f000000u;
      const uint32_t normal = (a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13;
      uint32_t h = a < 0x38800000u ? subnormal : normal;
      h = a >= 0x47800000u ? 0x7c00u : h;
      h = a > 0x7f800000u ? 0x7e00u : h;
      dst[start + i] = static_cast<uint16_t>(sign | h);
    }
  }
}

} // namespace kiln::rt
