// Small graph-rewrite helpers shared by the fusion passes (header-only, file-local linkage).
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::rewrite {

// Calls `visit(node)` for every node of `graph` and, before each node, for its subgraphs'
// nodes, over a snapshot of the node list: `visit` may erase the node it is given or insert nodes
// before it. Returns whether any call returned true (changed the graph).
// A rewrite may erase nodes later in the walk (a fused Relu or QuantizeLinear): after each change
// the walk re-reads which nodes are left, so it never touches an erased one.
template <typename Visit> bool rewriteEachNode(Graph& graph, Visit&& visit) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  std::unordered_set<const Node*> live(order.begin(), order.end());
  for (Node* node : order) {
    if (!live.count(node)) continue;
    bool here = false;
    for (Graph* sub : node->subgraphs())
      here |= rewriteEachNode(*sub, visit);
    here |= visit(node);
    if (!here) continue;
    changed = true;
    live.clear();
    for (const auto& left : graph.nodes())
      live.insert(left.get());
  }
  return changed;
}

// As rewriteEachNode, counting the calls that returned true.
template <typename Visit> size_t countEachRewrite(Graph& graph, Visit&& visit) {
  size_t count = 0;
  rewriteEachNode(graph, [&](Node* node) {
    const bool changed = visit(node);
    count += changed ? 1 : 0;
    return changed;
  });
  return count;
}

// A tensor the pass may bake into new weights: an initializer the user cannot override as an input.
inline const Tensor* constantTensor(const Value* v) {
  if (!v || !v->isInitializer() || v->isGraphInput()) return nullptr;
  return &v->initializer();
}

inline std::optional<std::vector<int64_t>> constantInts(const Value* v) {
  const Tensor* t = constantTensor(v);
  if (!t) return std::nullopt;
  if (t->dtype() == DType::Int64) return t->copyValues<int64_t>();
  if (t->dtype() == DType::Int32) {
    std::vector<int64_t> out;
    for (int32_t x : t->copyValues<int32_t>())
      out.push_back(x);
    return out;
  }
  return std::nullopt;
}

// True when `node` is the default-domain `op` with exactly `inputs` inputs and one output: the
// shape the reading passes match the writers' idioms by.
inline bool isOp(const Node* node, const char* op, size_t inputs) {
  return node && (node->domain().empty() || node->domain() == "ai.onnx") && node->opType() == op &&
         node->inputs().size() == inputs && node->outputs().size() == 1;
}

// The producer of `v` when it is such an `op`; nullptr otherwise.
inline Node* producerOf(const Value* v, const char* op, size_t inputs) {
  Node* p = v ? v->producer() : nullptr;
  return isOp(p, op, inputs) ? p : nullptr;
}

// True when `v` is a float32 constant holding one element equal to `expected`.
inline bool isScalar(const Value* v, float expected) {
  const Tensor* t = constantTensor(v);
  if (!t || t->dtype() != DType::Float32 || t->elementCount() != 1) return false;
  return t->copyValues<float>()[0] == expected;
}

// True when the value only feeds `user` (once) and callers outside the graph cannot see it, so the
// producer may be folded into that user.
inline bool onlyFeeds(const Value* v, const Node* user) {
  return v && !v->isGraphOutput() && v->uses().size() == 1 && v->uses()[0].user == user;
}

// True when output `i` of `node` is absent or nobody reads it.
inline bool outputUnused(const Node& node, size_t i) {
  const Value* out = node.output(i);
  return !out || (!out->hasUses() && !out->isGraphOutput());
}

// Erases `work` (distinct nodes) and then the nodes feeding them, each once nothing reads it: what
// a fusion leaves behind after rerouting an idiom's output.
inline void eraseUnread(Graph& graph, std::vector<Node*> work) {
  while (!work.empty()) {
    Node* n = work.back();
    work.pop_back();
    bool unread = n->owner() == &graph;
    for (size_t i = 0; i < n->outputs().size() && unread; ++i)
      unread = outputUnused(*n, i);
    if (!unread) continue;
    std::vector<Node*> feeders;
    for (Value* in : n->inputs())
      if (in && in->producer()) feeders.push_back(in->producer());
    graph.eraseNode(n);
    for (Node* f : feeders)
      if (std::find(work.begin(), work.end(), f) == work.end()) work.push_back(f);
  }
}

inline Node* nodeAfter(Graph& graph, const Node* node) {
  const auto& nodes = graph.nodes();
  for (auto it = nodes.begin(); it != nodes.end(); ++it)
    if (it->get() == node) return ++it == nodes.end() ? nullptr : it->get();
  return nullptr;
}

// Replaces `chain` (producer first, each node only feeding the next) by one new node whose single
// output keeps the name, type and uses of the last node's output 0: graph output names and
// per-tensor compare by name keep working. The new node sits where the last node was, is named
// after `chain.front()` and carries the locations of every original.
// opType, domain and attributes are copies: callers often pass a chain node's own, which dies here.
inline Node* replaceChain(Graph& graph, const std::vector<Node*>& chain, std::string opType,
                          std::string domain, const std::vector<Value*>& inputs,
                          Node::AttributeList attributes) {
  Node* last = chain.back();
  Value* kept = last->output(0);
  const std::string name = kept->name();
  const ValueType type = kept->type();
  const std::string doc = kept->docString();
  const auto& annotated = graph.annotatedValues();
  const bool wasAnnotated = std::find(annotated.begin(), annotated.end(), kept) != annotated.end();
  Node* anchor = nodeAfter(graph, last);

  // Park the uses on a placeholder so the old value (and its name) can go with its producer.
  Value* parked = graph.addValue(graph.uniqueName(name + "_parked"));
  graph.replaceAllUsesWith(kept, parked);
  std::vector<Location> locations;
  for (const Node* n : chain)
    for (const Location& loc : n->locations())
      if (std::find(locations.begin(), locations.end(), loc) == locations.end())
        locations.push_back(loc);
  const std::string nodeName = chain.front()->name();
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    graph.eraseNode(*it);

  Node* fused = graph.insertNodeBefore(anchor, opType, inputs, {name});
  fused->setName(nodeName);
  fused->setDomain(domain);
  for (const auto& [key, value] : attributes)
    fused->setAttribute(key, value);
  for (Location& loc : locations)
    fused->addLocation(std::move(loc));
  Value* out = fused->output(0);
  out->setType(type);
  out->setDocString(doc);
  if (wasAnnotated) graph.addAnnotatedValue(out);
  graph.replaceAllUsesWith(parked, out);
  graph.eraseValue(parked);
  return fused;
}

// Maps values of a graph being copied to their copies; values it does not hold (outer values) map
// to themselves.
using ValueMap = std::unordered_map<const Value*, Value*>;
inline Value* movedOr(const ValueMap& moved, Value* v) {
  if (!v) return nullptr;
  auto it = moved.find(v);
  return it == moved.end() ? v : it->second;
}

// Copies the initializers and nodes of `from` into `into`, as inlining a branch or a loop body
// needs. `place(opType, inputs, outputNames)` creates each copied node where the caller wants it;
// copies keep name, domain, doc string, attributes, locations and output types, and their values
// get names free in `into` (`unnamed` when the original has none). `moved` (seeded by the caller,
// e.g. with the body's inputs) gains every copied value. Nested subgraphs move with their nodes,
// and their reads of `from`'s values are rewired to the copies.
template <typename Place>
void copyGraphInto(const Graph& from, Graph& into, ValueMap& moved, Place&& place,
                   const std::string& unnamed = "value") {
  auto fresh = [&](const std::string& name) {
    return into.uniqueName(name.empty() ? unnamed : name);
  };
  for (Value* init : from.initializers()) {
    Value* copy = into.addInitializer(fresh(init->name()), init->initializer());
    copy->setType(init->type());
    moved[init] = copy;
  }
  for (const auto& node : from.nodes()) {
    std::vector<Value*> inputs;
    for (Value* in : node->inputs())
      inputs.push_back(movedOr(moved, in));
    std::vector<std::string> names;
    for (Value* out : node->outputs())
      names.push_back(out ? fresh(out->name()) : std::string());
    Node* copy = place(node->opType(), inputs, names);
    copy->setDomain(node->domain());
    copy->setName(node->name());
    copy->setDocString(node->docString());
    for (const auto& [key, attr] : node->attributes())
      copy->setAttribute(key, attr);
    for (const Location& loc : node->locations())
      copy->addLocation(loc);
    for (size_t i = 0; i < node->outputs().size(); ++i)
      if (Value* out = node->output(i)) {
        copy->output(i)->setType(out->type());
        moved[out] = copy->output(i);
      }
    for (Graph* sub : copy->subgraphs())
      sub->setParent(&into);
  }
  for (const auto& [original, copy] : moved) {
    std::vector<Use> uses = original->uses();
    for (const Use& use : uses)
      if (use.user->owner() != &from) use.user->setInput(use.inputIndex, copy);
  }
}

} // namespace kiln::rewrite
