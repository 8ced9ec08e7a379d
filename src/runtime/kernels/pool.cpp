// Pooling kernels: MaxPool (with Indices), AveragePool, LpPool, their Global forms, MaxUnpool.
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "half_steps.h"
#include "kiln/runtime/half_block.h"
#include "nn_util.h"
#include "thread_pool.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;
using nn::Window;

// The valid part of one output position's window, per spatial axis: input coordinate of kernel
// tap k is start + k * dilation, for k in [kLo, kHi).
struct Taps {
  std::vector<int64_t> start, kLo, kHi;
  explicit Taps(size_t r) : start(r), kLo(r), kHi(r) {}
};

// Calls fn(outIndex, taps) for every output position, row-major.
template <typename Fn> void forEachOutput(const Window& w, Fn&& fn) {
  const size_t r = w.rank();
  const int64_t outSize = nn::product(w.out);
  std::vector<int64_t> opos(r, 0);
  Taps taps(r);
  for (int64_t o = 0; o < outSize; ++o) {
    for (size_t d = 0; d < r; ++d) {
      const int64_t start = opos[d] * w.strides[d] - w.padBegin[d], dil = w.dilations[d];
      taps.start[d] = start;
      // first k with start + k*dil >= 0, first k with start + k*dil >= in
      taps.kLo[d] = start >= 0 ? 0 : (-start + dil - 1) / dil;
      int64_t hi = w.in[d] - start <= 0 ? 0 : (w.in[d] - start + dil - 1) / dil;
      taps.kHi[d] = std::min(hi, w.kernel[d]);
      if (taps.kHi[d] < taps.kLo[d]) taps.kHi[d] = taps.kLo[d];
    }
    fn(o, taps);
    for (size_t d = r; d-- > 0;) {
      if (++opos[d] < w.out[d]) break;
      opos[d] = 0;
    }
  }
}

// Calls fn(inputOffset) for every tap of `taps` inside the input (row-major plane offsets).
template <typename Fn>
void forEachTap(const Window& w, const std::vector<int64_t>& inStride, const Taps& taps, Fn&& fn) {
  const size_t r = w.rank();
  for (size_t d = 0; d < r; ++d)
    if (taps.kHi[d] <= taps.kLo[d]) return;
  std::vector<int64_t> k(taps.kLo);
  const size_t last = r - 1;
  const int64_t lastStep = w.dilations[last];
  while (true) {
    int64_t off = 0;
    for (size_t d = 0; d < last; ++d)
      off += (taps.start[d] + k[d] * w.dilations[d]) * inStride[d];
    int64_t x = taps.start[last] + taps.kLo[last] * lastStep;
    for (int64_t kk = taps.kLo[last]; kk < taps.kHi[last]; ++kk, x += lastStep)
      fn(off + x);
    size_t d = last;
    while (d-- > 0) {
      if (++k[d] < taps.kHi[d]) break;
      k[d] = taps.kLo[d];
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// Number of kernel taps of the window inside the padded input [-padBegin, in + padEnd).
int64_t paddedTapCount(const Window& w, const Taps& taps) {
  int64_t count = 1;
  for (size_t d = 0; d < w.rank(); ++d) {
    int64_t n = 0;
    for (int64_t k = 0; k < w.kernel[d]; ++k) {
      int64_t x = taps.start[d] + k * w.dilations[d];
      if (x >= -w.padBegin[d] && x < w.in[d] + w.padEnd[d]) ++n;
    }
    count *= n;
  }
  return count;
}

std::vector<int64_t> rowStrides(const std::vector<int64_t>& in) {
  std::vector<int64_t> s(in.size(), 1);
  for (size_t d = in.size() - 1; d-- > 0;)
    s[d] = s[d + 1] * in[d + 1];
  return s;
}

struct PoolShape {
  int64_t planes = 0; // N * C
  std::vector<int64_t> outDims;
  Window window;
};

Status poolShape(const KernelContext& ctx, const std::vector<int64_t>& xd, PoolShape& s) {
  if (xd.size() < 3) return ctx.fail("X must have rank >= 3, got {}", xd.size());
  std::vector<int64_t> kernel = ctx.attrInts("kernel_shape");
  if (kernel.empty()) return ctx.fail("kernel_shape is required");
  std::vector<int64_t> in(xd.begin() + 2, xd.end());
  KILN_TRY(nn::resolveWindow(ctx, in, kernel, ctx.attrInt("ceil_mode", 0) != 0, s.window));
  s.planes = xd[0] * xd[1];
  s.outDims = {xd[0], xd[1]};
  s.outDims.insert(s.outDims.end(), s.window.out.begin(), s.window.out.end());
  return Status::ok();
}

template <typename T>
void maxPool(const PoolShape& s, const T* x, T* y, int64_t* indices, bool columnMajor) {
  const Window& w = s.window;
  const int64_t inSize = nn::product(w.in), outSize = nn::product(w.out);
  const std::vector<int64_t> inStride = rowStrides(w.in);
  const size_t r = w.rank();
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* plane = x + p * inSize;
    forEachOutput(w, [&](int64_t o, const Taps& taps) {
      T best = std::numeric_limits<T>::lowest();
      int64_t bestOff = -1;
      forEachTap(w, inStride, taps, [&](int64_t off) {
        if (bestOff < 0 || plane[off] > best) {
          best = plane[off];
          bestOff = off;
        }
      });
      y[p * outSize + o] = best;
      if (!indices) return;
      int64_t idx = std::max<int64_t>(bestOff, 0);
      if (columnMajor) { // coordinates of the row-major offset, re-linearized first-axis-fastest
        int64_t rest = idx, col = 0, scale = 1;
        std::vector<int64_t> coord(r);
        for (size_t d = 0; d < r; ++d) {
          coord[d] = rest / inStride[d];
          rest %= inStride[d];
        }
        for (size_t d = 0; d < r; ++d) {
          col += coord[d] * scale;
          scale *= w.in[d];
        }
        idx = col;
      }
      indices[p * outSize + o] = p * inSize + idx;
    });
  }
}

// Tap range of each output position along one spatial axis: kernel taps [lo, hi) land inside
// the input, tap k reading start + k * dilation (the same bounds forEachOutput works out).
struct AxisTaps {
  std::vector<int64_t> start, lo, hi;
  AxisTaps(const Window& w, size_t d) : start(w.out[d]), lo(w.out[d]), hi(w.out[d]) {
    const int64_t dil = w.dilations[d];
    for (int64_t o = 0; o < w.out[d]; ++o) {
      const int64_t s = o * w.strides[d] - w.padBegin[d];
      start[o] = s;
      lo[o] = s >= 0 ? 0 : (-s + dil - 1) / dil;
      int64_t h = w.in[d] - s <= 0 ? 0 : (w.in[d] - s + dil - 1) / dil;
      hi[o] = std::max(std::min(h, w.kernel[d]), lo[o]);
    }
  }
  // The first run of outputs [begin, end) whose every kernel tap is inside the input (empty:
  // both out), the ones a pooling loop can take without bounds checks.
  void fullRun(int64_t kernel, int64_t& begin, int64_t& end) const {
    const auto out = static_cast<int64_t>(lo.size());
    begin = end = out;
    for (int64_t o = 0; o < out; ++o)
      if (kernel > 0 && lo[o] == 0 && hi[o] == kernel) {
        if (begin == out) begin = o;
        end = o + 1;
      } else if (begin != out) {
        break;
      }
  }
};

// MaxPool over two spatial axes without Indices: the tap ranges are worked out once per call
// (not per output), and the columns whose whole window lies inside the row run as one loop over
// output columns per tap. Every output visits its taps in the generic path's row-major order and
// keeps the first tap unless a later one is greater, so the results are the same bits.
template <typename T> void maxPool2d(const PoolShape& s, const T* x, T* y) {
  const Window& w = s.window;
  const int64_t inH = w.in[0], inW = w.in[1], outH = w.out[0], outW = w.out[1];
  const int64_t kw = w.kernel[1], sw = w.strides[1], dh = w.dilations[0], dw = w.dilations[1];
  const AxisTaps rows(w, 0), cols(w, 1);
  // Output columns [fullBegin, fullEnd) have every kernel column inside the input row.
  int64_t fullBegin, fullEnd;
  cols.fullRun(kw, fullBegin, fullEnd);
  const T lowest = std::numeric_limits<T>::lowest();
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* plane = x + p * inH * inW;
    for (int64_t oy = 0; oy < outH; ++oy) {
      T* yrow = y + (p * outH + oy) * outW;
      const int64_t kyLo = rows.lo[oy], kyHi = rows.hi[oy];
      if (kyHi <= kyLo) {
        std::fill(yrow, yrow + outW, lowest);
        continue;
      }
      auto scalar = [&](int64_t ox) {
        const int64_t kxLo = cols.lo[ox], kxHi = cols.hi[ox];
        if (kxHi <= kxLo) {
          yrow[ox] = lowest;
          return;
        }
        bool first = true;
        T best = lowest;
        for (int64_t ky = kyLo; ky < kyHi; ++ky) {
          const T* in = plane + (rows.start[oy] + ky * dh) * inW + cols.start[ox];
          for (int64_t kx = kxLo; kx < kxHi; ++kx) {
            const T v = in[kx * dw];
            if (first || v > best) best = v;
            first = false;
          }
        }
        yrow[ox] = best;
      };
      for (int64_t ox = 0; ox < fullBegin; ++ox)
        scalar(ox);
      if (fullEnd > fullBegin) {
        const int64_t n = fullEnd - fullBegin;
        T* out = yrow + fullBegin;
        const int64_t base = cols.start[fullBegin];
        bool first = true;
        for (int64_t ky = kyLo; ky < kyHi; ++ky) {
          const T* in = plane + (rows.start[oy] + ky * dh) * inW + base;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const T* tap = in + kx * dw;
            if (first) {
              for (int64_t i = 0; i < n; ++i)
                out[i] = tap[i * sw];
              first = false;
            } else {
              for (int64_t i = 0; i < n; ++i) {
                const T v = tap[i * sw];
                out[i] = v > out[i] ? v : out[i];
              }
            }
          }
        }
      }
      for (int64_t ox = fullEnd; ox < outW; ++ox)
        scalar(ox);
    }
  }
}

// A 2-D pooling of float16 planes: widened, pooled in float by `pool(part, in, out)` (a float
// kernel over `part.planes` planes) and narrowed a plane (or a group of small planes) at a time,
// split over the pool, instead of the whole tensor widened first and narrowed last: less memory
// traffic, same bytes (halvesToFloats and floatsToHalves, as the whole-tensor staging uses, on
// the same values). `tapsPerOutput` weighs the work.
template <typename Fn>
void pool2dHalfPlanes(int threads, const PoolShape& s, const uint16_t* x, uint16_t* y,
                      int64_t tapsPerOutput, Fn&& pool) {
  const Window& w = s.window;
  const int64_t inSize = w.in[0] * w.in[1], outSize = w.out[0] * w.out[1];
  const double workNs = static_cast<double>(s.planes) *
                        static_cast<double>(inSize + outSize * tapsPerOutput) * pool::kNsPerElement;
  // Small planes go a group at a time (about 8K values widened), so that the float kernel's
  // per-call tap tables are not worked out again for every plane (PP-OCR cls: 200 planes of 2x96).
  const int64_t group = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, inSize));
  pool::parallelFor(pool::threadsFor(threads, workNs), s.planes, 1, [&](int64_t b, int64_t e) {
    const int64_t most = std::min(group, e - b);
    PoolShape part = s; // the planes pooled in one call
    std::vector<float> in(static_cast<size_t>(inSize * most)),
        out(static_cast<size_t>(outSize * most));
    for (int64_t p = b; p < e; p += most) {
      part.planes = std::min(most, e - p);
      halvesToFloats(x + p * inSize, in.data(), static_cast<size_t>(inSize * part.planes));
      pool(part, in.data(), out.data());
      floatsToHalves(out.data(), y + p * outSize, static_cast<size_t>(outSize * part.planes));
    }
  });
}

// maxPool2d over float16 planes (pool2dHalfPlanes). Widening is exact, every maximum is a widened
// input, and an empty window's lowest float narrows to -inf as it does from the whole-tensor
// staging.
void maxPool2dHalfPlanes(int threads, const PoolShape& s, const uint16_t* x, uint16_t* y) {
  pool2dHalfPlanes(
      threads, s, x, y, s.window.kernel[0] * s.window.kernel[1],
      [](const PoolShape& part, const float* in, float* out) { maxPool2d<float>(part, in, out); });
}

// maxPool2d on float data in [N, H, W, C] order (a Conv's channels-last hand-off), written in the
// same order: each output takes its taps in the same row-major order with the same comparison,
// channel by channel, so its bits are maxPool2d's.
void maxPool2dChannelsLast(const PoolShape& s, int64_t batch, int64_t channels, const float* x,
                           float* y) {
  const Window& w = s.window;
  const int64_t inH = w.in[0], inW = w.in[1], outH = w.out[0], outW = w.out[1];
  const int64_t dh = w.dilations[0], dw = w.dilations[1];
  const AxisTaps rows(w, 0), cols(w, 1);
  const float lowest = std::numeric_limits<float>::lowest();
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t oy = 0; oy < outH; ++oy)
      for (int64_t ox = 0; ox < outW; ++ox) {
        float* out = y + ((b * outH + oy) * outW + ox) * channels;
        const int64_t kyLo = rows.lo[oy], kyHi = rows.hi[oy];
        const int64_t kxLo = cols.lo[ox], kxHi = cols.hi[ox];
        if (kyHi <= kyLo || kxHi <= kxLo) {
          std::fill(out, out + channels, lowest);
          continue;
        }
        bool first = true;
        for (int64_t ky = kyLo; ky < kyHi; ++ky)
          for (int64_t kx = kxLo; kx < kxHi; ++kx) {
            const int64_t iy = rows.start[oy] + ky * dh, ix = cols.start[ox] + kx * dw;
            const float* in = x + ((b * inH + iy) * inW + ix) * channels;
            if (first) {
              std::copy(in, in + channels, out);
              first = false;
              continue;
            }
            for (int64_t c = 0; c < channels; ++c)
              out[c] = in[c] > out[c] ? in[c] : out[c];
          }
      }
}

Status maxPoolOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  PoolShape s;
  KILN_TRY(poolShape(ctx, x.dims(), s));
  if (ctx.channelsLastInput()) {
    // Planned by the executor (FusionPlan::handoffTo) only for a 2-D float MaxPool without
    // Indices whose output goes to one Conv, which takes it channels-last too.
    // Float16 (from a float16 Conv) is staged as the planar path stages it: the same float
    // comparisons on the same widened values, narrowed back the same way.
    if ((x.dtype() != DType::Float32 && x.dtype() != DType::Float16) || s.window.rank() != 2 ||
        ctx.wantsOutput(1) || !ctx.channelsLastOutputAllowed())
      return Status(ErrorCode::Internal, "unexpected channels-last input of a MaxPool", "");
    Staged<float> xv(x);
    StagedOut<float> y(x.dtype(), s.outDims);
    maxPool2dChannelsLast(s, x.dims()[0], x.dims()[1], xv.data(), y.data());
    // Float32 data where the graph says float16: a float16 Conv's widened hand-off, whose reader
    // takes it as it is. Every maximum already is a float16 value; rounding makes an empty
    // window's lowest float the -inf the float16 output would hold.
    if (x.dtype() == DType::Float32 && ctx.node().input(0)->dtype() == DType::Float16)
      roundThroughHalves(y.data(), static_cast<size_t>(y.elementCount()));
    ctx.setOutput(0, std::move(y).finish());
    ctx.markChannelsLastOutput();
    return Status::ok();
  }
  if (x.dtype() == DType::Float16 && s.window.rank() == 2 && !ctx.wantsOutput(1)) {
    OutTensor y(DType::Float16, s.outDims);
    maxPool2dHalfPlanes(ctx.threads(), s, reinterpret_cast<const uint16_t*>(x.data()),
                        y.data<uint16_t>());
    ctx.setOutput(0, std::move(y).finish());
    return Status::ok();
  }
  const bool columnMajor = ctx.attrInt("storage_order", 0) != 0;
  std::optional<OutTensor> indices;
  if (ctx.wantsOutput(1)) indices.emplace(DType::Int64, s.outDims);
  int64_t* idx = indices ? indices->data<int64_t>() : nullptr;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), s.outDims);
    if (!idx && s.window.rank() == 2)
      maxPool2d<T>(s, xv.data(), y.data());
    else
      maxPool<T>(s, xv.data(), y.data(), idx, columnMajor);
    // A float16 Conv's planar widened hand-off (float32 where the graph says float16): rounded
    // as on the channels-last path above.
    if constexpr (std::is_same_v<T, float>)
      if (x.dtype() == DType::Float32 && ctx.node().input(0)->dtype() == DType::Float16)
        roundThroughHalves(y.data(), static_cast<size_t>(y.elementCount()));
    ctx.setOutput(0, std::move(y).finish());
  };
  switch (x.dtype()) {
  case DType::Int8:
    run(int8_t{});
    break;
  case DType::UInt8:
    run(uint8_t{});
    break;
  default:
    if (!nn::dispatchFloat(x.dtype(), run))
      return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  }
  if (indices) ctx.setOutput(1, std::move(*indices).finish());
  return Status::ok();
}

// AveragePool (power 1, mean) and LpPool (power p, p-th root of the sum of |x|^p).
template <typename T>
void sumPool(const PoolShape& s, const T* x, T* y, bool average, bool countPad, double p) {
  const Window& w = s.window;
  const int64_t inSize = nn::product(w.in), outSize = nn::product(w.out);
  const std::vector<int64_t> inStride = rowStrides(w.in);
  for (int64_t pl = 0; pl < s.planes; ++pl) {
    const T* plane = x + pl * inSize;
    forEachOutput(w, [&](int64_t o, const Taps& taps) {
      T sum{0};
      int64_t count = 0;
      if (average) {
        forEachTap(w, inStride, taps, [&](int64_t off) {
          sum += plane[off];
          ++count;
        });
        if (countPad) count = paddedTapCount(w, taps);
        y[pl * outSize + o] = count > 0 ? sum / static_cast<T>(count) : T{0};
      } else if (p == 2.0) {
        forEachTap(w, inStride, taps, [&](int64_t off) { sum += plane[off] * plane[off]; });
        y[pl * outSize + o] = std::sqrt(sum);
      } else {
        forEachTap(w, inStride, taps, [&](int64_t off) {
          sum += static_cast<T>(std::pow(std::fabs(static_cast<double>(plane[off])), p));
        });
        y[pl * outSize + o] = static_cast<T>(std::pow(static_cast<double>(sum), 1.0 / p));
      }
    });
  }
}

// Per output position along spatial axis d: how many kernel taps land inside the padded input
// [-padBegin, in + padEnd) (paddedTapCount is the product over the axes).
std::vector<int64_t> paddedAxisCounts(const Window& w, size_t d, const AxisTaps& taps) {
  std::vector<int64_t> counts(static_cast<size_t>(w.out[d]));
  for (int64_t o = 0; o < w.out[d]; ++o) {
    int64_t n = 0;
    for (int64_t k = 0; k < w.kernel[d]; ++k) {
      const int64_t x = taps.start[o] + k * w.dilations[d];
      if (x >= -w.padBegin[d] && x < w.in[d] + w.padEnd[d]) ++n;
    }
    counts[static_cast<size_t>(o)] = n;
  }
  return counts;
}

// sumPool's average over two spatial axes with the tap tables worked out once per call (not per
// output): each output sums its taps from zero in the same row-major order and divides by the
// same count, so the results are the same bits; the columns whose whole window lies inside the
// row run as one loop over output columns per tap.
template <typename T> void averagePool2d(const PoolShape& s, const T* x, T* y, bool countPad) {
  const Window& w = s.window;
  const int64_t inH = w.in[0], inW = w.in[1], outH = w.out[0], outW = w.out[1];
  const int64_t kw = w.kernel[1], sw = w.strides[1], dh = w.dilations[0], dw = w.dilations[1];
  const AxisTaps rows(w, 0), cols(w, 1);
  const std::vector<int64_t> rowPad = paddedAxisCounts(w, 0, rows),
                             colPad = paddedAxisCounts(w, 1, cols);
  auto countAt = [&](int64_t oy, int64_t ox) {
    return countPad ? rowPad[static_cast<size_t>(oy)] * colPad[static_cast<size_t>(ox)]
                    : (rows.hi[oy] - rows.lo[oy]) * (cols.hi[ox] - cols.lo[ox]);
  };
  // Output columns [fullBegin, fullEnd) have every kernel column inside the input row.
  int64_t fullBegin, fullEnd;
  cols.fullRun(kw, fullBegin, fullEnd);
  for (int64_t p = 0; p < s.planes; ++p) {
    const T* plane = x + p * inH * inW;
    for (int64_t oy = 0; oy < outH; ++oy) {
      T* yrow = y + (p * outH + oy) * outW;
      const int64_t kyLo = rows.lo[oy], kyHi = rows.hi[oy];
      auto scalar = [&](int64_t ox) {
        const int64_t kxLo = cols.lo[ox], kxHi = cols.hi[ox];
        T sum{0};
        for (int64_t ky = kyLo; ky < kyHi && kxLo < kxHi; ++ky) {
          const T* in = plane + (rows.start[oy] + ky * dh) * inW + cols.start[ox];
          for (int64_t kx = kxLo; kx < kxHi; ++kx)
            sum += in[kx * dw];
        }
        // A window with no tap inside the input averages to zero (its sum, over any count).
        const int64_t count = kyHi > kyLo && kxHi > kxLo ? countAt(oy, ox) : 0;
        yrow[ox] = count > 0 ? sum / static_cast<T>(count) : T{0};
      };
      if (kyHi <= kyLo) {
        for (int64_t ox = 0; ox < outW; ++ox)
          scalar(ox);
        continue;
      }
      for (int64_t ox = 0; ox < fullBegin; ++ox)
        scalar(ox);
      if (fullEnd > fullBegin) {
        const int64_t n = fullEnd - fullBegin;
        T* out = yrow + fullBegin;
        std::fill(out, out + n, T{0});
        for (int64_t ky = kyLo; ky < kyHi; ++ky) {
          const T* in = plane + (rows.start[oy] + ky * dh) * inW + cols.start[fullBegin];
          for (int64_t kx = 0; kx < kw; ++kx) {
            const T* tap = in + kx * dw;
            for (int64_t i = 0; i < n; ++i)
              out[i] += tap[i * sw];
          }
        }
        for (int64_t i = 0; i < n; ++i)
          out[i] = out[i] / static_cast<T>(countAt(oy, fullBegin + i));
      }
      for (int64_t ox = fullEnd; ox < outW; ++ox)
        scalar(ox);
    }
  }
}

Status sumPoolOp(KernelContext& ctx, bool average) {
  const Tensor& x = ctx.input(0);
  PoolShape s;
  KILN_TRY(poolShape(ctx, x.dims(), s));
  const bool countPad = ctx.attrInt("count_include_pad", 0) != 0;
  // p is an int since opset 2 and was a float before.
  const double p = ctx.attrInt("p", -1) >= 0 ? static_cast<double>(ctx.attrInt("p", 2))
                                             : ctx.attrFloat("p", 2.0f);
  const bool average2d = average && s.window.rank() == 2;
  const Window& w = s.window;
  const int64_t inSize = nn::product(w.in), outSize = nn::product(w.out);
  if (average2d && x.dtype() == DType::Float16) {
    OutTensor y(DType::Float16, s.outDims);
    pool2dHalfPlanes(ctx.threads(), s, reinterpret_cast<const uint16_t*>(x.data()),
                     y.data<uint16_t>(), w.kernel[0] * w.kernel[1],
                     [&](const PoolShape& part, const float* in, float* out) {
                       averagePool2d<float>(part, in, out, countPad);
                     });
    ctx.setOutput(0, std::move(y).finish());
    return Status::ok();
  }
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), s.outDims);
    if (average2d) {
      // Planes spread over the pool: each is pooled alike whichever thread takes it.
      const double workNs = static_cast<double>(s.planes) *
                            static_cast<double>(inSize + outSize * w.kernel[0] * w.kernel[1]) *
                            pool::kNsPerElement;
      pool::parallelFor(
          pool::threadsFor(ctx.threads(), workNs), s.planes, 1, [&](int64_t b, int64_t e) {
            PoolShape part = s;
            part.planes = e - b;
            averagePool2d<T>(part, xv.data() + b * inSize, y.data() + b * outSize, countPad);
          });
    } else {
      sumPool<T>(s, xv.data(), y.data(), average, countPad, p);
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status averagePoolOp(KernelContext& ctx) { return sumPoolOp(ctx, true); }
Status lpPoolOp(KernelContext& ctx) { return sumPoolOp(ctx, false); }

enum class GlobalKind { Average, Max, Lp };

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,f16c")
// Eight values of a plane as floats: float32 loaded, float16 widened by the conversion
// instruction.
inline __m256 loadEight(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 loadEight(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The eight planes rows[0..8) pooled side by side over their first n values (a multiple of 8 of
// them, returned) into acc[0..8): eight values of each plane, transposed so that one vector
// holds value i of every plane, then the vectors added (or maxed) in order. Each lane is one
// plane's one-by-one sum (a NaN sum is redone by poolLanes), max(x, acc) as std::max(acc, x)
// picks (acc when unordered or equal). A float16 signalling NaN comes out quiet, which a max,
// that never keeps a NaN, and a mean narrowed to float16, a NaN with its sign, cannot tell.
template <bool kMax, typename Src>
int64_t poolEightAvx2(const Src* const* rows, int64_t n, float* acc) {
  __m256 a = _mm256_loadu_ps(acc);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 r0 = loadEight(rows[0] + i), r1 = loadEight(rows[1] + i);
    const __m256 r2 = loadEight(rows[2] + i), r3 = loadEight(rows[3] + i);
    const __m256 r4 = loadEight(rows[4] + i), r5 = loadEight(rows[5] + i);
    const __m256 r6 = loadEight(rows[6] + i), r7 = loadEight(rows[7] + i);
    // Per 128-bit half: pairs of planes interleaved, then quads; then the halves joined.
    const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
    const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
    const __m256 t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5);
    const __m256 t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
    const __m256 s0 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s1 = _mm256_shuffle_ps(t0, t2, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s2 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s3 = _mm256_shuffle_ps(t1, t3, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s4 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s5 = _mm256_shuffle_ps(t4, t6, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 s6 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(1, 0, 1, 0));
    const __m256 s7 = _mm256_shuffle_ps(t5, t7, _MM_SHUFFLE(3, 2, 3, 2));
    const __m256 v[8] = {
        _mm256_permute2f128_ps(s0, s4, 0x20), _mm256_permute2f128_ps(s1, s5, 0x20),
        _mm256_permute2f128_ps(s2, s6, 0x20), _mm256_permute2f128_ps(s3, s7, 0x20),
        _mm256_permute2f128_ps(s0, s4, 0x31), _mm256_permute2f128_ps(s1, s5, 0x31),
        _mm256_permute2f128_ps(s2, s6, 0x31), _mm256_permute2f128_ps(s3, s7, 0x31)};
    for (int j = 0; j < 8; ++j)
      a = kMax ? _mm256_max_ps(v[j], a) : _mm256_add_ps(a, v[j]);
  }
  _mm256_storeu_ps(acc, a);
  return i;
}
#pragma GCC pop_options
#endif

// Global average / max pooling of `lanes` planes side by side (the eight of a group, or one left
// over), each accumulated from its first element to its last: the dependency chains of a group
// overlap instead of waiting on one add after another, and each plane's sum is the one-by-one
// sum (same bits). `rows[l]` is plane l as stored (float, or float16); a group of eight float
// sums runs transposed in vectors (poolEightAvx2) where the machine has them. The rest reads
// `stretch(l, i0, n)`: n values of plane l from element i0 as T, a pointer into the tensor or a
// float16 stretch widened into a buffer in cache. The means or maxima go to out[0, lanes).
template <typename T, int64_t kLanes, typename Src, typename Stretch>
void poolLanes(GlobalKind kind, int64_t size, int64_t stretchSize, const Src* const* rows,
               Stretch&& stretch, T* out) {
  T acc[kLanes];
  for (int64_t l = 0; l < kLanes; ++l)
    acc[l] = kind == GlobalKind::Max ? -std::numeric_limits<T>::infinity() : T{0};
  int64_t from = 0;
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float> && kLanes == 8)
    if (haveF16c())
      from = kind == GlobalKind::Max ? poolEightAvx2<true>(rows, size, acc)
                                     : poolEightAvx2<false>(rows, size, acc);
#endif
  for (int64_t i0 = from; i0 < size; i0 += stretchSize) {
    const int64_t n = std::min(stretchSize, size - i0);
    const T* p[kLanes];
    for (int64_t l = 0; l < kLanes; ++l)
      p[l] = stretch(l, i0, n);
    if (kind == GlobalKind::Max) {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < kLanes; ++l)
          acc[l] = std::max(acc[l], p[l][i]);
    } else {
      for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < kLanes; ++l)
          acc[l] += p[l][i];
    }
  }
  // Which NaN an add keeps when both operands are NaN follows the operand order the compiler
  // picked, so the sign of a NaN mean would too: a plane whose sum is NaN is summed again one value
  // at a time up to the first NaN the sum meets or makes, which it keeps.
  if (kind != GlobalKind::Max)
    for (int64_t l = 0; l < kLanes; ++l) {
      if (!std::isnan(acc[l])) continue;
      T sum{0};
      for (int64_t i0 = 0; i0 < size && !std::isnan(sum); i0 += stretchSize) {
        const int64_t n = std::min(stretchSize, size - i0);
        const T* p = stretch(l, i0, n);
        for (int64_t i = 0; i < n && !std::isnan(sum); ++i)
          sum += p[i];
      }
      acc[l] = sum;
    }
  for (int64_t l = 0; l < kLanes; ++l)
    out[l] = kind == GlobalKind::Max ? acc[l] : acc[l] / static_cast<T>(size);
}

constexpr int64_t kPoolLanes = 8;

// Global average / max pooling of `planes` planes of `size` values: the groups of eight planes,
// then the planes left over one by one, the units spread over the pool (each pooled alike
// whichever thread takes it, so the bits do not depend on the thread count). `poolUnit(pl,
// lanes)` pools planes [pl, pl + lanes) (lanes 8 or 1).
template <typename PoolUnit>
void poolPlaneUnits(int threads, int64_t planes, int64_t size, PoolUnit&& poolUnit) {
  const int64_t groups = planes / kPoolLanes, units = groups + planes % kPoolLanes;
  auto run = [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      if (u < groups)
        poolUnit(u * kPoolLanes, kPoolLanes);
      else
        poolUnit(groups * kPoolLanes + (u - groups), 1);
    }
  };
  const int n = pool::threadsFor(threads, static_cast<double>(planes * size) * pool::kNsPerElement);
  if (n <= 1)
    run(0, units); // no std::function round trip for the small maps of SE blocks
  else
    pool::parallelFor(n, units, 1, run);
}

// Global average / max pooling of float16 planes: the float path's sums (poolLanes) on the
// planes widened a stretch at a time in cache instead of a float32 copy of the whole tensor,
// which PP-OCR det's .om made of each [96, 160, 160] map before pooling it. Widening is exact (a
// signalling NaN comes out quiet, which neither a max, that never keeps a NaN, nor the narrowed
// mean, a NaN with its sign, can tell), so the bits are the float path's.
Tensor globalPoolHalf(int threads, const Tensor& x, GlobalKind kind, int64_t planes, int64_t size,
                      const std::vector<int64_t>& yd) {
  const auto* src = reinterpret_cast<const uint16_t*>(x.data());
  constexpr int64_t kStretch = 512;
  OutTensor y(DType::Float16, yd);
  uint16_t* dst = y.data<uint16_t>();
  poolPlaneUnits(threads, planes, size, [&](int64_t pl, int64_t lanes) {
    float buf[kPoolLanes][kStretch];
    float out[kPoolLanes];
    const uint16_t* rows[kPoolLanes];
    for (int64_t l = 0; l < lanes; ++l)
      rows[l] = src + (pl + l) * size;
    auto stretch = [&](int64_t l, int64_t i0, int64_t n) -> const float* {
      vec::widenHalvesAll(rows[l] + i0, buf[l], n);
      return buf[l];
    };
    if (lanes == kPoolLanes)
      poolLanes<float, kPoolLanes>(kind, size, kStretch, rows, stretch, out);
    else
      poolLanes<float, 1>(kind, size, kStretch, rows, stretch, out);
    floatsToHalves(out, dst + pl, static_cast<size_t>(lanes));
  });
  return std::move(y).finish();
}

Status globalPoolOp(KernelContext& ctx, GlobalKind kind) {
  const Tensor& x = ctx.input(0);
  const auto& xd = x.dims();
  if (xd.size() < 2) return ctx.fail("X must have rank >= 2, got {}", xd.size());
  const int64_t planes = xd[0] * xd[1], size = nn::product(xd, 2);
  std::vector<int64_t> yd = {xd[0], xd[1]};
  yd.resize(xd.size(), 1);
  // p is an int since opset 2 and was a float before.
  const double p = ctx.attrInt("p", -1) >= 0 ? static_cast<double>(ctx.attrInt("p", 2))
                                             : ctx.attrFloat("p", 2.0f);
  if (x.dtype() == DType::Float16 && kind != GlobalKind::Lp) {
    ctx.setOutput(0, globalPoolHalf(ctx.threads(), x, kind, planes, size, yd));
    return Status::ok();
  }
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), yd);
    T* out = y.data();
    if (kind != GlobalKind::Lp) {
      poolPlaneUnits(ctx.threads(), planes, size, [&](int64_t pl, int64_t lanes) {
        // The rest of the plane is one stretch: it is in the tensor already.
        const T* rows[kPoolLanes];
        for (int64_t l = 0; l < lanes; ++l)
          rows[l] = xv.data() + (pl + l) * size;
        auto stretch = [&](int64_t l, int64_t i0, int64_t) { return rows[l] + i0; };
        if (lanes == kPoolLanes)
          poolLanes<T, kPoolLanes>(kind, size, size, rows, stretch, out + pl);
        else
          poolLanes<T, 1>(kind, size, size, rows, stretch, out + pl);
      });
    } else {
      for (int64_t pl = 0; pl < planes; ++pl) {
        const T* src = xv.data() + pl * size;
        double sum = 0;
        for (int64_t i = 0; i < size; ++i)
          sum += std::pow(std::fabs(static_cast<double>(src[i])), p);
        out[pl] = static_cast<T>(std::pow(sum, 1.0 / p));
      }
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status globalAveragePoolOp(KernelContext& ctx) { return globalPoolOp(ctx, GlobalKind::Average); }
Status globalMaxPoolOp(KernelContext& ctx) { return globalPoolOp(ctx, GlobalKind::Max); }
Status globalLpPoolOp(KernelContext& ctx) { return globalPoolOp(ctx, GlobalKind::Lp); }

// MaxUnpool scatters X to the flat positions MaxPool's Indices named, zeros elsewhere. Indices
// address the natural unpooled shape; a larger output_shape keeps each value at its coordinates
// (the extra rows and columns stay zero).
Status maxUnpoolOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  const auto& xd = x.dims();
  if (xd.size() < 3) return ctx.fail("X must have rank >= 3, got {}", xd.size());
  if (ind.dims() != xd) return ctx.fail("I must have the shape of X");
  const size_t r = xd.size() - 2;
  std::vector<int64_t> kernel = ctx.attrInts("kernel_shape");
  std::vector<int64_t> strides = ctx.attrInts("strides", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * r, 0));
  if (kernel.size() != r || strides.size() != r || pads.size() != 2 * r)
    return ctx.fail("kernel_shape/strides/pads do not match {} spatial dims", r);
  std::vector<int64_t> natural = {xd[0], xd[1]};
  for (size_t d = 0; d < r; ++d)
    natural.push_back((xd[d + 2] - 1) * strides[d] + kernel[d] - pads[d] - pads[d + r]);
  std::vector<int64_t> yd = natural;
  if (ctx.hasInput(2)) {
    yd = ctx.inputInts(2);
    if (yd.size() != xd.size()) return ctx.fail("output_shape must have rank {}", xd.size());
  }
  const std::vector<int64_t> natStride = rowStrides(natural), outStride = rowStrides(yd);
  const int64_t naturalTotal = nn::product(natural);
  std::vector<int64_t> idx = toInt64Vector(ind);
  Status status = Status::ok();
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), yd);
    std::fill(y.data(), y.data() + y.elementCount(), T{0});
    for (size_t i = 0; i < idx.size(); ++i) {
      int64_t rest = idx[i], off = 0;
      bool inside = rest >= 0 && rest < naturalTotal;
      for (size_t d = 0; d < yd.size() && inside; ++d) {
        const int64_t c = rest / natStride[d];
        rest %= natStride[d];
        if (c >= yd[d]) inside = false;
        off += c * outStride[d];
      }
      if (!inside) {
        status = ctx.fail("index {} is outside the output", idx[i]);
        return;
      }
      y.data()[off] = xv[i];
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return status;
}

KILN_REGISTER_KERNEL("MaxPool", maxPoolOp);
KILN_REGISTER_KERNEL("AveragePool", averagePoolOp);
KILN_REGISTER_KERNEL("LpPool", lpPoolOp);
KILN_REGISTER_KERNEL("GlobalAveragePool", globalAveragePoolOp);
KILN_REGISTER_KERNEL("GlobalMaxPool", globalMaxPoolOp);
KILN_REGISTER_KERNEL("GlobalLpPool", globalLpPoolOp);
KILN_REGISTER_KERNEL("MaxUnpool", maxUnpoolOp);

} // namespace
} // namespace kiln::rt
