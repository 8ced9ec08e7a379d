// IR verifier; passes run it after each step in debug builds, the importer after every import.
#include "kiln/ir/verifier.h"
#include "kiln/support/display.h"

#include <algorithm>
#include <unordered_set>

namespace kiln {
namespace {

Status fail(const Graph& graph, const std::string& what) {
  return Status(ErrorCode::VerifyFailed, fmt::format("graph '{}': {}", graph.name(), what),
                "this is a kiln bug if it follows a pass; report it with the model");
}

std::string nodeLabel(const Node& node) {
  return fmt::format("node '{}' ({})", displayName(node.name()), displayName(node.opType()));
}

bool isAncestor(const Graph* maybeAncestor, const Graph* graph) {
  for (const Graph* g = graph->parent(); g; g = g->parent())
    if (g == maybeAncestor) return true;
  return false;
}

} // namespace

Status verifyGraph(const Graph& graph) {
  std::unordered_set<const Value*> defined;
  for (const auto& value : graph.values()) {
    if (value->owner() != &graph)
      return fail(graph, fmt::format("value '{}' has a foreign owner", value->name()));
    if (graph.findLocalValue(value->name()) != value.get())
      return fail(graph, fmt::format("value '{}' is missing from the name map", value->name()));
    for (const Use& use : value->uses())
      if (use.user->input(use.inputIndex) != value.get())
        return fail(graph,
                    fmt::format("use list of '{}' names {} input {} which reads something else",
                                value->name(), nodeLabel(*use.user), use.inputIndex));
  }
  for (const Value* in : graph.inputs()) {
    if (!in || in->owner() != &graph) return fail(graph, "a graph input is not owned by the graph");
    defined.insert(in);
  }
  for (const Value* init : graph.initializers()) {
    if (!init->isInitializer())
      return fail(graph, fmt::format("initializer '{}' has no tensor", init->name()));
    defined.insert(init);
  }
  for (const auto& nodePtr : graph.nodes()) {
    const Node& node = *nodePtr;
    if (node.owner() != &graph) return fail(graph, nodeLabel(node) + " has a foreign owner");
    for (size_t i = 0; i < node.inputs().size(); ++i) {
      const Value* in = node.input(i);
      if (!in) continue;
      bool visible =
          in->owner() == &graph ? defined.count(in) > 0 : isAncestor(in->owner(), &graph);
      if (!visible)
        return fail(graph,
                    fmt::format("{} reads '{}' before it is defined", nodeLabel(node), in->name()));
      const auto& uses = in->uses();
      if (std::find(uses.begin(), uses.end(), Use{const_cast<Node*>(&node), i}) == uses.end())
        return fail(graph, fmt::format("{} input {} ('{}') is missing from its use list",
                                       nodeLabel(node), i, in->name()));
    }
    for (Graph* sub : node.subgraphs()) {
      if (sub->parent() != &graph)
        return fail(graph, nodeLabel(node) + " holds a subgraph with the wrong parent");
      KILN_TRY(verifyGraph(*sub));
    }
    for (size_t i = 0; i < node.outputs().size(); ++i) {
      const Value* out = node.output(i);
      if (!out) continue;
      if (out->producer() != &node || out->producerOutputIndex() != i)
        return fail(graph, fmt::format("{} output '{}' names another producer", nodeLabel(node),
                                       out->name()));
      if (!defined.insert(out).second)
        return fail(graph, fmt::format("value '{}' is defined twice", out->name()));
    }
  }
  for (const Value* out : graph.outputs()) {
    if (!out) return fail(graph, "a graph output is null");
    bool visible =
        out->owner() == &graph ? defined.count(out) > 0 : isAncestor(out->owner(), &graph);
    if (!visible)
      return fail(graph, fmt::format("graph output '{}' is never defined", out->name()));
  }
  for (const auto& value : graph.values())
    if (value->producer() && !defined.count(value.get()))
      return fail(graph, fmt::format("value '{}' names a producer that is not in the graph",
                                     value->name()));
  return Status::ok();
}

Status verifyModel(const Model& model) {
  if (!model.graph) return Status(ErrorCode::VerifyFailed, "model has no graph", "");
  return verifyGraph(*model.graph);
}

} // namespace kiln
