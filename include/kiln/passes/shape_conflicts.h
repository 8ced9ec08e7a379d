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

// Why `node` cannot run on the types its inputs have now (ONNX's inference for its op, strict),
// or "" when it can or that is not certain: only a standard op without subgraphs whose every
// input is a tensor of static shape is judged, so the answer holds for every run of the node.
// Small constant inputs are passed with their values (Reshape targets, Slice bounds ...).
std::string staticShapeConflict(const Node& node, const Model& model);

} // namespace kiln
