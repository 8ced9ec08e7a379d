// Runs a model in kiln's executor for unit tests: the tensor outputs in graph order (a failed run
// is a test failure and gives none).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"

namespace kiln::testing {

inline std::vector<Tensor> runModel(const Model& model,
                                    const std::map<std::string, rt::RtValue>& feeds) {
  rt::Executor executor(model);
  auto result = executor.run(feeds);
  EXPECT_TRUE(result) << result.status().toString();
  std::vector<Tensor> out;
  if (result)
    for (const rt::RtValue& v : result->outputs) {
      EXPECT_TRUE(v.isTensor());
      out.push_back(v.tensor);
    }
  return out;
}

// One input of runNode: an initializer called `name`, or (no tensor) an omitted optional input.
struct NodeArg {
  std::string name;
  std::optional<Tensor> tensor;
};

// Runs one `op` node whose inputs are initializers, at `threads` threads; returns its `outputs`
// outputs in order (a failed run is a test failure and gives none).
inline std::vector<Tensor> runNode(const std::string& op, const std::vector<NodeArg>& args,
                                   const std::vector<std::pair<std::string, Attribute>>& attrs,
                                   size_t outputs, int64_t opset = 17, int threads = 1) {
  Model model;
  model.opsets = {{"", opset}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  std::vector<Value*> ins;
  for (const NodeArg& a : args)
    ins.push_back(a.tensor ? g.addInitializer(a.name, *a.tensor) : nullptr);
  std::vector<std::string> outNames;
  for (size_t i = 0; i < outputs; ++i)
    outNames.push_back("out" + std::to_string(i));
  Node* n = g.appendNode(op, ins, outNames);
  for (const auto& [name, value] : attrs)
    n->setAttribute(name, value);
  for (size_t i = 0; i < outputs; ++i)
    g.addOutput(n->output(i));
  rt::ExecutorOptions options;
  options.threads = threads;
  rt::Executor exec(model, options);
  auto result = exec.run({});
  EXPECT_TRUE(result.hasValue()) << (result ? "" : result.status().toString());
  std::vector<Tensor> out;
  if (!result) return out;
  for (auto& v : result->outputs)
    out.push_back(v.tensor);
  return out;
}

// Starts `model` as an opset-`opset` graph "g" with one input "x" (type left to inference);
// returns x.
inline Value* startModelWithInput(Model& model, int64_t opset = 17) {
  model.opsets = {{"", opset}};
  model.graph = std::make_shared<Graph>("g");
  Value* x = model.graph->addValue("x");
  model.graph->addInput(x);
  return x;
}

// n floats uniform in [-1, 1) from a fixed seed: the same values on every run and machine.
inline std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(gen);
  return v;
}

} // namespace kiln::testing
