// Runs a model in kiln's executor for unit tests: the tensor outputs in graph order (a failed run
// is a test failure and gives none).
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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
