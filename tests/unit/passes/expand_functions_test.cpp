// expand-functions: a node the target refuses becomes its ONNX function body only when the body
// lowers; the expanded graph computes what the node did.
#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "kiln/compare.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// A target that refuses the listed op types and takes everything else.
Expected<PipelineResult> expandFor(Model& model, std::set<std::string> refused) {
  PipelineOptions options;
  options.verifyEach = true;
  options.targetName = "test";
  options.targetRefusal = [refused](const Node& node, int64_t) -> std::string {
    return refused.count(node.opType()) ? "no rule for " + node.opType() : "";
  };
  return runPipeline(model, {"infer-shapes", "expand-functions", "eliminate-dead-nodes"}, options);
}

std::vector<std::string> opTypes(const Model& model) {
  std::vector<std::string> out;
  for (const auto& node : model.graph->nodes())
    out.push_back(node->opType());
  return out;
}

bool hasOp(const Model& model, const std::string& op) {
  for (const auto& node : model.graph->nodes())
    if (node->opType() == op) return true;
  return false;
}

std::vector<Tensor> run(const Model& model, const std::map<std::string, rt::RtValue>& feeds) {
  rt::Executor executor(model);
  auto result = executor.run(feeds);
  EXPECT_TRUE(result) << result.status().toString();
  std::vector<Tensor> out;
  if (result)
    for (const auto& value : result->outputs)
      out.push_back(value.tensor);
  return out;
}

void expectClose(const std::vector<Tensor>& expected, const std::vector<Tensor>& actual) {
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i].dims(), actual[i].dims()) << "output " << i;
    auto a = expected[i].copyValues<float>();
    auto b = actual[i].copyValues<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], b[k], 1e-4f * (1 + std::fabs(a[k]))) << "output " << i << " element " << k;
  }
}

const char* kLayerNorm = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2,3,4] x, float[3,4] scale, float[3,4] bias) => (float[2,3,4] y, float[2,1,1] mean, float[2,1,1] inv) {
  y, mean, inv = LayerNormalization <axis = 1, epsilon = 0.01> (x, scale, bias)
}
)";

} // namespace

TEST(ExpandFunctions, LayerNormalizationExpandedWhenTheTargetRefusesIt) {
  Model original = modelFromOnnxText(kLayerNorm);
  Model model = modelFromOnnxText(kLayerNorm);
  auto result = expandFor(model, {"LayerNormalization"});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_FALSE(hasOp(model, "LayerNormalization"));
  EXPECT_TRUE(hasOp(model, "ReduceMean"));
  EXPECT_TRUE(verifyModel(model).isOk());
  // The outputs keep their names (and the body nodes are named under the node's name).
  ASSERT_EQ(model.graph->outputs().size(), 3u);
  EXPECT_EQ(model.graph->outputs()[0]->name(), "y");
  EXPECT_EQ(model.graph->outputs()[1]->name(), "mean");
  EXPECT_EQ(model.graph->outputs()[2]->name(), "inv");
  EXPECT_EQ(model.graph->outputs()[0]->producer()->name(), "n0/Y");
  // Every body node carries the original node's location.
  for (const auto& node : model.graph->nodes()) {
    ASSERT_EQ(node->locations().size(), 1u);
    EXPECT_EQ(node->locations()[0].nodeName, "n0");
    EXPECT_EQ(node->locations()[0].opType, "LayerNormalization");
  }
  auto feeds = makeDeterministicInputs(*original.graph, 7);
  ASSERT_TRUE(feeds);
  expectClose(run(original, *feeds), run(model, *feeds));
}

TEST(ExpandFunctions, LayerNormalizationKeptWhenTheTargetLowersIt) {
  Model model = modelFromOnnxText(kLayerNorm);
  auto result = expandFor(model, {});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_EQ(opTypes(model), (std::vector<std::string>{"LayerNormalization"}));
  EXPECT_FALSE(result->stats[1].changed);
}

TEST(ExpandFunctions, KeptWhenItsBodyDoesNotLowerEither) {
  Model model = modelFromOnnxText(kLayerNorm);
  auto result = expandFor(model, {"LayerNormalization", "ReduceMean"});
  ASSERT_TRUE(result) << result.status().toString();
  // The tried body is gone again: the node stays, and a note names the body op that blocked it.
  EXPECT_EQ(opTypes(model), (std::vector<std::string>{"LayerNormalization"}));
  EXPECT_EQ(model.graph->values().size(), 6u); // 3 inputs, 3 outputs
  bool noted = false;
  for (const std::string& note : result->notes)
    if (note.find("node 'n0' (LayerNormalization) was not expanded") != std::string::npos &&
        note.find("(ReduceMean): no rule for ReduceMean") != std::string::npos)
      noted = true;
  EXPECT_TRUE(noted);
}

TEST(ExpandFunctions, NestedBodiesAndAttributeReferences) {
  // SoftmaxCrossEntropyLoss's body holds a NegativeLogLikelihoodLoss, refused too and expanded in
  // turn; `reduction` reaches it through an attribute reference, and `ignore_index` (no default)
  // through the context-dependent builder.
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3,5] scores, int64[3] labels) => (float[] loss, float[3,5] logp) {
  loss, logp = SoftmaxCrossEntropyLoss <reduction = "sum", ignore_index = 4> (scores, labels)
}
)";
  Model original = modelFromOnnxText(text);
  Model model = modelFromOnnxText(text);
  auto result = expandFor(model, {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_FALSE(hasOp(model, "SoftmaxCrossEntropyLoss"));
  EXPECT_FALSE(hasOp(model, "NegativeLogLikelihoodLoss"));
  EXPECT_TRUE(hasOp(model, "GatherElements"));
  std::map<std::string, rt::RtValue> feeds;
  feeds["scores"] = rt::RtValue::ofTensor(
      Tensor::fromValues<float>(DType::Float32, {3, 5},
                                std::vector<float>{0.1f, -0.3f, 0.7f, 1.2f, -1.0f, 0.5f, 0.4f, 0.3f,
                                                   -0.2f, 0.9f, -0.6f, 0.8f, 0.0f, 0.2f, 1.5f}));
  feeds["labels"] = rt::RtValue::ofTensor(
      Tensor::fromValues<int64_t>(DType::Int64, {3}, std::vector<int64_t>{2, 4, 1}));
  expectClose(run(original, feeds), run(model, feeds));
}

TEST(ExpandFunctions, DefaultAttributeThroughAReference) {
  // MeanVarianceNormalization's body reads `axes` by reference; the node leaves it out, so the
  // schema default [0, 2, 3] applies.
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,2,2] x) => (float[2,3,2,2] y) {
  y = MeanVarianceNormalization (x)
}
)";
  Model original = modelFromOnnxText(text);
  Model model = modelFromOnnxText(text);
  auto result = expandFor(model, {"MeanVarianceNormalization"});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_FALSE(hasOp(model, "MeanVarianceNormalization"));
  const Node* mean = model.graph->findLocalValue("n0/X_RM")->producer();
  ASSERT_NE(mean, nullptr);
  ASSERT_NE(mean->attribute("axes"), nullptr);
  EXPECT_EQ(mean->attribute("axes")->asInts(), (std::vector<int64_t>{0, 2, 3}));
  auto feeds = makeDeterministicInputs(*original.graph, 3);
  ASSERT_TRUE(feeds);
  expectClose(run(original, *feeds), run(model, *feeds));
}

TEST(ExpandFunctions, OlderBodyWithASubgraphReadingOuterValues) {
  // Range's body is written for opset 11 (its ops mean the same at 17) and holds a Loop whose body
  // reads the function input `delta` from the enclosing graph: the renamed subgraph must read the
  // node's actual input.
  const char* text = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[] start, float[] limit, float[] step) => (float[5] y) {
  y = Range (start, limit, step)
}
)";
  Model original = modelFromOnnxText(text);
  Model model = modelFromOnnxText(text);
  auto result = expandFor(model, {"Range"});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_FALSE(hasOp(model, "Range"));
  EXPECT_TRUE(hasOp(model, "Loop"));
  EXPECT_TRUE(verifyModel(model).isOk());
  std::map<std::string, rt::RtValue> feeds;
  auto scalar = [](float v) {
    return rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {}, {v}));
  };
  feeds["start"] = scalar(1.0f);
  feeds["limit"] = scalar(3.4f);
  feeds["step"] = scalar(0.5f);
  expectClose(run(original, feeds), run(model, feeds));
}

namespace {

// Celu at opset 28 takes float16; the onnx library's Celu-12 body is typed for float and its float
// alpha constant would meet the float16 input (Div of f16 and f32: K5002 when run).
const char* kCeluHalf = R"(
<ir_version: 10, opset_import: ["" : 28]>
g (float16[5] x) => (float16[5] y) {
  y = Celu <alpha = 2.0> (x)
}
)";

TEST(ExpandFunctions, BodyNotUsedForAnInputTypeItsSchemaDoesNotTake) {
  Model model = modelFromOnnxText(kCeluHalf);
  auto result = expandFor(model, {"Celu"});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_EQ(opTypes(model), (std::vector<std::string>{"Celu"}));
  bool noted = false;
  for (const std::string& note : result->notes)
    if (note.find("(Celu) was not expanded") != std::string::npos &&
        note.find("does not take input 0 of type tensor(float16)") != std::string::npos)
      noted = true;
  EXPECT_TRUE(noted);
}

} // namespace
