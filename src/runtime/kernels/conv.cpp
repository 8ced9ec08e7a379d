// Convolution kernels: Conv and ConvTranspose (im2col / col2im around BLAS GEMM), and the
// integer ConvInteger and QLinearConv (int16 column blocks, vectorised int16 -> int32 GEMM).
#include <algorithm>
#include <cstring>
#include <memory>

#include "conv_dnnl.h"
#include "conv_loops.h"
#include "epilogue.h"
#include "half_steps.h"
#include "kiln/support/checked_math.h"
#include "ms_fixed_point.h"
#include "nn_util.h"
#include "thread_pool.h"

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

// The 2-D geometry oneDNN's float and integer convolutions are prepared for.
dnnl_conv::Conv2d conv2dOf(const ConvShape& s) {
  const Window& win = s.window;
  return {s.batch,
          s.channels,
          win.in[0],
          win.in[1],
          s.filters,
          win.out[0],
          win.out[1],
          {win.kernel[0], win.kernel[1]},
          {win.strides[0], win.strides[1]},
          {win.dilations[0], win.dilations[1]},
          {win.padBegin[0], win.padBegin[1]},
          {win.padEnd[0], win.padEnd[1]}};
}

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

// Columns [lo, hi) of an output row whose input column ox * stride + shift lies inside [0, width).
inline void validColumns(int64_t shift, int64_t stride, int64_t width, int64_t outWidth,
                         int64_t& lo, int64_t& hi) {
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  hi = width - shift <= 0 ? 0 : (width - shift + stride - 1) / stride;
  hi = std::min(hi, outWidth);
  lo = std::min(lo, hi);
}

// row[ox] += wv * in[ox * stride] over [lo, hi): the depthwise hot loop. Built for AVX2 and for
// the baseline and picked at load time; without FMA both clones round identically, so results do
// not depend on the machine.
__attribute__((target_clones("avx2", "default"))) void
axpyStrided(float* row, const float* in, float wv, int64_t lo, int64_t hi, int64_t stride) {
  if (stride == 1) {
    for (int64_t ox = lo; ox < hi; ++ox)
      row[ox] += wv * in[ox];
  } else {
    for (int64_t ox = lo; ox < hi; ++ox)
      row[ox] += wv * in[ox * stride];
  }
}

template <typename T>
void axpyStrided(T* row, const T* in, T wv, int64_t lo, int64_t hi, int64_t stride) {
  for (int64_t ox = lo; ox < hi; ++ox)
    row[ox] += wv * in[ox * stride];
}

// Depthwise 2-D conv (one input channel per group) as direct loops: per-group GEMMs would be
// 1-row products dominated by call and unfolding overhead. Each output row is finished before the
// next so that it stays in L1 while its kh * kw taps are added in a fixed order.
// `xHalf` (float only, instead of x): float16 input planes, each widened row by row as it is
// padded (in cache), instead of the whole tensor beforehand.
template <typename T>
void depthwise2d(int threads, const ConvShape& s, const T* x, const T* w, const T* bias, T* y,
                 const Epilogue* epilogue, const uint16_t* xHalf = nullptr) {
  const Window& win = s.window;
  const int64_t h = win.in[0], wd = win.in[1], oh = win.out[0], ow = win.out[1];
  const int64_t kh = win.kernel[0], kw = win.kernel[1], sh = win.strides[0], sw = win.strides[1];
  const int64_t dh = win.dilations[0], dw = win.dilations[1];
  const int64_t pt = win.padBegin[0], pl = win.padBegin[1], mg = s.filters / s.group;
  std::vector<int64_t> lo(static_cast<size_t>(kw)), hi(static_cast<size_t>(kw));
  for (int64_t kx = 0; kx < kw; ++kx)
    validColumns(kx * dw - pl, sw, wd, ow, lo[kx], hi[kx]);
  // Planes are independent: the pool takes contiguous ranges of (batch, filter) planes.
  const int64_t planeWork = oh * ow * kh * kw;
  // A tap costs about four GEMM multiply-adds (measured: a vector loop over one plane, with the
  // plane's padding copy and the epilogue).
  const double depthwiseNs =
      static_cast<double>(planeWork * s.filters * s.batch) * pool::kNsPerMac * 4.0;
  if (oh <= 0 || ow <= 0) return;
  if constexpr (std::is_same_v<T, float>) {
    // Float: vector loops over a zero-padded copy of each input plane (conv_loops.h).
    convloops::DepthwisePlane g{oh, ow, kh, kw, sh, sw, dh, dw, 0, 0, 0, 0, {}};
    convloops::planDepthwise(g);
    pool::parallelFor(pool::threadsFor(threads, depthwiseNs),
                      s.batch * s.filters, 1, [&](int64_t p0, int64_t p1) {
      thread_local std::vector<float> padded;
      if (padded.size() < static_cast<size_t>(g.sw * g.phaseStride))
        padded.resize(static_cast<size_t>(g.sw * g.phaseStride));
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t b = p / s.filters, m = p % s.filters;
        const int64_t inPlane = (b * s.channels + m / mg) * h * wd;
        if (xHalf)
          convloops::padPlane(g, nullptr, h, wd, pt, pl, padded.data(), xHalf + inPlane);
        else
          convloops::padPlane(g, x + inPlane, h, wd, pt, pl, padded.data());
        float* dst = y + (b * s.filters + m) * oh * ow;
        convloops::depthwisePlane(g, padded.data(), w + m * kh * kw, bias ? bias[m] : 0.0f, dst);
        if (epilogue) epilogue->apply(dst, oh * ow, m, (b * s.filters + m) * oh * ow);
      }
    });
    return;
  }
  pool::parallelFor(pool::threadsFor(threads, depthwiseNs),
                    s.batch * s.filters, 1, [&](int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
      const int64_t b = p / s.filters, m = p % s.filters;
      const T* src = x + (b * s.channels + m / mg) * h * wd;
      const T* wk = w + m * kh * kw;
      T* dst = y + (b * s.filters + m) * oh * ow;
      const T bv = bias ? bias[m] : T{0};
      for (int64_t oy = 0; oy < oh; ++oy) {
        T* row = dst + oy * ow;
        std::fill(row, row + ow, bv);
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = oy * sh + ky * dh - pt;
          if (iy < 0 || iy >= h) continue;
          const T* inRow = src + iy * wd;
          for (int64_t kx = 0; kx < kw; ++kx)
            if (lo[kx] < hi[kx])
              axpyStrided(row, inRow + (kx * dw - pl), wk[ky * kw + kx], lo[kx], hi[kx], sw);
        }
      }
      if constexpr (std::is_same_v<T, float>)
        if (epilogue) epilogue->apply(dst, oh * ow, m, (b * s.filters + m) * oh * ow);
  }
  });
}

// Unfolds output rows [oy0, oy1) of a 2-D conv over `channels` input planes into a
// [channels * kh * kw, (oy1 - oy0) * ow] column matrix; padding positions read 0. The interior of
// each row is a plain copy, the padded ends are filled outside the copy loop.
template <typename T>
void im2colRows(const T* image, int64_t channels, const Window& win, int64_t oy0, int64_t oy1,
                T* cols) {
  const int64_t h = win.in[0], wd = win.in[1], ow = win.out[1];
  const int64_t kh = win.kernel[0], kw = win.kernel[1], sh = win.strides[0], sw = win.strides[1];
  const int64_t dh = win.dilations[0], dw = win.dilations[1];
  const int64_t pt = win.padBegin[0], pl = win.padBegin[1];
  T* dst = cols;
  for (int64_t c = 0; c < channels; ++c) {
    const T* plane = image + c * h * wd;
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t shift = kx * dw - pl;
        int64_t lo = 0, hi = 0;
        validColumns(shift, sw, wd, ow, lo, hi);
        for (int64_t oy = oy0; oy < oy1; ++oy, dst += ow) {
          const int64_t iy = oy * sh + ky * dh - pt;
          if (iy < 0 || iy >= h || lo >= hi) {
            std::fill(dst, dst + ow, T{0});
            continue;
          }
          const T* in = plane + iy * wd + shift;
          std::fill(dst, dst + lo, T{0});
          if (sw == 1)
            std::copy(in + lo, in + hi, dst + lo);
          else
            for (int64_t ox = lo; ox < hi; ++ox)
              dst[ox] = in[ox * sw];
          std::fill(dst + hi, dst + ow, T{0});
        }
      }
  }
}

// About 1 MiB of columns per GEMM: large enough for BLAS to run at full speed, small enough that
// the unfolded tile is still in cache when the GEMM reads it (an untiled 3x3 conv over 96
// channels at 160x160 would write and re-read 88 MB).
constexpr int64_t kColumnTileBytes = int64_t{1} << 20;

// y[c, :] += bias[c] for `channels` rows of `size` elements (Conv and ConvTranspose outputs).
template <typename T> void addChannelBias(T* y, const T* bias, int64_t channels, int64_t size) {
  for (int64_t c = 0; c < channels; ++c) {
    const T bv = bias[c];
    T* row = y + c * size;
    for (int64_t i = 0; i < size; ++i)
      row[i] += bv;
  }
}

// y = conv(x, w) + bias, then the fused elementwise chain when `epilogue` is given (float only):
// per plane in the depthwise loops, per column block of the 1x1 GEMM, else over the whole output.
bool isDepthwise2d(const ConvShape& s) {
  return s.window.rank() == 2 && s.group > 1 && s.channels == s.group;
}

// Float 2-D convolutions with a spatial kernel go to oneDNN when it is built in (several times
// faster than im2col + GEMM on 3x3 layers, bench/results.md); 1x1 stays a plain GEMM.
bool takesDnnl(const ConvShape& s) {
  const Window& win = s.window;
  return dnnl_conv::available() && win.rank() == 2 && s.group == 1 && !isPointwise(win) &&
         s.batch * s.channels * nn::product(win.in) * nn::product(win.out) * s.filters > 0;
}

// [N, H*W, C] -> [N, C, H*W]: a channels-last input made planar for the paths that read NCHW.
template <typename T>
void channelsLastToPlanar(const T* x, int64_t n, int64_t c, int64_t hw, T* y) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k)
        y[(b * c + k) * hw + p] = x[(b * hw + p) * c + k];
}

// `xChannelsLast`: x holds its values in NHWC order (KernelContext::channelsLastInput).
// `yChannelsLast` (float only; null: not allowed): may write y in NHWC order when oneDNN's
// primitive writes NHWC itself and the chain treats all elements alike; set true when it did.
template <typename T>
void convForward(int threads, const ConvShape& s, const T* x, const T* w, const T* bias, T* y,
                 const Epilogue* epilogue, dnnl_conv::PackedWeights* packed = nullptr,
                 bool xChannelsLast = false, bool* yChannelsLast = nullptr) {
  const Window& win = s.window;
  Scratch<T> planar;
  auto planarX = [&] {
    if (!xChannelsLast) return x;
    planar.reset(static_cast<size_t>(s.batch * s.channels * nn::product(win.in)));
    channelsLastToPlanar(x, s.batch, s.channels, nn::product(win.in), planar.data());
    xChannelsLast = false;
    return static_cast<const T*>(planar.data());
  };
  if (isDepthwise2d(s)) {
    depthwise2d(threads, s, planarX(), w, bias, y, epilogue);
    return;
  }
  auto finish = [&] {
    if constexpr (std::is_same_v<T, float>)
      if (epilogue) epilogue->applyAll(threads, y);
  };
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), inSize = nn::product(win.in);
  const int64_t outSize = nn::product(win.out), rows = cg * ks;
  const bool pointwise = isPointwise(win);
  if constexpr (std::is_same_v<T, float>) {
    if (takesDnnl(s)) {
      const dnnl_conv::Conv2d c = conv2dOf(s);
      const bool yLast = yChannelsLast && (!epilogue || epilogue->channelAgnostic()) &&
                         dnnl_conv::writesChannelsLast(threads, c, bias != nullptr);
      if (dnnl_conv::run(threads, c, x, w, bias, y, packed, nullptr, xChannelsLast, yLast)) {
        // A channel-agnostic chain runs on channels-last data as it does on planar data.
        finish();
        if (yLast) *yChannelsLast = true;
        return;
      }
    }
  }
  x = planarX();
  // 2-D convs unfold a band of output rows at a time; other ranks unfold the whole image.
  const bool tiled = !pointwise && win.rank() == 2;
  const int64_t ow = tiled ? win.out[1] : outSize, oh = tiled ? win.out[0] : 1;
  const int64_t bandRows =
      tiled ? std::clamp<int64_t>(kColumnTileBytes / std::max<int64_t>(1, rows * ow * sizeof(T)), 1,
                                  oh)
            : 1;
  Scratch<T> cols; // every element is written by the unfolding before the GEMM reads it
  if (!pointwise) cols.reset(static_cast<size_t>(rows * (tiled ? bandRows * ow : outSize)));
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = x + (b * s.channels + g * cg) * inSize;
      const T* wg = w + g * mg * rows;
      T* yg = y + (b * s.filters + g * mg) * outSize;
      if (pointwise) {
        if constexpr (std::is_same_v<T, float>) {
          // Bias and chain on each finished column block while it is in cache: the chain's
          // first pass adds the bias.
          const float* bg = bias ? bias + g * mg : nullptr;
          const nn::GemmBlockDone done = [&](int64_t j0, int64_t cols) {
            if (outSize == 1 && epilogue && epilogue->channelAgnostic()) {
              // One value per channel (a squeeze-excitation block's convolutions): the chain
              // runs once over the group's channels, not once per value.
              if (bg) vec::binarySame(vec::BinOp::Add, yg, bg, yg, mg);
              epilogue->apply(yg, mg, g * mg, (b * s.filters + g * mg) * outSize);
              return;
            }
            for (int64_t i = 0; i < mg; ++i) {
              float* seg = yg + i * outSize + j0;
              if (epilogue)
                epilogue->apply(seg, cols, g * mg + i, (b * s.filters + g * mg + i) * outSize + j0,
                                nullptr, bg ? bg + i : nullptr);
              else if (bg)
                addChannelBias(seg, bg + i, 1, cols);
            }
          };
          nn::gemm(threads, false, false, mg, outSize, rows, T{1}, wg, rows, xg, outSize, T{0}, yg,
                   outSize, &done);
          continue;
        }
        nn::gemm(threads, false, false, mg, outSize, rows, T{1}, wg, rows, xg, outSize, T{0}, yg,
                 outSize);
      } else if (tiled) {
        for (int64_t oy0 = 0; oy0 < oh; oy0 += bandRows) {
          const int64_t oy1 = std::min(oh, oy0 + bandRows), n = (oy1 - oy0) * ow;
          im2colRows(xg, cg, win, oy0, oy1, cols.data());
          nn::gemm(threads, false, false, mg, n, rows, T{1}, wg, rows, cols.data(), n, T{0},
                   yg + oy0 * ow, outSize);
        }
      } else {
        nn::im2col(xg, cg, win, T{0}, cols.data());
        nn::gemm(threads, false, false, mg, outSize, rows, T{1}, wg, rows, cols.data(), outSize,
                 T{0}, yg, outSize);
      }
      if (bias) addChannelBias(yg, bias + g * mg, mg, outSize);
    }
  }
  if (!pointwise) finish(); // 1x1 ran the chain on each GEMM block
}

// What a Conv node keeps between runs: its constant weights in oneDNN's layout; for a float16
// Conv, the executor's widened copies of its constant weights and bias (WideningCache) with the
// buffers they were made from, so that a run does not look them up again (a lock and a hash
// lookup per input, a few percent of a small model's run).
struct ConvState {
  dnnl_conv::PackedWeights weights;
  struct Widened {
    const Buffer* from = nullptr;
    std::shared_ptr<const Buffer> floats;
  };
  Widened halfWeights, halfBias;
  Epilogue::KeptOperands chainOperands; // a float16 chain's widened constant operands
};

// The float32 values of constant float16 input `t`: kept in `slot` after the first lookup in the
// executor's widening cache; null when `t` is not a cached initializer.
const float* keptWidening(ConvState::Widened& slot, const Tensor& t) {
  if (!t.buffer()) return nullptr;
  if (slot.from != t.buffer().get() || !slot.floats) {
    slot.floats = cachedWidening(t);
    slot.from = slot.floats ? t.buffer().get() : nullptr;
  }
  return slot.floats ? reinterpret_cast<const float*>(slot.floats->data()) : nullptr;
}

// A float16 convolution's epilogue bound to its output dims: the fused chain when it binds
// (true), else `roundOnly`, the epilogue of no steps that only rounds (false). `kept`: the node's
// widened chain operands from earlier runs (Epilogue::KeptOperands).
bool bindHalfEpilogue(Epilogue*& epilogue, const std::vector<int64_t>& outDims,
                      Epilogue& roundOnly, Epilogue::KeptOperands* kept = nullptr) {
  if (epilogue && epilogue->bind(outDims, true, nullptr, kept)) return true;
  roundOnly.bind(outDims, true);
  epilogue = &roundOnly;
  return false;
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
  // A fused chain (float32 output whose operands fit) runs inside; the executor then binds this
  // output to the chain's result.
  Epilogue* epilogue = ctx.epilogue();
  // A float16 Conv's input may come widened: the float32 values of a float16 Conv before it (the
  // hand-off below), already rounded to float16, channels-last or planar. Only where the graph
  // says the input is float16 (channels-last: is not float32), so a float32 producer's output is
  // never taken for one.
  const DType declaredX = ctx.node().input(0)->dtype();
  const bool wideIn =
      x.dtype() == DType::Float32 &&
      (declaredX == DType::Float16 || (ctx.channelsLastInput() && declaredX != DType::Float32));
  const bool halfConv = (x.dtype() == DType::Float16 || wideIn) && w.dtype() == DType::Float16 &&
                        (!hasBias || ctx.input(2).dtype() == DType::Float16);
  // Float32 convolutions hand their output over channels-last (convForward), and float16 ones
  // computed by oneDNN (below); the others never take it.
  if (ctx.channelsLastInput() && x.dtype() != DType::Float32 && !halfConv)
    return Status(ErrorCode::Internal, "channels-last input of a non-float32 Conv", "");
  if (halfConv) {
    // Computed in float; the epilogue runs the chain on each finished block of the convolution
    // (per GEMM column block, per depthwise plane), rounding as the unfused nodes do, and writes
    // the float16 output while the block is in cache; without a fused chain an epilogue of no
    // steps does the rounding. Constant weights are made float32 once: in oneDNN's layout for
    // the convolutions it runs, as the executor's widened copy for the others. Widening (and
    // reordering) them on every call cost more than the rest of the fp16 overhead on small
    // convolutions (PP-OCR cls .om ran at 3x its .onnx); the price is one float32 copy beside the
    // float16 weights, as a float32 model holds its packed copy beside the original.
    // The float16 output is made when it is known not to be handed off widened (below); the
    // epilogue narrows into it from then on.
    const bool constantWeights = ctx.inputIsConstant(1);
    dnnl_conv::PackedWeights* packed = nullptr;
    ConvState* state = nullptr;
    if (std::shared_ptr<void>* slot = ctx.nodeState(); slot && constantWeights) {
      if (!*slot) *slot = std::make_shared<ConvState>();
      state = static_cast<ConvState*>(slot->get());
      packed = &state->weights;
    }
    std::optional<OutTensor> y, yWide;
    Epilogue roundOnly;
    const bool chained =
        bindHalfEpilogue(epilogue, yd, roundOnly, state ? &state->chainOperands : nullptr);
    auto halfOutput = [&] {
      if (y) return;
      y.emplace(DType::Float16, yd);
      epilogue->setNarrowBase(y->data<uint16_t>());
    };
    // A depthwise convolution widens its input plane by plane (in cache); the others read the
    // input widened as a whole. Either way by the conversion instruction alone (widenHalves): a
    // NaN's payload is not seen through the convolution and its chain, whose output is narrowed
    // by floatsToHalves.
    const bool depthwise = isDepthwise2d(s);
    // A channels-last float16 input (the hand-off below) is widened as it lies: oneDNN reads it
    // channels-last, convForward makes it planar. The plan only hands off to group-1 readers.
    const bool xLast = ctx.channelsLastInput();
    if (xLast && depthwise)
      return Status(ErrorCode::Internal, "channels-last input of a depthwise Conv", "");
    Scratch<float> xw;
    const float* xf = wideIn ? reinterpret_cast<const float*>(x.data()) : nullptr;
    if (!depthwise && !wideIn) {
      xw.reset(static_cast<size_t>(x.elementCount()));
      vec::widenHalvesOnPool(ctx.threads(), reinterpret_cast<const uint16_t*>(x.data()), xw.data(),
                             static_cast<int64_t>(x.elementCount()));
      xf = xw.data();
    }
    std::optional<Staged<float>> bv;
    const float* bias = nullptr;
    if (hasBias && state && ctx.input(2).dtype() == DType::Float16 && ctx.inputIsConstant(2))
      bias = keptWidening(state->halfBias, ctx.input(2));
    if (hasBias && !bias) {
      bv.emplace(ctx.input(2));
      bias = bv->data();
    }
    const int64_t outCount = nn::product(yd);
    Scratch<float> wideScratch;
    float* wide = nullptr;
    auto widenPerCall = [&](Scratch<float>& into) {
      into.reset(static_cast<size_t>(w.elementCount()));
      halvesToFloats(reinterpret_cast<const uint16_t*>(w.data()), into.data(), into.size());
      return into.data();
    };
    bool done = false;
    if (packed && takesDnnl(s)) {
      // oneDNN keeps constant weights in its own layout, so no float32 copy is kept beside it
      // (168 MiB for ISNet): they are widened into scratch on the call that packs them and not
      // read at all while the packed copy (keyed by the float16 weights' address) is current.
      // The one-off widened copy comes from the heap, not the run's buffers: a run that packs
      // would otherwise ask for one more buffer than the next, which then leaves the planned
      // arena.
      const dnnl_conv::Conv2d c = conv2dOf(s);
      const void* weightsId = w.data();
      std::vector<float> packing;
      const float* wf = reinterpret_cast<const float*>(w.data()); // not read: see packedFor
      if (!dnnl_conv::packedFor(*packed, ctx.threads(), c, hasBias, weightsId)) {
        packing.resize(static_cast<size_t>(w.elementCount()));
        halvesToFloats(reinterpret_cast<const uint16_t*>(w.data()), packing.data(), packing.size());
        wf = packing.data();
      }
      // Hand-off between float16 convolutions (FusionPlan::handoffTo): oneDNN leaves the float
      // values channels-last, the chain (or the rounding) runs on them as they lie, and the reader
      // has oneDNN read them so. Where the graph says this output is float16 they are handed over
      // as they are, rounded to float16 in place (a float32 tensor: the reader skips widening,
      // and this Conv narrowing); else narrowed into the float16 output in that order. Either
      // way the reader sees the planar values moved, so it computes the same bits: rounding
      // then widening is what narrowing then widening gives, NaN as roundThroughHalves says. Not
      // when the executor's chain failed to bind here: its nodes would then read the
      // channels-last output.
      const bool yLast = ctx.channelsLastOutputAllowed() && (chained || !ctx.epilogue()) &&
                         epilogue->channelAgnostic() &&
                         dnnl_conv::writesChannelsLast(ctx.threads(), c, hasBias);
      if (yLast && ctx.node().output(0)->dtype() == DType::Float16) {
        yWide.emplace(DType::Float32, yd);
        wide = yWide->data<float>();
      } else {
        halfOutput();
        wideScratch.reset(static_cast<size_t>(outCount));
        wide = wideScratch.data();
      }
      done = dnnl_conv::run(ctx.threads(), c, xf, wf, bias, wide, packed, weightsId, xLast, yLast);
      if (!done && yWide) {
        // Planar after all: the float16 output, the float values in scratch.
        yWide.reset();
        halfOutput();
        wideScratch.reset(static_cast<size_t>(outCount));
        wide = wideScratch.data();
      }
      if (done) epilogue->applyAll(ctx.threads(), wide);
      if (done && yLast) ctx.markChannelsLastOutput();
    }
    if (!done) {
      // The other paths write planar values: handed over widened as they are, rounded in place
      // (a 1x1 or grouped Conv's hand-off, FusionPlan::handoffTo), where the graph says this
      // output is float16; else narrowed into the float16 output.
      if (!wide && ctx.channelsLastOutputAllowed() && (chained || !ctx.epilogue()) &&
          ctx.node().output(0)->dtype() == DType::Float16) {
        yWide.emplace(DType::Float32, yd);
        wide = yWide->data<float>();
      }
      if (!wide) {
        halfOutput();
        wideScratch.reset(static_cast<size_t>(outCount));
        wide = wideScratch.data();
      }
      // Other constant weights are widened once (the executor's copy); others on each call.
      std::optional<Staged<float>> keptWeights;
      Scratch<float> callWeights;
      const float* wf = nullptr;
      if (constantWeights) {
        if (state) wf = keptWidening(state->halfWeights, w);
        if (!wf) {
          keptWeights.emplace(w);
          wf = keptWeights->data();
        }
      } else {
        wf = widenPerCall(callWeights);
      }
      if (depthwise)
        depthwise2d<float>(ctx.threads(), s, wideIn ? xf : nullptr, wf, bias, wide, epilogue,
                           wideIn ? nullptr : reinterpret_cast<const uint16_t*>(x.data()));
      else
        convForward<float>(ctx.threads(), s, xf, wf, bias, wide, epilogue, packed, xLast);
    }
    ctx.setOutput(0, yWide ? std::move(*yWide).finish() : std::move(*y).finish());
    if (chained) ctx.markEpilogueApplied();
    return Status::ok();
  }
  if (epilogue && !(x.dtype() == DType::Float32 && epilogue->bind(yd))) epilogue = nullptr;
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x), wv(w);
    std::optional<Staged<T>> bv;
    if (hasBias) bv.emplace(ctx.input(2));
    StagedOut<T> y(x.dtype(), yd);
    // Float32 weights that stay the same tensor over the executor's runs are rearranged once.
    dnnl_conv::PackedWeights* packed = nullptr;
    if (std::shared_ptr<void>* slot = ctx.nodeState();
        slot && w.dtype() == DType::Float32 && ctx.inputIsConstant(1)) {
      if (!*slot) *slot = std::make_shared<ConvState>();
      packed = &static_cast<ConvState*>(slot->get())->weights;
    }
    // Channels-last in and out only between float32 convolutions (the executor's hand-off). The
    // output stays channels-last only when the planned chain runs here: a chain that failed to
    // bind runs as its own nodes, which read the output in NCHW order.
    const bool isFloat = std::is_same_v<T, float> && x.dtype() == DType::Float32;
    const bool chainHere = epilogue || !ctx.epilogue();
    bool yLast = false;
    convForward<T>(ctx.threads(), s, xv.data(), wv.data(), bv ? bv->data() : nullptr, y.data(),
                   epilogue, packed, isFloat && ctx.channelsLastInput(),
                   isFloat && chainHere && ctx.channelsLastOutputAllowed() ? &yLast : nullptr);
    ctx.setOutput(0, std::move(y).finish());
    if (yLast) ctx.markChannelsLastOutput();
  });
  if (done && epilogue) ctx.markEpilogueApplied();
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
    if (w.strides[d] < 1 || w.dilations[d] < 1 || w.kernel[d] < 1)
      return ctx.fail("strides, dilations and kernel dims must be positive");
    // strides * (out - 1) + output_padding + (kernel - 1) * dilation + 1, checked: attributes of
    // a damaged file can make any term wrap.
    auto full = checkedMul<int64_t>(w.strides[d], w.out[d] - 1);
    const auto reach = checkedMul<int64_t>(w.kernel[d] - 1, w.dilations[d]);
    if (full && reach) full = checkedAdd<int64_t>(*full, *reach);
    if (full) full = checkedAdd<int64_t>(*full, outputPadding[d]);
    if (full) full = checkedAdd<int64_t>(*full, 1);
    const auto pads = checkedAdd<int64_t>(w.padBegin[d], w.padEnd[d]);
    const auto natural = checkedMul<int64_t>(w.out[d], w.strides[d]);
    std::optional<int64_t> in;
    if (full && pads && natural) {
      if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
        in = outputShape.empty() ? *natural : outputShape[d];
      else
        in = checkedSub<int64_t>(*full, autoPad == "VALID" ? 0 : *pads);
    }
    const auto total = in ? checkedSub<int64_t>(*full, *in) : std::nullopt;
    if (!total)
      return ctx.fail("output size arithmetic overflows on spatial axis {} (input {}, kernel "
                      "{}, stride {}, dilation {}, pads {}+{}, output_padding {})",
                      d, w.out[d], w.kernel[d], w.strides[d], w.dilations[d], w.padBegin[d],
                      w.padEnd[d], outputPadding[d]);
    w.in[d] = *in;
    if (!outputShape.empty() || autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      // Floor division: an output_shape larger than the natural one gives negative padding,
      // which then lands at the end (as extra output_padding would).
      const int64_t half = *total >= 0 ? *total / 2 : -((-*total + 1) / 2);
      if (autoPad == "SAME_UPPER") {
        w.padBegin[d] = half;
        w.padEnd[d] = *total - half;
      } else {
        w.padBegin[d] = *total - half;
        w.padEnd[d] = half;
      }
    } else if (autoPad == "VALID") {
      w.padBegin[d] = w.padEnd[d] = 0;
    }
    if (w.in[d] < 0) return ctx.fail("negative output size on spatial axis {}", d);
  }
  return checkWindowProducts(ctx, w);
}

// True for a 2-D ConvTranspose whose kernel equals its stride with no padding or dilation (the
// 2x2 stride-2 upsampling of detection heads): every output pixel then receives exactly one
// input position and one tap, so the columns can be written in place instead of added.
bool isTiling(const Window& w) {
  if (w.rank() != 2) return false;
  for (size_t d = 0; d < 2; ++d)
    if (w.kernel[d] != w.strides[d] || w.dilations[d] != 1 || w.padBegin[d] != 0 ||
        w.padEnd[d] != 0 || w.in[d] != w.out[d] * w.strides[d])
      return false;
  return true;
}

// Writes [channels * kh * kw, oh * ow] columns into [channels, oh * kh, ow * kw] tiles, adding
// the bias on the way.
template <typename T>
void scatterTiles(int threads, const T* cols, int64_t channels, const Window& w, const T* bias,
                  T* image) {
  const int64_t oh = w.out[0], ow = w.out[1], kh = w.kernel[0], kw = w.kernel[1];
  const int64_t width = w.in[1], plane = w.in[0] * width;
  // Channels are independent: ranges of them over the pool (a strided copy per element).
  const double work = static_cast<double>(channels * plane) * pool::kNsPerElement * 2.0;
  pool::parallelFor(pool::threadsFor(threads, work), channels, 1, [&](int64_t c0, int64_t c1) {
  for (int64_t c = c0; c < c1; ++c) {
    const T bv = bias ? bias[c] : T{0};
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        const T* src = cols + ((c * kh + ky) * kw + kx) * oh * ow;
        for (int64_t oy = 0; oy < oh; ++oy) {
          T* dst = image + c * plane + (oy * kh + ky) * width + kx;
          const T* row = src + oy * ow;
          for (int64_t ox = 0; ox < ow; ++ox)
            dst[ox * kw] = row[ox] + bv;
        }
      }
  }
  });
}

template <typename T>
void convTransposeForward(int threads, const ConvShape& s, const T* x, const T* w, const T* bias,
                          T* y) {
  const Window& win = s.window;
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), xSize = nn::product(win.out);
  const int64_t ySize = nn::product(win.in), rows = mg * ks;
  Scratch<T> cols(static_cast<size_t>(rows * xSize)); // the GEMM (beta 0) writes all of it
  const bool tiles = isTiling(win);
  if (!tiles) std::fill(y, y + s.batch * s.filters * ySize, T{0});
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t g = 0; g < s.group; ++g) {
      const T* xg = x + (b * s.channels + g * cg) * xSize;
      nn::gemm(threads, true, false, rows, xSize, cg, T{1}, w + g * cg * rows, rows, xg, xSize,
               T{0}, cols.data(), xSize);
      T* yg = y + (b * s.filters + g * mg) * ySize;
      if (tiles) {
        scatterTiles(threads, cols.data(), mg, win, bias ? bias + g * mg : nullptr, yg);
        continue;
      }
      nn::col2imAdd(cols.data(), mg, win, yg);
      if (bias) addChannelBias(yg, bias + g * mg, mg, ySize);
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
  // Float16 X, or its widened hand-off (float32 values already rounded to float16, where the graph
  // says float16: FusionPlan::handoffTo), with float16 weights and bias.
  const bool wideIn = x.dtype() == DType::Float32 && ctx.node().input(0)->dtype() == DType::Float16;
  if ((x.dtype() == DType::Float16 || wideIn) && w.dtype() == DType::Float16 &&
      (!hasBias || ctx.input(2).dtype() == DType::Float16)) {
    // Computed in float as below. The input is widened over the pool (exact per element, so any
    // split gives the same bits) unless it came widened; the fused chain (or, without one, the
    // rounding) runs on the float output over the pool as a float16 Conv's does, and narrows it
    // into the float16 output, or rounds it in place when it is handed on widened. PP-OCR det's
    // .om transposes [24, 160, 160] float16 maps up to [24, 320, 320], then to [1, 640, 640].
    const int threads = ctx.threads();
    Epilogue* epilogue = ctx.epilogue();
    Epilogue roundOnly;
    const bool chained = bindHalfEpilogue(epilogue, yd, roundOnly);
    const auto xCount = static_cast<int64_t>(x.elementCount());
    Scratch<float> xw;
    const float* xf = reinterpret_cast<const float*>(x.data());
    if (!wideIn) {
      xw.reset(static_cast<size_t>(xCount));
      const auto* xh = reinterpret_cast<const uint16_t*>(x.data());
      pool::parallelFor(
          pool::threadsFor(threads, static_cast<double>(xCount) * pool::kNsPerElement), xCount,
          vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
            halvesToFloats(xh + i0, xw.data() + i0, static_cast<size_t>(i1 - i0));
          });
      xf = xw.data();
    }
    Staged<float> wv(w);
    std::optional<Staged<float>> bv;
    if (hasBias) bv.emplace(ctx.input(2));
    std::optional<OutTensor> y, yWide;
    Scratch<float> yScratch;
    float* yf = nullptr;
    if (ctx.channelsLastOutputAllowed() && (chained || !ctx.epilogue()) &&
        ctx.node().output(0)->dtype() == DType::Float16) {
      yWide.emplace(DType::Float32, yd);
      yf = yWide->data<float>();
    } else {
      y.emplace(DType::Float16, yd);
      yScratch.reset(static_cast<size_t>(nn::product(yd)));
      yf = yScratch.data();
      epilogue->setNarrowBase(y->data<uint16_t>());
    }
    convTransposeForward<float>(threads, s, xf, wv.data(), bv ? bv->data() : nullptr, yf);
    epilogue->applyAll(threads, yf);
    ctx.setOutput(0, yWide ? std::move(*yWide).finish() : std::move(*y).finish());
    if (chained) ctx.markEpilogueApplied();
    return Status::ok();
  }
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

// acc[m, n] = sum_k w[m, k] * cols[k, n] for m < mg and n in [n0, n1): int16 operands widened to
// int32 products and sums, which are exact, so the blocking and the summation order do not change
// a bit. Four output rows share each loaded column row; blocks of columns stay in L1.
__attribute__((target_clones("avx2", "default"))) void
int16GemmColumns(const int16_t* w, int64_t mg, int64_t rows, const int16_t* cols, int64_t ldc,
                 int64_t n0, int64_t n1, int32_t* acc, int64_t ldacc) {
  constexpr int64_t kBlock = 256;
  alignas(64) int32_t t0[kBlock], t1[kBlock], t2[kBlock], t3[kBlock];
  for (int64_t c0 = n0; c0 < n1; c0 += kBlock) {
    const int64_t nb = std::min(kBlock, n1 - c0);
    int64_t m = 0;
    for (; m + 4 <= mg; m += 4) {
      std::fill(t0, t0 + nb, 0);
      std::fill(t1, t1 + nb, 0);
      std::fill(t2, t2 + nb, 0);
      std::fill(t3, t3 + nb, 0);
      const int16_t* w0 = w + m * rows;
      for (int64_t k = 0; k < rows; ++k) {
        const int16_t* src = cols + k * ldc + c0;
        const int16_t a0 = w0[k], a1 = w0[rows + k], a2 = w0[2 * rows + k], a3 = w0[3 * rows + k];
        for (int64_t j = 0; j < nb; ++j) {
          const int16_t v = src[j]; // int16 x int16 widening products
          t0[j] += static_cast<int32_t>(a0) * v;
          t1[j] += static_cast<int32_t>(a1) * v;
          t2[j] += static_cast<int32_t>(a2) * v;
          t3[j] += static_cast<int32_t>(a3) * v;
        }
      }
      std::copy(t0, t0 + nb, acc + m * ldacc + c0);
      std::copy(t1, t1 + nb, acc + (m + 1) * ldacc + c0);
      std::copy(t2, t2 + nb, acc + (m + 2) * ldacc + c0);
      std::copy(t3, t3 + nb, acc + (m + 3) * ldacc + c0);
    }
    for (; m < mg; ++m) {
      std::fill(t0, t0 + nb, 0);
      const int16_t* wm = w + m * rows;
      for (int64_t k = 0; k < rows; ++k) {
        const int16_t* src = cols + k * ldc + c0;
        const int16_t a0 = wm[k];
        for (int64_t j = 0; j < nb; ++j)
          t0[j] += static_cast<int32_t>(a0) * src[j];
      }
      std::copy(t0, t0 + nb, acc + m * ldacc + c0);
    }
  }
}

// int8 / uint8 bytes minus a zero point as int16 (exact: the difference lies in [-510, 510]).
void shiftedInt16(const Tensor& t, const int32_t* zero, int64_t perZero, int16_t* out) {
  const size_t n = static_cast<size_t>(t.elementCount());
  const uint8_t* b = t.data();
  const bool isSigned = t.dtype() == DType::Int8;
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = isSigned ? static_cast<int32_t>(static_cast<int8_t>(b[i])) : b[i];
    out[i] = static_cast<int16_t>(v - zero[i / static_cast<size_t>(perZero)]);
  }
}

// Unfolds output positions [n0, n1) of one [C, in...] int8 / uint8 image into a
// [C * prod(kernel), n1 - n0] int16 column block of (x - zero); padding reads 0.
template <typename S>
void im2colRange(const S* image, int32_t zero, int64_t channels, const Window& w, int64_t n0,
                 int64_t n1, int16_t* cols) {
  const size_t r = w.rank();
  const int64_t inSize = nn::product(w.in), kernelSize = nn::product(w.kernel), nb = n1 - n0;
  const int64_t inLast = w.in[r - 1], outLast = w.out[r - 1], sLast = w.strides[r - 1];
  std::vector<int64_t> inStride(r, 1), kpos(r, 0), start(r, 0), opos(r);
  for (size_t d = r - 1; d-- > 0;)
    inStride[d] = inStride[d + 1] * w.in[d + 1];
  for (int64_t rest = n0, d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
    start[static_cast<size_t>(d)] = rest % w.out[static_cast<size_t>(d)];
    rest /= w.out[static_cast<size_t>(d)];
  }
  int16_t* dst = cols;
  for (int64_t c = 0; c < channels; ++c) {
    const S* src = image + c * inSize;
    for (int64_t kidx = 0; kidx < kernelSize; ++kidx, dst += nb) {
      int64_t rem = kidx;
      for (size_t d = r; d-- > 0;) {
        kpos[d] = rem % w.kernel[d];
        rem /= w.kernel[d];
      }
      const int64_t baseLast = kpos[r - 1] * w.dilations[r - 1] - w.padBegin[r - 1];
      opos = start;
      for (int64_t o = 0; o < nb;) {
        const int64_t seg = std::min(nb - o, outLast - opos[r - 1]);
        bool valid = true;
        int64_t off = 0;
        for (size_t d = 0; d + 1 < r; ++d) {
          const int64_t ip = opos[d] * w.strides[d] + kpos[d] * w.dilations[d] - w.padBegin[d];
          if (ip < 0 || ip >= w.in[d]) {
            valid = false;
            break;
          }
          off += ip * inStride[d];
        }
        int16_t* out = dst + o;
        if (!valid) {
          std::fill(out, out + seg, int16_t{0});
        } else {
          const S* row = src + off;
          const int64_t ox0 = opos[r - 1];
          for (int64_t i = 0; i < seg; ++i) {
            const int64_t ix = (ox0 + i) * sLast + baseLast;
            out[i] = (ix >= 0 && ix < inLast)
                         ? static_cast<int16_t>(static_cast<int32_t>(row[ix]) - zero)
                         : int16_t{0};
          }
        }
        o += seg;
        opos[r - 1] += seg;
        for (size_t d = r - 1; d > 0 && opos[d] == w.out[d]; --d) {
          opos[d] = 0;
          ++opos[d - 1];
        }
      }
    }
  }
}

// What ConvInteger / QLinearConv keep per node: the oneDNN convolution prepared for constant
// weights (or that oneDNN refused this geometry).
struct Int8State {
  std::shared_ptr<dnnl_conv::Int8Conv> conv;
  dnnl_conv::Conv2d geometry{};
  int threads = 0;
  bool xSigned = false, refused = false;
};

// The oneDNN integer convolution for this node, prepared on its first run and kept in the node's
// state: only for 2-D, group 1 convolutions whose weights and weight zero points are constant.
// nullptr when it does not apply (the caller's own loops run then).
const dnnl_conv::Int8Conv* preparedInt8(KernelContext& ctx, size_t wIndex, size_t wzIndex,
                                        const ConvShape& s, const std::vector<int32_t>& wz) {
  std::shared_ptr<void>* slot = ctx.nodeState();
  if (!slot || !dnnl_conv::available() || s.window.rank() != 2 || s.group != 1) return nullptr;
  if (!ctx.inputIsConstant(wIndex) || (ctx.hasInput(wzIndex) && !ctx.inputIsConstant(wzIndex)))
    return nullptr;
  const int64_t work = s.batch * s.channels * s.filters * nn::product(s.window.out);
  if (work <= 0) return nullptr;
  const bool xSigned = ctx.input(0).dtype() == DType::Int8;
  const dnnl_conv::Conv2d c = conv2dOf(s);
  auto state = std::static_pointer_cast<Int8State>(*slot);
  if (state && state->threads == ctx.threads() && state->xSigned == xSigned &&
      std::memcmp(&state->geometry, &c, sizeof c) == 0)
    return state->refused ? nullptr : state->conv.get();
  state = std::make_shared<Int8State>();
  state->geometry = c;
  state->threads = ctx.threads();
  state->xSigned = xSigned;
  const Tensor& w = ctx.input(wIndex);
  state->conv = dnnl_conv::prepareInt8(ctx.threads(), c, xSigned, w.data(),
                                       w.dtype() == DType::Int8, wz.data());
  state->refused = !state->conv;
  *slot = state;
  return state->conv.get();
}

std::vector<int64_t> convOutDims(const ConvShape& s) {
  std::vector<int64_t> yd = {s.batch, s.filters};
  yd.insert(yd.end(), s.window.out.begin(), s.window.out.end());
  return yd;
}

// src[i] + k * ones[i] (ones may be null) with two's complement wrap-around, which gives the exact
// sum whenever it fits in int32 (ONNX's own output type), whatever the parts.
inline int32_t combined(const int32_t* src, const int32_t* ones, int32_t k, int64_t i) {
  if (!ones) return src[i];
  return static_cast<int32_t>(static_cast<uint32_t>(src[i]) +
                              static_cast<uint32_t>(k) * static_cast<uint32_t>(ones[i]));
}

// Float32 plane p (of [N, M, out...]) from its int32 sums, cast as the Cast kernel casts, then the
// fused chain on each chunk while it is in cache.
void finishFloatPlane(const Epilogue& epilogue, int64_t p, int64_t filters, int64_t outSize,
                      const int32_t* src, const int32_t* ones, int32_t k, float* y) {
  constexpr int64_t kChunk = 4096;
  for (int64_t j0 = 0; j0 < outSize; j0 += kChunk) {
    const int64_t len = std::min(kChunk, outSize - j0);
    for (int64_t i = j0; i < j0 + len; ++i)
      y[i] = static_cast<float>(combined(src, ones, k, i));
    epilogue.apply(y + j0, len, p % filters, p * outSize + j0);
  }
}

// Integer convolution (x - x_zero_point) * (w - w_zero_point[m]) accumulated in int32 into the
// buffer `output(s)` returns ([N, M, out...]); x and w are inputs 0 and wIndex, their zero points
// inputs xzIndex and wzIndex. With a bound `epilogue` (a ConvInteger's fused Cast and chain) the
// sums are cast to float32 instead and the chain applied, into the buffer `floatOutput(s)` returns.
// 2-D, group-1 convolutions with constant weights run through oneDNN's int8 convolution where it
// is exact (preparedInt8); otherwise W is staged as int16, each fixed block of output positions is
// unfolded on its own from the raw bytes of x (as int16, zero point subtracted) and multiplied by
// int16GemmColumns, the blocks spread over the thread pool. Integer sums are exact, so both paths
// and every thread count give identical results.
template <typename Output, typename FloatOutput>
Status integerConv(KernelContext& ctx, size_t wIndex, size_t xzIndex, size_t wzIndex, ConvShape& s,
                   Output&& output, Epilogue* epilogue, FloatOutput&& floatOutput) {
  const Tensor& x = ctx.input(0);
  const Tensor& w = ctx.input(wIndex);
  if (!isInt8Like(x.dtype()) || !isInt8Like(w.dtype()))
    return ctx.unsupported("dtypes {} x {}", dtypeName(x.dtype()), dtypeName(w.dtype()));
  KILN_TRY(convShape(ctx, x.dims(), w.dims(), s));
  std::vector<int32_t> xz, wz;
  KILN_TRY(zeroPoints(ctx, xzIndex, 1, xz, "x_zero_point"));
  KILN_TRY(zeroPoints(ctx, wzIndex, s.filters, wz, "w_zero_point"));
  if (epilogue && !epilogue->bind(convOutDims(s))) epilogue = nullptr;
  const Window& win = s.window;
  const int64_t cg = s.channels / s.group, mg = s.filters / s.group;
  const int64_t ks = nn::product(win.kernel), inSize = nn::product(win.in);
  const int64_t outSize = nn::product(win.out), rows = cg * ks;
  const int64_t planes = s.batch * s.filters;
  // The pool's split (pool::threadsFor): the epilogue converts and chains each sum; the loops
  // below cost about four float multiply-adds per integer one.
  const int epilogueThreads = pool::threadsFor(
      ctx.threads(), static_cast<double>(planes * outSize) * 2.0 * pool::kNsPerElement);
  const int loopThreads =
      pool::threadsFor(ctx.threads(), static_cast<double>(planes * outSize) *
                                          static_cast<double>(rows) * 4.0 * pool::kNsPerMac);
  if (const dnnl_conv::Int8Conv* prepared = preparedInt8(ctx, wIndex, wzIndex, s, wz)) {
    dnnl_conv::Int8Result r;
    if (dnnl_conv::runInt8(*prepared, x.data(), xz[0], ctx.threads(), r)) {
      int32_t* acc = epilogue ? nullptr : output(s);
      float* y = epilogue ? floatOutput(s) : nullptr;
      pool::parallelFor(epilogueThreads, planes, 1, [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t b = p / s.filters, m = p % s.filters;
          const int32_t* src = r.acc + (b * r.channels + m) * outSize;
          const int32_t* ones =
              r.corr ? r.acc + (b * r.channels + r.channels - 1) * outSize : nullptr;
          const int32_t k = r.corr ? r.corr[m] : 0;
          if (epilogue) {
            finishFloatPlane(*epilogue, p, s.filters, outSize, src, ones, k, y + p * outSize);
            continue;
          }
          int32_t* dst = acc + p * outSize;
          for (int64_t i = 0; i < outSize; ++i)
            dst[i] = combined(src, ones, k, i);
        }
      });
      if (epilogue) ctx.markEpilogueApplied();
      return Status::ok();
    }
  }
  Scratch<int16_t> ws(static_cast<size_t>(w.elementCount()));
  shiftedInt16(w, wz.data(), rows, ws.data());
  std::optional<Scratch<int32_t>> sums;
  if (epilogue) sums.emplace(static_cast<size_t>(planes * outSize));
  int32_t* acc = epilogue ? sums->data() : output(s);
  constexpr int64_t kBlock = 256;
  auto run = [&](auto* xdata) {
    for (int64_t b = 0; b < s.batch; ++b)
      for (int64_t g = 0; g < s.group; ++g) {
        const auto* image = xdata + (b * s.channels + g * cg) * inSize;
        const int16_t* wg = ws.data() + g * mg * rows;
        int32_t* out = acc + (b * s.filters + g * mg) * outSize;
        pool::parallelFor(loopThreads, outSize, kBlock, [&](int64_t n0, int64_t n1) {
          std::vector<int16_t> cols(static_cast<size_t>(rows * std::min(kBlock, n1 - n0)));
          for (int64_t c0 = n0; c0 < n1; c0 += kBlock) {
            const int64_t nb = std::min(kBlock, n1 - c0);
            im2colRange(image, xz[0], cg, win, c0, c0 + nb, cols.data());
            int16GemmColumns(wg, mg, rows, cols.data(), nb, 0, nb, out + c0, outSize);
          }
        });
      }
  };
  if (x.dtype() == DType::Int8)
    run(reinterpret_cast<const int8_t*>(x.data()));
  else
    run(x.data());
  if (epilogue) {
    float* y = floatOutput(s);
    pool::parallelFor(epilogueThreads, planes, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        finishFloatPlane(*epilogue, p, s.filters, outSize, acc + p * outSize, nullptr, 0,
                         y + p * outSize);
    });
    ctx.markEpilogueApplied();
  }
  return Status::ok();
}

// ConvInteger; with its Cast to float32 (and the chain after it) fused by the executor, the
// output is that chain's float32 result.
Status convIntegerOp(KernelContext& ctx) {
  ConvShape s;
  std::optional<OutTensor> y;
  std::optional<Scratch<float>> wide;
  KILN_TRY(integerConv(
      ctx, 1, 2, 3, s,
      [&](const ConvShape& shape) {
        y.emplace(DType::Int32, convOutDims(shape));
        return y->data<int32_t>();
      },
      ctx.epilogue(),
      [&](const ConvShape& shape) {
        if (!ctx.epilogue()->endsHalf()) {
          y.emplace(DType::Float32, convOutDims(shape));
          return y->data<float>();
        }
        // A chain ending in float16: the float values go to scratch, the result to the output.
        y.emplace(DType::Float16, convOutDims(shape));
        ctx.epilogue()->setNarrowBase(y->data<uint16_t>());
        wide.emplace(static_cast<size_t>(y->elementCount()));
        return wide->data();
      }));
  ctx.setOutput(0, std::move(*y).finish());
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
  KILN_TRY(integerConv(
      ctx, 3, 2, 5, s,
      [&](const ConvShape& shape) {
        acc.resize(static_cast<size_t>(nn::product(convOutDims(shape))));
        return acc.data();
      },
      nullptr, [](const ConvShape&) { return static_cast<float*>(nullptr); }));
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
  // Raised from a .ms: the runtime's fixed-point requantization, one multiplier per filter.
  const bool fixedPoint = ms_int8::requested(ctx);
  std::vector<ms_int8::Multiplier> multipliers;
  if (fixedPoint)
    for (int64_t m = 0; m < s.filters; ++m)
      multipliers.push_back(ms_int8::multiplierOf(xs[0], ws[static_cast<size_t>(m)], ys[0]));
  OutTensor y(yType, convOutDims(s));
  uint8_t* yb = y.bytes();
  // Requantization per element (a few integer or float operations): ranges of planes when it pays.
  const int requantThreads =
      pool::threadsFor(ctx.threads(), static_cast<double>(s.batch * s.filters * outSize) * 4.0 *
                                          pool::kNsPerElement);
  pool::parallelFor(requantThreads, s.batch * s.filters, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t m = p % s.filters;
      const int64_t base = p * outSize;
      const int32_t bv = bias.empty() ? 0 : static_cast<int32_t>(bias[static_cast<size_t>(m)]);
      if (fixedPoint) {
        const ms_int8::Multiplier& mul = multipliers[static_cast<size_t>(m)];
        for (int64_t i = 0; i < outSize; ++i) {
          // The int32 sum and bias wrap as the runtime's int32 addition does.
          const int32_t sum =
              static_cast<int32_t>(static_cast<uint32_t>(acc[static_cast<size_t>(base + i)]) +
                                   static_cast<uint32_t>(bv));
          yb[base + i] = static_cast<uint8_t>(ms_int8::outputCode(sum, mul, yz, lo, hi) & 0xff);
        }
        continue;
      }
      const float scale = xs[0] * ws[static_cast<size_t>(m)] / ys[0];
      for (int64_t i = 0; i < outSize; ++i) {
        float v = static_cast<float>(acc[static_cast<size_t>(base + i)] + bv) * scale;
        int64_t q = std::clamp(static_cast<int64_t>(std::nearbyint(v)) + yz, lo, hi);
        yb[base + i] = static_cast<uint8_t>(q & 0xff);
      }
    }
  });
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

KILN_REGISTER_KERNEL("Conv", convOp);
KILN_REGISTER_KERNEL("ConvTranspose", convTransposeOp);
KILN_REGISTER_KERNEL("ConvInteger", convIntegerOp);
KILN_REGISTER_KERNEL("QLinearConv", qlinearConvOp);

} // namespace
} // namespace kiln::rt
