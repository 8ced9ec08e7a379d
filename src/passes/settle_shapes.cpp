// settle-shapes: alternates shape inference (ONNX's, then kiln's propagate-shape-values for the
// shape tensors of dynamic models), constant folding and constant-If folding until nothing
// changes, so shape sub-graphs (Shape → Gather → Unsqueeze → Concat → Reshape) fold away; then
// reports every tensor that stays dynamic with the node that makes it so. Every step works inside
// If branches and Loop/Scan bodies as well, with the outer values' shapes: an If on a shape test
// inside a branch (exporters write rank tests so) folds there, and inference only gets through
// it once it has, which is why fold-constant-if is part of the round.
//
//   %s = Shape(%x: f32[1,3,8,8]); %g = Gather(%s, 0); ...; %r = Reshape(%y, %c)
//     →  init %c = i64[2] {1, 192};  %r: f32[1,192] = Reshape(%y, %c)
#include <map>

#include <fmt/ranges.h>

#include "kiln/passes/pass.h"
#include "kiln/support/display.h"

namespace kiln {
namespace {

constexpr int kMaxRounds = 16;

bool isStaticTensor(const Value* v) {
  return v && v->type().kind == TypeKind::Tensor && v->shape().isStatic();
}

void reportDynamic(const Graph& graph, PassContext& context) {
  // origin node label → dynamic values it leads to
  std::map<std::string, std::vector<std::string>> byOrigin;
  std::map<const Value*, std::string> originOf;
  for (const Value* in : graph.inputs())
    if (!in->isInitializer() && !isStaticTensor(in) && in->type().kind == TypeKind::Tensor)
      originOf[in] = fmt::format("graph input '{}' {}", in->name(), in->shape().toString());
  for (const auto& node : graph.nodes()) {
    std::string inherited;
    for (const Value* in : node->inputs()) {
      auto it = originOf.find(in);
      if (it != originOf.end()) {
        inherited = it->second;
        break;
      }
    }
    for (const Value* out : node->outputs()) {
      if (!out || out->type().kind != TypeKind::Tensor || isStaticTensor(out)) continue;
      std::string origin = inherited.empty()
                               ? fmt::format("node '{}' ({})", displayName(node->name()),
                                             displayName(node->opType()))
                               : inherited;
      originOf[out] = origin;
      byOrigin[origin].push_back(fmt::format("{}{}", out->name(), out->shape().toString()));
    }
  }
  for (const auto& [origin, values] : byOrigin) {
    std::vector<std::string> shown(values.begin(),
                                   values.begin() + std::min<size_t>(values.size(), 6));
    context.notes.push_back(fmt::format("{} tensor(s) stay dynamic because of {}: {}{}",
                                        values.size(), origin, fmt::join(shown, ", "),
                                        values.size() > shown.size() ? ", ..." : ""));
  }
}

class SettleShapes : public Pass {
 public:
  std::string_view name() const override { return "settle-shapes"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    const std::vector<std::string> round = {"infer-shapes",   "propagate-shape-values",
                                            "fold-constants", "fold-constant-if",
                                            "remove-noops",   "eliminate-dead-nodes"};
    std::vector<std::unique_ptr<Pass>> passes;
    for (const auto& name : round)
      passes.push_back(createPass(name));
    bool any = false;
    for (int i = 0; i < kMaxRounds; ++i) {
      bool changed = false;
      for (auto& pass : passes) {
        KILN_ASSIGN_OR_RETURN(bool c, pass->run(graph, context));
        changed |= c;
      }
      any |= changed;
      if (!changed) break;
    }
    reportDynamic(graph, context);
    return any;
  }
};

} // namespace

std::unique_ptr<Pass> makeSettleShapesPass() { return std::make_unique<SettleShapes>(); }

} // namespace kiln
