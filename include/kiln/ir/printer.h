// Stable, human-readable text form of the IR (golden tests diff it; it never prints addresses).
#pragma once

#include <ostream>
#include <string>

#include "kiln/ir/graph.h"

namespace kiln {

struct PrintOptions {
  bool locations = true; // print @"onnx_node_name" suffixes
};

void printGraph(std::ostream& out, const Graph& graph, const PrintOptions& options = {});
void printModel(std::ostream& out, const Model& model, const PrintOptions& options = {});
std::string modelToText(const Model& model, const PrintOptions& options = {});
std::string typeToText(const ValueType& type);

} // namespace kiln
