// Rewriting 2-D GridSample into standard ops (Gather of the sampled pixels, per-axis weights
// from Floor/Round/Clip arithmetic) for targets without the op (src/passes/expand_grid_sample.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// Why a GridSample node cannot be rewritten ("" when it can): 4-D input, static shapes, float
// data and grid of one dtype, a known mode and padding_mode.
std::string gridSampleExpansionBlocker(const Node& node, int64_t opset);

// Rewrites every GridSample of `graph` and of its subgraphs that `select` picks and that can be
// rewritten, in place (outputs keep their names). Returns how many were rewritten.
Expected<size_t> expandGridSampleNodes(Graph& graph, int64_t opset,
                                       const std::function<bool(const Node&)>& select);

} // namespace kiln
