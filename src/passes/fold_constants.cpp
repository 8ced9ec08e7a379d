// fold-constants: evaluates nodes whose inputs are all constant with the CPU executor.
//
//   init %s = i64[2] {1, 64}
//   %a = Constant() {value = ...}                 →  init %a = ...
//   %b = Concat(%s, %a) {axis = 0}                →  init %b = i64[...] {...}
//   %n = Shape(%x: f32[1,3,8,8])                  →  init %n = i64[4] {1, 3, 8, 8}
// Outputs larger than PassContext::foldSizeLimit stay unfolded, so Tile/ConstantOfShape/Expand
// cannot blow the model up. Random ops and nodes holding subgraphs are never folded (the nodes
// inside their subgraphs are).
#include <set>

#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"

namespace kiln {
namespace {

const std::set<std::string> kNeverFold = {"RandomNormal",      "RandomUniform", "RandomNormalLike",
                                          "RandomUniformLike", "Multinomial",   "Bernoulli"};

bool isConstant(const Value* v) { return v->isInitializer() && !v->isGraphInput(); }

// Shape and Size only need a static input shape, not constant input data.
bool foldableFromShape(const Node& node) {
  if (node.opType() != "Shape" && node.opType() != "Size") return false;
  const Value* in = node.input(0);
  return in && in->type().kind == TypeKind::Tensor && in->shape().isStatic();
}

std::optional<std::vector<Tensor>> evaluate(const Node& node, const PassContext& context) {
  std::vector<rt::RtValue> storage;
  storage.reserve(node.inputs().size());
  std::vector<const rt::RtValue*> inputs;
  for (const Value* in : node.inputs()) {
    if (!in) {
      inputs.push_back(nullptr);
      continue;
    }
    if (in->isInitializer()) {
      storage.push_back(rt::RtValue::ofTensor(in->initializer()));
    } else { // Shape/Size: a zero-filled stand-in of the right shape (only its dims are read)
      std::vector<int64_t> dims = in->shape().staticDims();
      storage.push_back(rt::RtValue::ofTensor(Tensor(in->dtype(), dims, Buffer::owned({}))));
    }
    inputs.push_back(&storage.back());
  }
  auto outputs = rt::Executor::evaluateNode(node, inputs, context.opset());
  if (!outputs) {
    if (context.explain)
      spdlog::debug("fold-constants: '{}' ({}) not folded: {}", node.name(), node.opType(),
                    outputs.status().toString());
    return std::nullopt;
  }
  std::vector<Tensor> tensors;
  uint64_t bytes = 0;
  for (auto& v : *outputs) {
    if (!v.isTensor()) return std::nullopt;
    bytes += v.tensor.byteSize();
    tensors.push_back(std::move(v.tensor));
  }
  if (bytes > context.foldSizeLimit) {
    if (context.explain)
      spdlog::debug("fold-constants: '{}' ({}) not folded: {} bytes exceed the {} byte limit",
                    node.name(), node.opType(), bytes, context.foldSizeLimit);
    return std::nullopt;
  }
  return tensors;
}

bool fold(Graph& graph, PassContext& context) {
  bool changed = false;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  for (Node* node : order) {
    // Inside If branches and Loop bodies too: a target that lowers the body needs its constant
    // axes and shapes as much as the main graph does.
    for (Graph* sub : node->subgraphs())
      changed |= fold(*sub, context);
    if (kNeverFold.count(node->opType()) || !node->subgraphs().empty()) continue;
    if (!node->domain().empty() && node->domain() != "ai.onnx") continue;
    bool allConstant = std::all_of(node->inputs().begin(), node->inputs().end(),
                                   [](const Value* v) { return !v || isConstant(v); });
    if (!allConstant && !foldableFromShape(*node)) continue;
    if (node->outputs().empty()) continue;
    auto values = evaluate(*node, context);
    if (!values) continue;
    graph.replaceNodeWithConstants(node, std::move(*values));
    changed = true;
  }
  return changed;
}

class FoldConstants : public Pass {
 public:
  std::string_view name() const override { return "fold-constants"; }
  Expected<bool> run(Graph& graph, PassContext& context) override { return fold(graph, context); }
};

} // namespace

std::unique_ptr<Pass> makeFoldConstantsPass() { return std::make_unique<FoldConstants>(); }

} // namespace kiln
