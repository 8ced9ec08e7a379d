// Block float32 <-> float16 conversion (half_block.h).
#include "kiln/runtime/half_block.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace kiln::rt {

#if defined(__x86_64__)
bool haveF16c() {
  // F16C read off CPUID leaf 1 (ECX): clang 14's __builtin_cpu_supports does not know "f16c".
  static const bool have = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
           (ecx & bit_F16C) != 0;
  }();
  return have;
}

bool haveAvx512() {
  static const bool have = __builtin_cpu_supports("avx512f");
  return have;
}
#endif

namespace {

#if defined(__x86_64__)
// The F16C conversion instructions, 8 values at a time, with NaNs fixed up to the scalar
// functions' results (the instructions keep a NaN's payload on narrowing and quiet a signalling
// NaN on widening): every other value converts exactly as floatToHalf / halfToFloat (round to
// nearest even, overflow to inf, subnormals kept; the instructions ignore MXCSR's DAZ and FTZ).

// NaNs are rare in activations: the fix-up blend runs only for a group of 8 that holds one (the
// test is one compare and a branch that is almost never taken).
__attribute__((target("avx2,f16c"))) size_t floatsToHalvesF16c(const uint8_t* src, uint16_t* dst,
                                                               size_t count) {
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x7fc00000);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i * 4));
    const __m256i a = _mm256_and_si256(bits, absMask);
    const __m256i nan = _mm256_cmpgt_epi32(a, inf);
    if (!_mm256_testz_si256(nan, nan)) {
      // A NaN becomes the plain quiet NaN with its sign, which narrows to sign | 0x7e00.
      const __m256i plain = _mm256_or_si256(_mm256_andnot_si256(absMask, bits), quiet);
      bits = _mm256_blendv_epi8(bits, plain, nan);
    }
    const __m128i h = _mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  return i;
}

__attribute__((target("avx2,f16c"))) size_t halvesToFloatsF16c(const uint16_t* src, float* dst,
                                                               size_t count) {
  const __m128i magnitude16 = _mm_set1_epi16(0x7fff);
  const __m128i infHalf16 = _mm_set1_epi16(0x7c00);
  const __m256i magnitude = _mm256_set1_epi32(0x7fff);
  const __m256i infHalf = _mm256_set1_epi32(0x7c00);
  const __m256i signBit = _mm256_set1_epi32(0x8000);
  const __m256i infFloat = _mm256_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    __m256i f = _mm256_castps_si256(_mm256_cvtph_ps(h));
    // Magnitudes fit int16 as positive values, so the signed compare finds the NaNs.
    const __m128i nan16 = _mm_cmpgt_epi16(_mm_and_si128(h, magnitude16), infHalf16);
    if (!_mm_testz_si128(nan16, nan16)) {
      const __m256i wide = _mm256_cvtepu16_epi32(h);
      const __m256i em = _mm256_and_si256(wide, magnitude);
      const __m256i nan = _mm256_cmpgt_epi32(em, infHalf);
      // A NaN keeps its payload as is: sign | all-ones exponent | mantissa << 13.
      const __m256i exact = _mm256_or_si256(
          _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(wide, signBit), 16), infFloat),
          _mm256_slli_epi32(em, 13));
      f = _mm256_blendv_epi8(f, exact, nan);
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), f);
  }
  return i;
}

// Narrowing and widening in registers: a NaN comes back as the quiet NaN with its sign (what
// floatToHalf's 0x7e00 widens to), every other value as the F16C round trip gives it.
__attribute__((target("avx2,f16c"))) size_t roundThroughHalvesF16c(float* v, size_t count) {
  const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
  const __m256i inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x7fc00000);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i));
    __m256i r = _mm256_castps_si256(
        _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_castsi256_ps(bits), _MM_FROUND_TO_NEAREST_INT)));
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, absMask), inf);
    if (!_mm256_testz_si256(nan, nan))
      r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_andnot_si256(absMask, bits), quiet), nan);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(v + i), r);
  }
  return i;
}

// The same conversions 16 values at a time where AVX-512 is there (its conversions take as many
// cycles per instruction as F16C's 8-wide ones); NaNs are found with an unordered compare and
// fixed up as above.

__attribute__((target("avx512f"))) size_t floatsToHalvesAvx512(const uint8_t* src, uint16_t* dst,
                                                               size_t count) {
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512i quiet = _mm512_set1_epi32(0x7fc00000);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512 x = _mm512_loadu_ps(src + i * 4);
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    if (nan) {
      const __m512i plain =
          _mm512_or_si512(_mm512_andnot_si512(absMask, _mm512_castps_si512(x)), quiet);
      x = _mm512_mask_blend_ps(nan, x, _mm512_castsi512_ps(plain));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
  }
  return i;
}

__attribute__((target("avx512f"))) size_t halvesToFloatsAvx512(const uint16_t* src, float* dst,
                                                               size_t count) {
  const __m512i magnitude = _mm512_set1_epi32(0x7fff);
  const __m512i signBit = _mm512_set1_epi32(0x8000);
  const __m512i infFloat = _mm512_set1_epi32(0x7f800000);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    __m512 f = _mm512_cvtph_ps(h);
    const __mmask16 nan = _mm512_cmp_ps_mask(f, f, _CMP_UNORD_Q);
    if (nan) {
      const __m512i wide = _mm512_cvtepu16_epi32(h);
      const __m512i em = _mm512_and_si512(wide, magnitude);
      // A NaN keeps its payload as is: sign | all-ones exponent | mantissa << 13.
      const __m512i exact = _mm512_or_si512(
          _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(wide, signBit), 16), infFloat),
          _mm512_slli_epi32(em, 13));
      f = _mm512_mask_blend_ps(nan, f, _mm512_castsi512_ps(exact));
    }
    _mm512_storeu_ps(dst + i, f);
  }
  return i;
}

__attribute__((target("avx512f"))) size_t roundThroughHalvesAvx512(float* v, size_t count) {
  const __m512i absMask = _mm512_set1_epi32(0x7fffffff);
  const __m512i quiet = _mm512_set1_epi32(0x7fc00000);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 x = _mm512_loadu_ps(v + i);
    __m512 r = _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    if (nan)
      r = _mm512_mask_blend_ps(nan, r,
                               _mm512_castsi512_ps(_mm512_or_si512(
                                   _mm512_andnot_si512(absMask, _mm512_castps_si512(x)), quiet)));
    _mm512_storeu_ps(v + i, r);
  }
  return i;
}
#endif

// The portable loops below, for what the vector loops leave.
void floatsToHalvesPortable(const uint8_t* src, uint16_t* dst, size_t count);
void halvesToFloatsPortable(const uint16_t* src, float* dst, size_t count);

} // namespace

void floatsToHalves(const uint8_t* src, uint16_t* dst, size_t count) {
  size_t done = 0;
#if defined(__x86_64__)
  if (haveAvx512()) done = floatsToHalvesAvx512(src, dst, count);
  if (haveF16c()) done += floatsToHalvesF16c(src + done * 4, dst + done, count - done);
#endif
  floatsToHalvesPortable(src + done * 4, dst + done, count - done);
}

void halvesToFloats(const uint16_t* src, float* dst, size_t count) {
  size_t done = 0;
#if defined(__x86_64__)
  if (haveAvx512()) done = halvesToFloatsAvx512(src, dst, count);
  if (haveF16c()) done += halvesToFloatsF16c(src + done, dst + done, count - done);
#endif
  halvesToFloatsPortable(src + done, dst + done, count - done);
}

namespace {

// Per value: the sign, then by magnitude: NaN / inf, overflow, float16 subnormals and zero (an
// add of 0.5f makes the FPU round the value to a multiple of 2^-24 under its round-to-nearest-even
// mode), and normal numbers (rebias the exponent, add the rounding bias, shift). Selects rather
// than branches, so each step is one vector instruction over a block.
void floatsToHalvesPortable(const uint8_t* src, uint16_t* dst, size_t count) {
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

// Per value: normal numbers rebias the exponent; inf / NaN keep the payload under an all-ones
// exponent; subnormals and zero are the integer mantissa times 2^-24 (both exact in float).
void halvesToFloatsPortable(const uint16_t* src, float* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    const uint32_t h = src[i];
    const uint32_t sign = (h & 0x8000u) << 16;
    const uint32_t em = h & 0x7fffu;
    const uint32_t normal = (em << 13) + 0x38000000u;
    const uint32_t special = (em << 13) | 0x7f800000u;
    const float tiny = static_cast<float>(static_cast<int32_t>(em)) * 5.9604644775390625e-08f;
    uint32_t tinyBits;
    std::memcpy(&tinyBits, &tiny, 4);
    uint32_t bits = em < 0x400u ? tinyBits : normal;
    bits = em >= 0x7c00u ? special : bits;
    bits |= sign;
    std::memcpy(dst + i, &bits, 4);
  }
}

} // namespace

void roundThroughHalves(float* v, size_t count) {
#if defined(__x86_64__)
  size_t done = 0;
  if (haveAvx512()) done = roundThroughHalvesAvx512(v, count);
  if (haveF16c()) done += roundThroughHalvesF16c(v + done, count - done);
  v += done;
  count -= done;
#endif
  constexpr size_t kBlock = 512;
  uint16_t halves[kBlock];
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    floatsToHalves(v + start, halves, n);
    halvesToFloats(halves, v + start, n);
  }
}

} // namespace kiln::rt
