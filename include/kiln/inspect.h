// Model summaries for `kiln inspect`: I/O, op histogram, parameter bytes.
#pragma once

#include <string>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

std::string inspectText(const Model& model);
std::string inspectJson(const Model& model);
// The graph as Graphviz dot: inputs, nodes (op type and name), weights, outputs; each edge is
// labelled with the tensor's type and shape; subgraphs are clusters.
std::string inspectDot(const Model& model);

// Loads any model kiln reads, by content (.onnx today).
Expected<Model> loadModel(const std::string& path);

} // namespace kiln
