// fuse-dynamic-quant: the float ops the .ms and .om writers spell DynamicQuantizeLinear and
// ConvInteger with become those ops again.
//
//   %lo = Min(ReduceMin(%x), 0)  %hi = Max(ReduceMax(%x), 0)
//   %s = Div(Sub(%hi, %lo), 255)  %zf = Round(Clip(Sub(0, Div(%lo, %s)), 0, 255))
//   %qf = Clip(Add(Round(Div(%x, %s)), %zf), 0, 255)
//     →  %q, %s, %z = DynamicQuantizeLinear(%x)  %qf = Cast(%q)  %zf = Cast(%z)
//   %y = Conv(Sub(Cast(%q), Cast(%z)), <integer-valued float W>)
//     →  %y = Cast(ConvInteger(%q, <W codes>, %z[, <wz>]))
// ReduceMax may be -ReduceMin(-x) (a .ms file); from a .om both reductions take an axes input
// listing every axis.
// decompose-quant writes these for a target without integer ops (src/passes/decompose_quant.cpp);
// read back from a .ms or .om they cost eleven full-tensor float ops per activation and a float
// Conv where the source model ran one DynamicQuantizeLinear and an integer convolution.
//
// The numbers are the same: DynamicQuantizeLinear's kernel computes the same range, scale (same
// float division), zero point and codes (x / scale rounded half to even, clamped), and a Conv over
// integer-valued floats sums the same integers ConvInteger sums in int32. Where they can differ:
// float sums past 2^24 round in the float Conv and not in ConvInteger (its result is then the
// source model's exact sum); an all-zero x gives scale 0, which the float idiom divides by (NaN
// codes) and the kernel does not (zero point 0, codes 0); NaN in x is skipped by the kernel's
// range. The weights become 8-bit codes: int8 when every value fits, else uint8 with a zero point
// per filter. Nodes of the idiom that something else still reads stay.
#include <algorithm>
#include <cmath>
#include <map>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::isOp;
using rewrite::isScalar;
using rewrite::producerOf;

int64_t attrInt(const Node& n, const char* name, int64_t fallback) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

// True when constant `axes` names every axis of `x` once (negative axes count from the end).
bool everyAxis(const Value* axes, const Value* x) {
  const auto list = rewrite::constantInts(axes);
  if (!list || !x || !x->shape().hasRank()) return false;
  const auto rank = static_cast<int64_t>(x->shape().rank());
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : *list) {
    const int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank || seen[static_cast<size_t>(axis)]) return false;
    seen[static_cast<size_t>(axis)] = true;
  }
  return static_cast<int64_t>(list->size()) == rank;
}

// The x of `v` = ReduceMin(x) over every axis (keepdims 0): no axes input, as the .ms reader
// raises it, or a constant one listing them all, as the .om reader does; nullptr otherwise.
Value* wholeMinOf(const Value* v, const char* op = "ReduceMin") {
  Node* n = producerOf(v, op, 1);
  if (!n) {
    n = producerOf(v, op, 2);
    if (!n || !everyAxis(n->input(1), n->input(0))) return nullptr;
  }
  if (attrInt(*n, "keepdims", 1) != 0 || attrInt(*n, "noop_with_empty_axes", 0) != 0)
    return nullptr;
  return n->input(0);
}

// The x of `v` = ReduceMax(x), or -ReduceMin(-x) as the .ms writer spells it.
Value* wholeMaxOf(const Value* v) {
  if (Value* x = wholeMinOf(v, "ReduceMax")) return x;
  Node* outer = producerOf(v, "Neg", 1);
  Value* negated = outer ? wholeMinOf(outer->input(0)) : nullptr;
  Node* inner = producerOf(negated, "Neg", 1);
  return inner ? inner->input(0) : nullptr;
}

// For a commutative `op` node with 0 as one operand, the other one.
Value* besidesZero(const Value* v, const char* op) {
  Node* n = producerOf(v, op, 2);
  if (!n) return nullptr;
  if (isScalar(n->input(1), 0.0f)) return n->input(0);
  if (isScalar(n->input(0), 0.0f)) return n->input(1);
  return nullptr;
}

bool isClip(const Node* n, float lo, float hi) {
  return isOp(n, "Clip", 3) && isScalar(n->input(1), lo) && isScalar(n->input(2), hi);
}

// One written DynamicQuantizeLinear: its input, the float scale, zero point and codes it makes.
struct WrittenQuant {
  Value* x = nullptr;
  Value* scale = nullptr;
  Value* zeroPoint = nullptr;
  Node* codes = nullptr; // the final Clip
};

// The idiom ending in `clip` (the codes' Clip); false when it is not one.
bool matchWrittenQuant(Node* clip, WrittenQuant& q) {
  if (!isClip(clip, 0.0f, 255.0f)) return false;
  Node* add = producerOf(clip->input(0), "Add", 2);
  if (!add) return false;
  for (size_t side = 0; side < 2; ++side) {
    Node* round = producerOf(add->input(side), "Round", 1);
    Node* div = round ? producerOf(round->input(0), "Div", 2) : nullptr;
    if (!div) continue;
    Value* x = div->input(0);
    Value* scale = div->input(1);
    Value* zeroPoint = add->input(1 - side);
    // An untyped x (a raised MaxPool's output) is float32 too: Min(min(x), <float32 0>) says so.
    if (!x || (x->dtype() != DType::Float32 && x->dtype() != DType::Undefined)) continue;
    // scale = (hi - lo) / 255 with lo = min(min(x), 0), hi = max(max(x), 0)
    Node* scaleDiv = producerOf(scale, "Div", 2);
    if (!scaleDiv || !isScalar(scaleDiv->input(1), 255.0f)) continue;
    Node* range = producerOf(scaleDiv->input(0), "Sub", 2);
    if (!range) continue;
    Value* lo = range->input(1);
    if (wholeMinOf(besidesZero(lo, "Min")) != x ||
        wholeMaxOf(besidesZero(range->input(0), "Max")) != x)
      continue;
    // zero point = round(clip(0 - lo / scale, 0, 255))
    Node* zpRound = producerOf(zeroPoint, "Round", 1);
    Node* zpClip = zpRound && zpRound->input(0) ? zpRound->input(0)->producer() : nullptr;
    if (!zpClip || !isClip(zpClip, 0.0f, 255.0f)) continue;
    Node* negate = producerOf(zpClip->input(0), "Sub", 2);
    if (!negate || !isScalar(negate->input(0), 0.0f)) continue;
    Node* lowScaled = producerOf(negate->input(1), "Div", 2);
    if (!lowScaled || lowScaled->input(0) != lo || lowScaled->input(1) != scale) continue;
    q = {x, scale, zeroPoint, clip};
    return true;
  }
  return false;
}

Node* castTo(Graph& graph, Node* anchor, Value* v, DType to, const std::string& name) {
  Node* cast = graph.insertNodeBefore(anchor, "Cast", {v}, {graph.uniqueName(name)});
  cast->setName(cast->output(0)->name());
  cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(to)));
  cast->output(0)->setType(ValueType::tensor(to, v->shape()));
  return cast;
}

// What DynamicQuantizeLinear(x) became: its outputs, and its codes and zero point as floats.
struct Rebuilt {
  Value *scale, *codesFloat, *zeroPointFloat;
};

// Rebuilds every written DynamicQuantizeLinear; the idiom's readers take the new values.
size_t rebuildQuants(Graph& graph) {
  std::map<Value*, Rebuilt> made; // by x: one DynamicQuantizeLinear per input
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  size_t count = 0;
  for (Node* clip : order) {
    WrittenQuant q;
    if (!matchWrittenQuant(clip, q)) continue;
    Value* codes = clip->output(0);
    auto it = made.find(q.x);
    // A graph output's new value takes its name; one already serving as another is left alone.
    if (it != made.end() &&
        ((codes->isGraphOutput() && it->second.codesFloat->isGraphOutput()) ||
         (q.zeroPoint->isGraphOutput() && it->second.zeroPointFloat->isGraphOutput()) ||
         (q.scale->isGraphOutput() && it->second.scale->isGraphOutput())))
      continue;
    if (it == made.end()) {
      // Right after x's producer (or first, for an input): every reader of the idiom comes later.
      Node* producer = q.x->producer();
      Node* anchor = producer && producer->owner() == &graph ? rewrite::nodeAfter(graph, producer)
                                                             : graph.nodes().front().get();
      const std::string base = q.x->name() + "_dynamic_quant";
      Node* dq = graph.insertNodeBefore(anchor, "DynamicQuantizeLinear", {q.x},
                                        {graph.uniqueName(base), graph.uniqueName(base + "_scale"),
                                         graph.uniqueName(base + "_zero_point")});
      dq->setName(base);
      for (const Location& loc : clip->locations())
        dq->addLocation(loc);
      dq->output(0)->setType(ValueType::tensor(DType::UInt8, q.x->shape()));
      dq->output(1)->setType(ValueType::tensor(DType::Float32, Shape::scalar()));
      dq->output(2)->setType(ValueType::tensor(DType::UInt8, Shape::scalar()));
      Node* codesFloat = castTo(graph, anchor, dq->output(0), DType::Float32, base + "_float");
      Node* zeroFloat = castTo(graph, anchor, dq->output(2), DType::Float32, base + "_zero_float");
      it = made.emplace(q.x, Rebuilt{dq->output(1), codesFloat->output(0), zeroFloat->output(0)})
               .first;
    }
    std::vector<Node*> idiom = {clip, q.zeroPoint->producer(), q.scale->producer()};
    std::vector<std::pair<Value*, std::string>> outputNames;
    for (auto [old, now] : {std::pair{codes, it->second.codesFloat},
                            std::pair{q.zeroPoint, it->second.zeroPointFloat},
                            std::pair{q.scale, it->second.scale}}) {
      if (old->isGraphOutput()) outputNames.emplace_back(now, old->name());
      graph.replaceAllUsesWith(old, now);
    }
    rewrite::eraseUnread(graph, idiom);
    for (const auto& [now, name] : outputNames)
      if (!graph.findLocalValue(name)) graph.renameValue(now, name);
    ++count;
  }
  return count;
}

// The codes a float value holds: v = Cast(c) with c 8-bit; nullptr otherwise.
Value* castCodes(const Value* v) {
  Node* cast = producerOf(v, "Cast", 1);
  if (!cast || attrInt(*cast, "to", 0) != dtypeToOnnx(DType::Float32)) return nullptr;
  Value* c = cast->input(0);
  return c && (c->dtype() == DType::UInt8 || c->dtype() == DType::Int8) ? c : nullptr;
}

// The float weight `w` (integer values, [M, ...]) as 8-bit codes and zero points: int8 codes and
// no zero point when every value fits, else uint8 codes with a zero point per filter; false when a
// value is not an integer or a filter spans more than 255.
bool weightCodes(const Tensor& w, Tensor& codes, std::optional<Tensor>& zeroPoints) {
  if (w.dtype() != DType::Float32 || w.dims().size() < 3 || w.dims()[0] <= 0) return false;
  const std::vector<float> values = w.copyValues<float>();
  const auto filters = static_cast<size_t>(w.dims()[0]);
  if (values.empty() || values.size() % filters != 0) return false;
  const size_t perFilter = values.size() / filters;
  bool fitsInt8 = true;
  for (float v : values) {
    if (!(std::fabs(v) <= 255.0f) || v != std::nearbyint(v)) return false;
    fitsInt8 = fitsInt8 && v >= -128.0f && v <= 127.0f;
  }
  // One loop for both: int8 codes are the values themselves (zero point 0, stored as their
  // two's-complement bytes), uint8 codes the values shifted by their filter's zero point.
  std::vector<uint8_t> out(values.size()), zeros(filters);
  for (size_t m = 0; m < filters; ++m) {
    const auto first = values.begin() + static_cast<std::ptrdiff_t>(m * perFilter);
    const auto [lo, hi] =
        std::minmax_element(first, first + static_cast<std::ptrdiff_t>(perFilter));
    // 128 (the executor's own base for uint8 weights) when the filter allows it.
    const float zero = fitsInt8                          ? 0.0f
                       : *lo >= -128.0f && *hi <= 127.0f ? 128.0f
                                                         : -std::min(*lo, 0.0f);
    if (*hi + zero > 255.0f) return false;
    zeros[m] = static_cast<uint8_t>(zero);
    for (size_t k = 0; k < perFilter; ++k)
      out[m * perFilter + k] =
          static_cast<uint8_t>(static_cast<int32_t>(values[m * perFilter + k] + zero));
  }
  codes = Tensor::fromValues(fitsInt8 ? DType::Int8 : DType::UInt8, w.dims(), out);
  if (fitsInt8)
    zeroPoints.reset();
  else
    zeroPoints = Tensor::fromValues(DType::UInt8, {static_cast<int64_t>(filters)}, zeros);
  return true;
}

// Conv(Sub(Cast(q), Cast(z)), W) (or Conv(Cast(q), W)) over 8-bit codes → ConvInteger + Cast.
size_t rebuildConvIntegers(Graph& graph) {
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  size_t count = 0;
  for (Node* conv : order) {
    if (!isOp(conv, "Conv", 2)) continue;
    Value* x = conv->input(0);
    Value* codes = castCodes(x);
    Value* zeroPoint = nullptr;
    Node* sub = nullptr;
    if (!codes && (sub = producerOf(x, "Sub", 2))) {
      codes = castCodes(sub->input(0));
      zeroPoint = castCodes(sub->input(1));
      const auto zeroCount = zeroPoint ? zeroPoint->shape().elementCount() : std::nullopt;
      if (!codes || !zeroCount || zeroPoint->dtype() != codes->dtype() || *zeroCount != 1)
        codes = nullptr;
    }
    // W: integer-valued float constants, or 8-bit codes cast to float.
    const Tensor* w = rewrite::constantTensor(conv->input(1));
    Value* castWeight = w ? nullptr : castCodes(conv->input(1));
    Tensor weightCoded;
    std::optional<Tensor> weightZeros;
    if (!codes || !(castWeight || (w && weightCodes(*w, weightCoded, weightZeros)))) continue;
    Value* y = conv->output(0);
    Value* floatWeight = conv->input(1);
    const std::string name = y->name();
    std::vector<Value*> inputs = {
        codes, castWeight
                   ? castWeight
                   : graph.addInitializer(graph.uniqueName(conv->input(1)->name() + "_codes"),
                                          std::move(weightCoded))};
    if (zeroPoint || weightZeros) inputs.push_back(zeroPoint);
    if (weightZeros)
      inputs.push_back(graph.addInitializer(
          graph.uniqueName(conv->input(1)->name() + "_zero_point"), std::move(*weightZeros)));
    Node* integer =
        graph.insertNodeBefore(conv, "ConvInteger", inputs, {graph.uniqueName(name + "_integer")});
    integer->setName(conv->name());
    for (const auto& [key, value] : conv->attributes())
      integer->setAttribute(key, value);
    for (const Location& loc : conv->locations())
      integer->addLocation(loc);
    integer->output(0)->setType(ValueType::tensor(DType::Int32, y->shape()));
    Node* cast = castTo(graph, conv, integer->output(0), DType::Float32, name + "_float");
    std::vector<Node*> feeders = {sub ? sub : x->producer()};
    if (castWeight && conv->input(1)->producer() != feeders[0])
      feeders.push_back(conv->input(1)->producer());
    graph.replaceAllUsesWith(y, cast->output(0));
    graph.eraseNode(conv);
    graph.renameValue(cast->output(0), name);
    rewrite::eraseUnread(graph, feeders);
    // The float weights the codes replace: four times their bytes, kept for nothing.
    if (w && !floatWeight->hasUses() && !floatWeight->isGraphOutput() &&
        floatWeight->owner() == &graph)
      graph.eraseValue(floatWeight);
    ++count;
  }
  return count;
}

// Cast(Cast(c → float32) → c's type) is c: the codes a rebuilt DynamicQuantizeLinear output
// where the idiom's float was cast back to 8 bits.
size_t foldCodeRoundTrips(Graph& graph) {
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  size_t count = 0;
  for (Node* cast : order) {
    if (!isOp(cast, "Cast", 1)) continue;
    Value* codes = castCodes(cast->input(0));
    Value* y = cast->output(0);
    if (!codes || attrInt(*cast, "to", 0) != dtypeToOnnx(codes->dtype())) continue;
    // The codes take a graph output's name unless they have one that must stay.
    const bool named = y->isGraphOutput();
    if (named && (codes->isGraphOutput() || codes->isGraphInput() || codes->isInitializer()))
      continue;
    const std::string name = y->name();
    graph.replaceAllUsesWith(y, codes);
    rewrite::eraseUnread(graph, {cast});
    if (named && !graph.findLocalValue(name)) graph.renameValue(codes, name);
    ++count;
  }
  return count;
}

size_t fuseDynamicQuant(Graph& graph) {
  size_t count = 0;
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs())
      count += fuseDynamicQuant(*sub);
  if (graph.nodes().empty()) return count;
  count += rebuildQuants(graph);
  count += rebuildConvIntegers(graph);
  count += foldCodeRoundTrips(graph);
  return count;
}

class FuseDynamicQuant : public Pass {
 public:
  std::string_view name() const override { return "fuse-dynamic-quant"; }
  Expected<bool> run(Graph& graph, PassContext&) override { return fuseDynamicQuant(graph) > 0; }
};

} // namespace

std::unique_ptr<Pass> makeFuseDynamicQuantPass() { return std::make_unique<FuseDynamicQuant>(); }

} // namespace kiln
