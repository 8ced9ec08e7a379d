// sink-transposes: moves layout Transposes down through ops that do not care about layout until
// they meet their inverse, so a graph raised from an NHWC artifact (.ms) runs in its source layout.
//
//   %t = Transpose(%x) {perm = p}; %y = Relu(%t)         →  %y = Relu(%x); %t' = Transpose(%y) {p}
//   %a = Transpose(%x) {p}; %b = Transpose(%z) {p};
//   %y = Add(%a, %b), Add(%a, %const)                     →  %y = Add(%x, %z); Transpose(%y) {p}
//   %t = Transpose(%x) {p}; %u = Transpose(%t) {q}        →  %u = Transpose(%x) {c}, c[i] =
//   p[q[i]],
//                                                            or %x itself when c is the identity
// Sinking takes elementwise ops (every input a Transpose with the same perm, or a constant, which
// is permuted here), one-input activations (Clip's bounds stay), and ops with an axis, which is
// renumbered: Concat, Softmax / LogSoftmax / Hardmax (opset 13+), Gather (1-D indices), Split,
// Reduce* with keepdims, Slice (constant axes). A Transpose sinks only toward its inverse (one
// must follow through sinkable ops), and one read by other nodes too only when those readers are
// Transposes or sinkable ops, so the count of Transposes does not grow.
// Values keep their names where their data goes: a Transpose's input read by it alone takes the
// Transpose's output name, and Model::sourceLayouts follows each renamed or relaid value, so
// `kiln compare` still pairs tensors with the source model's. Graph outputs keep their names and
// layouts. The .ms reader runs this pass on every graph it raises (each NHWC op comes back as an
// NCHW ONNX op between two Transposes, and the executor's Conv epilogue fusion then sees the
// activations right after their Conv).
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"
#include "runtime/kernels/shape_util.h"

namespace kiln {
namespace {

using Perm = std::vector<int64_t>;

bool isOnnx(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool isIdentity(const Perm& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int64_t>(i)) return false;
  return true;
}

Perm inverse(const Perm& p) {
  Perm out(p.size());
  for (size_t i = 0; i < p.size(); ++i)
    out[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return out;
}

// The layout after two Transposes: transposing by `first`, then by `second`.
Perm compose(const Perm& first, const Perm& second) {
  Perm out(second.size());
  for (size_t i = 0; i < second.size(); ++i)
    out[i] = first[static_cast<size_t>(second[i])];
  return out;
}

// A Transpose node's perm when it is written out and valid.
std::optional<Perm> permOf(const Node& node) {
  if (!isOnnx(node) || node.opType() != "Transpose" || node.inputs().size() != 1 ||
      !node.input(0) || node.outputs().size() != 1 || !node.output(0))
    return std::nullopt;
  const Attribute* a = node.attribute("perm");
  if (!a || a->kind() != AttrKind::Ints || a->asInts().empty()) return std::nullopt;
  const Perm& p = a->asInts();
  std::vector<bool> seen(p.size(), false);
  for (int64_t axis : p) {
    if (axis < 0 || axis >= static_cast<int64_t>(p.size()) || seen[static_cast<size_t>(axis)])
      return std::nullopt;
    seen[static_cast<size_t>(axis)] = true;
  }
  return p;
}

// What sinking does to a node of each op.
enum class Rule { Elementwise, Unary, Concat, AxisAttribute, Gather, Split, Reduce, Slice };

const std::map<std::string, Rule, std::less<>>& rules() {
  static const std::map<std::string, Rule, std::less<>> table = [] {
    std::map<std::string, Rule, std::less<>> t;
    for (const char* op : {"Add",     "Sub",  "Mul",     "Div",         "Pow",
                           "Max",     "Min",  "Sum",     "Mean",        "Mod",
                           "Equal",   "Less", "Greater", "LessOrEqual", "GreaterOrEqual",
                           "And",     "Or",   "Xor",     "Where",       "PRelu",
                           "BitShift"})
      t[op] = Rule::Elementwise;
    for (const char* op : {"Relu",
                           "Sigmoid",
                           "Tanh",
                           "Exp",
                           "Log",
                           "Abs",
                           "Neg",
                           "Sqrt",
                           "Erf",
                           "HardSigmoid",
                           "HardSwish",
                           "LeakyRelu",
                           "Elu",
                           "Selu",
                           "Celu",
                           "Softplus",
                           "Softsign",
                           "Sign",
                           "Ceil",
                           "Floor",
                           "Round",
                           "Reciprocal",
                           "Cast",
                           "Identity",
                           "Not",
                           "IsNaN",
                           "IsInf",
                           "Sin",
                           "Cos",
                           "Tan",
                           "Asin",
                           "Acos",
                           "Atan",
                           "Sinh",
                           "Cosh",
                           "Asinh",
                           "Acosh",
                           "Atanh",
                           "Gelu",
                           "Mish",
                           "ThresholdedRelu",
                           "Shrink",
                           "Clip"})
      t[op] = Rule::Unary;
    t["Concat"] = Rule::Concat;
    for (const char* op : {"Softmax", "LogSoftmax", "Hardmax"})
      t[op] = Rule::AxisAttribute;
    t["Gather"] = Rule::Gather;
    t["Split"] = Rule::Split;
    for (const char* op :
         {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
      t[op] = Rule::Reduce;
    t["Slice"] = Rule::Slice;
    return t;
  }();
  return table;
}

std::optional<Rule> ruleOf(const Node& node) {
  if (!isOnnx(node) || !node.subgraphs().empty()) return std::nullopt;
  auto it = rules().find(node.opType());
  if (it == rules().end()) return std::nullopt;
  return it->second;
}

int64_t intAttr(const Node& node, const char* name, int64_t fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

class Sinker {
 public:
  Sinker(Graph& graph, Model* model, int64_t opset, bool explain)
      : g_(graph), model_(model), opset_(opset), explain_(explain) {
    if (model_)
      for (const auto& v : g_.values())
        if (auto it = model_->sourceLayouts.find(v->name()); it != model_->sourceLayouts.end())
          layout_[v.get()] = it->second;
  }

  size_t run() {
    size_t changes = nameDataSources();
    // Sinking moves a Transpose below its reader, where the next reader in graph order meets it:
    // one walk in order does it, a second one catches what a multi-reader Transpose blocked.
    for (int round = 0; round < 4; ++round) {
      size_t here = 0;
      std::vector<Node*> order;
      for (const auto& node : g_.nodes())
        order.push_back(node.get());
      std::set<const Node*> erased;
      for (Node* node : order) {
        if (erased.count(node)) continue;
        if (permOf(*node))
          here += mergeWithProducer(node, erased);
        else if (auto rule = ruleOf(*node))
          here += sink(node, *rule);
      }
      here += eraseDeadTransposes();
      changes += here;
      if (here == 0) break;
    }
    for (Value* v : replacedConstants_)
      if (!v->hasUses() && !v->isGraphInput() && !v->isGraphOutput()) {
        g_.removeInitializer(v);
        g_.eraseValue(v);
      }
    writeLayouts();
    return changes;
  }

 private:
  Perm layoutOf(const Value* v, size_t rank) const {
    auto it = layout_.find(v);
    if (it != layout_.end() && it->second.size() == rank) return it->second;
    Perm id(rank);
    std::iota(id.begin(), id.end(), 0);
    return id;
  }

  // A Transpose's input read by it alone, made by a node of this graph, takes the Transpose's
  // output name when the Transpose only put it in the artifact's layout (an NHWC .ms tensor after
  // its NCHW op): the name then follows the data in the source's layout when the Transpose goes.
  size_t nameDataSources() {
    size_t count = 0;
    for (const auto& node : g_.nodes()) {
      auto p = permOf(*node);
      if (!p) continue;
      Value* x = node->input(0);
      Value* y = node->output(0);
      Node* maker = x->producer();
      if (!maker || maker->owner() != &g_ || permOf(*maker) || x->uses().size() != 1 ||
          x->isGraphOutput() || y->isGraphOutput() || x->isGraphInput())
        continue;
      // Only where it puts a tensor of the artifact back in its source layout under its name.
      if (!layout_.count(y) || layout_.count(x) ||
          !isIdentity(compose(layoutOf(y, p->size()), inverse(*p))))
        continue;
      const std::string xName = x->name(), yName = y->name();
      g_.renameValue(x, g_.uniqueName(xName + "_renamed"));
      g_.renameValue(y, xName);
      g_.renameValue(x, yName);
      layout_.erase(y); // x holds the source's tensor of that name as it is
      ++count;
    }
    return count;
  }

  void note(const Node& node, const std::string& why) const {
    if (explain_)
      spdlog::debug("sink-transposes: '{}' ({}) keeps its Transpose: {}",
                    node.name().empty() && node.output(0) ? node.output(0)->name() : node.name(),
                    node.opType(), why);
  }

  // Transpose after Transpose: one Transpose, or none.
  size_t mergeWithProducer(Node* node, std::set<const Node*>& erased) {
    const Perm q = *permOf(*node);
    Node* first = node->input(0)->producer();
    if (!first || first->owner() != &g_) return 0;
    auto p = permOf(*first);
    if (!p || p->size() != q.size()) return 0;
    const Perm c = compose(*p, q);
    Value* x = first->input(0);
    Value* y = node->output(0);
    if (!isIdentity(c)) {
      node->setInput(0, x);
      node->setAttribute("perm", Attribute::ofInts(c));
      return 1;
    }
    if (!y->isGraphOutput()) {
      layout_.erase(y);
      g_.replaceAllUsesWith(y, x);
      g_.eraseNode(node);
      erased.insert(node);
      return 1;
    }
    // A graph output keeps its name: its data's maker takes it when nothing else needs x's name.
    Node* maker = x->producer();
    if (!maker || maker->owner() != &g_ || x->isGraphOutput() || x->isGraphInput()) {
      node->setInput(0, x);
      node->setAttribute("perm", Attribute::ofInts(c));
      return 1;
    }
    const std::string name = y->name();
    const ValueType type = y->type();
    // x holds y's data now, in y's layout.
    std::optional<Perm> ly;
    if (auto it = layout_.find(y); it != layout_.end()) ly = it->second;
    layout_.erase(y);
    g_.replaceAllUsesWith(y, x);
    g_.eraseNode(node);
    erased.insert(node);
    g_.renameValue(x, name);
    if (type.kind == TypeKind::Tensor && type.shape.hasRank()) x->setType(type);
    if (ly)
      layout_[x] = *ly;
    else
      layout_.erase(x);
    return 1;
  }

  // Whether every reader of a Transpose's output can take the Transpose off its hands.
  bool readersSinkable(const Value* t) const {
    if (t->isGraphOutput()) return false;
    for (const Use& use : t->uses()) {
      if (use.user->owner() != &g_) return false;
      if (!permOf(*use.user) && !ruleOf(*use.user)) return false;
    }
    return true;
  }

  // Whether a Transpose by `p` of `v` would, sunk through v's readers, meet its inverse on some
  // path: a model's own Transpose that meets none is left where it is (moving it through a
  // LayerNormalization would only make the reductions strided).
  bool reachesInverse(const Value* v, const Perm& p) const {
    std::set<const Value*> seen;
    std::vector<const Value*> work = {v};
    while (!work.empty()) {
      const Value* at = work.back();
      work.pop_back();
      if (!seen.insert(at).second) continue;
      for (const Use& use : at->uses()) {
        const Node* reader = use.user;
        if (reader->owner() != &g_) continue;
        if (auto q = permOf(*reader)) {
          if (q->size() == p.size() && isIdentity(compose(p, *q))) return true;
          continue;
        }
        if (!ruleOf(*reader)) continue;
        for (const Value* out : reader->outputs())
          if (out) work.push_back(out);
      }
    }
    return false;
  }

  // `c` for a node reading the pre-Transpose layout: right-aligned to rank `rank` (broadcasting),
  // then permuted by the inverse of `p`. Single-element constants stay as they are.
  Value* relaidConstant(Value* c, const Perm& p, bool sameRank) {
    const Tensor& t = c->initializer();
    const size_t rank = p.size();
    if (t.dims().size() > rank || (sameRank && t.dims().size() != rank)) return nullptr;
    if (t.elementCount() <= 1) return c; // broadcasts the same in any layout
    auto key = std::make_pair(c, p);
    if (auto it = relaid_.find(key); it != relaid_.end()) return it->second;
    std::vector<int64_t> dims(rank - t.dims().size(), 1);
    dims.insert(dims.end(), t.dims().begin(), t.dims().end());
    auto permuted = rt::shape::transposed(rt::shape::reshaped(t, dims), inverse(p));
    if (!permuted) return nullptr;
    Value* v = g_.addInitializer(g_.uniqueName(c->name() + "_relaid"), std::move(*permuted));
    relaid_[key] = v;
    replacedConstants_.insert(c);
    return v;
  }

  Value* intsConstant(const std::string& base, const std::vector<int64_t>& values) {
    return g_.addInitializer(
        g_.uniqueName(base),
        Tensor::fromValues(DType::Int64, {static_cast<int64_t>(values.size())}, values));
  }

  // Renumbers an axis of the Transpose's output frame into its input's frame.
  static std::optional<int64_t> mapAxis(int64_t axis, const Perm& p) {
    const auto rank = static_cast<int64_t>(p.size());
    if (axis < -rank || axis >= rank) return std::nullopt;
    if (axis < 0) axis += rank;
    return p[static_cast<size_t>(axis)];
  }

  std::optional<std::vector<int64_t>> mapAxes(const std::vector<int64_t>& axes, const Perm& p) {
    std::vector<int64_t> out;
    for (int64_t a : axes) {
      auto m = mapAxis(a, p);
      if (!m) return std::nullopt;
      out.push_back(*m);
    }
    return out;
  }

  size_t sink(Node* node, Rule rule) {
    // Which inputs carry the data in the node's layout; the rest (Clip bounds, Gather indices,
    // Slice starts...) are read as they are.
    std::vector<size_t> data;
    if (rule == Rule::Elementwise || rule == Rule::Concat) {
      for (size_t i = 0; i < node->inputs().size(); ++i)
        if (node->input(i)) data.push_back(i);
    } else if (node->input(0)) {
      data.push_back(0);
    }
    std::optional<Perm> p;
    for (size_t i : data) {
      Node* maker = node->input(i)->producer();
      if (maker && maker->owner() == &g_)
        if (auto q = permOf(*maker)) {
          p = q;
          break;
        }
    }
    if (!p) return 0;
    if (!reachesInverse(node->output(0), *p))
      return note(*node, "no Transpose that undoes it follows"), 0;
    // The other inputs: the same Transpose's layout, or constants to relay.
    std::vector<std::pair<size_t, Value*>> replaced;
    for (size_t i : data) {
      Value* in = node->input(i);
      Node* maker = in->producer();
      std::optional<Perm> q;
      if (maker && maker->owner() == &g_) q = permOf(*maker);
      if (q) {
        if (*q != *p) return note(*node, "its inputs have Transposes with different perms"), 0;
        if (!readersSinkable(in))
          return note(*node, fmt::format("'{}' has readers that keep its layout", in->name())), 0;
        replaced.push_back({i, maker->input(0)});
        continue;
      }
      const Tensor* constant = rewrite::constantTensor(in);
      if (!constant)
        return note(*node, fmt::format("'{}' is neither a constant nor a Transpose "
                                       "with the same perm",
                                       in->name())),
               0;
      Value* relaid = relaidConstant(in, *p, rule == Rule::Concat);
      if (!relaid) return note(*node, fmt::format("constant '{}' cannot be relaid", in->name())), 0;
      replaced.push_back({i, relaid});
    }
    // Axis renumbering, worked out before anything changes.
    Node::AttributeList attributes;
    std::vector<std::pair<size_t, Value*>> auxiliary;
    switch (rule) {
    case Rule::Elementwise:
    case Rule::Unary:
      break;
    case Rule::Concat:
    case Rule::Split:
    case Rule::AxisAttribute:
    case Rule::Gather: {
      if (rule == Rule::AxisAttribute && opset_ < 13)
        return note(*node, "before opset 13 its axis flattens the trailing dims"), 0;
      if (rule == Rule::Gather) {
        const Value* indices = node->input(1);
        const bool vector =
            indices &&
            (indices->isInitializer() ? indices->initializer().dims().size() == 1
                                      : indices->shape().hasRank() && indices->shape().rank() == 1);
        if (!vector) return note(*node, "its indices are not known to be 1-D"), 0;
      }
      const int64_t fallback = rule == Rule::Concat          ? INT64_MAX
                               : rule == Rule::AxisAttribute ? -1
                                                             : 0;
      const int64_t axis = intAttr(*node, "axis", fallback);
      auto mapped = axis == INT64_MAX ? std::nullopt : mapAxis(axis, *p);
      if (!mapped) return note(*node, "its axis is missing or out of range"), 0;
      attributes.emplace_back("axis", Attribute::ofInt(*mapped));
      break;
    }
    case Rule::Reduce: {
      if (intAttr(*node, "keepdims", 1) != 1) return note(*node, "keepdims = 0 drops axes"), 0;
      if (const Attribute* a = node->attribute("axes"); a && a->kind() == AttrKind::Ints) {
        auto mapped = mapAxes(a->asInts(), *p);
        if (!mapped) return note(*node, "an axis is out of range"), 0;
        attributes.emplace_back("axes", Attribute::ofInts(*mapped));
      } else if (node->input(1)) {
        auto axes = rewrite::constantInts(node->input(1));
        auto mapped = axes ? mapAxes(*axes, *p) : std::nullopt;
        if (!mapped) return note(*node, "its axes are not constant or out of range"), 0;
        auxiliary.push_back({1, intsConstant(node->output(0)->name() + "_axes", *mapped)});
      }
      break;
    }
    case Rule::Slice: {
      std::optional<std::vector<int64_t>> axes;
      if (node->input(3)) {
        axes = rewrite::constantInts(node->input(3));
      } else if (auto starts = rewrite::constantInts(node->input(1))) {
        axes.emplace(starts->size());
        std::iota(axes->begin(), axes->end(), 0);
      }
      auto mapped = axes ? mapAxes(*axes, *p) : std::nullopt;
      if (!mapped || opset_ < 10) return note(*node, "its axes are not constant inputs"), 0;
      auxiliary.push_back({3, intsConstant(node->output(0)->name() + "_axes", *mapped)});
      break;
    }
    }

    // Rewrite: the node reads the pre-Transpose layout; a Transpose of its outputs restores the
    // layout for its readers.
    for (auto& [i, v] : replaced)
      node->setInput(i, v);
    for (auto& [i, v] : auxiliary) {
      if (i < node->inputs().size()) {
        if (Value* old = node->input(i); old && old->isInitializer())
          replacedConstants_.insert(old);
        node->setInput(i, v);
      } else {
        node->addInput(v);
      }
    }
    for (auto& [key, value] : attributes)
      node->setAttribute(key, value);
    const Perm pInverse = inverse(*p);
    Node* anchor = rewrite::nodeAfter(g_, node);
    for (Value* out : node->outputs()) {
      if (!out) continue;
      const std::vector<Use> uses = out->uses();
      const ValueType type = out->type();
      const Perm before = layoutOf(out, p->size());
      const bool hadLayout = layout_.count(out) != 0;
      Node* t =
          g_.insertNodeBefore(anchor, "Transpose", {out}, {g_.uniqueName(out->name() + "_layout")});
      t->setName(g_.uniqueName(node->name() + "/layout"));
      t->setAttribute("perm", Attribute::ofInts(*p));
      for (const Location& loc : node->locations())
        t->addLocation(loc);
      Value* restored = t->output(0);
      for (const Use& use : uses)
        use.user->setInput(use.inputIndex, restored);
      restored->setType(type);
      if (type.kind == TypeKind::Tensor && type.shape.hasRank() && type.shape.rank() == p->size()) {
        std::vector<Dim> dims(p->size());
        for (size_t i = 0; i < p->size(); ++i)
          dims[static_cast<size_t>((*p)[i])] = type.shape[i];
        out->setType(ValueType::tensor(type.dtype, Shape(dims)));
      } else if (type.kind == TypeKind::Tensor) {
        out->setType(ValueType::tensor(type.dtype, Shape()));
      }
      if (out->isGraphOutput()) {
        // The graph output keeps its name and layout: the restoring Transpose takes both.
        for (size_t k = 0; k < g_.outputs().size(); ++k)
          if (g_.outputs()[k] == out) g_.setOutput(k, restored);
        const std::string a = out->name(), b = restored->name();
        g_.renameValue(out, g_.uniqueName(a + "_renamed"));
        g_.renameValue(restored, a);
        g_.renameValue(out, b);
        if (hadLayout) layout_[restored] = before;
        layout_.erase(out);
      } else {
        layout_[out] = compose(before, pInverse);
      }
    }
    return 1;
  }

  size_t eraseDeadTransposes() {
    size_t count = 0;
    for (bool again = true; again;) {
      again = false;
      std::vector<Node*> dead;
      for (const auto& node : g_.nodes())
        if (permOf(*node) && rewrite::outputUnused(*node, 0)) dead.push_back(node.get());
      for (Node* node : dead) {
        layout_.erase(node->output(0));
        g_.eraseNode(node);
        again = true;
        ++count;
      }
    }
    return count;
  }

  // Model::sourceLayouts by the names values have now: an identity layout needs no entry.
  void writeLayouts() {
    if (!model_) return;
    for (const auto& v : g_.values()) {
      auto it = layout_.find(v.get());
      if (it == layout_.end() || isIdentity(it->second))
        model_->sourceLayouts.erase(v->name());
      else
        model_->sourceLayouts[v->name()] = it->second;
    }
  }

  Graph& g_;
  Model* model_;
  int64_t opset_;
  bool explain_;
  std::map<const Value*, Perm> layout_; // value → perm from its source tensor's layout
  std::map<std::pair<Value*, Perm>, Value*> relaid_;
  std::set<Value*> replacedConstants_;
};

size_t sinkGraph(Graph& graph, PassContext& context) {
  size_t changes = 0;
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs())
      changes += sinkGraph(*sub, context);
  // Subgraph values share the model's layout map with the main graph only by name; the main
  // graph's are the ones compare reads.
  Model* model = graph.parent() ? nullptr : context.model;
  changes += Sinker(graph, model, context.opset(), context.explain).run();
  return changes;
}

class SinkTransposes : public Pass {
 public:
  std::string_view name() const override { return "sink-transposes"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return sinkGraph(graph, context) > 0;
  }
};

} // namespace

std::unique_ptr<Pass> makeSinkTransposesPass() { return std::make_unique<SinkTransposes>(); }

} // namespace kiln
