// The executor's per-graph plan (kernels, input/output slots, initializer pointers, release
// points) is worked out on the first run and reused: later runs with other shapes, fed
// initializer inputs, subgraphs reading outer values and initializers, and graph outputs that are
// inputs or initializers must all still give the right values. Also the rank-2 MaxPool path
// (no Indices) against the generic one (with Indices), bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

Tensor floats(std::vector<int64_t> dims, const std::vector<float>& v) {
  return rt::makeTensor<float>(DType::Float32, std::move(dims), v);
}

std::vector<float> values(const rt::RtValue& v) {
  EXPECT_TRUE(v.isTensor());
  return rt::toFloatVector(v.tensor);
}

TEST(ExecutorPlan, ShapesChangeBetweenRuns) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N,C] x) => (float[N,C] y, float[N,C] x_out) <float[1] b = {1.5}> {
  a = Add (x, b)
  r = Relu (a)
  y = Mul (r, x)
  x_out = Identity (x)
}
)");
  rt::Executor executor(model);
  for (int64_t n : {1, 3, 2, 3}) {
    std::vector<float> x;
    for (int64_t i = 0; i < n * 4; ++i)
      x.push_back(static_cast<float>(i) - 5.0f);
    auto result = executor.run({{"x", rt::RtValue::ofTensor(floats({n, 4}, x))}});
    ASSERT_TRUE(result) << result.status().toString();
    ASSERT_EQ(result->outputs.size(), 2u);
    EXPECT_EQ(result->outputs[0].tensor.dims(), (std::vector<int64_t>{n, 4}));
    std::vector<float> expected;
    for (float v : x)
      expected.push_back(std::max(v + 1.5f, 0.0f) * v);
    EXPECT_EQ(values(result->outputs[0]), expected) << "n = " << n;
    EXPECT_EQ(values(result->outputs[1]), x);
  }
}

TEST(ExecutorPlan, FedInitializerInputOverridesInitializer) {
  // `b` is a graph input with an initializer: fed, the fed value wins; not fed, the initializer.
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x, float[2] b) => (float[2] y, float[2] b_out) <float[2] b = {10, 20}> {
  y = Add (x, b)
  b_out = Identity (b)
}
)");
  rt::Executor executor(model);
  auto x = rt::RtValue::ofTensor(floats({2}, {1, 2}));
  for (int round = 0; round < 2; ++round) {
    auto plain = executor.run({{"x", x}});
    ASSERT_TRUE(plain) << plain.status().toString();
    EXPECT_EQ(values(plain->outputs[0]), (std::vector<float>{11, 22}));
    auto fed = executor.run({{"x", x}, {"b", rt::RtValue::ofTensor(floats({2}, {100, 200}))}});
    ASSERT_TRUE(fed) << fed.status().toString();
    EXPECT_EQ(values(fed->outputs[0]), (std::vector<float>{101, 202}));
    EXPECT_EQ(values(fed->outputs[1]), (std::vector<float>{100, 200}));
  }
}

TEST(ExecutorPlan, SubgraphsReadOuterValuesAndInitializers) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x, bool c) => (float[N] y, float[2] w_out) <float[1] w = {2}, float[2] w2 = {7, 8}> {
  h = Relu (x)
  y = If (c) <
    then_branch = t () => (float[N] t_out) {
      t_out = Mul (h, w)
    },
    else_branch = e () => (float[N] e_out) {
      e_out = Sub (x, w)
    }
  >
  w_out = Identity (w2)
}
)");
  rt::Executor executor(model);
  auto boolean = [](bool v) {
    return rt::RtValue::ofTensor(rt::makeTensor<uint8_t>(DType::Bool, {}, {v ? uint8_t{1} : uint8_t{0}}));
  };
  for (int round = 0; round < 2; ++round)
    for (bool c : {true, false}) {
      const int64_t n = c ? 3 : 2;
      std::vector<float> x = c ? std::vector<float>{-1, 2, 3} : std::vector<float>{5, -6};
      auto result = executor.run({{"x", rt::RtValue::ofTensor(floats({n}, x))}, {"c", boolean(c)}});
      ASSERT_TRUE(result) << result.status().toString();
      const std::vector<float> expected =
          c ? std::vector<float>{0, 4, 6} : std::vector<float>{3, -8};
      EXPECT_EQ(values(result->outputs[0]), expected);
      EXPECT_EQ(values(result->outputs[1]), (std::vector<float>{7, 8}));
    }
}

TEST(ExecutorPlan, CapturedIntermediatesOnEveryRun) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[2] y) {
  a = Neg (x)
  y = Abs (a)
}
)");
  rt::ExecutorOptions options;
  options.captureNames = {"a"};
  rt::Executor executor(model, options);
  for (float v : {1.0f, 4.0f}) {
    auto result = executor.run({{"x", rt::RtValue::ofTensor(floats({2}, {v, -v}))}});
    ASSERT_TRUE(result) << result.status().toString();
    ASSERT_EQ(result->captured.count("a"), 1u);
    EXPECT_EQ(values(result->captured.at("a")), (std::vector<float>{-v, v}));
    EXPECT_EQ(values(result->outputs[0]), (std::vector<float>{v, v}));
  }
}

// MaxPool's Y with and without the Indices output (two code paths) must be the same bits.
std::vector<Tensor> runMaxPool(const Tensor& x, const std::vector<std::pair<std::string, Attribute>>& attrs,
                               bool indices) {
  Model model;
  model.opsets = {{"", 12}};
  model.graph = std::make_shared<Graph>("g");
  Graph& g = *model.graph;
  Value* in = g.addInitializer("x", x);
  std::vector<std::string> outs = {"y"};
  if (indices) outs.push_back("i");
  Node* n = g.appendNode("MaxPool", {in}, outs);
  for (const auto& [name, value] : attrs)
    n->setAttribute(name, value);
  for (Value* out : n->outputs())
    g.addOutput(out);
  rt::Executor executor(model);
  auto result = executor.run({});
  EXPECT_TRUE(result) << (result ? "" : result.status().toString());
  std::vector<Tensor> out;
  if (result)
    for (auto& v : result->outputs)
      out.push_back(v.tensor);
  return out;
}

TEST(ExecutorPlan, MaxPool2dPathMatchesGenericBitForBit) {
  struct Case {
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil = 0;
  };
  const std::vector<Case> cases = {
      {{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}},    {{1, 2}, {1, 2}, {0, 0, 0, 0}, {1, 1}},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}},    {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}},
      {{3, 2}, {2, 3}, {1, 0, 2, 1}, {2, 2}, 1}, {{2, 3}, {3, 1}, {0, 2, 1, 0}, {1, 2}, 1},
      {{5, 5}, {1, 1}, {2, 2, 2, 2}, {1, 1}},
  };
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(2 * 3 * 9 * 11);
  for (float& v : x)
    v = dist(gen);
  // Ties and NaNs: the first tap wins unless a later one is greater.
  x[5] = x[6] = x[16] = 0.75f;
  x[30] = std::numeric_limits<float>::quiet_NaN();
  x[200] = std::numeric_limits<float>::quiet_NaN();
  const Tensor input = floats({2, 3, 9, 11}, x);
  for (const Case& c : cases) {
    std::vector<std::pair<std::string, Attribute>> attrs = {
        {"kernel_shape", Attribute::ofInts(c.kernel)},
        {"strides", Attribute::ofInts(c.strides)},
        {"pads", Attribute::ofInts(c.pads)},
        {"dilations", Attribute::ofInts(c.dilations)},
        {"ceil_mode", Attribute::ofInt(c.ceil)}};
    auto fast = runMaxPool(input, attrs, false);
    auto generic = runMaxPool(input, attrs, true);
    ASSERT_EQ(fast.size(), 1u);
    ASSERT_EQ(generic.size(), 2u);
    ASSERT_EQ(fast[0].dims(), generic[0].dims());
    EXPECT_EQ(std::memcmp(fast[0].data(), generic[0].data(), fast[0].byteSize()), 0)
        << "kernel " << c.kernel[0] << "x" << c.kernel[1] << " strides " << c.strides[0] << ","
        << c.strides[1];
  }
}

} // namespace
