// Shape conflicts: nodes whose input shapes or types contradict their op's rules, found by ONNX's
// shape inference in strict mode (the infer-shapes pass runs it leniently and keeps going).
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct ShapeConflict {
  std::string node; // keep-list name (keep_dtype.h); "" when ONNX's report names no node
  std::string opType;
  Status status; // K3002 ShapeConflict naming the node and what contradicts what
};

// Every conflict found, one per node; empty when the model is consistent. Meant for a model whose
// input shapes are fixed (after the default pipeline), as `kiln check` and `atc --mode=3` run it.
std::vector<ShapeConflict> shapeConflicts(const Model& model);

} // namespace kiln
