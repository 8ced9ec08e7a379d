// Quantization kernels: QuantizeLinear, DequantizeLinear (per tensor, per axis and blocked; 4-,
// 8- and 16-bit codes) and DynamicQuantizeLinear.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <immintrin.h>
#include <limits>

#include "ms_fixed_point.h"
#include <fmt/ranges.h>

#include "nn_util.h"
#include "ops/quant.h"
#include "thread_pool.h"

namespace kiln::rt {
namespace {

void storeInt(uint8_t* bytes, DType d, uint64_t i, int64_t v) {
  switch (d) {
  case DType::UInt8:
  case DType::Int8:
    bytes[i] = static_cast<uint8_t>(v & 0xff);
    break;
  case DType::UInt4:
  case DType::Int4: { // two per byte, low nibble first
    const unsigned shift = static_cast<unsigned>(i % 2) * 4;
    bytes[i / 2] = static_cast<uint8_t>((bytes[i / 2] & ~(0xfu << shift)) | ((v & 0xf) << shift));
    break;
  }
  default: {
    uint16_t u = static_cast<uint16_t>(v & 0xffff);
    std::memcpy(bytes + 2 * i, &u, 2);
  }
  }
}

// How an element maps to its scale / zero point: per tensor, per slice along `axis`, or per block
// of `blockSize` elements along `axis` (opset 21: the scale has x's rank with that axis divided
// into ceil(len / blockSize) blocks).
struct QuantParams {
  int64_t inner = 1, channels = 1; // element i uses (i / inner) % channels
  bool perAxis = false;
  int64_t blockSize = 0, blocks = 1; // blocked: axis of length `channels`, `blocks` scales along it
  size_t at(uint64_t i) const {
    if (!perAxis) return 0;
    return static_cast<size_t>(
        ops::quantParamIndex(static_cast<int64_t>(i), inner, channels, blockSize));
  }
};

Status quantParams(const KernelContext& ctx, const Tensor& x, const Tensor& scale, QuantParams& q) {
  const int64_t blockSize = ctx.attrInt("block_size", 0);
  const uint64_t n = scale.elementCount();
  if (n == 1 && blockSize <= 0) return Status::ok();
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  auto axis = normalizeAxis(ctx.attrInt("axis", 1), rank);
  if (!axis) return ctx.fail("axis {} out of range for rank {}", ctx.attrInt("axis", 1), rank);
  const size_t a = static_cast<size_t>(*axis);
  q.channels = x.dims()[a];
  q.inner = nn::product(x.dims(), a + 1);
  q.perAxis = true;
  if (blockSize > 0) {
    // The scale (and zero point) has x's shape, the axis counted in blocks.
    q.blockSize = blockSize;
    q.blocks = (q.channels + blockSize - 1) / blockSize;
    std::vector<int64_t> want = x.dims();
    want[a] = q.blocks;
    if (scale.dims() != want)
      return ctx.fail("scale dims [{}] do not block x [{}] by {} along axis {}",
                      fmt::join(scale.dims(), ","), fmt::join(x.dims(), ","), blockSize, *axis);
    return Status::ok();
  }
  if (scale.dims().size() != 1) return ctx.fail("scale must be a scalar or 1-D");
  if (static_cast<int64_t>(n) != q.channels)
    return ctx.fail("scale has {} values, axis {} has {}", n, *axis, q.channels);
  return Status::ok();
}

Status quantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  // The zero point's type, else (opset 21) the output_dtype attribute, else uint8.
  DType yType = DType::UInt8;
  if (ctx.hasInput(2)) {
    yType = ctx.input(2).dtype();
  } else if (const int64_t to = ctx.attrInt("output_dtype", 0); to != 0) {
    const std::optional<DType> named = dtypeFromOnnx(static_cast<int32_t>(to));
    if (!named) return ctx.fail("output_dtype {} is not a tensor type", to);
    yType = *named;
  }
  int64_t lo = 0, hi = 0;
  if (!ops::quantCodeRange(yType, lo, hi))
    return ctx.unsupported("output dtype {}", dtypeName(yType));
  QuantParams q;
  KILN_TRY(quantParams(ctx, x, scale, q));
  std::vector<int64_t> zp(scale.elementCount(), 0);
  if (ctx.hasInput(2)) {
    zp = ctx.inputInts(2);
    if (zp.size() != scale.elementCount()) return ctx.fail("zero point and scale sizes differ");
  }
  OutTensor y(yType, x.dims());
  const uint64_t n = x.elementCount();
  if (x.dtype() == DType::Float64) {
    std::vector<double> sv(scale.elementCount());
    for (size_t i = 0; i < sv.size(); ++i)
      sv[i] = elementAsDouble(scale, i);
    const double* xd = ctx.inputData<double>(0);
    for (uint64_t i = 0; i < n; ++i) {
      const size_t c = q.at(i);
      storeInt(y.bytes(), yType, i,
               nn::roundSaturate(xd[i] / sv[c], lo - zp[c], hi - zp[c]) + zp[c]);
    }
  } else {
    // Float arithmetic, as the reference computes x / y_scale in the input's precision.
    std::vector<float> xv = toFloatVector(x), sv = toFloatVector(scale);
    if (ms_int8::requested(ctx)) { // raised from a .ms QuantDTypeCast: the runtime's rounding
      std::vector<float> inverse(sv.size());
      for (size_t c = 0; c < sv.size(); ++c)
        inverse[c] = 1.0f / sv[c];
      for (uint64_t i = 0; i < n; ++i) {
        const size_t c = q.at(i);
        storeInt(y.bytes(), yType, i, ms_int8::quantizeCode(xv[i], inverse[c], zp[c], lo, hi));
      }
      ctx.setOutput(0, std::move(y).finish());
      return Status::ok();
    }
    for (uint64_t i = 0; i < n; ++i) {
      const size_t c = q.at(i);
      const float v = xv[i] / sv[c];
      storeInt(y.bytes(), yType, i, nn::roundSaturate(v, lo - zp[c], hi - zp[c]) + zp[c]);
    }
  }
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

// Code i of an integer tensor (4- to 32-bit), read in place.
inline int64_t codeAt(const uint8_t* p, DType d, uint64_t i) {
  switch (d) {
  case DType::Int8:
    return static_cast<int8_t>(p[i]);
  case DType::UInt8:
    return p[i];
  case DType::Int4:
  case DType::UInt4:
    return nibbleAt(p, i, d == DType::Int4);
  case DType::Int16: {
    int16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  }
  case DType::UInt16: {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  }
  default: {
    int32_t v;
    std::memcpy(&v, p + 4 * i, 4);
    return v;
  }
  }
}

Status dequantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const DType d = x.dtype();
  if (d != DType::Int8 && d != DType::UInt8 && d != DType::Int4 && d != DType::UInt4 &&
      d != DType::Int16 && d != DType::UInt16 && d != DType::Int32)
    return ctx.unsupported("input dtype {}", dtypeName(d));
  QuantParams q;
  KILN_TRY(quantParams(ctx, x, scale, q));
  std::vector<int64_t> zp(scale.elementCount(), 0);
  if (ctx.hasInput(2)) {
    zp = ctx.inputInts(2);
    if (zp.size() != scale.elementCount()) return ctx.fail("zero point and scale sizes differ");
  }
  const uint8_t* codes = x.data();
  const auto n = static_cast<int64_t>(x.elementCount());
  bool done = nn::dispatchFloat(scale.dtype(), [&](auto tag) {
    using T = decltype(tag);
    nn::Staged<T> sv(scale);
    nn::StagedOut<T> y(scale.dtype(), x.dims());
    T* out = y.data();
    // Codes read in place (a 4-bit weight is never widened to int64 as a whole); each element is
    // computed alone, so any split gives the same values.
    pool::parallelFor(ctx.threads(), n, int64_t{1} << 14, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const size_t c = q.at(static_cast<uint64_t>(i));
        out[i] = static_cast<T>(codeAt(codes, d, static_cast<uint64_t>(i)) - zp[c]) * sv[c];
      }
    });
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("scale dtype {}", dtypeName(scale.dtype()));
  return Status::ok();
}

// min(0, x...) and max(0, x...) over x[0, n); NaNs are skipped, as std::min / std::max with the
// running value first skip them. Min and max are exact, so the lane order does not matter.
__attribute__((target("avx2"))) void rangeAvx2(const float* x, int64_t n, float& mn, float& mx) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    lo = _mm256_min_ps(v, lo); // v < lo ? v : lo (lo when v is NaN)
    hi = _mm256_max_ps(v, hi);
  }
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, lo);
  _mm256_store_ps(h, hi);
  for (int k = 0; k < 8; ++k) {
    mn = std::min(mn, l[k]);
    mx = std::max(mx, h[k]);
  }
  for (; i < n; ++i) {
    mn = std::min(mn, x[i]);
    mx = std::max(mx, x[i]);
  }
}

// The per-element code of DynamicQuantizeLinear: nearbyint(x / scale) clamped to [-zp, 255 - zp]
// (NaN reads 0), plus zp.
inline uint8_t quantizeOne(float x, float scale, int64_t zp) {
  return static_cast<uint8_t>(nn::roundSaturate(x / scale, -zp, 255 - zp) + zp);
}

// Eight codes of quantizeOne from v = x / scale, as int32.
__attribute__((target("avx2"))) inline __m256i quantize8(__m256 v, __m256 lo, __m256 hi,
                                                         __m256i z) {
  __m256 r = _mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  r = _mm256_and_ps(r, _mm256_cmp_ps(v, v, _CMP_ORD_Q)); // NaN -> 0
  r = _mm256_min_ps(_mm256_max_ps(r, lo), hi);
  return _mm256_add_epi32(_mm256_cvtps_epi32(r), z);
}

// quantizeOne over x[0, n) with the same IEEE division and round-to-nearest-even, 32 at a time.
__attribute__((target("avx2"))) void quantizeAvx2(const float* x, int64_t n, float scale,
                                                  int64_t zp, uint8_t* y) {
  const __m256 s = _mm256_set1_ps(scale);
  const __m256 lo = _mm256_set1_ps(static_cast<float>(-zp));
  const __m256 hi = _mm256_set1_ps(static_cast<float>(255 - zp));
  const __m256i z = _mm256_set1_epi32(static_cast<int32_t>(zp));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
#define KILN_QUANTIZE8(p) quantize8(_mm256_div_ps(_mm256_loadu_ps(p), s), lo, hi, z)
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i ab = _mm256_packus_epi32(KILN_QUANTIZE8(x + i), KILN_QUANTIZE8(x + i + 8));
    const __m256i cd = _mm256_packus_epi32(KILN_QUANTIZE8(x + i + 16), KILN_QUANTIZE8(x + i + 24));
    const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packus_epi16(ab, cd), order);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), bytes);
  }
#undef KILN_QUANTIZE8
  for (; i < n; ++i)
    y[i] = quantizeOne(x[i], scale, zp);
}

// Calls fn(block, count) over x[b, e) as float32: x itself when In is float, else float16 widened
// kBlock values at a time into a buffer on the stack (exact: the floats a whole-tensor widening
// gives, without a float32 copy of the tensor).
template <typename In, typename Fn>
void forFloatBlocks(const In* x, int64_t b, int64_t e, Fn&& fn) {
  if constexpr (std::is_same_v<In, float>) {
    fn(x + b, e - b, b);
  } else {
    constexpr int64_t kBlock = 2048;
    alignas(32) float block[kBlock];
    for (int64_t i = b; i < e; i += kBlock) {
      const int64_t count = std::min(kBlock, e - i);
      halvesToFloats(x + i, block, static_cast<size_t>(count));
      fn(block, count, i);
    }
  }
}

// DynamicQuantizeLinear over x[0, n) (float32, or float16 bits widened block by block): one pass
// for the range, one to quantize, both split over the pool (min / max and the per-element codes
// are exact, so any split or blocking gives the same bytes). The range always includes 0 so that 0
// is exactly representable.
template <typename In>
void dynamicQuantize(int threads, const In* x, int64_t n, float& scale, int64_t& zp, uint8_t* y) {
  static const bool avx2 = __builtin_cpu_supports("avx2");
  constexpr int64_t kGrain = int64_t{1} << 14;
  const int64_t parts = std::max<int64_t>(1, (n + kGrain - 1) / kGrain);
  std::vector<float> los(static_cast<size_t>(parts), 0.0f), his(static_cast<size_t>(parts), 0.0f);
  pool::parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    float l = 0.0f, h = 0.0f;
    forFloatBlocks(x, b, e, [&](const float* v, int64_t count, int64_t) {
      if (avx2) {
        rangeAvx2(v, count, l, h);
      } else {
        for (int64_t i = 0; i < count; ++i) {
          l = std::min(l, v[i]);
          h = std::max(h, v[i]);
        }
      }
    });
    los[static_cast<size_t>(b / kGrain)] = l;
    his[static_cast<size_t>(b / kGrain)] = h;
  });
  float mn = 0.0f, mx = 0.0f;
  for (size_t p = 0; p < los.size(); ++p) {
    mn = std::min(mn, los[p]);
    mx = std::max(mx, his[p]);
  }
  scale = (mx - mn) / 255.0f;
  zp = scale == 0.0f ? 0 : nn::roundSaturate((0.0f - mn) / scale, 0, 255);
  if (scale == 0.0f) {
    std::fill(y, y + n, static_cast<uint8_t>(zp));
    return;
  }
  pool::parallelFor(threads, n, kGrain, [&](int64_t b, int64_t e) {
    forFloatBlocks(x, b, e, [&](const float* v, int64_t count, int64_t at) {
      if (avx2) {
        quantizeAvx2(v, count, scale, zp, y + at);
      } else {
        for (int64_t i = 0; i < count; ++i)
          y[at + i] = quantizeOne(v[i], scale, zp);
      }
    });
  });
}

Status dynamicQuantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!nn::isFloatLike(x.dtype())) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  OutTensor y(DType::UInt8, x.dims());
  float scale = 0.0f;
  int64_t zp = 0;
  const auto n = static_cast<int64_t>(x.elementCount());
  if (x.dtype() == DType::Float32) {
    dynamicQuantize(ctx.threads(), ctx.inputData<float>(0), n, scale, zp, y.bytes());
  } else if (x.dtype() == DType::Float16) {
    // Also a Cast's float16 input handed on as it is (FusionPlan::passHalf).
    dynamicQuantize(ctx.threads(), ctx.inputData<uint16_t>(0), n, scale, zp, y.bytes());
  } else {
    // bfloat16 / float64 values widened (or narrowed) to float32 first.
    std::vector<float> xv = toFloatVector(x);
    dynamicQuantize(ctx.threads(), xv.data(), n, scale, zp, y.bytes());
  }
  ctx.setOutput(0, std::move(y).finish());
  ctx.setOutput(1, makeTensor<float>(DType::Float32, {}, {scale}));
  ctx.setOutput(2, makeTensor<uint8_t>(DType::UInt8, {}, {static_cast<uint8_t>(zp)}));
  return Status::ok();
}

// kiln.ms::DynamicQuant (ops/quant.h): MindSpore Lite's DynamicQuant kernel, step for step, so a
// .ms run in kiln quantizes activations to the same int8 codes as the runtime:
//   asymmetric: range = max - min (0.01 when not positive; 0 need not be in it), scale = range /
//               255 in float, zero point = round(-128 - min / scale) (half away from zero);
//   symmetric:  scale = 2·max(|min|, |max|) / 254, zero point 0;
//   codes:      round(x · (1 / scale) + zero point) clamped to [-128, 127]; ±inf saturate.
// With prefer_axes each index of those axes gets its own range (per token for a MatMul's rows).
struct MsSegmentParams {
  float scale = 1;
  int32_t zeroPoint = 0;
};

MsSegmentParams msDynamicParams(float mn, float mx, bool symmetric) {
  MsSegmentParams p;
  if (symmetric) {
    const float most = std::max(std::fabs(mx), std::fabs(mn));
    p.scale = 2 * most / 254;
    return p;
  }
  float range = mx - mn;
  if (range <= 0) range = 0.01f;
  p.scale = range / 255;
  p.zeroPoint = static_cast<int32_t>(std::round(-128.0 - static_cast<double>(mn) / p.scale));
  return p;
}

// One code: x · inverse + zero point rounded half away from zero, in float as the runtime.
int8_t msQuantizeOne(float x, float inverse, int32_t zeroPoint) {
  if (x == std::numeric_limits<float>::infinity()) return 127;
  if (x == -std::numeric_limits<float>::infinity()) return -128;
  const float shifted = x * inverse + static_cast<float>(zeroPoint);
  if (std::isnan(shifted)) return 0;
  return static_cast<int8_t>(std::clamp(std::round(shifted), -128.0f, 127.0f));
}

Status msDynamicQuantOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() != DType::Float32) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  const bool symmetric = ctx.attrInt("symmetric", 0) != 0;
  const std::vector<int64_t>& dims = x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<bool> prefer(static_cast<size_t>(rank), false);
  for (int64_t a : ctx.attrInts("prefer_axes")) {
    auto axis = normalizeAxis(a, rank);
    if (!axis) return ctx.fail("prefer axis {} out of range for rank {}", a, rank);
    prefer[static_cast<size_t>(*axis)] = true;
  }
  const bool perSegment = std::find(prefer.begin(), prefer.end(), true) != prefer.end();
  // The segments are the index combinations of the preferred axes; a segment's elements are the
  // rest, visited in memory order (the runtime transposes them together first: the same values).
  std::vector<int64_t> strides(static_cast<size_t>(rank), 1), paramDims;
  for (int64_t i = rank - 1; i > 0; --i)
    strides[static_cast<size_t>(i - 1)] =
        strides[static_cast<size_t>(i)] * dims[static_cast<size_t>(i)];
  std::vector<int64_t> segAxes, restAxes;
  for (int64_t i = 0; i < rank; ++i) {
    (prefer[static_cast<size_t>(i)] ? segAxes : restAxes).push_back(i);
    if (perSegment)
      paramDims.push_back(prefer[static_cast<size_t>(i)] ? dims[static_cast<size_t>(i)] : 1);
  }
  auto countOf = [&](const std::vector<int64_t>& axes) {
    int64_t c = 1;
    for (int64_t a : axes)
      c *= dims[static_cast<size_t>(a)];
    return c;
  };
  const int64_t segments = countOf(segAxes), perSeg = countOf(restAxes);
  // Offsets of the elements of one segment (relative to its first), in memory order.
  std::vector<int64_t> inner(static_cast<size_t>(perSeg));
  {
    std::vector<int64_t> index(restAxes.size(), 0);
    for (int64_t k = 0; k < perSeg; ++k) {
      int64_t off = 0;
      for (size_t j = 0; j < restAxes.size(); ++j)
        off += index[j] * strides[static_cast<size_t>(restAxes[j])];
      inner[static_cast<size_t>(k)] = off;
      for (size_t j = restAxes.size(); j-- > 0;) {
        if (++index[j] < dims[static_cast<size_t>(restAxes[j])]) break;
        index[j] = 0;
      }
    }
  }
  const float* xp = ctx.inputData<float>(0);
  OutTensor y(DType::Int8, dims);
  int8_t* yp = reinterpret_cast<int8_t*>(y.bytes());
  std::vector<float> scales(static_cast<size_t>(segments));
  std::vector<int32_t> zeros(static_cast<size_t>(segments));
  std::vector<int64_t> index(segAxes.size(), 0);
  for (int64_t s = 0; s < segments; ++s) {
    int64_t base = 0;
    for (size_t j = 0; j < segAxes.size(); ++j)
      base += index[j] * strides[static_cast<size_t>(segAxes[j])];
    float mn = std::numeric_limits<float>::max(), mx = -std::numeric_limits<float>::max();
    for (int64_t off : inner) {
      mn = std::min(mn, xp[base + off]);
      mx = std::max(mx, xp[base + off]);
    }
    const MsSegmentParams p = msDynamicParams(mn, mx, symmetric);
    const float inverse = 1.0f / p.scale;
    for (int64_t off : inner)
      yp[base + off] = msQuantizeOne(xp[base + off], inverse, p.zeroPoint);
    scales[static_cast<size_t>(s)] = p.scale;
    zeros[static_cast<size_t>(s)] = p.zeroPoint;
    for (size_t j = segAxes.size(); j-- > 0;) {
      if (++index[j] < dims[static_cast<size_t>(segAxes[j])]) break;
      index[j] = 0;
    }
  }
  ctx.setOutput(0, std::move(y).finish());
  ctx.setOutput(1, makeTensor<float>(DType::Float32, paramDims, scales));
  ctx.setOutput(2, makeTensor<int32_t>(DType::Int32, paramDims, zeros));
  return Status::ok();
}

KILN_REGISTER_KERNEL("QuantizeLinear", quantizeLinearOp);
KILN_REGISTER_KERNEL("DequantizeLinear", dequantizeLinearOp);
KILN_REGISTER_KERNEL("DynamicQuantizeLinear", dynamicQuantizeLinearOp);
const bool kMsDynamicQuantRegistered =
    registerKernel(ops::kMsDomain, ops::kMsDynamicQuantOp, msDynamicQuantOp, __FILE__);

} // namespace
} // namespace kiln::rt
