// If/Loop facts shared by the .ms and .om lowerings (ops/control_flow.h).
#include "ops/control_flow.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/lowering.h"

namespace kiln::ops {
namespace {

// Whether `v` is defined in `g` or in a graph nested inside it.
bool definedWithin(const Value* v, const Graph& g) {
  for (const Graph* owner = v->owner(); owner; owner = owner->parent())
    if (owner == &g) return true;
  return false;
}

void collect(const Graph& g, const Graph& scope, std::vector<const Value*>& out,
             std::set<const Value*>& seen) {
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->inputs())
      if (v && !definedWithin(v, scope) && seen.insert(v).second) out.push_back(v);
    for (const Graph* sub : n->subgraphs())
      collect(*sub, scope, out, seen);
  }
  for (const Value* v : g.outputs())
    if (v && !definedWithin(v, scope) && seen.insert(v).second) out.push_back(v);
}

std::string valueKindReason(const Value* v, const char* what) {
  if (v && v->type().kind != TypeKind::Tensor && v->type().kind != TypeKind::Unknown)
    return fmt::format("{} '{}' is not a tensor (sequences and optionals stay on the CPU)", what,
                       v->name());
  return "";
}

std::string graphReason(const Graph& g, const std::string& where,
                        const std::function<std::string(const Node&)>& nodeReason) {
  size_t position = 0;
  for (const auto& n : g.nodes()) {
    ++position;
    if (std::string r = nodeReason(*n); !r.empty())
      return fmt::format("{}: {}: {}", where, lowering::nodeLabel(*n, position), r);
  }
  for (const Value* v : g.outputs())
    if (std::string r = valueKindReason(v, "output"); !r.empty())
      return fmt::format("{}: {}", where, r);
  return "";
}

} // namespace

std::string boundaryKindReason(const Graph& graph, const std::string& format) {
  std::vector<std::string> parts;
  auto add = [&](const Value* v, const char* what) {
    if (!v) return;
    const char* kind = v->type().kind == TypeKind::Sequence ? "sequence"
                       : v->type().kind == TypeKind::Optional ? "optional"
                       : v->type().kind == TypeKind::Map      ? "map"
                                                              : nullptr;
    if (!kind) return;
    parts.push_back(fmt::format("{} '{}' is {} {}; {} has no {} tensors", what, v->name(),
                                v->type().kind == TypeKind::Optional ? "an" : "a", kind, format,
                                kind));
  };
  for (const Value* v : graph.inputs())
    if (!v->isInitializer()) add(v, "graph input");
  for (const Value* v : graph.outputs())
    add(v, "graph output");
  return fmt::format("{}", fmt::join(parts, "; "));
}

std::vector<const Value*> capturedValues(const Graph& g) {
  std::vector<const Value*> out;
  std::set<const Value*> seen;
  collect(g, g, out, seen);
  return out;
}

std::vector<const Value*> capturedValues(const std::vector<const Graph*>& graphs) {
  std::vector<const Value*> out;
  std::set<const Value*> seen;
  for (const Graph* g : graphs)
    for (const Value* v : capturedValues(*g))
      if (seen.insert(v).second) out.push_back(v);
  return out;
}

LoopParts loopParts(const Node& loop, std::string* reason) {
  LoopParts parts;
  reason->clear();
  const Attribute* body = loop.attribute("body");
  if (!body || body->kind() != AttrKind::Graph || !body->asGraph()) {
    *reason = "Loop without a body graph";
    return parts;
  }
  parts.body = body->asGraph().get();
  if (loop.inputs().size() < 2) {
    *reason = "Loop needs its M and cond inputs (either may be omitted as '')";
    return parts;
  }
  parts.maxTrip = loop.input(0);
  parts.cond = loop.input(1);
  for (size_t i = 2; i < loop.inputs().size(); ++i)
    parts.carried.push_back(loop.input(i));
  const size_t n = parts.carried.size();
  if (parts.body->inputs().size() != n + 2 || parts.body->outputs().size() < n + 1) {
    *reason = fmt::format("Loop body takes {} inputs and gives {} outputs for {} carried values",
                          parts.body->inputs().size(), parts.body->outputs().size(), n);
    return parts;
  }
  parts.scanOutputs = parts.body->outputs().size() - 1 - n;
  return parts;
}

std::string controlFlowReason(const Node& node,
                              const std::function<std::string(const Node&)>& nodeReason) {
  for (const Value* v : node.inputs())
    if (std::string r = valueKindReason(v, "input"); !r.empty()) return r;
  for (const Value* v : node.outputs())
    if (std::string r = valueKindReason(v, "output"); !r.empty()) return r;
  if (node.opType() == "If") {
    for (const char* name : {"then_branch", "else_branch"}) {
      const Attribute* a = node.attribute(name);
      if (!a || a->kind() != AttrKind::Graph || !a->asGraph())
        return fmt::format("If without its {} graph", name);
      const Graph& g = *a->asGraph();
      if (!g.inputs().empty() || g.outputs().size() != node.outputs().size())
        return fmt::format("{} gives {} outputs for the If's {}", name, g.outputs().size(),
                           node.outputs().size());
      if (std::string r = graphReason(g, name, nodeReason); !r.empty()) return r;
    }
    return "";
  }
  if (node.opType() == "Loop") {
    std::string reason;
    LoopParts parts = loopParts(node, &reason);
    if (!reason.empty()) return reason;
    if (parts.scanOutputs > 0)
      return fmt::format(
          "Loop with {} scan output(s) whose shapes are not static; the targets' loops only "
          "carry state, and the default pipeline (carry-loop-scan-outputs) turns scan outputs "
          "into carried values when their shapes are known: fix the input shapes",
          parts.scanOutputs);
    for (const Value* v : parts.body->inputs())
      if (std::string r = valueKindReason(v, "body input"); !r.empty()) return r;
    return graphReason(*parts.body, "body", nodeReason);
  }
  return "";
}

} // namespace kiln::ops
