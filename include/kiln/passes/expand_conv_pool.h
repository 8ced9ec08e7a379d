// Rewriting 3-D Conv / ConvTranspose / MaxPool / AveragePool and 1-D ConvTranspose into 2-D ops
// over reshaped views, exactly, for targets whose ops are 2-D only (src/passes/expand_conv_pool.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// True for the nodes the rewrite is about: Conv, MaxPool and AveragePool over a 5-D input,
// ConvTranspose over a 3-D or 5-D input.
bool isNdConvPool(const Node& node);

// Why such a node cannot be rewritten ("" when it can): the shapes must be static, the data
// float, the attributes consistent, the model's opset at least 5 (Reshape with a shape input).
std::string convPoolExpansionBlocker(const Node& node, int64_t opset);

// Rewrites every such node of `graph` and of its subgraphs that `select` picks and that can be
// rewritten, in place (outputs keep their names). Returns how many were rewritten.
Expected<size_t> expandConvPoolNodes(Graph& graph, int64_t opset,
                                     const std::function<bool(const Node&)>& select);

} // namespace kiln
