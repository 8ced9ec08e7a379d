// Conv weights kept rearranged between runs (the node state, conv_dnnl.h PackedWeights): only for a
// weight input that is the same tensor on every run (an initializer no feed overrides, a kept
// constant node's output). A fed weight, even one whose bytes change in place at the same
// address, is rearranged on every run, and every run gives the bytes a fresh executor gives.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "run_model.h"

using namespace kiln;

namespace {

constexpr int64_t kChannels = 8, kFilters = 16, kSize = 12;

const std::vector<int64_t> kWeightDims = {kFilters, kChannels, 3, 3};
constexpr size_t kWeightCount = kFilters * kChannels * 9;

Tensor tensor(std::vector<int64_t> dims, const std::vector<float>& v) {
  return rt::makeTensor<float>(DType::Float32, std::move(dims), v);
}

enum class WeightFrom { Initializer, ConstantNode, GraphInput, OverridableInitializer };

// y = Relu(Conv3x3(x, W)) with W from `from`.
Model convModel(WeightFrom from) {
  Model model;
  model.opsets = {{"", 17}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  Value* x = g.addValue("x");
  g.addInput(x);
  Value* w = nullptr;
  switch (from) {
  case WeightFrom::Initializer:
    w = g.addInitializer("w", tensor(kWeightDims, kiln::testing::randomFloats(kWeightCount, 1)));
    break;
  case WeightFrom::ConstantNode: {
    Value* raw = g.addInitializer("w_raw", tensor(kWeightDims, kiln::testing::randomFloats(kWeightCount, 1)));
    w = g.appendNode("Identity", {raw}, {"w"})->output(0);
    break;
  }
  case WeightFrom::GraphInput:
    w = g.addValue("w");
    g.addInput(w);
    break;
  case WeightFrom::OverridableInitializer:
    w = g.addInitializer("w", tensor(kWeightDims, kiln::testing::randomFloats(kWeightCount, 1)));
    g.addInput(w);
    break;
  }
  Node* conv = g.appendNode("Conv", {x, w}, {"conv"});
  conv->setAttribute("pads", Attribute::ofInts({1, 1, 1, 1}));
  Node* relu = g.appendNode("Relu", {conv->output(0)}, {"y"});
  g.addOutput(relu->output(0));
  return model;
}

rt::RtValue input() {
  return rt::RtValue::ofTensor(tensor({1, kChannels, kSize, kSize},
                                      kiln::testing::randomFloats(kChannels * kSize * kSize, 2)));
}

// The output of a new executor's first run (nothing kept from earlier runs).
Tensor fresh(const Model& model, const std::map<std::string, rt::RtValue>& feeds) {
  rt::Executor executor(model);
  auto result = executor.run(feeds);
  EXPECT_TRUE(result) << result.status().toString();
  return result ? result->outputs[0].tensor : Tensor();
}

bool sameBytes(const Tensor& a, const Tensor& b) {
  return a.dims() == b.dims() && a.byteSize() == b.byteSize() &&
         std::memcmp(a.data(), b.data(), a.byteSize()) == 0;
}

TEST(ConvWeights, ConstantWeightsAreKeptAndGiveTheSameBytes) {
  for (WeightFrom from : {WeightFrom::Initializer, WeightFrom::ConstantNode}) {
    const Model model = convModel(from);
    const std::map<std::string, rt::RtValue> feeds = {{"x", input()}};
    const Tensor want = fresh(model, feeds);
    rt::Executor executor(model);
    for (int run = 0; run < 3; ++run) {
      auto result = executor.run(feeds);
      ASSERT_TRUE(result) << result.status().toString();
      EXPECT_TRUE(sameBytes(result->outputs[0].tensor, want)) << "run " << run;
    }
  }
}

TEST(ConvWeights, FedWeightsChangedInPlaceAreNotStale) {
  const Model model = convModel(WeightFrom::GraphInput);
  // One block of memory whose contents change between runs: the weight pointer stays the same.
  auto storage = std::make_shared<std::vector<float>>(kiln::testing::randomFloats(kWeightCount, 3));
  auto weights = [&] {
    auto buffer = Buffer::borrowed(storage, reinterpret_cast<const uint8_t*>(storage->data()),
                                   storage->size() * sizeof(float));
    return rt::RtValue::ofTensor(Tensor(DType::Float32, kWeightDims, buffer));
  };
  rt::Executor executor(model);
  std::vector<Tensor> outputs;
  for (uint32_t run = 0; run < 3; ++run) {
    *storage = kiln::testing::randomFloats(kWeightCount, 10 + run);
    const std::map<std::string, rt::RtValue> feeds = {{"x", input()}, {"w", weights()}};
    auto result = executor.run(feeds);
    ASSERT_TRUE(result) << result.status().toString();
    EXPECT_TRUE(sameBytes(result->outputs[0].tensor, fresh(model, feeds))) << "run " << run;
    outputs.push_back(result->outputs[0].tensor);
  }
  EXPECT_FALSE(sameBytes(outputs[0], outputs[1]));
}

TEST(ConvWeights, AnInitializerAFeedMayReplaceIsNotKept) {
  const Model model = convModel(WeightFrom::OverridableInitializer);
  rt::Executor executor(model);
  const std::map<std::string, rt::RtValue> own = {{"x", input()}};
  const std::map<std::string, rt::RtValue> fed = {
      {"x", input()}, {"w", rt::RtValue::ofTensor(tensor(kWeightDims, kiln::testing::randomFloats(kWeightCount, 7)))}};
  for (const auto* feeds : {&own, &fed, &own}) {
    auto result = executor.run(*feeds);
    ASSERT_TRUE(result) << result.status().toString();
    EXPECT_TRUE(sameBytes(result->outputs[0].tensor, fresh(model, *feeds)));
  }
}

} // namespace
