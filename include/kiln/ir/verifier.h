// Structural verifier: SSA definitions, use lists, producers, topological order, subgraph scoping.
#pragma once

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// Returns the first violated invariant as a K3001 error naming the graph and node.
Status verifyGraph(const Graph& graph);
Status verifyModel(const Model& model);

} // namespace kiln
