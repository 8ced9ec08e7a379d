// What If and Loop mean for targets that hold subgraphs as separate graphs with explicit inputs,
// decided once for both backends: which outer values a body reads, the shape of a Loop, and why a
// control-flow node cannot be taken.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"

namespace kiln::ops {

// Values of enclosing graphs that `g` or its nested subgraphs read, in first-read order. A target
// passes them in as explicit subgraph inputs.
std::vector<const Value*> capturedValues(const Graph& g);
// `capturedValues` of several graphs, merged in order without repeats.
std::vector<const Value*> capturedValues(const std::vector<const Graph*>& graphs);

// A Loop's parts: inputs (M, cond, carried...), body (iter, cond, carried...) → (cond, carried...,
// scan...).
struct LoopParts {
  const Value* maxTrip = nullptr; // omitted: no limit
  const Value* cond = nullptr;    // omitted: true
  std::vector<const Value*> carried;
  const Graph* body = nullptr;
  size_t scanOutputs = 0;
};
// The Loop's parts, or the reason it is malformed ("" in `reason` when fine).
LoopParts loopParts(const Node& loop, std::string* reason);

// Why an If or Loop cannot be lowered by a target whose per-node reason is `nodeReason` ("" when
// it can): the node's own shape (the branch/body signatures, tensor values only, scan outputs
// carried by the default pipeline), then every node of every subgraph, nested ones included.
std::string controlFlowReason(const Node& node,
                              const std::function<std::string(const Node&)>& nodeReason);

// Why a target without sequence, optional or map tensors cannot take `graph` as it is ("" when
// it can): each graph input and output of such a type, as "graph input 'x' is a sequence; .ms has
// no sequence tensors". `format` is the target's file extension (".ms", ".om"). A sequence built
// inside the model is flattened by eliminate-static-sequences; one at the boundary cannot be.
std::string boundaryKindReason(const Graph& graph, const std::string& format);

} // namespace kiln::ops
