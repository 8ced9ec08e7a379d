// expand-conv-pool: rewrites convolution, transposed convolution and pooling of a rank a target's
// 2-D ops cannot take into 2-D ops over reshaped views, exactly (kiln/passes/expand_conv_pool.h).
// Every padding rule (auto_pad, output_shape, ceil_mode) is first resolved into explicit per-axis
// pads from static shapes, with the executor's rules (src/runtime/kernels/{conv,pool,nn_util}.cpp).
//
// 3-D MaxPool / AveragePool: a box window is separable, and so are the ONNX divisors (with or
// without count_include_pad, the count of a box is the product of its per-axis counts), so
//   X [N,C,D,H,W] → Reshape [N, C·D, H, W] → Pool over (H, W) → Reshape [N, C, D, Ho·Wo]
//     → Pool with the window [kd, 1] over (D, Ho·Wo) → Reshape [N, C, Do, Ho, Wo]
// 3-D Conv: the depth taps become channels (an im2col along depth only) and one 2-D Conv sums them:
//   Reshape [N, C, D, H·W] → Pad the depth with zeros → Gather depth od·sd + kd·dd for every
//     (od, kd) → [N, C, Do·KD, H·W] → Reshape [N, C, Do, KD, H·W] → Transpose [N, Do, C, KD, H·W]
//     → Reshape [N·Do, C·KD, H, W] → Conv over (H, W) with W reshaped to [O, C/G·KD, KH, KW]
//       (channel c·KD + kd keeps each group's channels together, so groups stay as they are)
//     → [N·Do, O, Ho, Wo] → Reshape [N, Do, O, Ho·Wo] → Transpose → Reshape [N, O, Do, Ho, Wo]
// 1-D ConvTranspose: a 2-D one over [N, C, 1, L] with a unit kernel height.
// 3-D ConvTranspose: a 2-D one over (H, W) with the depth taps as output channels, then a 2-D one
// over (D, Ho·Wo) with one-hot weights that adds tap kd of input depth id at id·sd + kd·dd − pd:
//   Transpose X [N, D, C, H, W] → Reshape [N·D, C, H, W] → ConvTranspose with W reshaped to
//     [C, O/G·KD, KH, KW] → [N·D, O·KD, Ho, Wo] → Reshape [N, D, O, KD, Ho·Wo]
//     → Transpose [N, O, KD, D, Ho·Wo] → Reshape [N·O, KD, D, Ho·Wo]
//     → ConvTranspose, kernel [KD, 1], W2[kd, 0, k, 0] = (k == kd) → [N·O, 1, Do, Ho·Wo]
//     → Reshape [N, O, Do, Ho, Wo] (+ B viewed as [O, 1, 1, 1])
// Only Reshape, Transpose, Gather, Pad, Add and the node's own op type (with attributes its opset
// has) are emitted.
#include "kiln/passes/expand_conv_pool.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"
#include "ops/conv.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

enum class Kind { Conv, ConvTranspose, MaxPool, AveragePool };

bool isFloatDType(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 ||
         t == DType::BFloat16;
}

int rankOf(const Value* v) {
  return v && v->shape().hasRank() ? static_cast<int>(v->shape().rank()) : -1;
}

bool used(const Value* v) { return v && (v->hasUses() || v->isGraphOutput()); }

// One spatial axis with its padding resolved.
struct Axis {
  int64_t in = 1, kernel = 1, stride = 1, dilation = 1, padBegin = 0, padEnd = 0, out = 1;
  int64_t outPad = 0; // ConvTranspose
  int64_t span() const { return (kernel - 1) * dilation + 1; }
};

// A unit axis of length `len` (kernel 1, stride 1, no pad): the identity of every window op.
Axis unitAxis(int64_t len) {
  Axis a;
  a.in = a.out = len;
  return a;
}

struct Plan {
  Kind kind = Kind::Conv;
  DType dtype = DType::Undefined;
  std::vector<int64_t> x, w, y; // dims of X, W (conv kinds) and Y
  std::vector<Axis> axes;
  int64_t group = 1;
  bool ceil = false, countPad = false, dilations = false;
};

Expected<Plan> planOf(const Node& n, int64_t opset) {
  auto fail = [](const std::string& why) -> Expected<Plan> {
    return Status(ErrorCode::BadAttribute, why, "");
  };
  if (!isNdConvPool(n))
    return fail("only 3-D Conv, ConvTranspose, MaxPool, AveragePool and 1-D ConvTranspose are "
                "rewritten");
  Plan p;
  const std::string& op = n.opType();
  p.kind = op == "Conv"            ? Kind::Conv
           : op == "ConvTranspose" ? Kind::ConvTranspose
           : op == "MaxPool"       ? Kind::MaxPool
                                   : Kind::AveragePool;
  const bool conv = p.kind == Kind::Conv || p.kind == Kind::ConvTranspose;
  if (opset < 5)
    return fail(fmt::format("opset {} is below 5 (the rewrite's Reshape takes its shape as an input)",
                            opset));
  const Value* x = n.input(0);
  if (!x->shape().isStatic()) return fail("the input shape is not static (fix the input shape)");
  p.x = x->shape().staticDims();
  p.dtype = x->dtype();
  if (!isFloatDType(p.dtype)) return fail(fmt::format("the input is {}, not float", dtypeName(p.dtype)));
  for (int64_t d : p.x)
    if (d < 1) return fail("the input is empty");
  const size_t r = p.x.size() - 2;
  if (n.outputs().size() > 1 && used(n.output(1))) return fail("the Indices output is used");

  std::vector<int64_t> kernel;
  if (conv) {
    const Value* w = n.input(1);
    if (!w || !w->shape().isStatic()) return fail("the weight shape is not static");
    p.w = w->shape().staticDims();
    if (p.w.size() != p.x.size())
      return fail(fmt::format("weight rank {} differs from input rank {}", p.w.size(), p.x.size()));
    KILN_ASSIGN_OR_RETURN(p.group, ops::intAttr(n, "group", 1));
    if (p.group < 1) return fail(fmt::format("group {}", p.group));
    kernel.assign(p.w.begin() + 2, p.w.end());
    if (n.attribute("kernel_shape")) {
      KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> k, ops::intsAttr(n, "kernel_shape", {}));
      if (k != kernel) return fail("kernel_shape differs from the weight's dims");
    }
    const int64_t out = p.kind == Kind::Conv ? p.w[0] : p.w[1] * p.group;
    if (p.kind == Kind::Conv ? (p.w[1] * p.group != p.x[1] || p.w[0] % p.group != 0)
                             : (p.w[0] != p.x[1] || p.x[1] % p.group != 0))
      return fail(fmt::format("weight [{}] does not fit {} input channels in {} groups",
                              fmt::join(p.w, ","), p.x[1], p.group));
    if (const Value* b = n.input(2)) {
      if (!b->shape().isStatic() || b->shape().staticDims() != std::vector<int64_t>{out})
        return fail(fmt::format("the bias is not known to have {} values", out));
      if (p.kind == Kind::ConvTranspose && r == 3 && opset < 7)
        return fail(fmt::format("a bias at opset {} (the rewrite adds it with a broadcasting Add, "
                                "opset 7 on)",
                                opset));
    }
    p.y = {p.x[0], out};
  } else {
    KILN_ASSIGN_OR_RETURN(kernel, ops::intsAttr(n, "kernel_shape", {}));
    KILN_ASSIGN_OR_RETURN(const int64_t ceilMode, ops::intAttr(n, "ceil_mode", 0));
    p.ceil = ceilMode != 0;
    if (p.kind == Kind::AveragePool) {
      KILN_ASSIGN_OR_RETURN(const int64_t countPad, ops::intAttr(n, "count_include_pad", 0));
      p.countPad = countPad != 0;
    }
    p.y = {p.x[0], p.x[1]};
  }
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> strides,
                        ops::intsAttr(n, "strides", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> dilations,
                        ops::intsAttr(n, "dilations", std::vector<int64_t>(r, 1)));
  KILN_ASSIGN_OR_RETURN(const std::vector<int64_t> pads,
                        ops::intsAttr(n, "pads", std::vector<int64_t>(2 * r, 0)));
  KILN_ASSIGN_OR_RETURN(const std::string autoPad, ops::stringAttr(n, "auto_pad", "NOTSET"));
  if (kernel.size() != r || strides.size() != r || dilations.size() != r || pads.size() != 2 * r)
    return fail(fmt::format("kernel_shape/strides/dilations/pads do not match {} spatial dims", r));
  const bool same = autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER";
  if (!same && autoPad != "NOTSET" && autoPad != "VALID" && !autoPad.empty())
    return fail(fmt::format("auto_pad '{}'", autoPad));
  std::vector<int64_t> outPad(r, 0), outShape;
  if (p.kind == Kind::ConvTranspose) {
    KILN_ASSIGN_OR_RETURN(outPad, ops::intsAttr(n, "output_padding", std::vector<int64_t>(r, 0)));
    KILN_ASSIGN_OR_RETURN(outShape, ops::intsAttr(n, "output_shape", {}));
    if (outShape.size() > r) outShape.erase(outShape.begin(), outShape.end() - ptrdiff_t(r));
    if (outPad.size() != r || (!outShape.empty() && outShape.size() != r))
      return fail(fmt::format("output_padding/output_shape do not match {} spatial dims", r));
  }
  for (size_t d = 0; d < r; ++d) {
    Axis a;
    a.in = p.x[2 + d];
    a.kernel = kernel[d];
    a.stride = strides[d];
    a.dilation = dilations[d];
    if (a.kernel < 1 || a.stride < 1 || a.dilation < 1)
      return fail("kernel dims, strides and dilations must be positive");
    if (a.dilation != 1) p.dilations = true;
    a.padBegin = autoPad == "VALID" ? 0 : pads[d];
    a.padEnd = autoPad == "VALID" ? 0 : pads[d + r];
    if (p.kind == Kind::ConvTranspose) {
      // [in, out] swapped against Conv: positions i·s + k·d − padBegin of an output of `out`.
      a.outPad = outPad[d];
      const int64_t full = a.stride * (a.in - 1) + a.outPad + a.span();
      if (!outShape.empty() || same) {
        const int64_t target = outShape.empty() ? a.in * a.stride : outShape[d];
        const int64_t total = full - target;
        const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
        a.padBegin = autoPad == "SAME_UPPER" ? half : total - half;
        a.padEnd = total - a.padBegin;
      }
      if (a.padBegin < 0)
        return fail("output_shape/auto_pad ask for outputs before the first input position");
      if (a.padEnd < 0) { // extra trailing outputs, as output_padding gives them
        a.outPad -= a.padEnd;
        a.padEnd = 0;
      }
      if (a.outPad < 0) return fail("negative output_padding");
      a.out = full + (a.outPad - outPad[d]) - a.padBegin - a.padEnd;
      if (a.out < 1) return fail("an empty output");
    } else {
      if (same) {
        const ops::AxisPads sp =
            ops::samePadding(a.in, a.kernel, a.stride, a.dilation, autoPad == "SAME_UPPER");
        a.padBegin = sp.begin;
        a.padEnd = sp.end;
      }
      if (a.padBegin < 0 || a.padEnd < 0) return fail("negative pads");
      const int64_t span = a.in + a.padBegin + a.padEnd - a.span();
      if (span < 0) return fail("the window is larger than the padded input");
      const bool ceil = p.ceil && !same;
      a.out = (ceil ? (span + a.stride - 1) / a.stride : span / a.stride) + 1;
      if (same) a.out = (a.in + a.stride - 1) / a.stride;
      if (ceil && (a.out - 1) * a.stride >= a.in + a.padBegin) --a.out;
    }
    p.axes.push_back(a);
    p.y.push_back(a.out);
  }
  if (same) p.ceil = false; // explicit SAME pads give ceil(in / stride) outputs either way
  const Value* y = n.output(0);
  if (y && y->shape().isStatic() && y->shape().staticDims() != p.y)
    return fail(fmt::format("the output shape [{}] differs from the computed [{}]",
                            fmt::join(y->shape().staticDims(), ","), fmt::join(p.y, ",")));
  return p;
}

class Expander {
 public:
  Expander(Graph& graph, Node& node, Plan plan, int64_t opset)
      : g_(graph), n_(node), p_(std::move(plan)), opset_(opset) {
    base_ = !n_.name().empty() ? n_.name() : n_.output(0)->name();
  }

  void run() {
    Value* y = nullptr;
    switch (p_.kind) {
    case Kind::Conv:
      y = conv3d();
      break;
    case Kind::ConvTranspose:
      y = p_.axes.size() == 1 ? convTranspose1d() : convTranspose3d();
      break;
    default:
      y = pool3d();
    }
    replaceOutput(y);
  }

 private:
  using Dims = std::vector<int64_t>;

  Value* op(const std::string& type, const std::vector<Value*>& inputs, const Dims& dims,
            const std::string& tag, Node::AttributeList attrs = {}) {
    const std::string name = g_.uniqueName(base_ + "_" + tag);
    Node* node = g_.insertNodeBefore(&n_, type, inputs, {name});
    node->setName(name);
    for (auto& [key, value] : attrs)
      node->setAttribute(key, std::move(value));
    node->mergeLocations(n_);
    node->output(0)->setType(ValueType::tensor(p_.dtype, Shape::fromStatic(dims)));
    return node->output(0);
  }
  Value* ints(const Dims& v, const std::string& tag) {
    return g_.addInitializer(g_.uniqueName(base_ + "_" + tag),
                             Tensor::fromValues<int64_t>(DType::Int64, {int64_t(v.size())}, v));
  }
  Value* reshape(Value* v, const Dims& dims, const std::string& tag) {
    return op("Reshape", {v, ints(dims, tag + "_shape")}, dims, tag);
  }
  Value* transpose(Value* v, const Dims& perm, const Dims& dims, const std::string& tag) {
    return op("Transpose", {v}, dims, tag, {{"perm", Attribute::ofInts(perm)}});
  }
  // A weight or bias viewed with new dims: the same bytes for a constant, a Reshape otherwise.
  // A graph input with an initializer (IR < 4 models list their weights as inputs) counts as
  // its initializer: this rewrite runs only for a target, and both targets write such inputs as
  // constants. A Reshape there would leave the 2-D convolution a weight computed at run time,
  // which crashes the MindSpore Lite runtime's grouped convolution (test_Conv3d_groups).
  Value* view(Value* v, const Dims& dims, const std::string& tag) {
    if (v->isInitializer()) {
      const Tensor& t = v->initializer();
      orphans_.push_back(v);
      return g_.addInitializer(g_.uniqueName(base_ + "_" + tag),
                               Tensor(t.dtype(), dims, t.buffer()));
    }
    return reshape(v, dims, tag);
  }
  static Attribute pair(int64_t a, int64_t b) { return Attribute::ofInts({a, b}); }
  // The attributes of a 2-D window op over axes (a, b).
  Node::AttributeList window(const Axis& a, const Axis& b, bool pool, int64_t group = 1) const {
    Node::AttributeList attrs{
        {"kernel_shape", pair(a.kernel, b.kernel)},
        {"strides", pair(a.stride, b.stride)},
        {"pads", Attribute::ofInts({a.padBegin, b.padBegin, a.padEnd, b.padEnd})}};
    if (!pool || p_.dilations) attrs.push_back({"dilations", pair(a.dilation, b.dilation)});
    if (!pool) attrs.push_back({"group", Attribute::ofInt(group)});
    if (pool && p_.ceil) attrs.push_back({"ceil_mode", Attribute::ofInt(1)});
    if (pool && p_.countPad) attrs.push_back({"count_include_pad", Attribute::ofInt(1)});
    if (a.outPad || b.outPad) attrs.push_back({"output_padding", pair(a.outPad, b.outPad)});
    return attrs;
  }
  static bool identity(const Axis& a) {
    return a.kernel == 1 && a.stride == 1 && a.padBegin == 0 && a.padEnd == 0;
  }

  Value* pool3d() {
    const std::string& type = n_.opType();
    const int64_t N = p_.x[0], C = p_.x[1], D = p_.x[2], H = p_.x[3], W = p_.x[4];
    const Axis &ad = p_.axes[0], &ah = p_.axes[1], &aw = p_.axes[2];
    Value* v = n_.input(0);
    if (!identity(ah) || !identity(aw)) {
      v = reshape(v, {N, C * D, H, W}, "planes");
      v = op(type, {v}, {N, C * D, ah.out, aw.out}, "hw", window(ah, aw, true));
    }
    if (!identity(ad)) {
      v = reshape(v, {N, C, D, ah.out * aw.out}, "depth_view");
      v = op(type, {v}, {N, C, ad.out, ah.out * aw.out}, "d",
             window(ad, unitAxis(ah.out * aw.out), true));
    }
    return reshape(v, p_.y, "y");
  }

  Value* conv3d() {
    const int64_t N = p_.x[0], C = p_.x[1], D = p_.x[2], H = p_.x[3], W = p_.x[4];
    const int64_t O = p_.w[0], Cg = p_.w[1], KD = p_.w[2], KH = p_.w[3], KW = p_.w[4];
    const Axis &ad = p_.axes[0], &ah = p_.axes[1], &aw = p_.axes[2];
    const int64_t Do = ad.out, HW = H * W;
    Value* v = reshape(n_.input(0), {N, C, D, HW}, "x_view");
    int64_t Dp = D;
    if (ad.padBegin || ad.padEnd) {
      Dp = D + ad.padBegin + ad.padEnd;
      const Dims pads = {0, 0, ad.padBegin, 0, 0, 0, ad.padEnd, 0};
      if (opset_ >= 11)
        v = op("Pad", {v, ints(pads, "depth_pads")}, {N, C, Dp, HW}, "x_padded");
      else
        v = op("Pad", {v}, {N, C, Dp, HW}, "x_padded", {{"pads", Attribute::ofInts(pads)}});
    }
    Dims taps;
    for (int64_t od = 0; od < Do; ++od)
      for (int64_t kd = 0; kd < KD; ++kd)
        taps.push_back(od * ad.stride + kd * ad.dilation);
    v = op("Gather", {v, ints(taps, "depth_taps")}, {N, C, Do * KD, HW}, "x_taps",
           {{"axis", Attribute::ofInt(2)}});
    v = reshape(v, {N, C, Do, KD, HW}, "x_taps_5d");
    v = transpose(v, {0, 2, 1, 3, 4}, {N, Do, C, KD, HW}, "x_taps_t");
    v = reshape(v, {N * Do, C * KD, H, W}, "x_2d");
    std::vector<Value*> ins = {v, view(n_.input(1), {O, Cg * KD, KH, KW}, "w_2d")};
    if (Value* b = n_.input(2)) ins.push_back(b);
    Value* y = op("Conv", ins, {N * Do, O, ah.out, aw.out}, "conv_2d", window(ah, aw, false, p_.group));
    y = reshape(y, {N, Do, O, ah.out * aw.out}, "y_view");
    y = transpose(y, {0, 2, 1, 3}, {N, O, Do, ah.out * aw.out}, "y_t");
    return reshape(y, p_.y, "y");
  }

  Value* convTranspose1d() {
    const int64_t N = p_.x[0], C = p_.x[1], L = p_.x[2];
    const int64_t Og = p_.w[1], K = p_.w[2], O = p_.y[1];
    const Axis& a = p_.axes[0];
    Value* v = reshape(n_.input(0), {N, C, 1, L}, "x_2d");
    std::vector<Value*> ins = {v, view(n_.input(1), {C, Og, 1, K}, "w_2d")};
    if (Value* b = n_.input(2)) ins.push_back(b);
    Value* y = op("ConvTranspose", ins, {N, O, 1, a.out}, "convt_2d", window(unitAxis(1), a, false, p_.group));
    return reshape(y, p_.y, "y");
  }

  Value* convTranspose3d() {
    const int64_t N = p_.x[0], C = p_.x[1], D = p_.x[2], H = p_.x[3], W = p_.x[4];
    const int64_t Og = p_.w[1], KD = p_.w[2], KH = p_.w[3], KW = p_.w[4], O = p_.y[1];
    const Axis &ad = p_.axes[0], &ah = p_.axes[1], &aw = p_.axes[2];
    const int64_t HWo = ah.out * aw.out;
    Value* v = transpose(n_.input(0), {0, 2, 1, 3, 4}, {N, D, C, H, W}, "x_t");
    v = reshape(v, {N * D, C, H, W}, "x_2d");
    Value* w = view(n_.input(1), {C, Og * KD, KH, KW}, "w_2d");
    Value* z = op("ConvTranspose", {v, w}, {N * D, O * KD, ah.out, aw.out}, "convt_hw",
                  window(ah, aw, false, p_.group));
    z = reshape(z, {N, D, O, KD, HWo}, "taps_view");
    z = transpose(z, {0, 2, 3, 1, 4}, {N, O, KD, D, HWo}, "taps_t");
    z = reshape(z, {N * O, KD, D, HWo}, "taps_2d");
    std::vector<double> oneHot(size_t(KD * KD), 0.0);
    for (int64_t k = 0; k < KD; ++k)
      oneHot[size_t(k * KD + k)] = 1.0;
    Tensor t = Tensor::fromValues<double>(DType::Float64, {KD, 1, KD, 1}, oneHot);
    if (p_.dtype != DType::Float64) t = *rt::castTensor(t, p_.dtype);
    Value* w2 = g_.addInitializer(g_.uniqueName(base_ + "_depth_taps"), std::move(t));
    Value* y = op("ConvTranspose", {z, w2}, {N * O, 1, ad.out, HWo}, "convt_d",
                  window(ad, unitAxis(HWo), false));
    y = reshape(y, p_.y, "y_5d");
    if (Value* b = n_.input(2)) y = op("Add", {y, view(b, {O, 1, 1, 1}, "bias")}, p_.y, "y");
    return y;
  }

  void replaceOutput(Value* value) {
    Value* old = n_.output(0);
    const std::string name = old->name();
    value->setType(old->type().shape.isStatic() ? old->type()
                                                : ValueType::tensor(p_.dtype, Shape::fromStatic(p_.y)));
    g_.renameValue(old, g_.uniqueName(name + "_nd"));
    g_.renameValue(value, name);
    g_.replaceAllUsesWith(old, value);
    g_.eraseNode(&n_);
    // Constant weights the views replaced, when nothing else reads them.
    for (Value* v : orphans_)
      if (!v->hasUses() && !v->isGraphOutput() && !v->isGraphInput() && !v->producer())
        g_.eraseValue(v);
  }

  Graph& g_;
  Node& n_;
  Plan p_;
  const int64_t opset_;
  std::string base_;
  std::vector<Value*> orphans_;
};

size_t expandIn(Graph& graph, int64_t opset, const std::function<bool(const Node&)>& select) {
  return rewrite::countEachRewrite(graph, [&](Node* node) {
    if (!isNdConvPool(*node) || !select(*node)) return false;
    auto plan = planOf(*node, opset);
    if (!plan) return false;
    Expander(*node->owner(), *node, plan.take(), opset).run();
    return true;
  });
}

class ExpandConvPoolPass : public Pass {
 public:
  std::string_view name() const override { return "expand-conv-pool"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    // With a target, only what it refuses; without one, every node the rewrite can take.
    return expandIn(graph, context.opset(), [&](const Node& node) {
             return !context.targetTakes || !context.targetTakes(node);
           }) > 0;
  }
};

} // namespace

bool isNdConvPool(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  const std::string& op = node.opType();
  const int rank = rankOf(node.input(0));
  if (op == "Conv" || op == "MaxPool" || op == "AveragePool") return rank == 5;
  if (op == "ConvTranspose") return rank == 3 || rank == 5;
  return false;
}

std::string convPoolExpansionBlocker(const Node& node, int64_t opset) {
  auto plan = planOf(node, opset);
  return plan ? std::string() : plan.status().message();
}

Expected<size_t> expandConvPoolNodes(Graph& graph, int64_t opset,
                                     const std::function<bool(const Node&)>& select) {
  return expandIn(graph, opset, select);
}

std::unique_ptr<Pass> makeExpandConvPoolPass() { return std::make_unique<ExpandConvPoolPass>(); }

} // namespace kiln
