// eliminate-dead-nodes: removes nodes whose outputs nothing reads, and unused initializers.
//
//   %a = Relu(%x)          (nothing reads %a)          →   (gone)
//   init %w (unused)                                    →   (gone)
#include <vector>

#include "kiln/passes/pass.h"

namespace kiln {
namespace {

bool isDead(const Node& node) {
  for (const Value* out : node.outputs())
    if (out && (out->hasUses() || out->isGraphOutput())) return false;
  return true;
}

bool eliminate(Graph& graph) {
  bool changed = false;
  // Reverse order: erasing a consumer can make its producers dead in the same sweep.
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    if (isDead(*node)) {
      graph.eraseNode(node);
      changed = true;
      continue;
    }
    for (Graph* sub : node->subgraphs())
      changed |= eliminate(*sub);
  }
  std::vector<Value*> unused;
  for (Value* init : graph.initializers())
    if (!init->hasUses() && !init->isGraphInput() && !init->isGraphOutput()) unused.push_back(init);
  for (Value* init : unused)
    graph.eraseValue(init);
  return changed || !unused.empty();
}

class EliminateDeadNodes : public Pass {
 public:
  std::string_view name() const override { return "eliminate-dead-nodes"; }
  Expected<bool> run(Graph& graph, PassContext&) override { return eliminate(graph); }
};

} // namespace

std::unique_ptr<Pass> makeEliminateDeadNodesPass() {
  return std::make_unique<EliminateDeadNodes>();
}

} // namespace kiln
