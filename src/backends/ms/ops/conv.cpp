// .ms rules of the conv family (Conv, ConvTranspose): Conv2DFusion and
// Conv2dTransposeFusion over NHWC data and KHWC weights.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "backends/ms/ms_quant.h"
#include "backends/ms/ms_raise_context.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

// The list attributes a Conv reads, kind-checked.
std::string spatialReason(const Node& n, std::initializer_list<const char*> names) {
  for (const char* name : names) {
    auto values = ops::intsAttr(n, name, {});
    if (!values) return values.status().message();
  }
  return {};
}

std::string checkConvNative(const Node& n) {
  if (auto group = ops::intAttr(n, "group", 1); !group) return group.status().message();
  if (auto autoPad = ops::stringAttr(n, "auto_pad", "NOTSET"); !autoPad)
    return autoPad.status().message();
  else if (!autoPad->empty() && *autoPad != "NOTSET" && *autoPad != "VALID" &&
           *autoPad != "SAME_UPPER" && *autoPad != "SAME_LOWER")
    return fmt::format("auto_pad '{}'", *autoPad);
  const int rank = declaredRank(n.input(0)), wRank = declaredRank(n.input(1));
  if (rank == 3 && wRank >= 0 && wRank != 3) return "weight of unknown shape or rank";
  if (rank >= 0 && rank != 3 && wRank >= 0 && wRank != 4)
    return fmt::format("{}-D convolution (weight rank {}); .ms Conv2DFusion is 2-D only",
                       wRank >= 2 ? wRank - 2 : 0, wRank);
  if (std::string reason = spatialReason(n, {"kernel_shape", "strides", "dilations", "pads"});
      !reason.empty())
    return reason;
  if (rank >= 0 && rank != 3) {
    auto strides = ops::intsAttr(n, "strides", {1, 1});
    auto dilations = ops::intsAttr(n, "dilations", {1, 1});
    if (strides->size() != 2 || dilations->size() != 2) return "strides/dilations need 2 values";
  }
  return {};
}

std::string checkConv(const Node& n, const lowering::OpContext& context) {
  return withConvPoolExpansion(n, context, checkConvNative(n));
}

// Emits Conv2DFusion (`attrs`) from NHWC `x` and `params` (weight, bias) into NHWC `y`. The
// runtime runs a grouped convolution that is neither plain (group 1) nor depthwise (group = input
// = output channels) as one convolution per group over channel slices it copies for one image
// only (mindspore-lite nnacl_c/kernel/group_convolution.c, GroupConvSeparateInputRun copies
// in_hw_ positions), so every image after the first comes out as zeros. A static batch N > 1 is
// convolved one image at a time: Split along N, one Conv2DFusion per image, Concat.
void emitConv2d(LoweringContext& ctx, const Node& n, uint32_t x,
                const std::vector<uint32_t>& params, uint32_t y, int64_t group, int64_t inCh,
                int64_t outCh, const AttrBuilder& attrs, bool quantized = false) {
  const std::vector<int32_t> xDims = ctx.tensor(x).dims, yDims = ctx.tensor(y).dims;
  const bool grouped = group > 1 && !(group == inCh && group == outCh);
  const int64_t batch = xDims.empty() ? -1 : xDims[0];
  if (!grouped || batch <= 1 || yDims.size() != 4 || yDims[0] != batch) {
    std::vector<uint32_t> ins = {x};
    ins.insert(ins.end(), params.begin(), params.end());
    ctx.emit(fb::PrimitiveType_Conv2DFusion, attrs, ins, {y}, quantized);
    return;
  }
  Chain ch(ctx, n);
  std::vector<int32_t> image = xDims, imageOut = yDims;
  image[0] = imageOut[0] = 1;
  std::vector<uint32_t> images, outs;
  for (int64_t i = 0; i < batch; ++i) {
    images.push_back(ch.tmp(ch.typeOf(x), image));
    outs.push_back(ch.tmp(ch.typeOf(y), imageOut));
  }
  const std::vector<int64_t> ones(static_cast<size_t>(batch), 1);
  ctx.emit(
      fb::PrimitiveType_Split,
      [=](FBB& b) { return fb::CreateSplit(b, batch, b.CreateVector(ones), 0).Union(); }, {x},
      images);
  for (int64_t i = 0; i < batch; ++i) {
    std::vector<uint32_t> ins = {images[i]};
    ins.insert(ins.end(), params.begin(), params.end());
    ctx.emit(fb::PrimitiveType_Conv2DFusion, attrs, ins, {outs[i]}, quantized);
  }
  ctx.emit(fb::PrimitiveType_Concat, [](FBB& b) { return fb::CreateConcat(b, 0).Union(); }, outs,
           {y});
}

// Rows [first, first + count) of axis 0 of constant `t`: a view of the same bytes.
Tensor leadingRows(const Tensor& t, int64_t first, int64_t count) {
  const size_t row = t.byteSize() / static_cast<size_t>(t.dims()[0]);
  std::vector<int64_t> dims = t.dims();
  dims[0] = count;
  auto buffer = t.buffer();
  return Tensor(t.dtype(), dims,
                Buffer::borrowed(buffer, buffer->data() + static_cast<size_t>(first) * row,
                                 static_cast<size_t>(count) * row));
}

// A grouped 2-D Conv over a batch of unknown size (which emitConv2d cannot split by image) as one
// plain convolution per group: the input's channels Split into the groups, each group's rows of
// the constant weight and bias, a Concat of the outputs along channels. Returns false (nothing
// emitted) when the weight or bias is not a plain constant.
Expected<bool> lowerConvPerGroup(LoweringContext& ctx, const Node& n, uint32_t x, uint32_t y,
                                 int64_t group, int64_t inCh, int64_t outCh,
                                 const std::function<AttrBuilder(int64_t, int64_t)>& attrsFor) {
  auto w = ctx.constOf(n.input(1));
  if (!w || w->quantized) return false;
  std::optional<Const> b;
  if (const Value* bias = n.input(2)) {
    b = ctx.constOf(bias);
    if (!b || b->quantized) return false;
  }
  const int64_t groupIn = inCh / group, groupOut = outCh / group;
  Chain ch(ctx, n);
  std::vector<int32_t> inDims = ch.dimsOf(x), outDims = ch.dimsOf(y);
  inDims[3] = static_cast<int32_t>(groupIn);
  outDims[3] = static_cast<int32_t>(groupOut);
  std::vector<uint32_t> slices, outs;
  for (int64_t g = 0; g < group; ++g) {
    slices.push_back(ch.tmp(ch.typeOf(x), inDims));
    outs.push_back(ch.tmp(ch.typeOf(y), outDims));
  }
  const std::vector<int64_t> widths(static_cast<size_t>(group), groupIn);
  ctx.emit(
      fb::PrimitiveType_Split,
      [=](FBB& fbb) { return fb::CreateSplit(fbb, group, fbb.CreateVector(widths), 3).Union(); },
      {x}, slices);
  const std::string name = n.output(0)->name();
  for (int64_t g = 0; g < group; ++g) {
    KILN_ASSIGN_OR_RETURN(uint32_t wg, ctx.permutedConstTensor(
                                           leadingRows(w->tensor, g * groupOut, groupOut), kToNhwc,
                                           fmt::format("{}_w_group{}", name, g), kFormatKHWC));
    std::vector<uint32_t> ins = {slices[static_cast<size_t>(g)], wg};
    if (b) {
      KILN_ASSIGN_OR_RETURN(uint32_t bg,
                            ctx.constTensor(leadingRows(b->tensor, g * groupOut, groupOut),
                                            fmt::format("{}_b_group{}", name, g)));
      ins.push_back(bg);
    }
    ctx.emit(fb::PrimitiveType_Conv2DFusion, attrsFor(groupIn, groupOut), ins,
             {outs[static_cast<size_t>(g)]});
  }
  ctx.emit(fb::PrimitiveType_Concat, [](FBB& fbb) { return fb::CreateConcat(fbb, 3).Union(); },
           outs, {y});
  return true;
}

Status lowerConv1d(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const LoweringContext::View1d view, ctx.begin1d(n));
  const int act = ctx.activationFor(n);
  auto w = ctx.constOf(n.input(1));
  auto wShape = ctx.staticShape(n.input(1));
  if (!wShape || wShape->size() != 3) return bad("weight of unknown shape or rank");
  const auto wd = *wShape;
  Expected<uint32_t> wid = 0u;
  if (w) {
    Tensor wt = w->quantized ? dequantize(*w) : w->tensor;
    Tensor w4(wt.dtype(), {wd[0], wd[1], 1, wd[2]}, wt.buffer());
    wid = ctx.permutedConstTensor(w4, kToNhwc, w->name + "_khwc", kFormatKHWC);
  } else {
    // A run-time weight takes the same view and layout change as the data.
    auto wv = ctx.input(n.input(1), Layout::Onnx);
    if (!wv) return wv.status();
    const std::string wn = n.input(1)->name();
    wid = ctx.transposeTensor(ctx.reshapeTensor(*wv, {wd[0], wd[1], 1, wd[2]}, wn + "_4d"), true,
                              wn + "_khwc");
  }
  if (!wid) return wid.status();
  std::vector<uint32_t> params = {*wid};
  if (const Value* b = n.input(2)) {
    auto bt = ctx.input(b, Layout::Onnx);
    if (!bt) return bt.status();
    params.push_back(*bt);
  }
  KILN_ASSIGN_OR_RETURN(const int64_t group, ops::intAttr(n, "group", 1));
  const int64_t outCh = wd[0], inCh = wd[1] * group;
  const std::vector<int64_t> kernel = {1, wd[2]};
  const auto strides = view.strides, dilations = view.dilations, padList = view.padList;
  emitConv2d(ctx, n, view.x, params, view.y, group, inCh, outCh, [=](FBB& b) {
    return fb::CreateConv2DFusion(b, fb::Format_NHWC, b.CreateVector(kernel),
                                  b.CreateVector(strides), b.CreateVector(dilations),
                                  fb::PadMode_PAD, b.CreateVector(padList), 0, group, inCh, outCh,
                                  static_cast<fb::ActivationType>(act))
        .Union();
  });
  return ctx.end1d(n, view);
}

// A 2-D Conv's strides, dilations, resolved pads and group, decoded once for the float and the
// int8 (QLinearConv) lowering.
struct Conv2dGeometry {
  std::vector<int64_t> strides, dilations;
  Padding pad;
  int64_t group = 1;
};

Expected<Conv2dGeometry> conv2dGeometry(LoweringContext& ctx, const Node& n,
                                        const std::vector<int64_t>& kernel) {
  Conv2dGeometry g;
  KILN_ASSIGN_OR_RETURN(g.strides, ops::intsAttr(n, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(g.dilations, ops::intsAttr(n, "dilations", {1, 1}));
  if (g.strides.size() != 2 || g.dilations.size() != 2)
    return bad("strides/dilations need 2 values");
  std::string err;
  auto pad = convPadding(n, inputHW(ctx.resolve(n.input(0))), kernel, g.strides, g.dilations, &err);
  if (!pad) return bad("{}", err);
  g.pad = std::move(*pad);
  KILN_ASSIGN_OR_RETURN(g.group, ops::intAttr(n, "group", 1));
  return g;
}

Status lowerConv(LoweringContext& ctx, const Node& n) {
  if (ctx.rankOf(n.input(0)) == 3) return lowerConv1d(ctx, n);
  auto wShape = ctx.staticShape(n.input(1));
  if (!wShape) return bad("weight '{}' has an unknown shape", n.input(1)->name());
  const auto& wd = *wShape;
  if (wd.size() != 4)
    return bad("{}-D convolution (weight rank {}); .ms Conv2DFusion is 2-D only",
               wd.size() >= 2 ? wd.size() - 2 : 0, wd.size());
  auto kernel = std::vector<int64_t>{wd[2], wd[3]};
  if (n.attribute("kernel_shape")) {
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> k, ops::intsAttr(n, "kernel_shape", {}));
    if (k != kernel) return bad("kernel_shape differs from the weight's dims");
  }
  KILN_ASSIGN_OR_RETURN(const Conv2dGeometry geometry, conv2dGeometry(ctx, n, kernel));
  const std::vector<int64_t>& strides = geometry.strides;
  const std::vector<int64_t>& dilations = geometry.dilations;
  const Padding* pad = &geometry.pad;
  const int64_t group = geometry.group;
  const int64_t outCh = wd[0], inCh = wd[1] * group;
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  const int act = ctx.activationFor(n);
  const auto padList = pad->list;
  const int padMode = pad->mode;
  auto attrsFor = [=](int64_t groupCount, int64_t in, int64_t out) -> AttrBuilder {
    return [=](FBB& b) {
      return fb::CreateConv2DFusion(b, fb::Format_NHWC, b.CreateVector(kernel),
                                    b.CreateVector(strides), b.CreateVector(dilations),
                                    static_cast<fb::PadMode>(padMode), b.CreateVector(padList), 0,
                                    groupCount, in, out, static_cast<fb::ActivationType>(act))
          .Union();
    };
  };
  const std::vector<int32_t> xDims = ctx.tensor(*x).dims;
  if (group > 1 && !(group == inCh && group == outCh) && !xDims.empty() && xDims[0] < 0) {
    auto y = ctx.output(ctx.fusedOutput(n), Layout::Nhwc);
    if (!y) return y.status();
    KILN_ASSIGN_OR_RETURN(const bool done, lowerConvPerGroup(ctx, n, *x, *y, group, inCh, outCh,
                                                             [&](int64_t in, int64_t out) {
                                                               return attrsFor(1, in, out);
                                                             }));
    if (done) return Status::ok();
    return bad("grouped convolution over a batch of unknown size with a weight computed at run "
               "time (the runtime's grouped convolution fills in the first image only)");
  }
  bool quantized = false;
  auto wt = ctx.weightTensor(n.input(1), kToNhwc, 0, kFormatKHWC, &quantized);
  if (!wt) return wt.status();
  std::vector<uint32_t> params = {*wt};
  if (const Value* b = n.input(2)) {
    auto bt = ctx.input(b, Layout::Onnx);
    if (!bt) return bt.status();
    params.push_back(*bt);
  }
  auto y = ctx.output(ctx.fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  emitConv2d(ctx, n, *x, params, *y, group, inCh, outCh, attrsFor(group, inCh, outCh), quantized);
  return Status::ok();
}

// ConvTranspose's attributes, decoded once for check and lower.
struct ConvTransposeAttrs {
  std::vector<int64_t> strides, dilations, outPad, pads, outputShape;
  bool hasOutputShape = false;
  int64_t group = 1;
  std::string autoPad;
};

Expected<ConvTransposeAttrs> convTransposeAttrs(const Node& n) {
  ConvTransposeAttrs a;
  KILN_ASSIGN_OR_RETURN(a.strides, ops::intsAttr(n, "strides", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.dilations, ops::intsAttr(n, "dilations", {1, 1}));
  KILN_ASSIGN_OR_RETURN(a.outPad, ops::intsAttr(n, "output_padding", {0, 0}));
  KILN_ASSIGN_OR_RETURN(a.pads, ops::intsAttr(n, "pads", {0, 0, 0, 0}));
  KILN_ASSIGN_OR_RETURN(a.outputShape, ops::intsAttr(n, "output_shape", {}));
  a.hasOutputShape = n.attribute("output_shape") != nullptr;
  KILN_ASSIGN_OR_RETURN(a.group, ops::intAttr(n, "group", 1));
  KILN_ASSIGN_OR_RETURN(a.autoPad, ops::stringAttr(n, "auto_pad", "NOTSET"));
  return a;
}

std::string checkConvTransposeNative(const Node& n) {
  auto a = convTransposeAttrs(n);
  if (!a) return a.status().message();
  if (a->strides.size() != 2 || a->dilations.size() != 2 || a->outPad.size() != 2)
    return "strides/dilations/output_padding need 2 values (.ms supports 2-D)";
  if (const int wRank = declaredRank(n.input(1)); wRank >= 0 && wRank != 4)
    return fmt::format("{}-D transposed convolution; .ms supports 2-D", wRank - 2);
  return {};
}

std::string checkConvTranspose(const Node& n, const lowering::OpContext& context) {
  return withConvPoolExpansion(n, context, checkConvTransposeNative(n));
}

// A constant ConvTranspose weight [C_in, C_out/group, KH, KW] with `dilations` spelled out: the
// taps spread apart with zeros between them, so the dilation-1 kernel of (K - 1) * d + 1 taps
// computes the same sums. The runtime's deconvolution refuses dilations other than 1 while
// preparing (NNACL prepare failed, ret 44, on test_convtranspose_dilations).
Tensor dilatedKernel(const Tensor& w, const std::vector<int64_t>& dilations) {
  const auto& d = w.dims();
  const int64_t kh = (d[2] - 1) * dilations[0] + 1, kw = (d[3] - 1) * dilations[1] + 1;
  const size_t element = w.byteSize() / static_cast<size_t>(d[0] * d[1] * d[2] * d[3]);
  std::vector<uint8_t> bytes(static_cast<size_t>(d[0] * d[1] * kh * kw) * element, 0);
  for (int64_t plane = 0; plane < d[0] * d[1]; ++plane)
    for (int64_t i = 0; i < d[2]; ++i)
      for (int64_t j = 0; j < d[3]; ++j) {
        const size_t from = static_cast<size_t>((plane * d[2] + i) * d[3] + j) * element;
        const size_t to =
            static_cast<size_t>((plane * kh + i * dilations[0]) * kw + j * dilations[1]) * element;
        std::copy_n(w.data() + from, element, bytes.data() + to);
      }
  return Tensor(w.dtype(), {d[0], d[1], kh, kw}, Buffer::owned(std::move(bytes)));
}

// The same spreading for a weight computed at run time (ONNX layout [A, B, KH, KW] in tensor
// `w`): each spatial axis in turn gets d - 1 zeros after every tap (a Pad of a view with a unit
// axis), and a StridedSlice drops the zeros after the last tap. Returns the KHWC tensor.
uint32_t dilateKernelAtRunTime(LoweringContext& ctx, const Node& n, uint32_t w,
                               const std::vector<int64_t>& wd, const std::vector<int64_t>& d) {
  Chain ch(ctx, n);
  const std::string base = n.input(1)->name() + "_dilated";
  const int64_t planes = wd[0] * wd[1], kh = (wd[2] - 1) * d[0] + 1, kw = (wd[3] - 1) * d[1] + 1;
  // Pads axis 2 of the 4-D `x` by `after` zeros at its end.
  auto padAxis2 = [&](uint32_t x, int64_t after, const std::string& tag) {
    uint32_t pairs = ctx.intConst({0, 0, 0, 0, 0, after, 0, 0}, base + tag + "_paddings",
                                  std::vector<int32_t>{4, 2});
    std::vector<int32_t> dims = ch.dimsOf(x);
    dims[2] += static_cast<int32_t>(after);
    uint32_t out = ch.tmp(ch.typeOf(x), dims);
    ctx.emit(
        fb::PrimitiveType_PadFusion,
        [](FBB& b) { return fb::CreatePadFusion(b, 0, fb::PaddingMode_CONSTANT, 0.0f).Union(); },
        {x, pairs}, {out});
    return out;
  };
  uint32_t rows =
      padAxis2(ctx.reshapeTensor(w, {planes, wd[2], 1, wd[3]}, base + "_rows"), d[0] - 1, "_h");
  uint32_t cols =
      padAxis2(ctx.reshapeTensor(rows, {planes * wd[2] * d[0], wd[3], 1, 1}, base + "_cols"),
               d[1] - 1, "_w");
  uint32_t spread = ctx.reshapeTensor(cols, {planes, wd[2] * d[0], wd[3] * d[1], 1}, base + "_4d");
  uint32_t begin = ctx.intConst({0, 0, 0, 0}, base + "_begin");
  uint32_t end = ctx.intConst({planes, kh, kw, 1}, base + "_end");
  uint32_t steps = ctx.intConst({1, 1, 1, 1}, base + "_steps");
  uint32_t cut = ch.tmp(ch.typeOf(w), {static_cast<int32_t>(planes), static_cast<int32_t>(kh),
                                       static_cast<int32_t>(kw), 1});
  ctx.emit(fb::PrimitiveType_StridedSlice,
           [](FBB& b) { return fb::CreateStridedSlice(b, 0, 0, 0, 0, 0).Union(); },
           {spread, begin, end, steps}, {cut});
  return ctx.transposeTensor(ctx.reshapeTensor(cut, {wd[0], wd[1], kh, kw}, base + "_oihw"), true,
                             base + "_khwc");
}

Status lowerConvTranspose(LoweringContext& ctx, const Node& n) {
  auto wShape = ctx.staticShape(n.input(1));
  if (!wShape) return bad("weight '{}' has an unknown shape", n.input(1)->name());
  const auto& wd = *wShape;
  if (wd.size() != 4) return bad("{}-D transposed convolution; .ms supports 2-D", wd.size() - 2);
  KILN_ASSIGN_OR_RETURN(ConvTransposeAttrs attrs, convTransposeAttrs(n));
  std::vector<int64_t> kernel = {wd[2], wd[3]};
  const auto strides = attrs.strides;
  auto dilations = attrs.dilations;
  auto outPad = attrs.outPad;
  const int64_t group = attrs.group;
  const int64_t inCh = wd[0], outCh = wd[1] * group;
  auto hw = inputHW(ctx.resolve(n.input(0)));
  std::vector<int64_t> pads = attrs.pads;
  const std::string autoPad = attrs.autoPad;
  if (attrs.hasOutputShape || (autoPad != "NOTSET" && autoPad != "VALID")) {
    std::vector<int64_t> target;
    if (attrs.hasOutputShape) {
      target = attrs.outputShape;
      if (target.size() > 2) target.erase(target.begin(), target.end() - 2);
    } else {
      for (size_t i = 0; i < 2; ++i)
        target.push_back(hw.size() == 2 ? hw[i] * strides[i] : -1);
    }
    if (hw.size() != 2 || hw[0] < 0 || hw[1] < 0 || target.size() != 2)
      return dynamicShape("output_shape/auto_pad need static input sizes");
    pads.assign(4, 0);
    for (size_t i = 0; i < 2; ++i) {
      int64_t total =
          strides[i] * (hw[i] - 1) + outPad[i] + ((kernel[i] - 1) * dilations[i] + 1) - target[i];
      if (total < 0) {
        outPad[i] -= total; // ONNX grows the output by extra trailing pixels
        total = 0;
      }
      int64_t half = total / 2;
      pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[i + 2] = total - pads[i];
    }
  } else if (autoPad == "VALID") {
    pads.assign(4, 0);
  }
  if (pads.size() != 4) return bad("pads need 4 values");
  std::vector<int64_t> padList = {pads[0], pads[2], pads[1], pads[3]};
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  const bool depthwise = group > 1 && group == inCh && wd[1] == 1;
  bool quantized = false;
  Expected<uint32_t> wt = 0u;
  const auto constWeight = ctx.constOf(n.input(1));
  if (dilations != std::vector<int64_t>{1, 1} && constWeight && !constWeight->quantized) {
    wt = ctx.permutedConstTensor(dilatedKernel(constWeight->tensor, dilations), kToNhwc,
                                 constWeight->name + "_dilated", kFormatKHWC);
    kernel = {(kernel[0] - 1) * dilations[0] + 1, (kernel[1] - 1) * dilations[1] + 1};
    dilations = {1, 1};
  } else if (dilations != std::vector<int64_t>{1, 1} && !constWeight) {
    auto w = ctx.input(n.input(1), Layout::Onnx);
    if (!w) return w.status();
    wt = dilateKernelAtRunTime(ctx, n, *w, wd, dilations);
    kernel = {(kernel[0] - 1) * dilations[0] + 1, (kernel[1] - 1) * dilations[1] + 1};
    dilations = {1, 1};
  } else {
    wt = ctx.weightTensor(n.input(1), kToNhwc, depthwise ? 0 : 3, kFormatKHWC, &quantized);
  }
  if (!wt) return wt.status();
  std::vector<uint32_t> ins = {*x, *wt};
  if (const Value* b = n.input(2)) {
    auto bt = ctx.input(b, Layout::Onnx);
    if (!bt) return bt.status();
    ins.push_back(*bt);
  }
  auto y = ctx.output(ctx.fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  const int act = ctx.activationFor(n);
  ctx.emit(
      fb::PrimitiveType_Conv2dTransposeFusion,
      [=](FBB& b) {
        return fb::CreateConv2dTransposeFusion(
                   b, fb::Format_NHWC, b.CreateVector(kernel), b.CreateVector(strides),
                   b.CreateVector(dilations), fb::PadMode_PAD, 0, b.CreateVector(padList), 0, group,
                   inCh, outCh, static_cast<fb::ActivationType>(act), b.CreateVector(outPad))
            .Union();
      },
      ins, {*y}, quantized);
  return Status::ok();
}

// QLinearConv (2-D, plain or depthwise) over int8 codes: Conv2DFusion run by the runtime's int8
// kernel (QUANT_ALL) on int8 NHWC tensors with per-tensor QuantParams, int8 KHWC weights with one
// QuantParam per output channel (or one), an int32 bias whose QuantParams carry x_scale ·
// w_scale[c]. Inputs as ONNX numbers them: x 0, x_scale 1, x_zp 2, w 3, w_scale 4, w_zp 5,
// y_scale 6, y_zp 7, B 8.
std::string checkQLinearConv(const Node& n, const lowering::OpContext&) {
  if (std::string reason = qlinearCodesReason(n); !reason.empty()) return reason;
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4)
    return fmt::format("{}-D input (.ms int8 Conv2DFusion is 2-D)", rank - 2);
  if (auto autoPad = ops::stringAttr(n, "auto_pad", "NOTSET"); !autoPad)
    return autoPad.status().message();
  return spatialReason(n, {"kernel_shape", "strides", "dilations", "pads"});
}

Status lowerQLinearConv(LoweringContext& ctx, const Node& n) {
  auto wShape = ctx.staticShape(n.input(3));
  if (!wShape || wShape->size() != 4) return bad("the weight is not 4-D");
  const auto wd = *wShape;
  const std::vector<int64_t> kernel = {wd[2], wd[3]};
  KILN_ASSIGN_OR_RETURN(const Conv2dGeometry geometry, conv2dGeometry(ctx, n, kernel));
  const std::vector<int64_t>& strides = geometry.strides;
  const std::vector<int64_t>& dilations = geometry.dilations;
  const Padding* pad = &geometry.pad;
  const int64_t group = geometry.group;
  const int64_t outCh = wd[0], inCh = wd[1] * group;
  KILN_ASSIGN_OR_RETURN(uint32_t x, ctx.input(n.input(0), Layout::Nhwc));
  KILN_ASSIGN_OR_RETURN(Int8Weight w, int8Weight(ctx, n.input(3), n.input(4), n.input(5)));
  const std::string name = n.output(0)->name();
  KILN_ASSIGN_OR_RETURN(uint32_t wt,
                        ctx.permutedConstTensor(w.codes, kToNhwc, name + "_weight", kFormatKHWC));
  ctx.tensor(wt).quantParams = w.params;
  ctx.tensor(wt).isQuantizedWeight = true;
  ctx.tensor(wt).modelCodes = true;
  std::vector<uint32_t> ins = {x, wt};
  const MsQuantParam xParam = activationParam(ctx, n.input(1), n.input(2), DType::UInt8);
  if (n.inputs().size() > 8 && n.input(8)) {
    auto b = ctx.constOf(n.input(8));
    if (!b) return bad("the bias must be a constant");
    KILN_ASSIGN_OR_RETURN(uint32_t bt, ctx.constTensor(b->tensor, name + "_bias"));
    std::vector<MsQuantParam> biasParams;
    for (int64_t c = 0; c < outCh; ++c) {
      MsQuantParam p;
      // The product in float32, as the quantizer that coded the bias computed it.
      p.scale = static_cast<float>(xParam.scale) *
                static_cast<float>(w.params[w.params.size() == 1 ? 0 : c].scale);
      p.numBits = 32;
      p.dstDtype = kTypeInt32;
      biasParams.push_back(p);
    }
    ctx.tensor(bt).quantParams = biasParams;
    ins.push_back(bt);
  }
  KILN_ASSIGN_OR_RETURN(uint32_t y, ctx.output(n.output(0), Layout::Nhwc));
  setInt8(ctx, y, activationParam(ctx, n.input(6), n.input(7), DType::UInt8));
  const auto padList = pad->list;
  const int padMode = pad->mode;
  ctx.emit(fb::PrimitiveType_Conv2DFusion,
           [=](FBB& b) {
             return fb::CreateConv2DFusion(b, fb::Format_NHWC, b.CreateVector(kernel),
                                           b.CreateVector(strides), b.CreateVector(dilations),
                                           static_cast<fb::PadMode>(padMode),
                                           b.CreateVector(padList), 0, group, inCh, outCh,
                                           fb::ActivationType_NO_ACTIVATION)
                 .Union();
           },
           ins, {y});
  ctx.markQuantAll();
  return Status::ok();
}

KILN_MS_LOWERING("Conv", checkConv, lowerConv);
KILN_MS_LOWERING("QLinearConv", checkQLinearConv, lowerQLinearConv);
KILN_MS_LOWERING("ConvTranspose", checkConvTranspose, lowerConvTranspose);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

Status raiseConv2DFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::Conv2DFusion* c = p.value_as_Conv2DFusion();
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 4) return ctx.nodeUnsupported("weight must be 4-D [C_out, KH, KW, C_in/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  // KHWC → OIHW; a non-constant weight gets a Transpose.
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {0, 3, 1, 2}, 0}));
  std::vector<Value*> ins{ctx.toNchw(x), w};
  // Int8 kernels: QLinearConv over the codes, with the tensors' QuantParams as its parameters.
  const bool int8 = int8Data(ctx);
  if (int8) {
    auto xq = quantConstants(ctx, ctx.inIndex(0));
    auto wq = quantConstants(ctx, ctx.inIndex(1));
    auto yq = quantConstants(ctx, ctx.outIndex(0));
    if (!wq || !yq || !ctx.isConstant(ctx.inIndex(1)))
      return ctx.nodeUnsupported("int8 convolution without a constant quantized weight and "
                                 "quantized output");
    if (c->activation_type() != msfb::ActivationType_NO_ACTIVATION)
      return ctx.nodeUnsupported("int8 convolution with a fused activation");
    ins = {ctx.toNchw(x), xq->first, xq->second, w, wq->first, wq->second, yq->first, yq->second};
  }
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  auto stride = ctx.longs(c->stride()), dilation = ctx.longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? wd[0] : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = ctx.longs(c->pad_list());
  if (c->pad_mode() == msfb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == msfb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  // The executor requantizes it as the runtime does (fixed point), not as ONNX's QLinearConv.
  if (int8) attrs.push_back({"kiln_requantize", Attribute::ofString("ms_fixed_point")});
  Value* y = ctx.emit(int8 ? "QLinearConv" : "Conv", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), c->activation_type()));
  return ctx.bind(0, y);
}

Status raiseConv2dTransposeFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  const msfb::Conv2dTransposeFusion* c = p.value_as_Conv2dTransposeFusion();
  if (ctx.inputCount() < 2) return ctx.nodeUnsupported("needs input and weight");
  auto wd = ctx.dims(ctx.inIndex(1));
  if (wd.size() != 4) return ctx.nodeUnsupported("weight must be 4-D [C_in, KH, KW, C_out/group]");
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  KILN_ASSIGN_OR_RETURN(Value * w, ctx.in(1, {std::nullopt, {0, 3, 1, 2}, 3}));
  std::vector<Value*> ins{ctx.toNchw(x), w};
  if (ctx.inputCount() > 2) {
    KILN_ASSIGN_OR_RETURN(Value * b, ctx.in(2));
    ins.push_back(b);
  }
  auto stride = ctx.longs(c->stride()), dilation = ctx.longs(c->dilation());
  if (stride.size() < 2) stride = {1, 1};
  if (dilation.size() < 2) dilation = {1, 1};
  int64_t group = c->group() == 0 ? 1 : c->group();
  Node::AttributeList attrs{{"strides", Attribute::ofInts({stride[0], stride[1]})},
                            {"dilations", Attribute::ofInts({dilation[0], dilation[1]})},
                            {"group", Attribute::ofInt(group)},
                            {"kernel_shape", Attribute::ofInts({wd[1], wd[2]})}};
  auto pads = ctx.longs(c->pad_list());
  if (c->pad_mode() == msfb::PadMode_SAME)
    attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
  else if (pads.size() >= 4 && c->pad_mode() == msfb::PadMode_PAD)
    attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
  auto outPad = ctx.longs(c->output_paddings());
  if (outPad.size() >= 2 && (outPad[0] || outPad[1]))
    attrs.push_back({"output_padding", Attribute::ofInts({outPad[0], outPad[1]})});
  Value* y = ctx.emit("ConvTranspose", ins, std::move(attrs));
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), c->activation_type()));
  return ctx.bind(0, y);
}

} // namespace

KILN_MS_RAISING(Conv2DFusion, raiseConv2DFusion);
KILN_MS_RAISING(Conv2dTransposeFusion, raiseConv2dTransposeFusion);

} // namespace kiln::ms
