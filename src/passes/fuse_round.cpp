// fuse-round: the float32 rounding idiom the .ms writer spells ONNX Round with becomes Round again.
//
//   %neg = Less(%x, 0); %shift = Where(%neg, -2^23, 2^23)
//   %r = Sub(Add(%x, %shift), %shift)
//   %y = Where(Less(Abs(%x), 2^23), %r, %x)                  →  %y = Round(%x)
// The MindSpore Lite runtime's Round rounds halves away from zero, so the writer rounds halves to
// even by float32 addition (src/backends/ms/ops/elementwise_math.cpp, lowerRound): for |x| < 2^23,
// x ± 2^23 lands where the spacing is 1 and rounds x to even, the subtraction is exact; larger x
// pass through. That is Round's result for every float32 but the sign of a zero (the idiom gives
// +0 for x in (-0.5, -0]). Seven ops over a tensor become one: a quantized model read back from a
// .ms (QuantizeLinear and DynamicQuantizeLinear decomposed by decompose-quant) runs them per
// activation. Nodes of the idiom that something else reads stay.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::isOp;
using rewrite::isScalar;
using rewrite::producerOf;

constexpr float kSpacingOne = 8388608.0f; // 2^23: float32 values from here up are integers

// The Round that `where` (the idiom's last node) computes, as its input x; nullptr when it is
// not the idiom.
Value* roundedInput(const Node& where) {
  if (!isOp(&where, "Where", 3)) return nullptr;
  Value* x = where.input(2);
  if (!x || x->dtype() != DType::Float32) return nullptr;
  // Less(Abs(x), 2^23)
  Node* fractional = producerOf(where.input(0), "Less", 2);
  if (!fractional || !isScalar(fractional->input(1), kSpacingOne)) return nullptr;
  Node* abs = producerOf(fractional->input(0), "Abs", 1);
  if (!abs || abs->input(0) != x) return nullptr;
  // Sub(Add(x, shift), shift)
  Node* sub = producerOf(where.input(1), "Sub", 2);
  if (!sub) return nullptr;
  Value* shift = sub->input(1);
  Node* add = producerOf(sub->input(0), "Add", 2);
  if (!add || add->input(0) != x || add->input(1) != shift) return nullptr;
  // shift = Where(Less(x, 0), -2^23, 2^23)
  Node* sign = producerOf(shift, "Where", 3);
  if (!sign || !isScalar(sign->input(1), -kSpacingOne) || !isScalar(sign->input(2), kSpacingOne))
    return nullptr;
  Node* negative = producerOf(sign->input(0), "Less", 2);
  if (!negative || negative->input(0) != x || !isScalar(negative->input(1), 0.0f)) return nullptr;
  return x;
}

size_t fuseRounds(Graph& graph, const PassContext& context) {
  size_t count = 0;
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs())
      count += fuseRounds(*sub, context);
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  for (Node* where : order) {
    Value* x = roundedInput(*where);
    if (!x) continue;
    Node* round = graph.insertNodeBefore(where, "Round", {x},
                                         {graph.uniqueName(where->output(0)->name() + "_round")});
    round->setName(where->name());
    Value* y = where->output(0);
    for (const Location& loc : where->locations())
      round->addLocation(loc);
    round->output(0)->setType(y->type());
    // The Round takes the idiom's output name (a graph output or compare's pairing keep it).
    const std::string name = y->name();
    graph.replaceAllUsesWith(y, round->output(0));
    std::vector<Node*> idiom;
    for (Value* in : where->inputs())
      if (in && in->producer()) idiom.push_back(in->producer());
    graph.eraseNode(where);
    graph.renameValue(round->output(0), name);
    for (Node* n : idiom)
      rewrite::eraseUnread(graph, {n});
    if (context.explain) spdlog::debug("fuse-round: '{}' is Round({})", name, x->name());
    ++count;
  }
  return count;
}

class FuseRound : public Pass {
 public:
  std::string_view name() const override { return "fuse-round"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return fuseRounds(graph, context) > 0;
  }
};

} // namespace

std::unique_ptr<Pass> makeFuseRoundPass() { return std::make_unique<FuseRound>(); }

} // namespace kiln
