// Unrolling ONNX RNN, GRU and LSTM nodes into standard ops over a static sequence length, for
// targets that refuse the node (src/passes/expand_rnn.cpp).
#pragma once

#include <functional>
#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// Why `node` (RNN, GRU or LSTM) cannot be unrolled ("" when it can): the sequence length must be
// static and not too long, the hidden size known, the data float.
std::string rnnUnrollBlocker(const Node& node);

// Unrolls every RNN/GRU/LSTM node of `graph` and of its subgraphs that `select` picks and that
// can be unrolled, in place (outputs keep their names). Returns how many were unrolled.
Expected<size_t> unrollRnnNodes(Graph& graph, const std::function<bool(const Node&)>& select);

} // namespace kiln
