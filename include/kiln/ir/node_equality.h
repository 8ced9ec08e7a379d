// When two nodes compute the same thing: op type, domain and attributes compared by value (tensors
// by contents, floats bit for bit). Shared by the passes and analyses that reuse a node's result.
#pragma once

#include "kiln/ir/graph.h"

namespace kiln {

// Same kind and value. Graph attributes never compare equal (a subgraph's work is not compared).
bool sameAttribute(const Attribute& a, const Attribute& b);

// The same attributes by name (the order they were written in does not matter), each the same.
bool sameAttributes(const Node& a, const Node& b);

// Ops that draw random numbers: their outputs are not a function of their inputs and attributes.
bool drawsRandomNumbers(const std::string& opType);

} // namespace kiln
