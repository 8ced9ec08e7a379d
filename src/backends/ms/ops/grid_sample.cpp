// .ms rule of the grid_sample family (GridSample): MindSpore Lite has no GridSample op, so the
// conversion pipeline rewrites 2-D GridSample into Gather and elementwise ops
// (kiln/passes/expand_grid_sample.h); this rule only refuses what is left, saying why.
#include <string>

#include "backends/ms/ms_context.h"
#include "kiln/passes/expand_grid_sample.h"

namespace kiln::ms {
namespace {

// ---- Lowering (ONNX → .ms): one check + lower per ONNX op, registered at the end of the block.

std::string checkGridSample(const Node& n, const lowering::OpContext& context) {
  const std::string why = "MindSpore Lite has no GridSample op";
  const std::string blocker = gridSampleExpansionBlocker(n, context.opset);
  if (blocker.empty()) return why + "; the conversion pipeline rewrites it into Gather and "
                                    "elementwise ops";
  return why + ", and it cannot be rewritten into standard ops: " + blocker;
}

Status lowerGridSample(LoweringContext& ctx, const Node& n) {
  return bad("{}", checkGridSample(n, lowering::OpContext{ctx.opset(), {}}));
}

KILN_MS_LOWERING("GridSample", checkGridSample, lowerGridSample);
// ---- end of lowering

} // namespace
} // namespace kiln::ms
