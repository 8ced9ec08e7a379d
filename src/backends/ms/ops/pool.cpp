// .ms rules of the pool family (MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool):
// MaxPoolFusion / AvgPoolFusion over NHWC data.
// Lowering (ONNX → .ms: a pure check and the lower that emits ops) and raising (the reader's
// rules for the .ms ops this family emits, back to ONNX ops) side by side.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkPoolNative(const Node& n) {
  if (outputUsed(n, 1)) return "the Indices output of MaxPool";
  const bool global = n.opType() == "GlobalAveragePool" || n.opType() == "GlobalMaxPool";
  if (const int rank = declaredRank(n.input(0)); rank >= 0 && rank != 4 && (global || rank != 3))
    return fmt::format("{}-D input; .ms pooling is 2-D (4-D NCHW input)", rank);
  if (!global && declaredRank(n.input(0)) == 4)
    if (auto kernel = ops::intsAttr(n, "kernel_shape", {}); kernel && kernel->size() != 2)
      return fmt::format("kernel_shape of {} values", kernel->size());
  for (const char* name : {"kernel_shape", "strides", "pads"})
    if (auto values = ops::intsAttr(n, name, {}); !values) return values.status().message();
  for (const char* name : {"ceil_mode", "count_include_pad"})
    if (auto value = ops::intAttr(n, name, 0); !value) return value.status().message();
  if (auto autoPad = ops::stringAttr(n, "auto_pad", "NOTSET"); !autoPad)
    return autoPad.status().message();
  auto dil = ops::intsAttr(n, "dilations", {});
  if (!dil) return dil.status().message();
  for (int64_t d : *dil)
    if (d != 1 && n.opType() != "MaxPool") return fmt::format("dilations [{}]", fmt::join(*dil, ","));
  return {};
}

std::string checkPool(const Node& n, const lowering::OpContext& context) {
  return withConvPoolExpansion(n, context, checkPoolNative(n));
}

// Taps a dilated MaxPool whose strides are no multiples of its dilations may have: each becomes
// a StridedSlice.
constexpr int64_t kMaxDilatedTaps = 64;

// MaxPool with dilation d and a stride s that is a multiple of it: every tap sits on the grid
// d·t of the padded input, so it is Pad(−inf) → StridedSlice(step d) → MaxPoolFusion(kernel k,
// stride s/d, no pad), in NHWC over a 4-D view ([N, C, 1, L] for 1-D). The end pad grows to the
// last tap ceil_mode reaches.
Status lowerDilatedMaxPool(LoweringContext& ctx, const Node& n) {
  const int rank = ctx.rankOf(n.input(0));
  auto in = ctx.staticShape(n.input(0));
  auto out = ctx.staticShape(n.output(0));
  if (!in || !out || (rank != 3 && rank != 4)) return bad("dilated MaxPool needs known 3-D/4-D shapes");
  KILN_ASSIGN_OR_RETURN(const std::string autoPad, ops::stringAttr(n, "auto_pad", "NOTSET"));
  if (autoPad != "NOTSET") return bad("dilations with auto_pad {}", autoPad);
  const size_t sp = size_t(rank - 2);
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> k, ops::intsAttr(n, "kernel_shape", {}));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> st, ops::intsAttr(n, "strides", std::vector<int64_t>(sp, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> dl, ops::intsAttr(n, "dilations", std::vector<int64_t>(sp, 1)));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> pads, ops::intsAttr(n, "pads", std::vector<int64_t>(2 * sp, 0)));
  if (k.size() != sp || st.size() != sp || dl.size() != sp || pads.size() != 2 * sp)
    return bad("kernel/strides/dilations/pads lengths");
  if (!isFloatingPoint(n.input(0)->dtype())) return bad("dilated MaxPool over {}", dtypeName(n.input(0)->dtype()));
  // 4-D view: H, W (1-D: H = 1 with a unit window).
  std::vector<int64_t> view = *in, kk = k, ss = st, dd = dl, pb, pe, len, outHW;
  if (rank == 3) {
    view = {(*in)[0], (*in)[1], 1, (*in)[2]};
    kk = {1, k[0]}, ss = {1, st[0]}, dd = {1, dl[0]};
    pb = {0, pads[0]}, pe = {0, pads[1]};
    outHW = {1, (*out)[2]};
  } else {
    pb = {pads[0], pads[1]}, pe = {pads[2], pads[3]};
    outHW = {(*out)[2], (*out)[3]};
  }
  len = {view[2], view[3]};
  // A stride that is no multiple of the dilation puts the taps off any one grid: each of the
  // k_h·k_w taps is then a StridedSlice (step s) of its own and a Maximum chain reduces them.
  const bool perTap = ss[0] % dd[0] != 0 || ss[1] % dd[1] != 0;
  if (perTap && kk[0] * kk[1] > kMaxDilatedTaps)
    return bad("dilations [{}] with strides [{}] that are not multiples of them, over {} taps "
               "(at most {} become slices)",
               fmt::join(dl, ","), fmt::join(st, ","), kk[0] * kk[1], kMaxDilatedTaps);
  std::vector<int64_t> m(2), taps(2), padEnd(2), sliceEnd(2);
  for (size_t a = 0; a < 2; ++a) {
    m[a] = perTap ? 1 : ss[a] / dd[a];
    taps[a] = (outHW[a] - 1) * m[a] + kk[a];
    sliceEnd[a] =
        perTap ? dd[a] * (kk[a] - 1) + (outHW[a] - 1) * ss[a] + 1 : dd[a] * (taps[a] - 1) + 1;
    padEnd[a] = std::max(pe[a], sliceEnd[a] - len[a] - pb[a]);
  }
  const std::string base = n.output(0)->name();
  auto x = ctx.input(n.input(0), Layout::Onnx);
  if (!x) return x.status();
  uint32_t x4 = rank == 3 ? ctx.reshapeTensor(*x, view, base + "_4d") : *x;
  const std::vector<int64_t> pairs = {0, 0, 0, 0, pb[0], padEnd[0], pb[1], padEnd[1]};
  uint32_t tp = ctx.intConst(pairs, base + "_dil_paddings", std::vector<int32_t>{4, 2});
  MsTensor padded = ctx.tensor(x4);
  padded.name = base + "_dil_padded";
  padded.nodeType = kNodeCNode;
  padded.data.reset();
  padded.format = kFormatNCHW;
  padded.dims = {int32_t(view[0]), int32_t(view[1]), int32_t(pb[0] + len[0] + padEnd[0]),
                 int32_t(pb[1] + len[1] + padEnd[1])};
  uint32_t xp = ctx.addTensor(std::move(padded));
  const float negInf = -std::numeric_limits<float>::infinity();
  ctx.emit(fb::PrimitiveType_PadFusion,
           [=](FBB& b) { return fb::CreatePadFusion(b, 0, fb::PaddingMode_CONSTANT, negInf).Union(); },
           {x4, tp}, {xp});
  if (perTap) {
    // Tap (i, j) of every window: rows i·d_h + s_h·r, columns j·d_w + s_w·c.
    std::optional<uint32_t> acc;
    for (int64_t i = 0; i < kk[0]; ++i)
      for (int64_t j = 0; j < kk[1]; ++j) {
        const std::string tap = fmt::format("{}_tap{}_{}", base, i, j);
        const int64_t r0 = i * dd[0], c0 = j * dd[1];
        uint32_t tb = ctx.intConst({0, 0, r0, c0}, tap + "_begin");
        uint32_t te = ctx.intConst(
            {view[0], view[1], r0 + (outHW[0] - 1) * ss[0] + 1, c0 + (outHW[1] - 1) * ss[1] + 1},
            tap + "_end");
        uint32_t ts = ctx.intConst({1, 1, ss[0], ss[1]}, tap + "_steps");
        MsTensor t = ctx.tensor(xp);
        t.name = tap;
        t.dims = {int32_t(view[0]), int32_t(view[1]), int32_t(outHW[0]), int32_t(outHW[1])};
        uint32_t sliced = ctx.addTensor(std::move(t));
        ctx.emit(fb::PrimitiveType_StridedSlice,
                 [](FBB& b) { return fb::CreateStridedSlice(b, 0, 0, 0, 0, 0).Union(); },
                 {xp, tb, te, ts}, {sliced});
        if (!acc) {
          acc = sliced;
          continue;
        }
        uint32_t merged = ctx.intermediate(sliced, ctx.uniqueName(tap + "_max"));
        ctx.emit(fb::PrimitiveType_Maximum, emptyTable<fb::Maximum>(), {*acc, sliced}, {merged});
        acc = merged;
      }
    uint32_t s = ctx.intConst(*out, base + "_shape");
    auto y = ctx.output(n.output(0), Layout::Onnx);
    if (!y) return y.status();
    ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {*acc, s}, {*y});
    return Status::ok();
  }
  uint32_t tb = ctx.intConst({0, 0, 0, 0}, base + "_dil_begin");
  uint32_t te = ctx.intConst({view[0], view[1], sliceEnd[0], sliceEnd[1]}, base + "_dil_end");
  uint32_t ts = ctx.intConst({1, 1, dd[0], dd[1]}, base + "_dil_steps");
  MsTensor grid = ctx.tensor(xp);
  grid.name = base + "_dil_grid";
  grid.dims = {int32_t(view[0]), int32_t(view[1]), int32_t(taps[0]), int32_t(taps[1])};
  uint32_t xg = ctx.addTensor(std::move(grid));
  ctx.emit(fb::PrimitiveType_StridedSlice,
           [](FBB& b) { return fb::CreateStridedSlice(b, 0, 0, 0, 0, 0).Union(); },
           {xp, tb, te, ts}, {xg});
  uint32_t xn = ctx.transposeTensor(xg, true, base + "_dil_grid_nhwc");
  MsTensor pooled = ctx.tensor(xn);
  pooled.name = base + "_dil_pooled";
  pooled.dims = {int32_t(view[0]), int32_t(outHW[0]), int32_t(outHW[1]), int32_t(view[1])};
  uint32_t yn = ctx.addTensor(std::move(pooled));
  const std::vector<int64_t> kernel = kk, strides = m, zero = {0, 0, 0, 0};
  ctx.emit(
      fb::PrimitiveType_MaxPoolFusion,
      [=](FBB& b) {
        return fb::CreateMaxPoolFusion(b, b.CreateVector(kernel), b.CreateVector(strides),
                                       b.CreateVector(zero), fb::PadMode_PAD, fb::RoundMode_FLOOR,
                                       fb::Format_NHWC, false)
            .Union();
      },
      {xn}, {yn});
  uint32_t y4 = ctx.transposeTensor(yn, false, base + "_dil_pooled_nchw");
  uint32_t s = ctx.intConst(*out, base + "_shape");
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {y4, s}, {*y});
  return Status::ok();
}

Status lowerPool1d(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const LoweringContext::View1d view, ctx.begin1d(n));
  const int act = ctx.activationFor(n);
  const bool isMax = n.opType() == "MaxPool";
  KILN_ASSIGN_OR_RETURN(const int64_t ceilMode, ops::intAttr(n, "ceil_mode", 0));
  KILN_ASSIGN_OR_RETURN(const int64_t countIncludePad, ops::intAttr(n, "count_include_pad", 0));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> kernelShape,
                        ops::intsAttr(n, "kernel_shape", {1}));
  const bool ceil = ceilMode != 0;
  const int64_t padBegin = view.padList[2], padEnd = view.padList[3];
  const bool anyPad = padBegin || padEnd;
  if (padBegin > 50 || padEnd > 50) return bad("pad over 50");
  if (!isMax && anyPad && (countIncludePad != 0 || ceil))
    return bad("count_include_pad/ceil_mode with padding");
  const std::vector<int64_t> kernel = {1, kernelShape.empty() ? 1 : kernelShape[0]};
  const auto strides = view.strides, padList = view.padList;
  ctx.emit(
      isMax ? fb::PrimitiveType_MaxPoolFusion : fb::PrimitiveType_AvgPoolFusion,
      [=](FBB& b) {
        auto k = b.CreateVector(kernel), st = b.CreateVector(strides), p = b.CreateVector(padList);
        const auto rm = ceil ? fb::RoundMode_CEIL : fb::RoundMode_FLOOR;
        const auto a = static_cast<fb::ActivationType>(act);
        if (isMax)
          return fb::CreateMaxPoolFusion(b, k, st, p, fb::PadMode_PAD, rm, fb::Format_NHWC, false,
                                         a)
              .Union();
        return fb::CreateAvgPoolFusion(b, k, st, p, fb::PadMode_PAD, rm, fb::Format_NHWC, false, a)
            .Union();
      },
      {view.x}, {view.y});
  return ctx.end1d(n, view);
}

Status lowerPool(LoweringContext& ctx, const Node& n) {
  const std::string& op = n.opType();
  const bool global = op == "GlobalAveragePool" || op == "GlobalMaxPool";
  const bool isMax = op == "MaxPool" || op == "GlobalMaxPool";
  if (op == "MaxPool") {
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> dil, ops::intsAttr(n, "dilations", {}));
    if (std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; }))
      return lowerDilatedMaxPool(ctx, n);
  }
  if (!global && ctx.rankOf(n.input(0)) == 3) return lowerPool1d(ctx, n);
  if (ctx.rankOf(n.input(0)) != 4)
    return bad("{}-D input; .ms pooling is 2-D (4-D NCHW input)", ctx.rankOf(n.input(0)));
  std::vector<int64_t> kernel, strides = {1, 1};
  Padding pad{{0, 0, 0, 0}, fb::PadMode_VALID};
  bool ceil = false, includePad = false;
  auto hw = inputHW(ctx.resolve(n.input(0)));
  if (global) {
    if (hw.size() == 2 && hw[0] > 0 && hw[1] > 0) kernel = hw;
  } else {
    KILN_ASSIGN_OR_RETURN(kernel, ops::intsAttr(n, "kernel_shape", {}));
    if (kernel.size() != 2) return bad("kernel_shape of {} values", kernel.size());
    KILN_ASSIGN_OR_RETURN(strides, ops::intsAttr(n, "strides", {1, 1}));
    KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> dil, ops::intsAttr(n, "dilations", {1, 1}));
    if (dil != std::vector<int64_t>{1, 1}) return bad("dilations [{}]", fmt::join(dil, ","));
    KILN_ASSIGN_OR_RETURN(const int64_t ceilMode, ops::intAttr(n, "ceil_mode", 0));
    KILN_ASSIGN_OR_RETURN(const int64_t countIncludePad, ops::intAttr(n, "count_include_pad", 0));
    ceil = ceilMode != 0;
    std::string err;
    auto p = convPadding(n, hw, kernel, strides, {1, 1}, &err);
    if (!p) return bad("{}", err);
    pad = *p;
    for (int64_t v : pad.list)
      if (v > 50) return bad("pad {} (the .ms runtime accepts pooling pads up to 50)", v);
    const bool anyPad = std::any_of(pad.list.begin(), pad.list.end(), [](int64_t v) { return v; });
    if (!isMax && anyPad && ceil)
      return bad("ceil_mode=1 with padding (window counts differ from ONNX at the border)");
    // count_include_pad=1: .ms averages over the valid pixels only, so the zeros are padded
    // explicitly first (a PadFusion) and the pool itself pads nothing.
    includePad = !isMax && anyPad && countIncludePad != 0;
  }
  auto x = ctx.input(n.input(0), Layout::Nhwc);
  if (!x) return x.status();
  if (includePad) {
    const std::vector<int64_t> pairs = {0, 0, pad.list[0], pad.list[1], pad.list[2], pad.list[3],
                                        0, 0};
    const std::string base = n.output(0)->name() + "_padded";
    uint32_t tp = ctx.intConst(pairs, base + "_paddings", std::vector<int32_t>{4, 2});
    MsTensor t = ctx.tensor(*x);
    t.name = base;
    t.nodeType = kNodeCNode;
    t.data.reset();
    t.quantParams.clear();
    if (t.dims.size() == 4) {
      for (size_t i = 1; i < 3; ++i)
        if (t.dims[i] >= 0) t.dims[i] += int32_t(pairs[2 * i] + pairs[2 * i + 1]);
    }
    uint32_t padded = ctx.addTensor(std::move(t));
    ctx.emit(
        fb::PrimitiveType_PadFusion,
        [](FBB& b) { return fb::CreatePadFusion(b, 0, fb::PaddingMode_CONSTANT, 0.0f).Union(); },
        {*x, tp}, {padded});
    *x = padded;
    pad = Padding{{0, 0, 0, 0}, fb::PadMode_PAD};
  }
  auto y = ctx.output(ctx.fusedOutput(n), Layout::Nhwc);
  if (!y) return y.status();
  const int act = ctx.activationFor(n);
  const auto padList = pad.list;
  const int padMode = pad.mode;
  ctx.emit(
      isMax ? fb::PrimitiveType_MaxPoolFusion : fb::PrimitiveType_AvgPoolFusion,
      [=](FBB& b) {
        auto k = b.CreateVector(kernel), st = b.CreateVector(strides), p = b.CreateVector(padList);
        const auto pm = static_cast<fb::PadMode>(padMode);
        const auto rm = ceil ? fb::RoundMode_CEIL : fb::RoundMode_FLOOR;
        const auto a = static_cast<fb::ActivationType>(act);
        if (isMax)
          return fb::CreateMaxPoolFusion(b, k, st, p, pm, rm, fb::Format_NHWC, global, a).Union();
        return fb::CreateAvgPoolFusion(b, k, st, p, pm, rm, fb::Format_NHWC, global, a).Union();
      },
      {*x}, {*y});
  return Status::ok();
}

KILN_MS_LOWERING("AveragePool", checkPool, lowerPool);
KILN_MS_LOWERING("GlobalAveragePool", checkPool, lowerPool);
KILN_MS_LOWERING("GlobalMaxPool", checkPool, lowerPool);
KILN_MS_LOWERING("MaxPool", checkPool, lowerPool);
// ---- end of lowering

} // namespace
} // namespace kiln::ms

// ---- Raising (.ms → IR): one rule per .ms primitive this family reads back.

namespace kiln::ms {

namespace {

template <typename Pool> Status raisePool(RaisingContext& ctx, const Pool* p, bool isMax) {
  KILN_ASSIGN_OR_RETURN(Value * x, ctx.in(0));
  Value* nchw = ctx.toNchw(x);
  Value* y;
  if (p->global()) {
    y = ctx.emit(isMax ? "GlobalMaxPool" : "GlobalAveragePool", {nchw});
  } else {
    auto kernel = ctx.longs(p->kernel_size()), strides = ctx.longs(p->strides());
    if (kernel.size() < 2) return ctx.nodeUnsupported("kernel_size needs [h, w]");
    if (strides.size() < 2) strides = {1, 1};
    Node::AttributeList attrs{{"kernel_shape", Attribute::ofInts({kernel[0], kernel[1]})},
                              {"strides", Attribute::ofInts({strides[0], strides[1]})}};
    auto pads = ctx.longs(p->pad());
    if (p->pad_mode() == msfb::PadMode_SAME)
      attrs.push_back({"auto_pad", Attribute::ofString("SAME_UPPER")});
    else if (p->pad_mode() == msfb::PadMode_PAD && pads.size() >= 4)
      attrs.push_back({"pads", Attribute::ofInts({pads[0], pads[2], pads[1], pads[3]})});
    if (p->round_mode() == msfb::RoundMode_CEIL)
      attrs.push_back({"ceil_mode", Attribute::ofInt(1)});
    y = ctx.emit(isMax ? "MaxPool" : "AveragePool", {nchw}, std::move(attrs));
  }
  KILN_ASSIGN_OR_RETURN(y, ctx.activation(ctx.toNhwc(y), p->activation_type()));
  return ctx.bind(0, y);
}

Status raiseMaxPoolFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return raisePool(ctx, p.value_as_MaxPoolFusion(), true);
}

Status raiseAvgPoolFusion(RaisingContext& ctx, const msfb::Primitive& p) {
  return raisePool(ctx, p.value_as_AvgPoolFusion(), false);
}

} // namespace

KILN_MS_RAISING(MaxPoolFusion, raiseMaxPoolFusion);
KILN_MS_RAISING(AvgPoolFusion, raiseAvgPoolFusion);

} // namespace kiln::ms
