// Resize (opsets 10-19) and the deprecated Upsample: nearest, linear and cubic interpolation over
// any number of axes, every coordinate transformation and nearest rounding mode.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/kernel.h"
#include "ops/resize.h"
#include "shape_util.h"
#include "thread_pool.h"

namespace kiln::rt {
namespace {

enum class Mode { Nearest, Linear, Cubic };

struct ResizeParams {
  Mode mode = Mode::Nearest;
  ops::ResizeCoordinateRule coordinates; // which source pixel each output reads (ops/resize.h)
  double cubicA = -0.75;
  bool excludeOutside = false;
  double extrapolation = 0.0;
};

// Input-axis taps of one output coordinate: (index, weight) pairs.
struct AxisPlan {
  int64_t inLen = 0, outLen = 0;
  std::vector<int64_t> tapStart; // per output coordinate, into index/weight (size outLen + 1)
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside; // tf_crop_and_resize coordinates outside the input
  bool identity = true;
};

AxisPlan planAxis(const ResizeParams& p, int64_t inLen, int64_t outLen, double scale,
                  double roiStart, double roiEnd) {
  AxisPlan plan;
  plan.inLen = inLen;
  plan.outLen = outLen;
  plan.outside.assign(static_cast<size_t>(outLen), 0);
  const bool crop = p.coordinates.transform == "tf_crop_and_resize";
  auto add = [&](int64_t i, double w) {
    if (w == 0.0) return;
    plan.index.push_back(std::clamp<int64_t>(i, 0, inLen - 1));
    plan.weight.push_back(w);
  };
  for (int64_t o = 0; o < outLen; ++o) {
    plan.tapStart.push_back(static_cast<int64_t>(plan.index.size()));
    const float xf =
        ops::resizeSourceCoordinate(p.coordinates, o, static_cast<float>(scale), inLen, outLen,
                                    static_cast<float>(roiStart), static_cast<float>(roiEnd));
    const double x = xf;
    if (crop && (x < 0.0 || x > static_cast<double>(inLen - 1))) {
      plan.outside[static_cast<size_t>(o)] = 1;
      plan.identity = false;
      add(0, 1.0);
      continue;
    }
    if (p.mode == Mode::Nearest) {
      add(ops::resizeNearestIndex(p.coordinates, xf, static_cast<float>(scale)), 1.0);
    } else if (p.mode == Mode::Linear) {
      const double c = std::clamp(x, 0.0, static_cast<double>(inLen - 1));
      const auto i0 = static_cast<int64_t>(std::floor(c));
      const double t = c - static_cast<double>(i0);
      add(i0, 1.0 - t);
      add(std::min(i0 + 1, inLen - 1), t);
    } else {
      const auto i0 = static_cast<int64_t>(std::floor(x));
      const double t = x - static_cast<double>(i0), a = p.cubicA;
      double w[4];
      const double d0 = t + 1.0, d1 = t, d2 = 1.0 - t, d3 = 2.0 - t;
      w[0] = ((a * d0 - 5.0 * a) * d0 + 8.0 * a) * d0 - 4.0 * a;
      w[1] = ((a + 2.0) * d1 - (a + 3.0)) * d1 * d1 + 1.0;
      w[2] = ((a + 2.0) * d2 - (a + 3.0)) * d2 * d2 + 1.0;
      w[3] = ((a * d3 - 5.0 * a) * d3 + 8.0 * a) * d3 - 4.0 * a;
      if (p.excludeOutside) {
        double sum = 0.0;
        for (int k = 0; k < 4; ++k) {
          const int64_t i = i0 - 1 + k;
          if (i < 0 || i >= inLen) w[k] = 0.0;
          sum += w[k];
        }
        if (sum != 0.0)
          for (double& v : w)
            v /= sum;
      }
      for (int k = 0; k < 4; ++k)
        add(i0 - 1 + k, w[k]);
    }
    const int64_t start = plan.tapStart.back();
    const auto count = static_cast<int64_t>(plan.index.size()) - start;
    if (count != 1 || plan.index.back() != o || plan.weight.back() != 1.0) plan.identity = false;
  }
  plan.tapStart.push_back(static_cast<int64_t>(plan.index.size()));
  if (inLen != outLen) plan.identity = false;
  return plan;
}

std::vector<double> toDoubles(const Tensor& t) {
  std::vector<double> out(t.elementCount());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = elementAsDouble(t, i);
  return out;
}

// Interpolates axis `a` of a row-major buffer in place of a new buffer.
std::vector<double> resizeAxis(const std::vector<double>& src, std::vector<int64_t>& dims, size_t a,
                               const AxisPlan& plan) {
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i < a) outer *= dims[i];
    if (i > a) inner *= dims[i];
  }
  std::vector<double> dst(static_cast<size_t>(outer * plan.outLen * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t y = 0; y < plan.outLen; ++y) {
      double* d = dst.data() + (o * plan.outLen + y) * inner;
      for (int64_t t = plan.tapStart[static_cast<size_t>(y)];
           t < plan.tapStart[static_cast<size_t>(y) + 1]; ++t) {
        const double w = plan.weight[static_cast<size_t>(t)];
        const double* s =
            src.data() + (o * plan.inLen + plan.index[static_cast<size_t>(t)]) * inner;
        for (int64_t i = 0; i < inner; ++i)
          d[i] += w * s[i];
      }
    }
  dims[a] = plan.outLen;
  return dst;
}

std::optional<Tensor> fromDoubles(const std::vector<double>& v, DType dtype,
                                  std::vector<int64_t> dims) {
  OutTensor out(dtype, std::move(dims));
  if (dtype == DType::Float16 || dtype == DType::BFloat16) {
    for (size_t i = 0; i < v.size(); ++i)
      out.data<uint16_t>()[i] = dtype == DType::Float16 ? floatToHalf(static_cast<float>(v[i]))
                                                        : floatToBfloat16(static_cast<float>(v[i]));
    return std::move(out).finish();
  }
  bool ok = dispatchNumeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* dst = out.data<T>();
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_floating_point_v<T>) {
        dst[i] = static_cast<T>(v[i]);
      } else if constexpr (std::is_same_v<T, bool>) {
        dst[i] = v[i] != 0.0;
      } else {
        const double r = std::nearbyint(v[i]);
        dst[i] = static_cast<T>(std::clamp(r, static_cast<double>(std::numeric_limits<T>::lowest()),
                                           static_cast<double>(std::numeric_limits<T>::max())));
      }
    }
  });
  if (!ok) return std::nullopt;
  return std::move(out).finish();
}

// Float32 bilinear over the two innermost axes, in float with the four-tap weighted sum in the
// order ONNX Runtime's CPU kernel uses, so the two agree bit for bit (a one-ulp difference here
// flips codes in a following DynamicQuantizeLinear and grows through quantized networks). The
// general path below interpolates axis by axis in double.
Tensor bilinearFloat(const Tensor& x, const std::vector<int64_t>& outDims,
                     const std::vector<double>& scales, const ResizeParams& p) {
  const size_t rank = x.dims().size();
  const int64_t inH = x.dims()[rank - 2], inW = x.dims()[rank - 1];
  const int64_t outH = outDims[rank - 2], outW = outDims[rank - 1];
  struct Taps {
    std::vector<int64_t> i1, i2;
    std::vector<float> d1, d2; // d1: distance to i1 (weight of i2), d2: distance to i2
  };
  auto taps = [&](int64_t inLen, int64_t outLen, double scale) {
    Taps t;
    for (int64_t o = 0; o < outLen; ++o) {
      float c = scale == 1.0
                    ? static_cast<float>(o)
                    : ops::resizeSourceCoordinate(p.coordinates, o, static_cast<float>(scale),
                                                  inLen, outLen, 0.0f, 1.0f);
      c = std::max(0.0f, std::min(c, static_cast<float>(inLen - 1)));
      const int64_t i1 = std::min(static_cast<int64_t>(c), inLen - 1);
      const int64_t i2 = std::min(i1 + 1, inLen - 1);
      float d1 = std::fabs(c - static_cast<float>(i1)), d2 = std::fabs(c - static_cast<float>(i2));
      if (i1 == i2) d1 = d2 = 0.5f;
      t.i1.push_back(i1);
      t.i2.push_back(i2);
      t.d1.push_back(d1);
      t.d2.push_back(d2);
    }
    return t;
  };
  const Taps ty = taps(inH, outH, scales[rank - 2]), tx = taps(inW, outW, scales[rank - 1]);
  OutTensor out(DType::Float32, outDims);
  const float* src = shape::elements<float>(x);
  float* dst = out.data<float>();
  const int64_t planes = static_cast<int64_t>(x.elementCount()) / std::max<int64_t>(inH * inW, 1);
  for (int64_t n = 0; n < planes; ++n) {
    const float* in = src + n * inH * inW;
    float* o = dst + n * outH * outW;
    for (int64_t y = 0; y < outH; ++y) {
      const float* row1 = in + ty.i1[static_cast<size_t>(y)] * inW;
      const float* row2 = in + ty.i2[static_cast<size_t>(y)] * inW;
      const float dy1 = ty.d1[static_cast<size_t>(y)], dy2 = ty.d2[static_cast<size_t>(y)];
      for (int64_t xo = 0; xo < outW; ++xo) {
        const auto k = static_cast<size_t>(xo);
        const float x11 = row1[tx.i1[k]], x21 = row1[tx.i2[k]];
        const float x12 = row2[tx.i1[k]], x22 = row2[tx.i2[k]];
        const float dx1 = tx.d1[k], dx2 = tx.d2[k];
        o[y * outW + xo] = dx2 * dy2 * x11 + dx1 * dy2 * x21 + dx2 * dy1 * x12 + dx1 * dy1 * x22;
      }
    }
  }
  return std::move(out).finish();
}

// An axis plan with one or two taps per output coordinate (linear mode) as flat arrays. A
// one-tap coordinate's second tap repeats the first with weight 0 and is listed in `single`, to be
// recomputed without it (0 times an infinite value would make a NaN the one-tap sum has not).
struct PairTaps {
  std::vector<int64_t> i0, i1;
  std::vector<double> w0, w1;
  std::vector<int64_t> single;
};

std::optional<PairTaps> pairTaps(const AxisPlan& plan) {
  PairTaps t;
  for (int64_t o = 0; o < plan.outLen; ++o) {
    const auto first = static_cast<size_t>(plan.tapStart[static_cast<size_t>(o)]);
    const auto count = static_cast<size_t>(plan.tapStart[static_cast<size_t>(o) + 1]) - first;
    if (count < 1 || count > 2) return std::nullopt;
    t.i0.push_back(plan.index[first]);
    t.w0.push_back(plan.weight[first]);
    t.i1.push_back(plan.index[first + count - 1]);
    t.w1.push_back(count == 2 ? plan.weight[first + 1] : 0.0);
    if (count == 1) t.single.push_back(o);
  }
  return t;
}

// resizePlanesHalf for plans of at most two taps per coordinate: the same double sums in the same
// order ((0.0 + w0 * a) + w1 * b, the 0.0 turning -0.0 into +0.0 as the general sum does), in
// loops without the tap lists, over rows so that one large plane also splits across threads.
void resizePlanesHalfPairs(int threads, const uint16_t* src, uint16_t* dst, int64_t planes,
                           int64_t inH, int64_t inW, int64_t outH, int64_t outW,
                           const AxisPlan& rows, const AxisPlan& cols, const PairTaps& rowTaps,
                           const PairTaps& colTaps) {
  const int64_t work = planes * outH * outW;
  pool::parallelFor(pool::threadsFor(threads, static_cast<double>(work) * pool::kNsPerElement),
                    planes * outH, 1, [&](int64_t r0, int64_t r1) {
                      // Input rows widened to float on first use (the plane they hold in `held`).
                      std::vector<float> in(static_cast<size_t>(inH * inW));
                      std::vector<int64_t> held(static_cast<size_t>(inH), -1);
                      std::vector<double> mid(static_cast<size_t>(inW));
                      std::vector<float> row(static_cast<size_t>(outW));
                      auto inputRow = [&](int64_t p, int64_t i) {
                        float* r = in.data() + i * inW;
                        if (held[static_cast<size_t>(i)] != p) {
                          halvesToFloats(src + (p * inH + i) * inW, r, static_cast<size_t>(inW));
                          held[static_cast<size_t>(i)] = p;
                        }
                        return static_cast<const float*>(r);
                      };
                      for (int64_t r = r0; r < r1; ++r) {
                        const int64_t p = r / outH, y = r % outH;
                        const auto yi = static_cast<size_t>(y);
                        double* m = mid.data();
                        if (rows.identity) {
                          const float* a = inputRow(p, y);
                          for (int64_t c = 0; c < inW; ++c)
                            m[c] = static_cast<double>(a[c]);
                        } else {
                          const float* a = inputRow(p, rowTaps.i0[yi]);
                          const double w0 = rowTaps.w0[yi];
                          if (rowTaps.w1[yi] == 0.0) {
                            for (int64_t c = 0; c < inW; ++c)
                              m[c] = 0.0 + w0 * static_cast<double>(a[c]);
                          } else {
                            const float* b = inputRow(p, rowTaps.i1[yi]);
                            const double w1 = rowTaps.w1[yi];
                            for (int64_t c = 0; c < inW; ++c)
                              m[c] = (0.0 + w0 * static_cast<double>(a[c])) +
                                     w1 * static_cast<double>(b[c]);
                          }
                        }
                        float* o = row.data();
                        if (cols.identity) {
                          for (int64_t c = 0; c < outW; ++c)
                            o[c] = static_cast<float>(m[c]);
                        } else {
                          const int64_t* j0 = colTaps.i0.data();
                          const int64_t* j1 = colTaps.i1.data();
                          const double* u0 = colTaps.w0.data();
                          const double* u1 = colTaps.w1.data();
                          for (int64_t c = 0; c < outW; ++c)
                            o[c] = static_cast<float>((0.0 + u0[c] * m[j0[c]]) + u1[c] * m[j1[c]]);
                          for (int64_t c : colTaps.single)
                            o[c] = static_cast<float>(0.0 + u0[c] * m[j0[c]]);
                        }
                        floatsToHalves(o, dst + r * outW, static_cast<size_t>(outW));
                      }
                    });
}

// The general path below for a float16 tensor resized on its two innermost axes only, plane by
// plane in cache (and planes over the pool) instead of whole-tensor double buffers per axis: the
// same double sums in the same order (the rows axis first, each sum from 0.0 in tap order), so
// the same float16 results. PP-OCR and ISNet .om files resize float16 maps. Linear plans (two
// taps at most) take resizePlanesHalfPairs, the rest (cubic) the tap lists here.
Tensor resizePlanesHalf(int threads, const Tensor& x, const std::vector<int64_t>& outDims,
                        const AxisPlan& rows, const AxisPlan& cols) {
  const size_t rank = x.dims().size();
  const int64_t inH = x.dims()[rank - 2], inW = x.dims()[rank - 1];
  const int64_t outH = outDims[rank - 2], outW = outDims[rank - 1];
  const int64_t planes = static_cast<int64_t>(x.elementCount()) / std::max<int64_t>(inH * inW, 1);
  OutTensor out(DType::Float16, outDims);
  const auto* src = reinterpret_cast<const uint16_t*>(x.data());
  uint16_t* dst = out.data<uint16_t>();
  {
    const std::optional<PairTaps> rowTaps = rows.identity ? PairTaps{} : pairTaps(rows);
    const std::optional<PairTaps> colTaps = cols.identity ? PairTaps{} : pairTaps(cols);
    if (rowTaps && colTaps) {
      resizePlanesHalfPairs(threads, src, dst, planes, inH, inW, outH, outW, rows, cols, *rowTaps,
                            *colTaps);
      return std::move(out).finish();
    }
  }
  auto sum = [](const AxisPlan& plan, int64_t o, auto&& at) {
    double d = 0.0;
    for (int64_t t = plan.tapStart[static_cast<size_t>(o)];
         t < plan.tapStart[static_cast<size_t>(o) + 1]; ++t)
      d += plan.weight[static_cast<size_t>(t)] * at(plan.index[static_cast<size_t>(t)]);
    return d;
  };
  const int64_t work = planes * outH * outW;
  pool::parallelFor(
      pool::threadsFor(threads, static_cast<double>(work) * pool::kNsPerElement), planes, 1,
      [&](int64_t p0, int64_t p1) {
        std::vector<float> in(static_cast<size_t>(inH * inW)), row(static_cast<size_t>(outW));
        std::vector<double> mid(static_cast<size_t>(outH * inW));
        for (int64_t p = p0; p < p1; ++p) {
          halvesToFloats(src + p * inH * inW, in.data(), in.size());
          for (int64_t y = 0; y < outH; ++y)
            for (int64_t c = 0; c < inW; ++c)
              mid[static_cast<size_t>(y * inW + c)] =
                  rows.identity
                      ? static_cast<double>(in[static_cast<size_t>(y * inW + c)])
                      : sum(rows, y, [&](int64_t i) {
                          return static_cast<double>(in[static_cast<size_t>(i * inW + c)]);
                        });
          for (int64_t y = 0; y < outH; ++y) {
            const double* m = mid.data() + y * inW;
            for (int64_t c = 0; c < outW; ++c)
              row[static_cast<size_t>(c)] = static_cast<float>(
                  cols.identity ? m[c] : sum(cols, c, [&](int64_t i) { return m[i]; }));
            floatsToHalves(row.data(), dst + (p * outH + y) * outW, row.size());
          }
        }
      });
  return std::move(out).finish();
}

// Resizes x to outDims; scales[i] is the scale the coordinate transform uses for axis i.
Status runResize(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& outDims,
                 const std::vector<double>& scales, const std::vector<double>& roi,
                 const ResizeParams& p) {
  const size_t rank = x.dims().size();
  for (int64_t d : outDims)
    if (d < 0) return ctx.fail("negative output size in [{}]", fmt::join(outDims, ","));
  // The axis plans are as long as the output's axes: refuse an output that cannot exist first.
  checkOutputFits(x.dtype(), outDims);
  // Each axis plan holds an offset per output index, even when another axis makes the output empty.
  for (int64_t d : outDims)
    checkOutputFits(DType::Int64, {d});
  std::vector<AxisPlan> plans;
  bool anyOutside = false;
  for (size_t a = 0; a < rank; ++a) {
    if (x.dims()[a] == 0 && outDims[a] > 0) return ctx.fail("cannot resize an empty axis");
    const double roiStart = roi.empty() ? 0.0 : roi[a], roiEnd = roi.empty() ? 1.0 : roi[a + rank];
    plans.push_back(planAxis(p, x.dims()[a], outDims[a], scales[a], roiStart, roiEnd));
    for (uint8_t o : plans.back().outside)
      anyOutside |= o != 0;
  }
  if (p.mode == Mode::Nearest && !anyOutside) {
    // Pure gather: works for every dtype, strings included.
    return shape::withElements(ctx, x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      shape::ElemOut<T> out(x.dtype(), outDims);
      const T* src = shape::elements<T>(x);
      T* dst = out.data();
      // Per-axis source offsets, then one gather loop per output row (all axes but the last);
      // a row whose source row equals the previous one's (upsampling) is a copy of it.
      const std::vector<int64_t> strides = stridesOf(x.dims());
      std::vector<std::vector<int64_t>> offsets(rank);
      for (size_t a = 0; a < rank; ++a)
        for (int64_t o = 0; o < outDims[a]; ++o)
          offsets[a].push_back(
              plans[a].index[static_cast<size_t>(plans[a].tapStart[static_cast<size_t>(o)])] *
              strides[a]);
      const int64_t rowLen = rank == 0 ? 1 : outDims[rank - 1];
      const int64_t* last = rank == 0 ? nullptr : offsets[rank - 1].data();
      const uint64_t total = out.size();
      std::vector<int64_t> idx(rank, 0);
      int64_t base = 0, previous = -1;
      for (size_t a = 0; a + 1 < rank; ++a)
        base += outDims[a] > 0 ? offsets[a][0] : 0;
      for (uint64_t i = 0; rowLen > 0 && i < total; i += static_cast<uint64_t>(rowLen)) {
        T* row = dst + i;
        if (rank == 0) {
          row[0] = src[0];
          break;
        }
        if (base == previous) {
          std::copy(row - rowLen, row, row);
        } else {
          const T* in = src + base;
          for (int64_t k = 0; k < rowLen; ++k)
            row[k] = in[last[k]];
        }
        previous = base;
        for (size_t a = rank - 1; a-- > 0;) {
          base -= offsets[a][static_cast<size_t>(idx[a])];
          if (++idx[a] < outDims[a]) {
            base += offsets[a][static_cast<size_t>(idx[a])];
            break;
          }
          idx[a] = 0;
          base += offsets[a][0];
        }
      }
      ctx.setOutput(0, std::move(out).finish());
      return Status::ok();
    });
  }
  if (x.dtype() == DType::String) return ctx.unsupported("interpolating strings");
  bool outerIdentity = rank >= 2;
  for (size_t a = 0; a + 2 < rank; ++a)
    outerIdentity &= plans[a].identity;
  if (x.dtype() == DType::Float32 && p.mode == Mode::Linear && !anyOutside && outerIdentity &&
      p.coordinates.transform != "tf_crop_and_resize") {
    ctx.setOutput(0, bilinearFloat(x, outDims, scales, p));
    return Status::ok();
  }
  if (x.dtype() == DType::Float16 && !anyOutside && outerIdentity) {
    ctx.setOutput(0, resizePlanesHalf(ctx.threads(), x, outDims, plans[rank - 2], plans[rank - 1]));
    return Status::ok();
  }
  std::vector<double> values = toDoubles(x);
  std::vector<int64_t> dims = x.dims();
  for (size_t a = 0; a < rank; ++a)
    if (!plans[a].identity) values = resizeAxis(values, dims, a, plans[a]);
  if (anyOutside) {
    std::vector<int64_t> idx(rank, 0);
    for (size_t i = 0; i < values.size(); ++i) {
      bool outside = false;
      for (size_t a = 0; a < rank; ++a)
        outside |= plans[a].outside[static_cast<size_t>(idx[a])] != 0;
      if (outside) values[i] = p.extrapolation;
      for (size_t a = rank; a-- > 0;) {
        if (++idx[a] < outDims[a]) break;
        idx[a] = 0;
      }
    }
  }
  auto out = fromDoubles(values, x.dtype(), outDims);
  if (!out) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  ctx.setOutput(0, std::move(*out));
  return Status::ok();
}

std::optional<Mode> modeOf(const std::string& name) {
  if (name == "nearest") return Mode::Nearest;
  if (name == "linear" || name == "bilinear" || name == "trilinear") return Mode::Linear;
  if (name == "cubic") return Mode::Cubic;
  return std::nullopt;
}

// Output dims from per-axis scales: floor(in * scale).
std::vector<int64_t> dimsFromScales(const std::vector<int64_t>& in,
                                    const std::vector<double>& scales) {
  std::vector<int64_t> out(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const double size = std::floor(static_cast<double>(in[i]) * scales[i] + 1e-9);
    // Converting a double beyond int64 is undefined; such a size (or NaN) becomes INT64_MAX,
    // which runResize refuses as an output that cannot be allocated.
    out[i] = size < 0x1p63 ? static_cast<int64_t>(size) : INT64_MAX;
    if (size < -0x1p63) out[i] = -1;
  }
  return out;
}

std::vector<double> floatInput(const KernelContext& ctx, size_t i) {
  const std::vector<float> v = toFloatVector(ctx.input(i));
  return std::vector<double>(v.begin(), v.end());
}

Status resize(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.dims().size();
  ResizeParams p;
  auto mode = modeOf(ctx.attrString("mode", "nearest"));
  if (!mode) return ctx.unsupported("mode '{}'", ctx.attrString("mode"));
  p.mode = *mode;
  std::vector<double> scales(rank, 1.0), roi;
  std::vector<int64_t> outDims = x.dims();
  if (ctx.opset() < 11) {
    p.coordinates.transform = "asymmetric";
    p.coordinates.opset10Nearest = true;
    if (!ctx.hasInput(1)) return ctx.fail("missing scales");
    scales = floatInput(ctx, 1);
    if (scales.size() != rank) return ctx.fail("{} scales for rank {}", scales.size(), rank);
    outDims = dimsFromScales(x.dims(), scales);
    return runResize(ctx, x, outDims, scales, roi, p);
  }
  if (ctx.attrInt("antialias", 0) != 0) return ctx.unsupported("antialias");
  p.coordinates.transform = ctx.attrString("coordinate_transformation_mode", "half_pixel");
  p.coordinates.nearestMode = ctx.attrString("nearest_mode", "round_prefer_floor");
  p.cubicA = ctx.attrFloat("cubic_coeff_a", -0.75f);
  p.excludeOutside = ctx.attrInt("exclude_outside", 0) != 0;
  p.extrapolation = ctx.attrFloat("extrapolation_value", 0.0f);
  // Optional axes (opset 18) name which dims scales/sizes/roi describe.
  std::vector<int64_t> axes = ctx.attrInts("axes");
  if (axes.empty())
    for (size_t i = 0; i < rank; ++i)
      axes.push_back(static_cast<int64_t>(i));
  for (int64_t& a : axes) {
    auto n = normalizeAxis(a, static_cast<int64_t>(rank));
    if (!n) return ctx.fail("axis {} out of range", a);
    a = *n;
  }
  if (ctx.hasInput(1) && ctx.input(1).elementCount() > 0) {
    std::vector<double> given = floatInput(ctx, 1);
    if (given.size() != 2 * axes.size()) return ctx.fail("roi has {} values", given.size());
    roi.assign(2 * rank, 0.0);
    for (size_t i = 0; i < rank; ++i)
      roi[i + rank] = 1.0;
    for (size_t i = 0; i < axes.size(); ++i) {
      roi[static_cast<size_t>(axes[i])] = given[i];
      roi[static_cast<size_t>(axes[i]) + rank] = given[i + axes.size()];
    }
  }
  const bool hasScales = ctx.hasInput(2) && ctx.input(2).elementCount() > 0;
  const bool hasSizes = ctx.hasInput(3) && ctx.input(3).elementCount() > 0;
  if (hasScales == hasSizes) return ctx.fail("exactly one of scales and sizes must be given");
  if (hasScales) {
    std::vector<double> given = floatInput(ctx, 2);
    if (given.size() != axes.size())
      return ctx.fail("{} scales for {} axes", given.size(), axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      if (given[i] <= 0.0) return ctx.fail("scale {} must be positive", given[i]);
      scales[static_cast<size_t>(axes[i])] = given[i];
    }
    outDims = dimsFromScales(x.dims(), scales);
  } else {
    std::vector<int64_t> sizes = ctx.inputInts(3);
    if (sizes.size() != axes.size())
      return ctx.fail("{} sizes for {} axes", sizes.size(), axes.size());
    const std::string policy = ctx.attrString("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) {
        const auto a = static_cast<size_t>(axes[i]);
        outDims[a] = sizes[i];
        scales[a] = x.dims()[a] == 0
                        ? 1.0
                        : static_cast<double>(sizes[i]) / static_cast<double>(x.dims()[a]);
      }
    } else if (policy == "not_larger" || policy == "not_smaller") {
      double scale = policy == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t i = 0; i < axes.size(); ++i) {
        const double s = static_cast<double>(sizes[i]) /
                         static_cast<double>(x.dims()[static_cast<size_t>(axes[i])]);
        scale = policy == "not_larger" ? std::min(scale, s) : std::max(scale, s);
      }
      for (int64_t a : axes) {
        scales[static_cast<size_t>(a)] = scale;
        outDims[static_cast<size_t>(a)] = static_cast<int64_t>(
            std::round(scale * static_cast<double>(x.dims()[static_cast<size_t>(a)])));
      }
    } else {
      return ctx.unsupported("keep_aspect_ratio_policy '{}'", policy);
    }
  }
  return runResize(ctx, x, outDims, scales, roi, p);
}

Status upsample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t rank = x.dims().size();
  ResizeParams p;
  auto mode = modeOf(ctx.attrString("mode", "nearest"));
  if (!mode || *mode == Mode::Cubic) return ctx.unsupported("mode '{}'", ctx.attrString("mode"));
  p.mode = *mode;
  p.coordinates.transform = "asymmetric";
  p.coordinates.opset10Nearest = true;
  std::vector<double> scales;
  if (ctx.hasInput(1)) {
    scales = floatInput(ctx, 1);
  } else if (ctx.hasAttr("scales")) {
    for (float s : ctx.attrFloats("scales"))
      scales.push_back(s);
  } else {
    // Upsample-1 described the two innermost scales with height_scale / width_scale.
    scales.assign(rank, 1.0);
    if (rank >= 2) {
      scales[rank - 2] = ctx.attrFloat("height_scale", 1.0f);
      scales[rank - 1] = ctx.attrFloat("width_scale", 1.0f);
    }
  }
  if (scales.size() != rank) return ctx.fail("{} scales for rank {}", scales.size(), rank);
  return runResize(ctx, x, dimsFromScales(x.dims(), scales), scales, {}, p);
}

KILN_REGISTER_KERNEL("Resize", resize);
KILN_REGISTER_KERNEL("Upsample", upsample);

} // namespace
} // namespace kiln::rt
