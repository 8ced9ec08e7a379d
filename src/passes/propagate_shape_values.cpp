// propagate-shape-values: kiln's own data propagation over shape tensors, for what ONNX shape
// inference leaves open on dynamic models (it loses the rank of a Reshape whose target is
// computed, and stops at Cast/Slice chains over Shape).
//
//   %s = Shape(%x: f32[N,120,1,W]); %h = Slice(%s) {starts = [0], ends = [2]}
//   %c = Concat(%h, [-1]); %r: f32[*] = Reshape(%x, %c)
//     →  %r: f32[N,120,W] = Reshape(%x, [0, 0, -1])      (the Shape chain is left to die)
//
// A shape tensor's elements are tracked as dims (static, a dim symbol, or unknown) through
// Shape, Cast, Slice, Gather, Concat, (Un)Squeeze and integer Add/Sub/Mul/Div. With them:
// - Reshape, Expand, ConstantOfShape, Tile and Resize outputs get their rank and every dim that
//   follows (a -1 is worked out by cancelling symbols: [N,120,1,W] → [N,120,-1] gives W);
// - a shape value whose elements are all static is folded to a constant;
// - a computed Reshape target becomes a constant when each element is static, equal to the
//   input's dim at the same position (written 0: "copy", allowzero = 0) or, once, unknown
//   (written -1); a computed Expand shape likewise, with 1 where the input's dim is kept.
// Types only get more specific: a dim already static is never replaced. If branches and Loop/Scan
// bodies are walked too, seeing the shape values of the outer values they read.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "kiln/passes/pass.h"
#include "kiln/support/checked_math.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

// A shape tensor's elements; `scalar` for a 0-D tensor (one element).
struct Elems {
  std::vector<Dim> dims;
  bool scalar = false;
  bool allStatic() const {
    return std::all_of(dims.begin(), dims.end(), [](const Dim& d) { return d.isStatic(); });
  }
};

constexpr size_t kMaxElems = 64; // shape tensors are small; anything longer is data

bool isOnnx(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool isIndexType(DType t) { return t == DType::Int64 || t == DType::Int32; }

std::optional<int64_t> intAttr(const Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  if (!a || a->kind() != AttrKind::Int) return std::nullopt;
  return a->asInt();
}

std::optional<std::vector<int64_t>> intsAttr(const Node& node, const char* name) {
  const Attribute* a = node.attribute(name);
  if (!a || a->kind() != AttrKind::Ints) return std::nullopt;
  return a->asInts();
}

// An attribute (older opsets) or a constant input (newer ones); nullopt when neither is known,
// an empty optional-of-empty when the input is omitted and there is no attribute.
std::optional<std::vector<int64_t>> intsOf(const Node& node, const char* attr, size_t input) {
  if (auto a = intsAttr(node, attr)) return a;
  if (input < node.inputs().size() && node.input(input))
    return rewrite::constantInts(node.input(input));
  return std::vector<int64_t>{};
}

// Product of dims as a static factor times a multiset of symbols; unknown dims, and a factor that
// overflows, poison it.
struct Product {
  int64_t factor = 1;
  std::multiset<std::string> symbols;
  bool unknown = false;
  void times(const Dim& d) {
    if (d.isStatic()) {
      auto product = checkedMul<int64_t>(factor, d.value());
      if (product)
        factor = *product;
      else
        unknown = true;
    } else if (d.isSymbolic())
      symbols.insert(d.symbol());
    else
      unknown = true;
  }
};

// total / part as a dim, when the symbols cancel.
Dim quotient(const Product& total, const Product& part) {
  if (total.unknown || part.unknown || part.factor <= 0 || total.factor % part.factor != 0)
    return Dim();
  std::multiset<std::string> rest = total.symbols;
  for (const std::string& s : part.symbols) {
    auto it = rest.find(s);
    if (it == rest.end()) return Dim();
    rest.erase(it);
  }
  const int64_t factor = total.factor / part.factor;
  if (rest.empty()) return Dim::known(factor);
  if (rest.size() == 1 && factor == 1) return Dim::symbol(*rest.begin());
  return Dim();
}

class Propagation {
 public:
  // `outer` is the propagation of the enclosing graph when `graph` is an If branch or a Loop/Scan
  // body: the shape values it tracked are what the body's reads of outer values see.
  Propagation(Graph& graph, PassContext& context, const Propagation* outer = nullptr)
      : graph_(graph), context_(context), outer_(outer) {}

  bool run() {
    std::vector<Node*> order;
    for (const auto& node : graph_.nodes())
      order.push_back(node.get());
    for (Node* node : order) {
      // Bodies after the producers of the outer values they read (the graph's order), so those
      // values are known by now.
      for (Graph* sub : node->subgraphs())
        changed_ |= Propagation(*sub, context_, this).run();
      if (!isOnnx(*node) || !node->subgraphs().empty()) continue;
      propagate(*node);
      refineOutputs(*node);
      if (node->opType() == "Reshape") rewriteReshapeTarget(*node);
      if (node->opType() == "Expand") rewriteExpandShape(*node);
      foldIfStatic(*node);
    }
    return changed_;
  }

 private:
  std::optional<Elems> elemsOf(const Value* v) const {
    if (!v) return std::nullopt;
    for (const Propagation* p = this; p; p = p->outer_) {
      auto it = p->known_.find(v);
      if (it != p->known_.end()) return it->second;
    }
    const Tensor* t = rewrite::constantTensor(v);
    if (!t || t->dims().size() > 1 || t->elementCount() > kMaxElems) return std::nullopt;
    auto ints = rewrite::constantInts(v);
    if (!ints) return std::nullopt;
    Elems e;
    e.scalar = t->dims().empty();
    for (int64_t x : *ints)
      e.dims.push_back(Dim::known(x));
    return e;
  }

  void setElems(const Value* v, Elems e) {
    if (v && e.dims.size() <= kMaxElems) known_[v] = std::move(e);
  }

  // The value of a shape-computing node's output, from its inputs' values.
  void propagate(const Node& node) {
    const std::string& op = node.opType();
    const Value* out = node.output(0);
    if (!out || node.outputs().size() != 1) return;
    if (op == "Shape") {
      const Value* x = node.input(0);
      if (!x || !x->shape().hasRank()) return;
      const int64_t rank = static_cast<int64_t>(x->shape().rank());
      int64_t start = intAttr(node, "start").value_or(0);
      int64_t end = intAttr(node, "end").value_or(rank);
      if (start < 0) start += rank;
      if (end < 0) end += rank;
      start = std::clamp<int64_t>(start, 0, rank);
      end = std::clamp<int64_t>(end, 0, rank);
      Elems e;
      for (int64_t i = start; i < end; ++i)
        e.dims.push_back(x->shape()[static_cast<size_t>(i)]);
      setElems(out, std::move(e));
      return;
    }
    if (op == "Identity") {
      if (auto e = elemsOf(node.input(0))) setElems(out, *e);
      return;
    }
    if (op == "Cast") {
      auto to = intAttr(node, "to");
      auto dtype = to ? dtypeFromOnnx(static_cast<int32_t>(*to)) : std::nullopt;
      const Value* x = node.input(0);
      if (!dtype || !isIndexType(*dtype) || !x || !isIndexType(x->dtype())) return;
      if (auto e = elemsOf(x)) setElems(out, *e);
      return;
    }
    if (op == "Slice") return propagateSlice(node);
    if (op == "Gather") return propagateGather(node);
    if (op == "Concat") {
      auto axis = intAttr(node, "axis").value_or(0);
      if (axis != 0 && axis != -1) return;
      Elems e;
      for (const Value* in : node.inputs()) {
        auto part = elemsOf(in);
        if (!part || part->scalar) return;
        e.dims.insert(e.dims.end(), part->dims.begin(), part->dims.end());
      }
      setElems(out, std::move(e));
      return;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      auto e = elemsOf(node.input(0));
      auto axes = intsOf(node, "axes", 1);
      if (!e || !axes) return;
      if (op == "Unsqueeze" && e->scalar &&
          (*axes == std::vector<int64_t>{0} || *axes == std::vector<int64_t>{-1})) {
        e->scalar = false;
        setElems(out, *e);
      } else if (op == "Squeeze" && !e->scalar && e->dims.size() == 1 &&
                 (axes->empty() || *axes == std::vector<int64_t>{0} ||
                  *axes == std::vector<int64_t>{-1})) {
        e->scalar = true;
        setElems(out, *e);
      }
      return;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div") return propagateArithmetic(node);
  }

  void propagateSlice(const Node& node) {
    auto e = elemsOf(node.input(0));
    if (!e || e->scalar) return;
    const bool attrs = context_.opset() < 10;
    auto starts = attrs ? intsAttr(node, "starts") : intsOf(node, "starts", 1);
    auto ends = attrs ? intsAttr(node, "ends") : intsOf(node, "ends", 2);
    auto axes = attrs ? intsOf(node, "axes", 99) : intsOf(node, "axes", 3);
    auto steps = attrs ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{})
                       : intsOf(node, "steps", 4);
    if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1) return;
    if (!axes->empty() && (axes->size() != 1 || ((*axes)[0] != 0 && (*axes)[0] != -1))) return;
    if (!steps->empty() && steps->size() != 1) return;
    const int64_t step = steps->empty() ? 1 : (*steps)[0];
    if (step == 0) return;
    const int64_t n = static_cast<int64_t>(e->dims.size());
    int64_t s = (*starts)[0], t = (*ends)[0];
    if (s < 0) s += n;
    if (t < 0) t += n;
    Elems r;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, n);
      t = std::clamp<int64_t>(t, 0, n);
      for (int64_t i = s; i < t; i += step)
        r.dims.push_back(e->dims[static_cast<size_t>(i)]);
    } else {
      s = std::clamp<int64_t>(s, 0, n - 1);
      t = std::clamp<int64_t>(t, -1, n - 1);
      for (int64_t i = s; i > t; i += step)
        r.dims.push_back(e->dims[static_cast<size_t>(i)]);
    }
    setElems(node.output(0), std::move(r));
  }

  void propagateGather(const Node& node) {
    auto e = elemsOf(node.input(0));
    if (!e || e->scalar) return;
    const int64_t axis = intAttr(node, "axis").value_or(0);
    if (axis != 0 && axis != -1) return;
    const Tensor* it = rewrite::constantTensor(node.input(1));
    auto indices = rewrite::constantInts(node.input(1));
    if (!it || !indices || it->dims().size() > 1) return;
    const int64_t n = static_cast<int64_t>(e->dims.size());
    Elems r;
    r.scalar = it->dims().empty();
    for (int64_t i : *indices) {
      if (i < 0) i += n;
      if (i < 0 || i >= n) return;
      r.dims.push_back(e->dims[static_cast<size_t>(i)]);
    }
    setElems(node.output(0), std::move(r));
  }

  void propagateArithmetic(const Node& node) {
    const std::string& op = node.opType();
    auto a = elemsOf(node.input(0));
    auto b = elemsOf(node.input(1));
    if (!a || !b || !isIndexType(node.output(0)->dtype())) return;
    const size_t n = std::max(a->dims.size(), b->dims.size());
    if ((a->dims.size() != n && a->dims.size() != 1) ||
        (b->dims.size() != n && b->dims.size() != 1))
      return;
    Elems r;
    r.scalar = a->scalar && b->scalar;
    for (size_t i = 0; i < n; ++i) {
      const Dim& x = a->dims[a->dims.size() == 1 ? 0 : i];
      const Dim& y = b->dims[b->dims.size() == 1 ? 0 : i];
      Dim z;
      if (x.isStatic() && y.isStatic()) {
        const int64_t p = x.value(), q = y.value();
        if (op == "Add") z = Dim::known(p + q);
        if (op == "Sub") z = Dim::known(p - q);
        if (op == "Mul") z = Dim::known(p * q);
        // Integer division is only certain for non-negative operands (floor = truncation).
        if (op == "Div" && q > 0 && p >= 0) z = Dim::known(p / q);
      } else if (y.isStatic() && (((op == "Add" || op == "Sub") && y.value() == 0) ||
                                  ((op == "Mul" || op == "Div") && y.value() == 1))) {
        z = x;
      } else if (x.isStatic() &&
                 ((op == "Add" && x.value() == 0) || (op == "Mul" && x.value() == 1))) {
        z = y;
      }
      r.dims.push_back(z);
    }
    setElems(node.output(0), std::move(r));
  }

  // Makes `v`'s type more specific with `shape`: a missing rank, or dims not yet static.
  void refine(Value* v, const Shape& shape) {
    if (!v || v->type().kind == TypeKind::Unknown) return;
    if (v->type().kind != TypeKind::Tensor) return;
    const Shape& current = v->shape();
    Shape next;
    if (!current.hasRank()) {
      next = shape;
    } else {
      if (current.rank() != shape.rank()) return; // disagreement: leave it to inference
      std::vector<Dim> dims;
      bool better = false;
      for (size_t i = 0; i < current.rank(); ++i) {
        const Dim &c = current[i], &n = shape[i];
        if (!c.isStatic() && n.isStatic()) {
          dims.push_back(n);
          better = true;
        } else if (!c.isStatic() && !c.isSymbolic() && n.isSymbolic()) {
          dims.push_back(n);
          better = true;
        } else {
          dims.push_back(c);
        }
      }
      if (!better) return;
      next = Shape(std::move(dims));
    }
    // A shape whose static dims overflow no tensor can have; the executor reports it (K5002/K5004)
    // at the node that would make it, so it is not written into the graph.
    std::vector<int64_t> known;
    for (const Dim& d : next.dims())
      if (d.isStatic()) known.push_back(d.value());
    if (!checkedElementCount(known)) return;
    v->setShape(next);
    changed_ = true;
  }

  void refineOutputs(const Node& node) {
    const std::string& op = node.opType();
    Value* out = node.output(0);
    if (!out) return;
    if (op == "Reshape") {
      if (auto s = reshapeShape(node)) refine(out, *s);
    } else if (op == "ConstantOfShape") {
      auto e = elemsOf(node.input(0));
      if (e && !e->scalar) refine(out, Shape(e->dims));
    } else if (op == "Expand") {
      if (auto s = expandShape(node)) refine(out, *s);
    } else if (op == "Tile") {
      if (auto s = tileShape(node)) refine(out, *s);
    } else if (op == "Resize" && context_.opset() >= 11) {
      if (auto s = resizeShape(node)) refine(out, *s);
    }
  }

  std::optional<Shape> reshapeShape(const Node& node) const {
    const Value* x = node.input(0);
    const Value* target = node.input(1);
    if (!x || !target || intAttr(node, "allowzero").value_or(0) != 0) return std::nullopt;
    auto e = elemsOf(target);
    if (!e || e->scalar) {
      // Only the rank: a 1-D target of static length.
      if (!target->shape().hasRank() || target->shape().rank() != 1 ||
          !target->shape()[0].isStatic())
        return std::nullopt;
      return Shape(std::vector<Dim>(static_cast<size_t>(target->shape()[0].value())));
    }
    const bool rankKnown = x->shape().hasRank();
    std::vector<Dim> dims = e->dims;
    std::optional<size_t> inferred;
    Product part;
    for (size_t i = 0; i < dims.size(); ++i) {
      Dim& d = dims[i];
      if (d.isStatic() && d.value() == 0) {
        d = rankKnown && i < x->shape().rank() ? x->shape()[i] : Dim();
      } else if (d.isStatic() && d.value() == -1) {
        if (inferred) return std::nullopt;
        inferred = i;
        continue;
      } else if (d.isStatic() && d.value() < 0) {
        return std::nullopt;
      }
      part.times(d);
    }
    if (inferred) {
      Product total;
      if (rankKnown)
        for (const Dim& d : x->shape().dims())
          total.times(d);
      else
        total.unknown = true;
      dims[*inferred] = quotient(total, part);
    }
    return Shape(std::move(dims));
  }

  std::optional<Shape> expandShape(const Node& node) const {
    const Value* x = node.input(0);
    auto e = elemsOf(node.input(1));
    if (!x || !x->shape().hasRank() || !e || e->scalar) return std::nullopt;
    const auto& xs = x->shape().dims();
    const size_t rank = std::max(xs.size(), e->dims.size());
    std::vector<Dim> dims(rank);
    for (size_t i = 0; i < rank; ++i) {
      const size_t fromEnd = rank - i;
      Dim a = fromEnd <= xs.size() ? xs[xs.size() - fromEnd] : Dim::known(1);
      Dim b = fromEnd <= e->dims.size() ? e->dims[e->dims.size() - fromEnd] : Dim::known(1);
      if (a.isStatic() && a.value() == 1)
        dims[i] = b;
      else if (b.isStatic() && b.value() == 1)
        dims[i] = a;
      else if (a == b)
        dims[i] = a;
      else if (a.isStatic() && b.isStatic())
        return std::nullopt; // not broadcastable: inference reports it
      else if (a.isStatic())
        dims[i] = a; // b must be 1 or equal at run time
      else if (b.isStatic())
        dims[i] = b;
    }
    return Shape(std::move(dims));
  }

  std::optional<Shape> tileShape(const Node& node) const {
    const Value* x = node.input(0);
    auto e = elemsOf(node.input(1));
    if (!x || !x->shape().hasRank() || !e || e->scalar || e->dims.size() != x->shape().rank())
      return std::nullopt;
    std::vector<Dim> dims;
    for (size_t i = 0; i < e->dims.size(); ++i) {
      const Dim& a = x->shape()[i];
      const Dim& r = e->dims[i];
      if (a.isStatic() && r.isStatic())
        dims.push_back(Dim::known(a.value() * r.value()));
      else if (r.isStatic() && r.value() == 1)
        dims.push_back(a);
      else if (a.isStatic() && a.value() == 1)
        dims.push_back(r);
      else
        dims.push_back(Dim());
    }
    return Shape(std::move(dims));
  }

  std::optional<Shape> resizeShape(const Node& node) const {
    const Value* x = node.input(0);
    if (!x || !x->shape().hasRank()) return std::nullopt;
    if (node.input(3)) {
      auto e = elemsOf(node.input(3));
      if (!e || e->scalar || e->dims.size() != x->shape().rank() || node.attribute("axes"))
        return std::nullopt;
      return Shape(e->dims);
    }
    const Tensor* scales = rewrite::constantTensor(node.input(2));
    if (!scales || scales->dtype() != DType::Float32 ||
        scales->elementCount() != x->shape().rank() || node.attribute("axes"))
      return std::nullopt;
    const std::vector<float> s = scales->copyValues<float>();
    std::vector<Dim> dims;
    for (size_t i = 0; i < s.size(); ++i) {
      const Dim& d = x->shape()[i];
      if (d.isStatic()) {
        // A scale past int64 (or NaN, or negative) has no size to propagate: the node's own
        // checks refuse it later with its name.
        const double scaled =
            std::floor(static_cast<double>(d.value()) * static_cast<double>(s[i]));
        if (!(scaled >= 0.0 && scaled < 9.2e18)) return std::nullopt;
        dims.push_back(Dim::known(static_cast<int64_t>(scaled)));
      } else if (s[i] == 1.0f)
        dims.push_back(d);
      else
        dims.push_back(Dim());
    }
    return Shape(std::move(dims));
  }

  Value* newConstant(const Node& node, const std::string& suffix, const std::vector<int64_t>& v) {
    const std::string base = node.output(0) ? node.output(0)->name() : node.name();
    Value* c = graph_.addInitializer(
        graph_.uniqueName(base + suffix),
        Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v));
    c->setType(
        ValueType::tensor(DType::Int64, Shape::fromStatic({static_cast<int64_t>(v.size())})));
    return c;
  }

  // A computed Reshape target as a constant: static elements as they are, the input's own dim at
  // the same position as 0, one other as -1.
  void rewriteReshapeTarget(Node& node) {
    const Value* x = node.input(0);
    const Value* target = node.input(1);
    if (!x || !target || rewrite::constantTensor(target)) return;
    if (intAttr(node, "allowzero").value_or(0) != 0) return;
    auto e = elemsOf(target);
    if (!e || e->scalar) return;
    std::vector<int64_t> values;
    bool hasInferred = false;
    for (const Dim& d : e->dims)
      hasInferred = hasInferred || (d.isStatic() && d.value() == -1);
    for (size_t i = 0; i < e->dims.size(); ++i) {
      const Dim& d = e->dims[i];
      if (d.isStatic()) {
        values.push_back(d.value());
      } else if (d.isSymbolic() && x->shape().hasRank() && i < x->shape().rank() &&
                 x->shape()[i] == d) {
        values.push_back(0);
      } else {
        if (hasInferred) return;
        hasInferred = true;
        values.push_back(-1);
      }
    }
    node.setInput(1, newConstant(node, "_shape", values));
    changed_ = true;
  }

  // A computed Expand shape as a constant: 1 wherever the input's own dim is kept.
  void rewriteExpandShape(Node& node) {
    const Value* x = node.input(0);
    const Value* shape = node.input(1);
    if (!x || !shape || rewrite::constantTensor(shape) || !x->shape().hasRank()) return;
    auto e = elemsOf(shape);
    if (!e || e->scalar) return;
    const auto& xs = x->shape().dims();
    std::vector<int64_t> values;
    for (size_t i = 0; i < e->dims.size(); ++i) {
      const Dim& d = e->dims[i];
      const size_t fromEnd = e->dims.size() - i;
      if (d.isStatic()) {
        values.push_back(d.value());
      } else if (d.isSymbolic() && fromEnd <= xs.size() && xs[xs.size() - fromEnd] == d) {
        values.push_back(1);
      } else {
        return;
      }
    }
    node.setInput(1, newConstant(node, "_shape", values));
    changed_ = true;
  }

  // A node whose (shape) output is known element by element becomes a constant.
  void foldIfStatic(Node& node) {
    if (node.opType() == "Constant" || node.outputs().size() != 1) return;
    const Value* out = node.output(0);
    auto it = known_.find(out);
    if (it == known_.end() || !it->second.allStatic() || !isIndexType(out->dtype())) return;
    std::vector<int64_t> values;
    for (const Dim& d : it->second.dims)
      values.push_back(d.value());
    std::vector<int64_t> dims;
    if (!it->second.scalar) dims.push_back(static_cast<int64_t>(values.size()));
    Tensor t;
    if (out->dtype() == DType::Int64) {
      t = Tensor::fromValues<int64_t>(DType::Int64, dims, values);
    } else {
      std::vector<int32_t> narrow(values.begin(), values.end());
      t = Tensor::fromValues<int32_t>(DType::Int32, dims, narrow);
    }
    known_.erase(it);
    graph_.replaceNodeWithConstants(&node, {t});
    changed_ = true;
  }

  Graph& graph_;
  PassContext& context_;
  const Propagation* outer_ = nullptr;
  std::map<const Value*, Elems> known_;
  bool changed_ = false;
};

class PropagateShapeValues : public Pass {
 public:
  std::string_view name() const override { return "propagate-shape-values"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return Propagation(graph, context).run();
  }
};

} // namespace

std::unique_ptr<Pass> makePropagateShapeValuesPass() {
  return std::make_unique<PropagateShapeValues>();
}

} // namespace kiln
