// fix-input-shapes: applies the user's input-shape spec to the graph inputs.
//
//   graph (%x: f32[N,3,H,W])  with x:1,3,640,640   →   graph (%x: f32[1,3,640,640])
// Shapes of every other value are cleared (element types kept) so inference recomputes them for
// the new input shapes instead of trusting value_info exported for another size.
#include "kiln/passes/pass.h"
#include "kiln/shape_spec.h"

namespace kiln {
namespace {

void clearDerivedShapes(Graph& graph) {
  for (const auto& value : graph.values()) {
    if (value->isGraphInput() || value->isInitializer()) continue;
    ValueType type = value->type();
    if (type.kind != TypeKind::Tensor) continue;
    type.shape = Shape();
    value->setType(type);
  }
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs())
      clearDerivedShapes(*sub);
}

class FixInputShapes : public Pass {
 public:
  std::string_view name() const override { return "fix-input-shapes"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!context.inputShapes) return false;
    std::vector<Status> problems = validateShapeSpec(*context.inputShapes, graph);
    if (!problems.empty()) return problems.front();
    for (const InputShapeSpec& entry : context.inputShapes->inputs) {
      Value* input = findSpecInput(entry, graph);
      std::vector<Dim> dims;
      for (size_t i = 0; i < entry.dims.size(); ++i) {
        const DimSpec& d = entry.dims[i];
        if (d.isStatic())
          dims.push_back(Dim::known(d.lo));
        else if (input->shape().hasRank() && i < input->shape().rank())
          dims.push_back(input->shape()[i]);
        else
          dims.emplace_back();
      }
      ValueType type = input->type();
      type.kind = TypeKind::Tensor;
      type.shape = Shape(std::move(dims));
      input->setType(type);
    }
    clearDerivedShapes(graph);
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> makeFixInputShapesPass() { return std::make_unique<FixInputShapes>(); }

} // namespace kiln
