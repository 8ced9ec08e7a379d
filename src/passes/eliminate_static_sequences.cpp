// eliminate-static-sequences: a sequence (or optional) whose length and element positions are
// known at conversion time is bookkeeping over tensors; its readers become tensor ops, since
// neither .ms nor .om has a sequence type.
//
//   %s = SequenceConstruct(%a, %b, %c)
//   %t = SequenceErase(%s, 1)                     (constant or absent positions)
//   %y = SequenceAt(%t, -1)                  →   %y = Identity(%c)
//   %n = SequenceLength(%t)                  →   init %n = i64[] {2}
//   %z = ConcatFromSequence(%t) {axis = 0}   →   %z = Concat(%a, %c) {axis = 0}
//   %p = SplitToSequence(%x) {axis = 1, keepdims = 0}
//   %q = SequenceAt(%p, 0)                   →   %x0, %x1 = Split(%x, [1, 1]) {axis = 1}
//                                                %q = Identity(Squeeze(%x0, [1]))
//
// Each sequence value is tracked as a list of tensor values through SequenceEmpty,
// SequenceConstruct, SequenceInsert/SequenceErase, SplitToSequence (whose Split is made only when
// a reader needs an element), Identity, and Optional/OptionalGetElement (an optional built in the
// graph). Readers become tensor ops: SequenceAt (constant position, negative allowed) the element,
// SequenceLength a constant, ConcatFromSequence a Concat (Unsqueeze first for new_axis = 1),
// OptionalHasElement a constant. A SequenceMap over known sequences is unrolled (its body inlined
// once per element with fresh names), and so is a Loop with a constant trip count whose carried
// sequences start known and are only appended to. An If on a constant condition was already
// folded (fold-constant-if). After a change the graph is settled again (inference, folding,
// fold-constant-if, dead nodes): an unrolled body's iteration counts become constants there and
// the next sweep resolves what they index. What stays unknown (a sequence that is a graph input or
// output, a position computed at run time) is left as it is, and the targets refuse it.
//
// A position held by a graph input with a default (an initializer-backed input) counts as a
// constant only when converting for a target: .ms and .om inputs carry no defaults, and both
// backends write such an input as its default value.
#include <algorithm>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/ir/constant.h"
#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

constexpr int kMaxSweeps = 16;
// Unrolling stops short of models this would blow up: trip count × body nodes.
constexpr size_t kMaxUnrolledNodes = 8192;
constexpr int64_t kMaxTripCount = 1024;

using ValueMap = std::unordered_map<const Value*, Value*>;

bool isStandard(const Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

bool isSequenceKind(const Value* v) {
  return v && (v->type().kind == TypeKind::Sequence || v->type().kind == TypeKind::Optional);
}

Value* mapped(const ValueMap& map, Value* v) {
  if (!v) return nullptr;
  auto it = map.find(v);
  return it == map.end() ? v : it->second;
}

// A copied value's type: kind and dtype, and the dims that are static. Symbolic dims of a body
// name a size per iteration, not one size of the graph the copy lands in.
ValueType copiedType(const ValueType& type) {
  ValueType out = type;
  if (type.kind != TypeKind::Tensor || !type.shape.hasRank()) return out;
  std::vector<Dim> dims;
  for (const Dim& d : type.shape.dims())
    dims.push_back(d.isStatic() ? d : Dim());
  out.shape = Shape(std::move(dims));
  return out;
}

GraphPtr cloneGraph(const Graph& src, Graph* parent, ValueMap& map);

// Copies the nodes (and initializers) of `body` into `g` before `anchor`, with names fresh in `g`;
// `map` takes body values to their copies (inputs mapped by the caller) and gains every new one.
// Node names get `suffix`, so unrolled copies stay distinct; locations are kept.
void copyNodes(const Graph& body, Graph& g, Node* anchor, ValueMap& map, const std::string& suffix,
               bool keepTypes) {
  for (Value* init : body.initializers()) {
    if (map.count(init)) continue; // an initializer-backed body input the caller bound
    Value* copy = g.addInitializer(g.uniqueName(init->name()), init->initializer());
    map[init] = copy;
  }
  for (const auto& node : body.nodes()) {
    std::vector<Value*> inputs;
    for (Value* in : node->inputs())
      inputs.push_back(mapped(map, in));
    std::vector<std::string> names;
    for (Value* out : node->outputs())
      names.push_back(out ? g.uniqueName(out->name()) : std::string());
    Node* copy = g.insertNodeBefore(anchor, node->opType(), inputs, names);
    copy->setDomain(node->domain());
    copy->setName(node->name().empty() ? node->name() : node->name() + suffix);
    copy->setDocString(node->docString());
    for (const Location& loc : node->locations())
      copy->addLocation(loc);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      if (Value* out = node->output(i)) {
        copy->output(i)->setType(keepTypes ? out->type() : copiedType(out->type()));
        map[out] = copy->output(i);
      }
    for (const auto& [key, attr] : node->attributes()) {
      if (attr.kind() == AttrKind::Graph && attr.asGraph()) {
        copy->setAttribute(key, Attribute::ofGraph(cloneGraph(*attr.asGraph(), &g, map)));
      } else if (attr.kind() == AttrKind::Graphs) {
        std::vector<GraphPtr> graphs;
        for (const GraphPtr& sub : attr.asGraphs())
          graphs.push_back(sub ? cloneGraph(*sub, &g, map) : nullptr);
        copy->setAttribute(key, Attribute::ofGraphs(std::move(graphs)));
      } else {
        copy->setAttribute(key, attr);
      }
    }
  }
}

// A copy of a nested subgraph whose reads of copied values go to the copies.
GraphPtr cloneGraph(const Graph& src, Graph* parent, ValueMap& map) {
  auto g = std::make_shared<Graph>(src.name(), parent);
  g->setDocString(src.docString());
  for (Value* in : src.inputs()) {
    Value* v = in->isInitializer() ? g->addInitializer(g->uniqueName(in->name()), in->initializer())
                                   : g->addValue(g->uniqueName(in->name()));
    v->setType(in->type());
    g->addInput(v);
    map[in] = v;
  }
  copyNodes(src, *g, nullptr, map, "", true);
  for (Value* out : src.outputs())
    g->addOutput(mapped(map, out));
  return g;
}

// One element of a known sequence: a tensor value, or output `index` of a SplitToSequence whose
// Split is only made when a rewrite needs the element.
struct Element {
  Value* value = nullptr;
  Node* split = nullptr;
  size_t index = 0;
};

// A SplitToSequence's parts: `sizes` when they are constants, else `runtimeSplit` (a 1-D split
// tensor of static length); `squeeze` when keepdims = 0 drops the axis of size-1 parts.
struct SplitPlan {
  size_t count = 0;
  std::vector<int64_t> sizes;
  Value* runtimeSplit = nullptr;
  int64_t axis = 0;
  bool squeeze = false;
};

class Eliminator {
 public:
  Eliminator(PassContext& context) : context_(context), opset_(context.opset()) {}

  // One walk over `g` and its subgraphs, in order; true when it changed the graph.
  bool sweep(Graph& g) {
    sequences_.clear();
    optionals_.clear();
    splits_.clear();
    return walk(g);
  }

 private:
  bool walk(Graph& g) {
    bool changed = false;
    std::vector<Node*> order;
    for (const auto& node : g.nodes())
      order.push_back(node.get());
    for (Node* node : order) {
      for (Graph* sub : node->subgraphs())
        changed |= walk(*sub);
      if (isStandard(*node)) changed |= visit(node);
    }
    return changed;
  }

  void decline(const Node& n, const std::string& why) {
    if (context_.explain)
      spdlog::debug("eliminate-static-sequences: {} ({}) stays: {}", n.name(), n.opType(), why);
  }

  // A constant tensor: an initializer (an input's default only for a target), or a Constant.
  std::optional<Tensor> constantOf(const Value* v) {
    if (!v) return std::nullopt;
    if (v->isInitializer()) {
      if (v->isGraphInput()) {
        if (context_.targetName.empty()) return std::nullopt;
        if (noted_.insert(v).second)
          context_.notes.push_back(fmt::format(
              "graph input '{}' positions a sequence and is read as its default value: .{} "
              "inputs carry no defaults",
              v->name(), context_.targetName.substr(0, context_.targetName.find(':'))));
      }
      return v->initializer();
    }
    const Node* p = v->producer();
    if (p && p->opType() == "Constant" && isStandard(*p)) return constantNodeValue(*p);
    return std::nullopt;
  }

  std::optional<std::vector<int64_t>> constantInts(const Value* v) {
    auto t = constantOf(v);
    if (!t) return std::nullopt;
    std::vector<int64_t> out;
    if (t->dtype() == DType::Int64) return t->copyValues<int64_t>();
    if (t->dtype() != DType::Int32) return std::nullopt;
    for (int32_t x : t->copyValues<int32_t>())
      out.push_back(x);
    return out;
  }

  std::optional<int64_t> constantScalar(const Value* v) {
    auto values = constantInts(v);
    if (!values || values->size() != 1) return std::nullopt;
    return values->front();
  }

  std::optional<bool> constantBool(const Value* v) {
    auto t = constantOf(v);
    if (!t || t->elementCount() != 1 || t->dtype() != DType::Bool) return std::nullopt;
    return t->copyValues<uint8_t>()[0] != 0;
  }

  const std::vector<Element>* sequenceOf(const Value* v) const {
    auto it = sequences_.find(v);
    return it == sequences_.end() ? nullptr : &it->second;
  }

  // A position input normalized into [0, hi]; `fallback` when absent; nullopt when unknown or out
  // of range (the node then fails at run time, so it is left as it is).
  std::optional<int64_t> position(const Node& n, size_t i, int64_t length, int64_t fallback,
                                  int64_t hi) {
    if (!n.input(i)) return fallback;
    auto p = constantScalar(n.input(i));
    if (!p) return std::nullopt;
    int64_t q = *p < 0 ? *p + length : *p;
    if (q < 0 || q > hi) return std::nullopt;
    return q;
  }

  Value* intConstant(Graph& g, const std::string& base, const std::vector<int64_t>& values,
                     bool scalar) {
    std::vector<int64_t> dims;
    if (!scalar) dims.push_back(static_cast<int64_t>(values.size()));
    return g.addInitializer(g.uniqueName(base), Tensor::fromValues<int64_t>(DType::Int64, dims, values));
  }

  // Unsqueeze/Squeeze of one axis, as the model's opset writes it.
  Node* axisNode(Graph& g, Node* anchor, const std::string& op, Value* x, int64_t axis,
                 const std::string& name) {
    Node* n = nullptr;
    if (opset_ >= 13) {
      n = g.insertNodeBefore(anchor, op, {x, intConstant(g, name + "_axes", {axis}, false)},
                             {g.uniqueName(name)});
    } else {
      n = g.insertNodeBefore(anchor, op, {x}, {g.uniqueName(name)});
      n->setAttribute("axes", Attribute::ofInts({axis}));
    }
    ValueType type = ValueType::tensor(x->dtype(), Shape());
    if (x->type().kind == TypeKind::Tensor && x->shape().hasRank()) {
      std::vector<Dim> dims = x->shape().dims();
      const auto rank = static_cast<int64_t>(dims.size());
      if (op == "Unsqueeze") {
        const int64_t a = axis < 0 ? axis + rank + 1 : axis;
        if (a >= 0 && a <= rank) {
          dims.insert(dims.begin() + a, Dim::known(1));
          type.shape = Shape(dims);
        }
      } else {
        const int64_t a = axis < 0 ? axis + rank : axis;
        if (a >= 0 && a < rank) {
          dims.erase(dims.begin() + a);
          type.shape = Shape(dims);
        }
      }
    }
    n->output(0)->setType(type);
    return n;
  }

  // ---- SplitToSequence -------------------------------------------------------------------

  std::optional<SplitPlan> splitPlan(const Node& n) {
    const Value* x = n.input(0);
    if (!x) return std::nullopt;
    SplitPlan plan;
    const Attribute* axisAttr = n.attribute("axis");
    plan.axis = axisAttr && axisAttr->kind() == AttrKind::Int ? axisAttr->asInt() : 0;
    const Attribute* keep = n.attribute("keepdims");
    const bool keepdims = !keep || keep->kind() != AttrKind::Int || keep->asInt() != 0;
    std::optional<int64_t> dim;
    if (x->type().kind == TypeKind::Tensor && x->shape().hasRank()) {
      const auto rank = static_cast<int64_t>(x->shape().rank());
      const int64_t a = plan.axis < 0 ? plan.axis + rank : plan.axis;
      if (a < 0 || a >= rank) return std::nullopt;
      if (x->shape()[static_cast<size_t>(a)].isStatic())
        dim = x->shape()[static_cast<size_t>(a)].value();
    }
    Value* split = n.input(1);
    if (!split) {
      if (!dim) return std::nullopt;
      plan.sizes.assign(static_cast<size_t>(*dim), 1);
      plan.squeeze = !keepdims;
    } else if (auto sizes = constantInts(split)) {
      auto t = constantOf(split);
      if (t->dims().empty()) { // a scalar: parts of that size, the last one shorter
        const int64_t chunk = sizes->front();
        if (!dim || chunk <= 0) return std::nullopt;
        for (int64_t left = *dim; left > 0; left -= chunk)
          plan.sizes.push_back(std::min(chunk, left));
      } else {
        int64_t sum = 0;
        for (int64_t s : *sizes) {
          if (s < 0) return std::nullopt;
          sum += s;
        }
        if (dim && sum != *dim) return std::nullopt; // fails at run time
        plan.sizes = *sizes;
      }
    } else {
      // Sizes known only at run time: the count is the split tensor's static length.
      if (split->type().kind != TypeKind::Tensor || !split->shape().hasRank() ||
          split->shape().rank() != 1 || !split->shape()[0].isStatic())
        return std::nullopt;
      plan.count = static_cast<size_t>(split->shape()[0].value());
      plan.runtimeSplit = split;
      return plan;
    }
    plan.count = plan.sizes.size();
    return plan;
  }

  // The Split (and Squeezes) a SplitToSequence stands for, made once per sweep; nullptr when the
  // model's opset cannot take run-time split sizes.
  const std::vector<Value*>* splitElements(Node* sts) {
    if (auto it = splits_.find(sts); it != splits_.end()) return &it->second;
    auto plan = splitPlan(*sts);
    if (!plan || plan->count == 0) return nullptr;
    if (plan->runtimeSplit && opset_ < 13) {
      decline(*sts, "split sizes known only at run time, which Split takes from opset 13");
      return nullptr;
    }
    Graph& g = *sts->owner();
    Node* anchor = rewrite::nodeAfter(g, sts);
    Value* x = sts->input(0);
    const std::string base = sts->output(0) ? sts->output(0)->name() : std::string("split");
    std::vector<Value*> inputs = {x};
    if (opset_ >= 13)
      inputs.push_back(plan->runtimeSplit ? plan->runtimeSplit
                                          : intConstant(g, base + "_split", plan->sizes, false));
    std::vector<std::string> names;
    for (size_t i = 0; i < plan->count; ++i)
      names.push_back(g.uniqueName(fmt::format("{}_{}", base, i)));
    Node* split = g.insertNodeBefore(anchor, "Split", inputs, names);
    split->setName(sts->name());
    for (const Location& loc : sts->locations())
      split->addLocation(loc);
    split->setAttribute("axis", Attribute::ofInt(plan->axis));
    if (opset_ < 13) split->setAttribute("split", Attribute::ofInts(plan->sizes));
    std::vector<Value*> parts;
    for (size_t i = 0; i < plan->count; ++i) {
      ValueType type = ValueType::tensor(x->dtype(), Shape());
      if (!plan->runtimeSplit && x->type().kind == TypeKind::Tensor && x->shape().hasRank()) {
        std::vector<Dim> dims = x->shape().dims();
        const auto rank = static_cast<int64_t>(dims.size());
        dims[static_cast<size_t>(plan->axis < 0 ? plan->axis + rank : plan->axis)] =
            Dim::known(plan->sizes[i]);
        type.shape = Shape(std::move(dims));
      }
      split->output(i)->setType(type);
      Value* part = split->output(i);
      if (plan->squeeze) {
        Node* sq = axisNode(g, anchor, "Squeeze", part, plan->axis, part->name() + "_squeezed");
        sq->setName(sts->name());
        for (const Location& loc : sts->locations())
          sq->addLocation(loc);
        part = sq->output(0);
      }
      parts.push_back(part);
    }
    return &(splits_[sts] = std::move(parts));
  }

  Value* materialize(const Element& e) {
    if (e.value) return e.value;
    const std::vector<Value*>* parts = splitElements(e.split);
    return parts && e.index < parts->size() ? (*parts)[e.index] : nullptr;
  }

  // ---- rewrites --------------------------------------------------------------------------

  // `node`'s only output becomes `with`: its readers read `with`, or, for a graph output, an
  // Identity keeps the name.
  void replaceWith(Node* node, Value* with) {
    Graph& g = *node->owner();
    Value* out = node->output(0);
    if (out->isGraphOutput()) {
      rewrite::replaceChain(g, {node}, "Identity", "", {with}, {});
      return;
    }
    g.replaceAllUsesWith(out, with);
    g.eraseNode(node);
  }

  bool rewriteSequenceAt(Node* n) {
    const auto* seq = sequenceOf(n->input(0));
    if (!seq) return false;
    const auto length = static_cast<int64_t>(seq->size());
    auto p = position(*n, 1, length, -1, length - 1);
    if (!n->input(1) || !p) {
      decline(*n, "the position is not a constant within the sequence");
      return false;
    }
    Value* element = materialize((*seq)[static_cast<size_t>(*p)]);
    if (!element) return false;
    replaceWith(n, element);
    return true;
  }

  bool rewriteConcat(Node* n) {
    const auto* seq = sequenceOf(n->input(0));
    const Attribute* axisAttr = n->attribute("axis");
    if (!seq || seq->empty() || !axisAttr || axisAttr->kind() != AttrKind::Int) return false;
    const int64_t axis = axisAttr->asInt();
    const Attribute* newAxisAttr = n->attribute("new_axis");
    const bool newAxis =
        newAxisAttr && newAxisAttr->kind() == AttrKind::Int && newAxisAttr->asInt() != 0;
    std::vector<Value*> parts;
    for (const Element& e : *seq) {
      Value* v = materialize(e);
      if (!v) return false;
      parts.push_back(v);
    }
    Graph& g = *n->owner();
    if (newAxis)
      for (Value*& part : parts) {
        Node* u = axisNode(g, n, "Unsqueeze", part, axis, part->name() + "_unsqueezed");
        u->setName(n->name());
        for (const Location& loc : n->locations())
          u->addLocation(loc);
        part = u->output(0);
      }
    Node::AttributeList attrs;
    attrs.emplace_back("axis", Attribute::ofInt(axis));
    rewrite::replaceChain(g, {n}, "Concat", "", parts, attrs);
    return true;
  }

  // A SequenceMap over known sequences: the body once per element.
  bool unrollSequenceMap(Node* n) {
    const Attribute* bodyAttr = n->attribute("body");
    if (!bodyAttr || bodyAttr->kind() != AttrKind::Graph || !bodyAttr->asGraph()) return false;
    GraphPtr body = bodyAttr->asGraph(); // alive while the node goes
    if (body->inputs().size() != n->inputs().size() ||
        body->outputs().size() != n->outputs().size() || n->inputs().empty())
      return false;
    std::optional<size_t> length;
    for (size_t k = 0; k < n->inputs().size(); ++k) {
      const Value* in = n->input(k);
      if (!in) return false;
      const auto* seq = sequenceOf(in);
      if (!seq) {
        if (k == 0 || isSequenceKind(in)) {
          decline(*n, fmt::format("input '{}' is not a sequence known here", in->name()));
          return false;
        }
        continue; // a tensor every iteration reads as it is
      }
      if (length && *length != seq->size()) return false; // fails at run time
      length = seq->size();
    }
    if (*length * std::max<size_t>(body->nodeCount(), 1) > kMaxUnrolledNodes) return false;
    // Every element first: a Split must not land between copies.
    std::vector<std::vector<Value*>> elements(n->inputs().size());
    for (size_t k = 0; k < n->inputs().size(); ++k)
      if (const auto* seq = sequenceOf(n->input(k)))
        for (const Element& e : *seq) {
          Value* v = materialize(e);
          if (!v) return false;
          elements[k].push_back(v);
        }
    Graph& g = *n->owner();
    std::vector<std::vector<Value*>> results(n->outputs().size());
    for (size_t i = 0; i < *length; ++i) {
      ValueMap map;
      for (size_t k = 0; k < n->inputs().size(); ++k)
        map[body->inputs()[k]] = elements[k].empty() ? n->input(k) : elements[k][i];
      copyNodes(*body, g, n, map, fmt::format("_{}", i), false);
      for (size_t j = 0; j < body->outputs().size(); ++j)
        results[j].push_back(mapped(map, body->outputs()[j]));
    }
    // Each output is the sequence of its per-element results.
    std::vector<std::pair<Value*, Value*>> outputs;
    for (size_t j = 0; j < n->outputs().size(); ++j) {
      Value* out = n->output(j);
      if (!out) continue;
      Node* made = nullptr;
      if (results[j].empty()) {
        made = g.insertNodeBefore(n, "SequenceEmpty", {}, {g.uniqueName(out->name() + "_seq")});
        const DType dtype = body->outputs()[j]->dtype();
        if (dtype != DType::Undefined)
          made->setAttribute("dtype", Attribute::ofInt(dtypeToOnnx(dtype)));
      } else {
        made = g.insertNodeBefore(n, "SequenceConstruct", results[j],
                                  {g.uniqueName(out->name() + "_seq")});
      }
      made->setName(n->name());
      for (const Location& loc : n->locations())
        made->addLocation(loc);
      made->output(0)->setType(out->type());
      outputs.emplace_back(out, made->output(0));
    }
    if (context_.explain)
      spdlog::debug("eliminate-static-sequences: {} (SequenceMap) unrolled over {} elements",
                    n->name(), *length);
    replaceOutputs(n, outputs);
    return true;
  }

  // Rewires `node`'s outputs to their replacements and erases it; graph outputs keep their names.
  void replaceOutputs(Node* node, const std::vector<std::pair<Value*, Value*>>& outputs) {
    Graph& g = *node->owner();
    std::vector<std::pair<std::string, Value*>> renamed;
    for (const auto& [out, with] : outputs) {
      if (out->isGraphOutput()) renamed.emplace_back(out->name(), with);
      g.replaceAllUsesWith(out, with);
    }
    g.eraseNode(node);
    for (auto& [name, value] : renamed) {
      const bool local = value->owner() == &g && value->producer() && !value->isGraphInput() &&
                         std::count(g.outputs().begin(), g.outputs().end(), value) == 1;
      if (local) {
        g.renameValue(value, name);
        continue;
      }
      Node* copy = g.appendNode("Identity", {value}, {name});
      copy->output(0)->setType(value->type());
      for (size_t i = 0; i < g.outputs().size(); ++i)
        if (g.outputs()[i] == value) {
          g.setOutput(i, copy->output(0));
          break;
        }
    }
  }

  // Whether `g` (nested subgraphs included) reads or makes a sequence or optional.
  bool touchesSequences(const Graph& g) const {
    for (const auto& node : g.nodes()) {
      for (const Value* v : node->inputs())
        if (v && (isSequenceKind(v) || sequences_.count(v) || optionals_.count(v))) return true;
      for (const Value* v : node->outputs())
        if (isSequenceKind(v)) return true;
      for (const Graph* sub : node->subgraphs())
        if (touchesSequences(*sub)) return true;
    }
    return false;
  }

  // Whether the body's condition output is its condition input (maybe through an Identity) or a
  // constant true: the loop then runs its full trip count.
  bool keepsRunning(const Graph& body) {
    const Value* out = body.outputs()[0];
    const Value* in = body.inputs()[1];
    if (out == in) return true;
    if (const Node* p = out->producer(); p && p->opType() == "Identity" && p->input(0) == in)
      return true;
    auto c = constantBool(out);
    return c && *c;
  }

  // Whether carried sequence `k` of `body` only grows by insertions at the end.
  static bool onlyAppends(const Graph& body, size_t k) {
    const Value* in = body.inputs()[2 + k];
    const Value* v = body.outputs()[1 + k];
    while (v != in) {
      const Node* p = v ? v->producer() : nullptr;
      if (!p || p->owner() != &body) return false;
      if (p->opType() == "SequenceInsert" && !p->input(2))
        v = p->input(0);
      else if (p->opType() == "Identity")
        v = p->input(0);
      else
        return false;
    }
    return true;
  }

  // A Loop with a constant trip count that involves sequences: the body once per iteration.
  bool unrollLoop(Node* n) {
    const Attribute* bodyAttr = n->attribute("body");
    if (!bodyAttr || bodyAttr->kind() != AttrKind::Graph || !bodyAttr->asGraph()) return false;
    GraphPtr body = bodyAttr->asGraph();
    const size_t carried = n->inputs().size() < 2 ? 0 : n->inputs().size() - 2;
    if (n->inputs().size() < 2 || body->inputs().size() != carried + 2 ||
        body->outputs().size() < carried + 1 || n->outputs().size() != body->outputs().size() - 1)
      return false;
    bool involved = touchesSequences(*body);
    for (size_t k = 0; k < carried; ++k) {
      const Value* init = n->input(2 + k);
      if (!init) return false;
      const bool sequence = isSequenceKind(init) || isSequenceKind(body->inputs()[2 + k]) ||
                            sequences_.count(init) || optionals_.count(init);
      if (!sequence) continue;
      involved = true;
      if (!sequences_.count(init) && !optionals_.count(init)) {
        decline(*n, fmt::format("carried sequence '{}' is not known here", init->name()));
        return false;
      }
      if (sequences_.count(init) && !onlyAppends(*body, k)) {
        decline(*n, fmt::format("the body does more than append to '{}'", init->name()));
        return false;
      }
    }
    if (!involved) return false;
    auto trips = constantScalar(n->input(0));
    if (!n->input(0) || !trips || *trips < 0 || *trips > kMaxTripCount) {
      decline(*n, "the trip count is not a constant");
      return false;
    }
    if (n->input(1)) {
      auto c = constantBool(n->input(1));
      if (!c || !*c) {
        decline(*n, "the initial condition is not a constant true");
        return false;
      }
    }
    if (!keepsRunning(*body)) {
      decline(*n, "the body's condition may stop the loop early");
      return false;
    }
    const size_t scans = body->outputs().size() - 1 - carried;
    if (*trips == 0 && scans > 0) return false; // empty scan outputs have no static shape
    if (static_cast<size_t>(*trips) * std::max<size_t>(body->nodeCount(), 1) > kMaxUnrolledNodes)
      return false;

    Graph& g = *n->owner();
    const std::string base = !n->name().empty() ? n->name()
                             : n->output(0)    ? n->output(0)->name()
                                               : std::string("loop");
    Value* alwaysTrue = g.addInitializer(g.uniqueName(base + "_cond"),
                                         Tensor::fromValues<uint8_t>(DType::Bool, {}, {1}));
    std::vector<Value*> state(n->inputs().begin() + 2, n->inputs().end());
    std::vector<std::vector<Value*>> scanned(scans);
    for (int64_t i = 0; i < *trips; ++i) {
      ValueMap map;
      map[body->inputs()[0]] = intConstant(g, fmt::format("{}_iter{}", base, i), {i}, true);
      map[body->inputs()[1]] = alwaysTrue;
      for (size_t k = 0; k < carried; ++k)
        map[body->inputs()[2 + k]] = state[k];
      copyNodes(*body, g, n, map, fmt::format("_{}", i), false);
      for (size_t k = 0; k < carried; ++k)
        state[k] = mapped(map, body->outputs()[1 + k]);
      for (size_t j = 0; j < scans; ++j)
        scanned[j].push_back(mapped(map, body->outputs()[1 + carried + j]));
    }
    std::vector<std::pair<Value*, Value*>> outputs;
    for (size_t k = 0; k < carried; ++k)
      if (Value* out = n->output(k)) outputs.emplace_back(out, state[k]);
    for (size_t j = 0; j < scans; ++j) {
      Value* out = n->output(carried + j);
      if (!out) continue;
      std::vector<Value*> rows;
      for (Value* v : scanned[j]) {
        Node* u = axisNode(g, n, "Unsqueeze", v, 0, v->name() + "_row");
        u->setName(n->name());
        rows.push_back(u->output(0));
      }
      Node* cat = g.insertNodeBefore(n, "Concat", rows, {g.uniqueName(out->name() + "_rows")});
      cat->setName(n->name());
      cat->setAttribute("axis", Attribute::ofInt(0));
      cat->output(0)->setType(copiedType(out->type()));
      outputs.emplace_back(out, cat->output(0));
    }
    if (context_.explain)
      spdlog::debug("eliminate-static-sequences: {} (Loop) unrolled over {} iterations",
                    n->name(), *trips);
    replaceOutputs(n, outputs);
    return true;
  }

  // Records what `n` makes, or rewrites it when it reads a known sequence; true when the graph
  // changed.
  bool visit(Node* n) {
    const std::string& op = n->opType();
    Value* out = n->output(0);
    if (op == "SequenceEmpty") {
      if (out) sequences_[out] = {};
    } else if (op == "SequenceConstruct") {
      std::vector<Element> elements;
      for (Value* in : n->inputs()) {
        if (!in) return false;
        elements.push_back({in, nullptr, 0});
      }
      if (out) sequences_[out] = std::move(elements);
    } else if (op == "SequenceInsert") {
      const auto* seq = sequenceOf(n->input(0));
      if (!seq || !n->input(1) || !out) return false;
      const auto length = static_cast<int64_t>(seq->size());
      auto p = position(*n, 2, length, length, length);
      if (!p) return false;
      std::vector<Element> elements = *seq;
      elements.insert(elements.begin() + *p, Element{n->input(1), nullptr, 0});
      sequences_[out] = std::move(elements);
    } else if (op == "SequenceErase") {
      const auto* seq = sequenceOf(n->input(0));
      if (!seq || seq->empty() || !out) return false;
      const auto length = static_cast<int64_t>(seq->size());
      auto p = position(*n, 1, length, length - 1, length - 1);
      if (!p) return false;
      std::vector<Element> elements = *seq;
      elements.erase(elements.begin() + *p);
      sequences_[out] = std::move(elements);
    } else if (op == "SplitToSequence") {
      auto plan = splitPlan(*n);
      if (!plan || !out) return false;
      std::vector<Element> elements;
      for (size_t i = 0; i < plan->count; ++i)
        elements.push_back({nullptr, n, i});
      sequences_[out] = std::move(elements);
    } else if (op == "Identity") {
      if (const auto* seq = sequenceOf(n->input(0)); seq && out)
        sequences_[out] = *seq;
      else if (auto it = optionals_.find(n->input(0)); it != optionals_.end() && out)
        optionals_[out] = it->second;
    } else if (op == "Optional") {
      if (out) optionals_[out] = n->input(0); // nullptr: an empty optional
    } else if (op == "OptionalHasElement") {
      const Value* in = n->input(0);
      bool present = false;
      if (auto it = optionals_.find(in); it != optionals_.end())
        present = it->second != nullptr;
      else if (sequenceOf(in))
        present = true; // opset 18: a plain sequence is present
      else
        return false;
      n->owner()->replaceNodeWithConstants(
          n, {Tensor::fromValues<uint8_t>(DType::Bool, {}, {present ? uint8_t(1) : uint8_t(0)})});
      return true;
    } else if (op == "OptionalGetElement") {
      auto it = optionals_.find(n->input(0));
      if (it == optionals_.end() || !it->second || !out) return false;
      replaceWith(n, it->second);
      return true;
    } else if (op == "SequenceAt") {
      return rewriteSequenceAt(n);
    } else if (op == "SequenceLength") {
      const auto* seq = sequenceOf(n->input(0));
      if (!seq) return false;
      n->owner()->replaceNodeWithConstants(
          n, {Tensor::fromValues<int64_t>(DType::Int64, {}, {static_cast<int64_t>(seq->size())})});
      return true;
    } else if (op == "ConcatFromSequence") {
      return rewriteConcat(n);
    } else if (op == "SequenceMap") {
      return unrollSequenceMap(n);
    } else if (op == "Loop") {
      return unrollLoop(n);
    }
    return false;
  }

  PassContext& context_;
  int64_t opset_;
  std::unordered_map<const Value*, std::vector<Element>> sequences_;
  // An optional built in the graph: its element (a tensor or a sequence), nullptr when empty.
  std::unordered_map<const Value*, Value*> optionals_;
  std::unordered_map<const Node*, std::vector<Value*>> splits_;
  std::unordered_set<const Value*> noted_;
};

bool hasSequenceOps(const Graph& g) {
  for (const auto& node : g.nodes()) {
    const std::string& op = node->opType();
    if (op.rfind("Sequence", 0) == 0 || op.rfind("Optional", 0) == 0 ||
        op == "SplitToSequence" || op == "ConcatFromSequence")
      return true;
    for (const Graph* sub : node->subgraphs())
      if (hasSequenceOps(*sub)) return true;
  }
  return false;
}

class EliminateStaticSequences : public Pass {
 public:
  std::string_view name() const override { return "eliminate-static-sequences"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!hasSequenceOps(graph)) return false;
    // After a change: inference and folding make unrolled iteration counts and computed positions
    // constants, fold-constant-if takes Ifs whose condition became one, and dead sequence ops go.
    std::vector<std::unique_ptr<Pass>> settle;
    for (const char* name : {"infer-shapes", "propagate-shape-values", "fold-constants",
                             "remove-noops", "fold-constant-if", "eliminate-dead-nodes"})
      settle.push_back(createPass(name));
    Eliminator eliminator(context);
    bool any = false;
    for (int sweep = 0; sweep < kMaxSweeps; ++sweep) {
      if (!eliminator.sweep(graph)) break;
      any = true;
      for (int round = 0; round < kMaxSweeps; ++round) {
        bool changed = false;
        for (auto& pass : settle) {
          KILN_ASSIGN_OR_RETURN(bool c, pass->run(graph, context));
          changed |= c;
        }
        if (!changed) break;
      }
    }
    return any;
  }
};

} // namespace

std::unique_ptr<Pass> makeEliminateStaticSequencesPass() {
  return std::make_unique<EliminateStaticSequences>();
}

} // namespace kiln
