// Convolution kernels: Conv and ConvTranspose (im2col / col2im around BLAS GEMM), and the
// integer ConvInteger and QLinearConv (same unfolding, plain-loop integer GEMM).
#include "nn_util.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;
using nn::Window;

// Shapes every conv variant checks: X [N, C, in...], W [M, C/group, k...].
struct ConvShape {
  int64_t batch = 0, channels = 0, filters = 0, group = 1;
  Window window;
};

Status convShape(const KernelContext& ctx, const std::vector<int64_t>& xd,
                 const std::vector<int64_t>& wd, ConvShape& s) {
  if (xd.size() < 3) return ctx.fail("X must have rank >= 3, got {}", xd.size());
  if (wd.size() != xd.size())
    return ctx.fail("W rank {} differs from X rank {}", wd.size(), xd.size());
  s.batch = xd[0];
  s.channels = xd[1];
  s.filters = wd[0];
  s.group = ctx.attrInt("group", 1);
  if (s.group < 1 || s.channels % s.group != 0 || s.filters % s.group != 0)
    return ctx.fail("group {} does not divide channels {} and filters {}", s.group, s.channels,
                    s.filters);
  if (wd[1] * s.group != s.channels)
    return ctx.fail("W has {} input channels per group, X has {} channels in {} groups", wd[1],
                    s.channels, s.group);
  std::vector<int64_t> in(xd.begin() + 2, xd.end());
  std::vector<int64_t> kernel = ctx.attrInts("kernel_shape", {wd.begin() + 2, wd.end()});
  return nn::resolveWindow(ctx, in, kernel, false, s.window);
}

bool isPointwise(const Window& w) {
  for (size_t d = 0; d < w.rank(); ++d)
    if (w.kernel[d] != 1 || w.strides[d] != 1 || w.padBegin[d] != 0 || w.padEnd[d] != 0)
      return false;
  return true;
}

// Depthwise 2-D conv (one input channel per group) as direct loops: per-group GEMMs would be
// 1-row products dominated by call and unfolding overhead.
template <typename T>
void depthwise2d(const ConvShape& s, const T* x, const T* w, const T* bias, T* y) {
  const Window& win = s.window;
  const int64_t h = win.in[0], wd = win.in[1], oh = win.out[0], ow = win.out[1];
  const int64_t kh = win.kernel[0], kw = win.kernel[1], sh = win.strides[0], sw = win.strides[1];
  const int64_t dh = win.dilations[0], dw = win.dilations[1];
  const int64_t pt = win.padBegin[0], pl = win.padBegin[1], mg = s.filters / s.group;
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t m = 0; m < s.filters; ++m) {
      const T* src = x + (b * s.channels + m / mg) * h * wd;
      const T* wk = w + m * kh * kw;
      T* dst = y + (b * s.filters + m) * oh * ow;
      std::fill(dst, dst + oh * ow, bias ? bias[m] : T{0});
      for (int64_t kx = 0; kx < kw; ++kx) {
        // Output columns whose input column ox*sw + kx*dw - pl lies inside [0, wd).
        const int64_t shift = kx * dw - pl;
        int64_t lo = shift >= 0 ? 0 : (-shift + sw - 1) / sw;
        int64_t hi = wd - shift <= 0 ? 0 : (wd - shift + sw - 1) / sw;
        hi = std::min(hi, ow);
        if (lo >= hi) continue;
        for (int64_t oy = 0; oy < oh; ++oy) {
          T* row = dst + oy * ow;
          for (int64_t ky = 0; ky < kh; ++ky) {
            const int64_t iy = oy * sh + ky * dh - pt;
            if (iy < 0 || iy >= h) continue;
            const T wv = wk[ky * kw + kx];
            const T* in = src + iy * wd + shift;
            for (int64_t ox = lo; ox < hi; ++ox)
              row[ox] += wv * in[ox * sw];
          }
        }
      }
    }
}

template <typename T>
void convForward(int threads, const ConvShape& s, const T* x, const T* w, const T* bias, T* y) {
  if (s.window.rank() == 2 && s.group > 1 && s.channels == s.group) {
    depthwise2d(s, x, w, bias, y);
    return;
  }
  const Window& win = s.window;
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), inSize = nn::product(win.in);
  const int64_t outSize = nn::product(win.out), rows = cg * ks;
  const bool pointwise = isPointwise(win);
  std::vector<T> cols(pointwise ? 0 : static_cast<size_t>(rows * outSize));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = x + (b * s.channels + g * cg) * inSize;
      const T* colData = xg;
      if (!pointwise) {
        nn::im2col(xg, cg, win, T{0}, cols.data());
        colData = cols.data();
      }
      T* yg = y + (b * s.filters + g * mg) * outSize;
      nn::gemm(threads, false, false, mg, outSize, rows, T{1}, w + g * mg * rows, rows, colData,
               outSize, T{0}, yg, outSize);
      if (bias)
        for (int64_t m = 0; m < mg; ++m) {
          const T bv = bias[g * mg + m];
          T* row = yg + m * outSize;
          for (int64_t i = 0; i < outSize; ++i)
            row[i] += bv;
        }
    }
  }
}

Status convOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  ConvShape s;
  KILN_TRY(convShape(ctx, x.dims(), w.dims(), s));
  const bool hasBias = ctx.hasInput(2);
  if (hasBias && static_cast<int64_t>(ctx.input(2).elementCount()) != s.filters)
    return ctx.fail("B has {} elements, expected {}", ctx.input(2).elementCount(), s.filters);
  std::vector<int64_t> yd = {s.batch, s.filters};
  yd.insert(yd.end(), s.window.out.begin(), s.window.out.end());
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), wv(w);
    std::optional<Staged<T>> bv;
    if (hasBias) bv.emplace(ctx.input(2));
    StagedOut<T> y(x.dtype(), yd);
    convForward<T>(ctx.threads(), s, xv.data(), wv.data(), bv ? bv->data() : nullptr, y.data());
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

// ConvTranspose geometry: `window.in` is the output's spatial dims and `window.out` the input's,
// so col2imAdd scatters input positions o to output positions o*stride + k*dilation - pad.
Status convTransposeShape(const KernelContext& ctx, const std::vector<int64_t>& xd,
                          const std::vector<int64_t>& wd, ConvShape& s) {
  if (xd.size() < 3) return ctx.fail("X must have rank >= 3, got {}", xd.size());
  if (wd.size() != xd.size())
    return ctx.fail("W rank {} differs from X rank {}", wd.size(), xd.size());
  const size_t r = xd.size() - 2;
  s.batch = xd[0];
  s.channels = xd[1];
  s.group = ctx.attrInt("group", 1);
  if (s.group < 1 || s.channels % s.group != 0 || wd[0] != s.channels)
    return ctx.fail("W has {} input channels, X has {} in {} groups", wd[0], s.channels, s.group);
  s.filters = wd[1] * s.group;
  Window& w = s.window;
  w.out.assign(xd.begin() + 2, xd.end());
  w.kernel = ctx.attrInts("kernel_shape", {wd.begin() + 2, wd.end()});
  w.strides = ctx.attrInts("strides", std::vector<int64_t>(r, 1));
  w.dilations = ctx.attrInts("dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * r, 0));
  std::vector<int64_t> outputPadding = ctx.attrInts("output_padding", std::vector<int64_t>(r, 0));
  std::vector<int64_t> outputShape = ctx.attrInts("output_shape");
  if (outputShape.size() > r) outputShape.erase(outputShape.begin(), outputShape.end() - r);
  if (w.kernel.size() != r || w.strides.size() != r || w.dilations.size() != r ||
      pads.size() != 2 * r || outputPadding.size() != r ||
      (!outputShape.empty() && outputShape.size() != r))
    return ctx.fail("kernel_shape/strides/dilations/pads/output_padding/output_shape do not match "
                    "{} spatial dims",
                    r);
  const std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  w.padBegin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  w.padEnd.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  w.in.assign(r, 0);
  for (size_t d = 0; d < r; ++d) {
    const int64_t full = w.strides[d] * (w.out[d] - 1) + outputPadding[d] + w.effectiveKernel(d);
    if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      w.in[d] = outputShape.empty() ? w.out[d] * w.strides[d] : outputShape[d];
      // Floor division: an output_shape larger than the natural one gives negative padding,
      // which then lands at the end (as extra output_padding would).
      const int64_t total = full - w.in[d];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      if (autoPad == "SAME_UPPER") {
        w.padBegin[d] = half;
        w.padEnd[d] = total - half;
      } else {
        w.padBegin[d] = total - half;
        w.padEnd[d] = half;
      }
    } else {
      if (autoPad == "VALID") w.padBegin[d] = w.padEnd[d] = 0;
      w.in[d] = full - w.padBegin[d] - w.padEnd[d];
    }
    if (w.in[d] < 0) return ctx.fail("negative output size on spatial axis {}", d);
  }
  return Status::ok();
}

template <typename T>
void convTransposeForward(int threads, const ConvShape& s, const T* x, const T* w, const T* bias,
                          T* y) {
  const Window& win = s.window;
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), xSize = nn::product(win.out);
  const int64_t ySize = nn::product(win.in), rows = mg * ks;
  std::vector<T> cols(static_cast<size_t>(rows * xSize));
  std::fill(y, y + s.batch * s.filters * ySize, T{0});
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = x + (b * s.channels + g * cg) * xSize;
      nn::gemm(threads, true, false, rows, xSize, cg, T{1}, w + g * cg * rows, rows, xg, xSize,
               T{0}, cols.data(), xSize);
      T* yg = y + (b * s.filters + g * mg) * ySize;
      nn::col2imAdd(cols.data(), mg, win, yg);
      if (bias)
        for (int64_t m = 0; m < mg; ++m) {
          const T bv = bias[g * mg + m];
          T* row = yg + m * ySize;
          for (int64_t i = 0; i < ySize; ++i)
            row[i] += bv;
        }
    }
  }
}

Status convTransposeOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(1);
  ConvShape s;
  KILN_TRY(convTransposeShape(ctx, x.dims(), w.dims(), s));
  const bool hasBias = ctx.hasInput(2);
  if (hasBias && static_cast<int64_t>(ctx.input(2).elementCount()) != s.filters)
    return ctx.fail("B has {} elements, expected {}", ctx.input(2).elementCount(), s.filters);
  std::vector<int64_t> yd = {s.batch, s.filters};
  yd.insert(yd.end(), s.window.in.begin(), s.window.in.end());
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), wv(w);
    std::optional<Staged<T>> bv;
    if (hasBias) bv.emplace(ctx.input(2));
    StagedOut<T> y(x.dtype(), yd);
    convTransposeForward<T>(ctx.threads(), s, xv.data(), wv.data(), bv ? bv->data() : nullptr,
                            y.data());
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

bool isInt8Like(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// Zero point values of input i: empty input means 0; a scalar is broadcast to `count`.
Status zeroPoints(const KernelContext& ctx, size_t i, int64_t count, std::vector<int32_t>& out,
                  const char* what) {
  out.assign(static_cast<size_t>(count), 0);
  if (!ctx.hasInput(i)) return Status::ok();
  std::vector<int64_t> v = ctx.inputInts(i);
  if (v.size() == 1)
    std::fill(out.begin(), out.end(), static_cast<int32_t>(v[0]));
  else if (static_cast<int64_t>(v.size()) == count)
    std::transform(v.begin(), v.end(), out.begin(),
                   [](int64_t z) { return static_cast<int32_t>(z); });
  else
    return ctx.fail("{} has {} values, expected 1 or {}", what, v.size(), count);
  return Status::ok();
}

// Integer convolution (x - x_zero_point) * (w - w_zero_point[m]) accumulated in int32; x and w
// are inputs 0 and wIndex, their zero points inputs xzIndex and wzIndex.
Status integerConv(KernelContext& ctx, size_t wIndex, size_t xzIndex, size_t wzIndex, ConvShape& s,
                   std::vector<int32_t>& acc) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(wIndex);
  if (!isInt8Like(x.dtype()) || !isInt8Like(w.dtype()))
    return ctx.unsupported("dtypes {} x {}", dtypeName(x.dtype()), dtypeName(w.dtype()));
  KILN_TRY(convShape(ctx, x.dims(), w.dims(), s));
  std::vector<int32_t> xz, wz;
  KILN_TRY(zeroPoints(ctx, xzIndex, 1, xz, "x_zero_point"));
  KILN_TRY(zeroPoints(ctx, wzIndex, s.filters, wz, "w_zero_point"));
  const Window& win = s.window;
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), inSize = nn::product(win.in);
  const int64_t outSize = nn::product(win.out), rows = cg * ks;
  std::vector<int64_t> xv = toInt64Vector(x), wv = toInt64Vector(w);
  std::vector<int32_t> xs(xv.size()), ws(wv.size());
  for (size_t i = 0; i < xv.size(); ++i)
    xs[i] = static_cast<int32_t>(xv[i]) - xz[0];
  for (size_t i = 0; i < wv.size(); ++i)
    ws[i] = static_cast<int32_t>(wv[i]) - wz[i / static_cast<size_t>(rows)];
  std::vector<int32_t> cols(static_cast<size_t>(rows * outSize));
  acc.assign(static_cast<size_t>(s.batch * s.filters * outSize), 0);
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t g = 0; g < s.group; ++g) {
      nn::im2col(xs.data() + (b * s.channels + g * cg) * inSize, cg, win, int32_t{0}, cols.data());
      nn::gemmLoops<int32_t>(false, false, mg, outSize, rows, ws.data() + g * mg * rows, rows,
                             cols.data(), outSize, acc.data() + (b * s.filters + g * mg) * outSize,
                             outSize, false);
    }
  return Status::ok();
}

std::vector<int64_t> convOutDims(const ConvShape& s) {
  std::vector<int64_t> yd = {s.batch, s.filters};
  yd.insert(yd.end(), s.window.out.begin(), s.window.out.end());
  return yd;
}

Status convIntegerOp(KernelContext& ctx) {
  ConvShape s;
  std::vector<int32_t> acc;
  KILN_TRY(integerConv(ctx, 1, 2, 3, s, acc));
  ctx.setOutput(0, makeTensor<int32_t>(DType::Int32, convOutDims(s), acc));
  return Status::ok();
}

// Scales of input i as floats: a scalar broadcast to `count`, or `count` per-channel values.
Status scales(const KernelContext& ctx, size_t i, int64_t count, std::vector<float>& out,
              const char* what) {
  std::vector<float> v = toFloatVector(ctx.input(i));
  if (v.size() == 1)
    out.assign(static_cast<size_t>(count), v[0]);
  else if (static_cast<int64_t>(v.size()) == count)
    out = v;
  else
    return ctx.fail("{} has {} values, expected 1 or {}", what, v.size(), count);
  return Status::ok();
}

Status qlinearConvOp(KernelContext& ctx) {
  // Inputs: x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B.
  ConvShape s;
  std::vector<int32_t> acc;
  KILN_TRY(integerConv(ctx, 3, 2, 5, s, acc));
  std::vector<float> xs, ws, ys;
  KILN_TRY(scales(ctx, 1, 1, xs, "x_scale"));
  KILN_TRY(scales(ctx, 4, s.filters, ws, "w_scale"));
  KILN_TRY(scales(ctx, 6, 1, ys, "y_scale"));
  const DType yType = ctx.hasInput(7) ? ctx.input(7).dtype() : ctx.input(0).dtype();
  if (!isInt8Like(yType)) return ctx.unsupported("output dtype {}", dtypeName(yType));
  const int64_t yz = ctx.hasInput(7) ? ctx.inputInts(7).at(0) : 0;
  std::vector<int64_t> bias;
  if (ctx.hasInput(8)) {
    bias = ctx.inputInts(8);
    if (static_cast<int64_t>(bias.size()) != s.filters)
      return ctx.fail("B has {} values, expected {}", bias.size(), s.filters);
  }
  const int64_t lo = yType == DType::UInt8 ? 0 : -128, hi = yType == DType::UInt8 ? 255 : 127;
  const int64_t outSize = nn::product(s.window.out);
  OutTensor y(yType, convOutDims(s));
  uint8_t* yb = y.bytes();
  for (int64_t b = 0; b < s.batch; ++b)
    for (int64_t m = 0; m < s.filters; ++m) {
      const float scale = xs[0] * ws[static_cast<size_t>(m)] / ys[0];
      const int64_t base = (b * s.filters + m) * outSize;
      const int32_t bv = bias.empty() ? 0 : static_cast<int32_t>(bias[static_cast<size_t>(m)]);
      for (int64_t i = 0; i < outSize; ++i) {
        float v = static_cast<float>(acc[static_cast<size_t>(base + i)] + bv) * scale;
        int64_t q = std::clamp(static_cast<int64_t>(std::nearbyint(v)) + yz, lo, hi);
        yb[base + i] = static_cast<uint8_t>(q & 0xff);
      }
    }
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

KILN_REGISTER_KERNEL("Conv", convOp);
KILN_REGISTER_KERNEL("ConvTranspose", convTransposeOp);
KILN_REGISTER_KERNEL("ConvInteger", convIntegerOp);
KILN_REGISTER_KERNEL("QLinearConv", qlinearConvOp);

} // namespace
} // namespace kiln::rt
