// rewrite-castlike: CastLike becomes the Cast it stands for once the target type is known, so the
// backends (which lower Cast) take it.
//
//   %y = CastLike(%x, %like: f16[...])   →   %y = Cast<to = FLOAT16>(%x)
// The rule declines while %like's element type is unknown, and for CastLike's
// `saturate` = 0 (Cast has the same attribute from opset 19; copied when present).
#include <spdlog/spdlog.h>

#include "kiln/ir/dtype.h"
#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

// Replaces one CastLike by its Cast; false when the target type is not known yet.
bool rewriteOne(Graph& graph, Node* node, bool explain) {
  if (node->opType() != "CastLike" || !(node->domain().empty() || node->domain() == "ai.onnx"))
    return false;
  const Value* like = node->input(1);
  Value* out = node->output(0);
  if (!like || like->type().kind != TypeKind::Tensor || like->dtype() == DType::Undefined || !out) {
    if (explain)
      spdlog::debug("rewrite-castlike: '{}': the target type is not known", node->name());
    return false;
  }
  // The Cast takes the CastLike's place and output name; the old output is renamed away.
  const std::string name = out->name();
  graph.renameValue(out, graph.uniqueName(name + "_castlike"));
  Node* cast = graph.insertNodeBefore(node, "Cast", {node->input(0)}, {name});
  cast->setName(node->name());
  cast->mergeLocations(*node);
  cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(like->dtype())));
  if (const Attribute* saturate = node->attribute("saturate"))
    cast->setAttribute("saturate", *saturate);
  cast->output(0)->setType(out->type());
  graph.replaceAllUsesWith(out, cast->output(0));
  graph.eraseNode(node);
  return true;
}

class RewriteCastLike : public Pass {
 public:
  std::string_view name() const override { return "rewrite-castlike"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    // Each node is rewritten in the graph that owns it (a subgraph's CastLike in the subgraph).
    return rewrite::rewriteEachNode(
        graph, [&](Node* node) { return rewriteOne(*node->owner(), node, context.explain); });
  }
};

} // namespace

std::unique_ptr<Pass> makeRewriteCastLikePass() { return std::make_unique<RewriteCastLike>(); }

} // namespace kiln
