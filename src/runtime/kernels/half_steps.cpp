// Float16 chain steps rounded in registers (half_steps.h).
#include "half_steps.h"

#include "kiln/runtime/half_block.h"
#include "thread_pool.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::rt::vec {
namespace {

#if defined(__x86_64__)

// The operations of the float loops on one vector, written once over a vector type V (below):
// `sel(a, b, x, y)` is a < b ? x : y per lane; V::min(a, b) is a < b ? a : b and V::max(a, b)
// a > b ? a : b (the second operand when unordered), which are std::min(b, a) / std::max(b, a).
// So a select against a bound is one min or max instruction instead of a compare and a blend:
// v < lo ? lo : v is max(lo, v), hi < v ? hi : v is min(hi, v), 0 < v ? v : 0 is max(v, 0),
// NaNs and signed zeros included.
#define KILN_HALF_STEPS_BODY                                                                       \
  /* Each result rounded into out[i], or narrowed into narrow[i] when that is given. */            \
  template <typename Fn>                                                                           \
  int64_t loop1(const float* in, float* out, uint16_t* narrow, int64_t n, Fn fn) {                 \
    int64_t i = 0;                                                                                 \
    if (narrow)                                                                                    \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::narrow(narrow + i, fn(V::load(in + i)));                                                \
    else                                                                                           \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::store(out + i, V::round(fn(V::load(in + i))));                                          \
    return i;                                                                                      \
  }                                                                                                \
  template <typename Fn>                                                                           \
  int64_t loop2(const float* a, const float* b, float* out, uint16_t* narrow, int64_t n, Fn fn) {  \
    int64_t i = 0;                                                                                 \
    if (narrow)                                                                                    \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::narrow(narrow + i, fn(V::load(a + i), V::load(b + i)));                                 \
    else                                                                                           \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::store(out + i, V::round(fn(V::load(a + i), V::load(b + i))));                           \
    return i;                                                                                      \
  }                                                                                                \
  template <typename Fn> int64_t binary(BinOp op, Fn run) {                                        \
    switch (op) {                                                                                  \
    case BinOp::Add:                                                                               \
      return run([](V::T x, V::T y) { return V::add(x, y); });                                     \
    case BinOp::Sub:                                                                               \
      return run([](V::T x, V::T y) { return V::sub(x, y); });                                     \
    case BinOp::Mul:                                                                               \
      return run([](V::T x, V::T y) { return V::mul(x, y); });                                     \
    case BinOp::Div:                                                                               \
      return run([](V::T x, V::T y) { return V::div(x, y); });                                     \
    default:                                                                                       \
      return 0; /* Max / Min pick an operand: nothing to round */                                  \
    }                                                                                              \
  }                                                                                                \
  int64_t same(BinOp op, const float* a, const float* b, float* out, uint16_t* narrow,             \
               int64_t n) {                                                                        \
    return binary(op, [&](auto f) { return loop2(a, b, out, narrow, n, f); });                     \
  }                                                                                                \
  int64_t scalarRight(BinOp op, const float* a, float s, float* out, uint16_t* narrow,             \
                      int64_t n) {                                                                 \
    const V::T sv = V::set1(s);                                                                    \
    return binary(                                                                                 \
        op, [&](auto f) { return loop1(a, out, narrow, n, [&](V::T x) { return f(x, sv); }); });   \
  }                                                                                                \
  int64_t scalarLeft(BinOp op, float s, const float* b, float* out, uint16_t* narrow, int64_t n) { \
    const V::T sv = V::set1(s);                                                                    \
    return binary(                                                                                 \
        op, [&](auto f) { return loop1(b, out, narrow, n, [&](V::T y) { return f(sv, y); }); });   \
  }                                                                                                \
  int64_t unary(UnOp op, const float* in, float* out, uint16_t* narrow, int64_t n, float p0,       \
                float p1) {                                                                        \
    const V::T lo = V::set1(p0), hi = V::set1(p1), zero = V::set1(0.0f), one = V::set1(1.0f);      \
    const V::T sixth = V::set1(6.0f), half = V::set1(0.5f);                                        \
    switch (op) {                                                                                  \
    case UnOp::Relu: /* v > 0 ? v : 0 */                                                           \
      return loop1(in, out, narrow, n, [&](V::T v) { return V::max(v, zero); });                   \
    case UnOp::LeakyRelu: /* v < 0 ? p0 * v : v */                                                 \
      return loop1(in, out, narrow, n, [&](V::T v) { return V::sel(v, zero, V::mul(lo, v), v); }); \
    case UnOp::Clip: /* v < p0 ? p0 : v, then v > p1 ? p1 : v */                                   \
      return loop1(in, out, narrow, n, [&](V::T v) {                                               \
        v = V::max(lo, v);                                                                         \
        return V::min(hi, v);                                                                      \
      });                                                                                          \
    case UnOp::HardSigmoid: /* max(0, min(1, p0 * v + p1)) */                                      \
      return loop1(in, out, narrow, n,                                                             \
                   [&](V::T v) { return V::max(V::min(V::add(V::mul(lo, v), hi), one), zero); });  \
    case UnOp::HardSwish: /* v * max(0, min(1, v / 6 + 0.5)) */                                    \
      return loop1(in, out, narrow, n, [&](V::T v) {                                               \
        return V::mul(v, V::max(V::min(V::add(V::div(v, sixth), half), one), zero));               \
      });                                                                                          \
    }                                                                                              \
    return 0;                                                                                      \
  }                                                                                                \
  /* fn over float16 x widened in registers; each result as loop1 stores it, or, without */        \
  /* narrow, rounded and widened back as floatsToHalves then halvesToFloats would make it. */      \
  template <typename Fn>                                                                           \
  int64_t loopHalves(const uint16_t* x, float* out, uint16_t* narrow, int64_t n, Fn fn) {          \
    int64_t i = 0;                                                                                 \
    if (narrow)                                                                                    \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::narrow(narrow + i, fn(V::loadHalves(x + i)));                                           \
    else                                                                                           \
      for (; i + V::kWidth <= n; i += V::kWidth)                                                   \
        V::store(out + i, V::roundPlain(fn(V::loadHalves(x + i))));                                \
    return i;                                                                                      \
  }                                                                                                \
  int64_t scalarHalves(BinOp op, const uint16_t* x, const float* scales, int64_t runs,             \
                       int64_t inner, bool left, float* out, uint16_t* narrow) {                   \
    int64_t done = 0;                                                                              \
    for (int64_t r = 0; r < runs; ++r) {                                                           \
      const V::T sv = V::set1(scales[r]);                                                          \
      const int64_t at = r * inner;                                                                \
      float* o = out ? out + at : nullptr;                                                         \
      uint16_t* h = narrow ? narrow + at : nullptr;                                                \
      done = binary(op, [&](auto f) {                                                              \
        return left ? loopHalves(x + at, o, h, inner, [&](V::T v) { return f(sv, v); })            \
                    : loopHalves(x + at, o, h, inner, [&](V::T v) { return f(v, sv); });           \
      });                                                                                          \
    }                                                                                              \
    return done;                                                                                   \
  }                                                                                                \
  int64_t widen(const uint16_t* src, float* dst, int64_t n) { return V::widen(src, dst, n); }      \
  int64_t roundInPlace(float* v, int64_t n) {                                                      \
    return loop1(v, v, nullptr, n, [](V::T x) { return x; });                                      \
  }

// HardSwishSteps (half_steps.h) over one vector at a time.
#define KILN_HARD_SWISH_BODY                                                                       \
  int64_t hardSwish(const HardSwishSteps& h, const float* in, float* out, int64_t n) {             \
    const V::T add = V::set1(h.add), lo = V::set1(h.lo), hi = V::set1(h.hi);                       \
    const V::T div = V::set1(h.div), reciprocal = V::set1(1.0f / h.div);                           \
    const V::T inputBias = V::set1(h.inputBias);                                                   \
    int64_t i = 0;                                                                                 \
    for (; i + V::kWidth <= n; i += V::kWidth) {                                                   \
      V::T x = V::load(in + i);                                                                    \
      if (h.addInputBias) x = V::add(x, inputBias);                                                \
      if (h.roundInput) x = V::round(x);                                                           \
      V::T t = V::add(x, add);                                                                     \
      if (h.roundAdd) t = V::round(t);                                                             \
      t = V::max(lo, t);                                                                           \
      t = V::min(hi, t);                                                                           \
      if (h.roundClip) t = V::round(t);                                                            \
      t = h.productOfInput ? V::mul(x, t) : V::mul(t, x);                                          \
      if (h.roundProduct) t = V::round(t);                                                         \
      t = h.divideByReciprocal ? V::mul(t, reciprocal) : V::div(t, div);                           \
      if (h.narrow)                                                                                \
        V::narrow(h.narrow + i, t);                                                                \
      else                                                                                         \
        V::store(out + i, h.roundLast ? V::round(t) : t);                                          \
    }                                                                                              \
    return i;                                                                                      \
  }

#pragma GCC push_options
#pragma GCC target("avx512f")
namespace avx512 {
struct V {
  using T = __m512;
  static constexpr int64_t kWidth = 16;
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T v) { _mm512_storeu_ps(p, v); }
  static T set1(float s) { return _mm512_set1_ps(s); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T sel(T a, T b, T x, T y) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x);
  }
  static T round(T v) { return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  // As floatsToHalves: a NaN becomes the plain quiet NaN with its sign first.
  static void narrow(uint16_t* p, T v) {
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (nan) {
      const __m512i bits = _mm512_castps_si512(v);
      const __m512i plain = _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(INT32_MIN)),
                                            _mm512_set1_epi32(0x7fc00000));
      v = _mm512_mask_blend_ps(nan, v, _mm512_castsi512_ps(plain));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static T loadHalves(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  // round, a NaN then made the plain quiet NaN with its sign (as floatsToHalves narrows it).
  static T roundPlain(T v) {
    const T r = round(v);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    if (!nan) return r;
    const __m512i plain =
        _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)),
                        _mm512_set1_epi32(0x7fc00000));
    return _mm512_mask_blend_ps(nan, r, _mm512_castsi512_ps(plain));
  }
  static int64_t widen(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + kWidth <= n; i += kWidth)
      _mm512_storeu_ps(
          dst + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i))));
    return i;
  }
};
KILN_HALF_STEPS_BODY
KILN_HARD_SWISH_BODY
} // namespace avx512
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx2,f16c")
namespace f16c {
struct V {
  using T = __m256;
  static constexpr int64_t kWidth = 8;
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T v) { _mm256_storeu_ps(p, v); }
  static T set1(float s) { return _mm256_set1_ps(s); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T min(T a, T b) { return _mm256_min_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T sel(T a, T b, T x, T y) {
    return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  static T round(T v) { return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT)); }
  static void narrow(uint16_t* p, T v) {
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (!_mm256_testz_ps(nan, nan)) {
      const __m256 plain = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                                        _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
      v = _mm256_blendv_ps(v, plain, nan);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
  }
  static T loadHalves(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static T roundPlain(T v) {
    const T r = round(v);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_testz_ps(nan, nan)) return r;
    const __m256 plain = _mm256_or_ps(_mm256_and_ps(v, _mm256_set1_ps(-0.0f)),
                                      _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    return _mm256_blendv_ps(r, plain, nan);
  }
  static int64_t widen(const uint16_t* src, float* dst, int64_t n) {
    int64_t i = 0;
    for (; i + kWidth <= n; i += kWidth)
      _mm256_storeu_ps(dst + i,
                       _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
    return i;
  }
};
KILN_HALF_STEPS_BODY
KILN_HARD_SWISH_BODY
} // namespace f16c
#pragma GCC pop_options

#undef KILN_HALF_STEPS_BODY
#undef KILN_HARD_SWISH_BODY

// The widest set the machine has, or none.
enum class Isa { None, F16c, Avx512 };
Isa isa() {
  static const Isa best = haveAvx512() ? Isa::Avx512 : haveF16c() ? Isa::F16c : Isa::None;
  return best;
}

#define KILN_HALF_DISPATCH(call)                                                                   \
  switch (isa()) {                                                                                 \
  case Isa::Avx512:                                                                                \
    return avx512::call;                                                                           \
  case Isa::F16c:                                                                                  \
    return f16c::call;                                                                             \
  case Isa::None:                                                                                  \
    break;                                                                                         \
  }                                                                                                \
  return 0
#else
#define KILN_HALF_DISPATCH(call) return 0
#endif

} // namespace

int64_t binarySameHalf(BinOp op, const float* a, const float* b, float* out, int64_t n,
                       uint16_t* narrow) {
  KILN_HALF_DISPATCH(same(op, a, b, out, narrow, n));
}

int64_t binaryScalarRightHalf(BinOp op, const float* a, float s, float* out, int64_t n,
                              uint16_t* narrow) {
  KILN_HALF_DISPATCH(scalarRight(op, a, s, out, narrow, n));
}

int64_t binaryScalarLeftHalf(BinOp op, float s, const float* b, float* out, int64_t n,
                             uint16_t* narrow) {
  KILN_HALF_DISPATCH(scalarLeft(op, s, b, out, narrow, n));
}

int64_t binaryScalarHalves(BinOp op, const uint16_t* x, const float* scales, int64_t runs,
                           int64_t inner, bool scalarLeft, float* out, uint16_t* narrow) {
  if (runs <= 0) return 0;
  KILN_HALF_DISPATCH(scalarHalves(op, x, scales, runs, inner, scalarLeft, out, narrow));
}

int64_t unaryHalf(UnOp op, const float* in, float* out, int64_t n, float p0, float p1,
                  uint16_t* narrow) {
  KILN_HALF_DISPATCH(unary(op, in, out, narrow, n, p0, p1));
}

int64_t roundHalfInPlace(float* v, int64_t n) { KILN_HALF_DISPATCH(roundInPlace(v, n)); }

int64_t widenHalves(const uint16_t* src, float* dst, int64_t n) {
  KILN_HALF_DISPATCH(widen(src, dst, n));
}

int64_t hardSwishSteps(const HardSwishSteps& h, const float* x, float* out, int64_t n) {
  KILN_HALF_DISPATCH(hardSwish(h, x, out, n));
}

#undef KILN_HALF_DISPATCH

namespace {

// hardSwishReciprocalExact's check, uncached: the steps in scalar float arithmetic, rounded as
// the pass rounds them (roundThroughHalves), the quotient both ways narrowed by floatsToHalves
// (a NaN either way is the plain NaN with its sign, whatever its payload).
bool reciprocalMatchesDivision(const HardSwishSteps& h) {
  constexpr size_t kCount = 65536;
  std::vector<uint16_t> bits(kCount);
  for (size_t i = 0; i < kCount; ++i)
    bits[i] = static_cast<uint16_t>(i);
  std::vector<float> x(kCount), t(kCount), divided(kCount), multiplied(kCount);
  halvesToFloats(bits.data(), x.data(), kCount);
  for (size_t i = 0; i < kCount; ++i)
    t[i] = x[i] + h.add;
  if (h.roundAdd) roundThroughHalves(t.data(), kCount);
  for (size_t i = 0; i < kCount; ++i) {
    float c = t[i] < h.lo ? h.lo : t[i];
    t[i] = h.hi < c ? h.hi : c;
  }
  if (h.roundClip) roundThroughHalves(t.data(), kCount);
  for (size_t i = 0; i < kCount; ++i)
    t[i] = h.productOfInput ? x[i] * t[i] : t[i] * x[i];
  roundThroughHalves(t.data(), kCount);
  const float reciprocal = 1.0f / h.div;
  for (size_t i = 0; i < kCount; ++i) {
    divided[i] = t[i] / h.div;
    multiplied[i] = t[i] * reciprocal;
  }
  std::vector<uint16_t> a(kCount), b(kCount);
  floatsToHalves(divided.data(), a.data(), kCount);
  floatsToHalves(multiplied.data(), b.data(), kCount);
  return a == b;
}

} // namespace

bool hardSwishReciprocalExact(const HardSwishSteps& h) {
  if (!h.roundProduct || !(h.roundLast || h.narrow)) return false;
  // Keyed by the parameters' bits: a NaN parameter still finds itself.
  auto bitsOf = [](float v) {
    uint32_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
  };
  using Key = std::tuple<uint32_t, uint32_t, uint32_t, uint32_t, bool, bool, bool>;
  const Key key{bitsOf(h.add),    bitsOf(h.lo), bitsOf(h.hi), bitsOf(h.div),
                h.productOfInput, h.roundAdd,   h.roundClip};
  static std::mutex mutex;
  static std::map<Key, bool> known;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find(key);
  if (it == known.end()) it = known.emplace(key, reciprocalMatchesDivision(h)).first;
  return it->second;
}

void widenHalvesAll(const uint16_t* src, float* dst, int64_t n) {
  const int64_t done = widenHalves(src, dst, n);
  halvesToFloats(src + done, dst + done, static_cast<size_t>(n - done));
}

void widenHalvesOnPool(int threads, const uint16_t* src, float* dst, int64_t n) {
  pool::parallelFor(pool::threadsFor(threads, static_cast<double>(n) * pool::kNsPerElement), n,
                    kParallelGrain,
                    [&](int64_t i0, int64_t i1) { widenHalvesAll(src + i0, dst + i0, i1 - i0); });
}

} // namespace kiln::rt::vec
