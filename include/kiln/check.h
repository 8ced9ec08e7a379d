// Pre-conversion check (`kiln check`, and later `atc --mode=3`): every problem in a model at once.
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct CheckOptions {
  std::string inputShape; // ATC or converter_lite grammar (see shapeDialect)
  bool converterLiteDialect = false;
  std::string target = "cpu"; // cpu (kiln's executor); om:<soc> and ms come with their backends
};

struct NodeCheck {
  std::string name;
  std::string firstOutput; // names the node when it has no name
  std::string opType;
  std::string label() const; // "node 'conv1'" or "node producing 'y'"
  int64_t opset = 0;
  std::vector<std::string> inputTypes; // "f32[1,3,640,640]"
  std::vector<std::string> outputTypes;
  bool supported = true;
  std::string reason; // why not supported
};

struct CheckReport {
  std::string model;
  std::string target;
  std::vector<Status> problems; // shape-spec and model-level problems
  // What the target converts anyway but the user should know (shape inference conflicts on a
  // target whose converter does not refuse them).
  std::vector<Status> warnings;
  std::vector<NodeCheck> nodes;
  size_t unsupportedNodes = 0;
  bool ok() const { return problems.empty() && unsupportedNodes == 0; }
  std::string toText() const;
  std::string toJson() const;
};

// Validates the shape spec against the model, fixes shapes (default pipeline) when it is valid, and
// checks each node against the target. `model` is modified (shapes fixed).
Expected<CheckReport> checkModel(Model& model, const CheckOptions& options);

} // namespace kiln
