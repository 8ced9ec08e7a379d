// merge-transpose-reshape: collapses back-to-back layout changes into one node.
//
//   %t = Transpose(%x) {perm = p}; %y = Transpose(%t) {perm = q}  →  %y = Transpose(%x) {perm = c}
//     with c[i] = p[q[i]]; an identity c drops both (a graph output keeps an identity Transpose)
//   %r = Reshape(%x, %s1); %y = Reshape(%r, %s2: const)           →  %y = Reshape(%x, %s2)
//   %r = <reshape-like>(%x); %y = <reshape-like>(%r), %y static   →  %y = Reshape(%x, dims of %y)
// Reshape-like ops (Reshape, Flatten, Squeeze, Unsqueeze) keep the row-major element order, so only
// the last shape matters. A constant last target works as is unless it holds a 0 (copy-the-input
// dim) without allowzero; -1 is fine, since both inputs have the same element count. Otherwise the
// result needs a static shape: inferred, or worked out here from a static %x. The merged node keeps
// the last node's output name and the locations of both; the rule only fires when the intermediate
// value has no other reader and is not a graph output.
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using Dims = std::vector<int64_t>;

bool isOnnx(const Node& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

bool isReshapeLike(const Node& node) {
  if (!isOnnx(node)) return false;
  const std::string& op = node.opType();
  // Reshape before opset 5 took its target as an attribute; such nodes are left alone.
  if (op == "Reshape") return node.inputs().size() >= 2 && node.input(1);
  return op == "Flatten" || op == "Squeeze" || op == "Unsqueeze";
}

int64_t intAttr(const Node& node, const std::string& name, int64_t fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

std::optional<Dims> perm(const Node& transpose, std::optional<size_t> rank) {
  const Attribute* p = transpose.attribute("perm");
  if (p && p->kind() == AttrKind::Ints) return p->asInts();
  if (!rank) return std::nullopt;
  Dims reversed(*rank); // the default reverses the axes
  std::iota(reversed.rbegin(), reversed.rend(), 0);
  return reversed;
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, a constant input after.
std::optional<Dims> axesOf(const Node& node) {
  if (const Attribute* a = node.attribute("axes"); a && a->kind() == AttrKind::Ints)
    return a->asInts();
  if (node.input(1)) return rewrite::constantInts(node.input(1));
  return Dims{};
}

std::optional<Dims> reshapeDims(const Dims& in, const Dims& target, bool allowZero) {
  Dims out = target;
  int inferred = -1;
  uint64_t known = 1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0 && !allowZero) {
      if (i >= in.size()) return std::nullopt;
      out[i] = in[i];
    }
    if (out[i] == -1) {
      if (inferred >= 0) return std::nullopt;
      inferred = static_cast<int>(i);
      continue;
    }
    if (out[i] < 0) return std::nullopt;
    known *= static_cast<uint64_t>(out[i]);
  }
  auto total = checkedElementCount(in);
  if (!total) return std::nullopt;
  if (inferred >= 0) {
    if (known == 0 || *total % known != 0) return std::nullopt;
    out[static_cast<size_t>(inferred)] = static_cast<int64_t>(*total / known);
  } else if (known != *total) {
    return std::nullopt;
  }
  return out;
}

// Output dims of a reshape-like node for static input dims.
std::optional<Dims> outputDims(const Node& node, const Dims& in) {
  const std::string& op = node.opType();
  const int64_t rank = static_cast<int64_t>(in.size());
  if (op == "Reshape") {
    auto target = rewrite::constantInts(node.input(1));
    if (!target) return std::nullopt;
    return reshapeDims(in, *target, intAttr(node, "allowzero", 0) != 0);
  }
  if (op == "Flatten") {
    int64_t axis = intAttr(node, "axis", 1);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis > rank) return std::nullopt;
    int64_t outer = 1, inner = 1;
    for (int64_t i = 0; i < rank; ++i)
      (i < axis ? outer : inner) *= in[static_cast<size_t>(i)];
    return Dims{outer, inner};
  }
  auto axes = axesOf(node);
  if (!axes) return std::nullopt;
  if (op == "Squeeze") {
    std::vector<bool> drop(in.size(), false);
    if (axes->empty()) // no axes: every 1 goes
      for (size_t i = 0; i < in.size(); ++i)
        drop[i] = in[i] == 1;
    for (int64_t a : *axes) {
      if (a < 0) a += rank;
      if (a < 0 || a >= rank || in[static_cast<size_t>(a)] != 1) return std::nullopt;
      drop[static_cast<size_t>(a)] = true;
    }
    Dims out;
    for (size_t i = 0; i < in.size(); ++i)
      if (!drop[i]) out.push_back(in[i]);
    return out;
  }
  // Unsqueeze: axes index the output.
  const int64_t outRank = rank + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : *axes) {
    if (a < 0) a += outRank;
    if (a < 0 || a >= outRank || inserted[static_cast<size_t>(a)]) return std::nullopt;
    inserted[static_cast<size_t>(a)] = true;
  }
  Dims out;
  size_t next = 0;
  for (bool one : inserted)
    out.push_back(one ? 1 : in[next++]);
  return out;
}

std::optional<Dims> staticDims(const Value* v) {
  if (!v || v->type().kind != TypeKind::Tensor || !v->shape().isStatic()) return std::nullopt;
  return v->shape().staticDims();
}

// Drops `first` and `second` and hands their readers `x` directly.
void bypass(Graph& graph, Node* first, Node* second, Value* x) {
  graph.replaceAllUsesWith(second->output(0), x);
  graph.eraseNode(second);
  graph.eraseNode(first);
}

std::string mergeTransposes(Graph& graph, Node* first, Node* second) {
  Value* x = first->input(0);
  std::optional<size_t> rank;
  if (x->shape().hasRank()) rank = x->shape().rank();
  auto p = perm(*first, rank);
  if (!p) return "the first Transpose has a default perm and its input an unknown rank";
  auto q = perm(*second, p->size());
  if (!q || q->size() != p->size()) return "the perms have different lengths";
  Dims composed(p->size());
  bool identity = true;
  for (size_t i = 0; i < q->size(); ++i) {
    const int64_t from = (*q)[i];
    if (from < 0 || from >= static_cast<int64_t>(p->size())) return "a perm is out of range";
    composed[i] = (*p)[static_cast<size_t>(from)];
    identity &= composed[i] == static_cast<int64_t>(i);
  }
  if (identity && !second->output(0)->isGraphOutput()) {
    bypass(graph, first, second, x);
    return "";
  }
  // A graph output keeps its name, so an identity Transpose stays behind to produce it.
  rewrite::replaceChain(graph, {first, second}, "Transpose", second->domain(), {x},
                        {{"perm", Attribute::ofInts(composed)}});
  return "";
}

std::string mergeReshapes(Graph& graph, Node* first, Node* second) {
  Value* x = first->input(0);
  Value* y = second->output(0);
  const bool allowZero = second->opType() == "Reshape" && intAttr(*second, "allowzero", 0) != 0;
  if (second->opType() == "Reshape") {
    auto target = rewrite::constantInts(second->input(1));
    if (target && (allowZero || std::find(target->begin(), target->end(), 0) == target->end())) {
      Node::AttributeList attributes;
      if (allowZero) attributes.emplace_back("allowzero", Attribute::ofInt(1));
      rewrite::replaceChain(graph, {first, second}, "Reshape", second->domain(),
                            {x, second->input(1)}, attributes);
      return "";
    }
  }
  // Any other chain needs the final dims spelled out.
  std::optional<Dims> result = staticDims(y);
  if (!result) {
    if (auto mid = staticDims(first->output(0))) result = outputDims(*second, *mid);
  }
  if (!result) {
    if (auto in = staticDims(x))
      if (auto mid = outputDims(*first, *in)) result = outputDims(*second, *mid);
  }
  if (!result) return "the result shape is not static and the last target is not a usable constant";
  // A zero-sized dim would need allowzero (opset 14); such tensors are not worth the care.
  if (std::find(result->begin(), result->end(), 0) != result->end())
    return "the result has a zero-sized dim";
  if (staticDims(x) == result && !y->isGraphOutput()) {
    bypass(graph, first, second, x);
    return "";
  }
  Value* target = graph.addInitializer(
      graph.uniqueName(y->name() + "_shape"),
      Tensor::fromValues(DType::Int64, {static_cast<int64_t>(result->size())}, *result));
  rewrite::replaceChain(graph, {first, second}, "Reshape", "", {x, target}, {});
  return "";
}

// Merges `second` with the node feeding it; returns why it declined, "" after merging, or
// nullopt when the pair is not a candidate at all.
std::optional<std::string> tryMerge(Graph& graph, Node* second) {
  const bool secondTranspose = isOnnx(*second) && second->opType() == "Transpose";
  if (!secondTranspose && !isReshapeLike(*second)) return std::nullopt;
  Value* mid = second->input(0);
  Node* first = mid ? mid->producer() : nullptr;
  if (!first || first->output(0) != mid) return std::nullopt;
  const bool firstTranspose = isOnnx(*first) && first->opType() == "Transpose";
  if (secondTranspose ? !firstTranspose : !isReshapeLike(*first)) return std::nullopt;
  if (!rewrite::onlyFeeds(mid, second))
    return fmt::format("'{}' has other readers or is a graph output", mid->name());
  if (!first->input(0)) return "the first node has no input";
  return secondTranspose ? mergeTransposes(graph, first, second)
                         : mergeReshapes(graph, first, second);
}

bool merge(Graph& graph, const PassContext& context) {
  // Matches are anchored at the later node: only it and earlier nodes are erased, so the rest of
  // the snapshot stays valid, and a merged node feeds the next match of a longer chain.
  return rewrite::rewriteEachNode(graph, [&](Node* node) {
    std::string label = fmt::format("'{}' ({})", node->name(), node->opType());
    auto why = tryMerge(*node->owner(), node);
    if (!why) return false;
    if (why->empty()) {
      if (context.explain)
        spdlog::debug("merge-transpose-reshape: merged {} into its input", label);
      return true;
    }
    if (context.explain) spdlog::debug("merge-transpose-reshape: {} not merged: {}", label, *why);
    return false;
  });
}

class MergeTransposeReshape : public Pass {
 public:
  std::string_view name() const override { return "merge-transpose-reshape"; }
  Expected<bool> run(Graph& graph, PassContext& context) override { return merge(graph, context); }
};

} // namespace

std::unique_ptr<Pass> makeMergeTransposeReshapePass() {
  return std::make_unique<MergeTransposeReshape>();
}

} // namespace kiln
