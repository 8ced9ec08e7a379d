// expand-rnn: the unrolled graph computes what the RNN/GRU/LSTM kernels compute (directions,
// layouts, clip, peepholes, input_forget, linear_before_reset, activations with alpha/beta,
// constant and run-time sequence_lens), keeps the output names, and leaves what it cannot unroll.
#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kiln/compare.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/expand_rnn.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// Every kind of cell and option, weights as constants (computed once) and as inputs (sliced by
// Gather), sequence lengths constant and fed at run time.
const char* kStress = R"(
<ir_version: 8, opset_import: ["" : 14]>
stress (float[4,3,2] x, float[3,4,2] xb, int32[3] lens, float[2,9,2] gwi) => (float[4,1,3,3] y1, float[1,3,3] h1, float[1,3,3] c1, float[3,4,1,3] y2, float[3,1,3] h2, float[4,2,3,3] y3, float[2,3,3] h3, float[4,1,3,3] y4, float[1,3,3] c4, float[4,2,3,3] y5, float[2,3,3] h5) <float[1,12,2] w = {-0.4, 0.3, 0.1, -0.2, 0.5, 0.6, -0.1, 0.2, 0.3, -0.5, 0.4, 0.1, 0.2, -0.3, 0.6, 0.0, -0.6, 0.1, 0.2, 0.5, -0.2, 0.3, 0.4, -0.1}, float[1,12,3] r = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.1, 0.2, -0.3, 0.5, 0.1, -0.4, 0.2, 0.3, -0.6, 0.1, 0.0, 0.2, -0.3, 0.4, 0.5, -0.1, 0.2, 0.3, 0.6, -0.4, 0.1, 0.2, -0.2, 0.3, -0.5, 0.1, 0.4, 0.2, -0.1, 0.3}, float[1,24] b = {0.1, 0.2, -0.1, 0.3, -0.2, 0.1, 0.0, 0.4, -0.3, 0.2, 0.1, -0.1, 0.2, -0.2, 0.3, 0.1, 0.0, -0.1, 0.2, 0.3, -0.4, 0.1, 0.2, -0.3}, float[1,9] p = {0.3, -0.2, 0.1, 0.4, 0.2, -0.3, 0.1, 0.5, -0.1}, int32[3] cl = {4, 2, 3}, float[1,9,2] gw = {0.2, -0.1, 0.4, 0.3, -0.5, 0.1, 0.6, -0.2, 0.1, 0.3, -0.4, 0.2, 0.5, -0.1, 0.2, 0.4, -0.3, 0.1}, float[1,9,3] gr = {0.1, 0.2, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.1, -0.4, 0.5, 0.2, 0.1, -0.3, 0.2, 0.6, 0.1, -0.2, 0.3, 0.2, -0.1, 0.4, -0.5, 0.1, 0.2, 0.3, -0.2}, float[1,18] gb = {0.1, -0.2, 0.3, 0.2, 0.1, -0.1, 0.4, -0.3, 0.2, 0.1, 0.3, -0.2, 0.2, 0.1, -0.4, 0.3, 0.2, 0.1}, float[2,3,2] rw = {0.5, -0.4, 0.3, 0.2, -0.1, 0.6, -0.3, 0.2, 0.4, -0.5, 0.1, 0.3}, float[2,3,3] rr = {0.2, -0.1, 0.3, 0.1, 0.4, -0.2, -0.3, 0.2, 0.1, 0.4, 0.1, -0.3, 0.2, -0.2, 0.5, 0.1, 0.3, -0.1}, float[2,6] rb = {0.1, 0.2, -0.1, 0.3, 0.1, -0.2, 0.2, -0.3, 0.1, 0.0, 0.2, 0.1}, float[2,9,3] gr2 = {0.1, 0.2, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.1, -0.4, 0.5, 0.2, 0.1, -0.3, 0.2, 0.6, 0.1, -0.2, 0.3, 0.2, -0.1, 0.4, -0.5, 0.1, 0.2, 0.3, -0.2, 0.2, -0.1, 0.3, 0.1, 0.4, -0.2, -0.3, 0.2, 0.1, 0.4, 0.1, -0.3, 0.2, -0.2, 0.5, 0.1, 0.3, -0.1, 0.1, 0.2, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.1}> {
  y1, h1, c1 = LSTM <hidden_size = 3, direction = "reverse", clip = 0.5> (x, w, r, b, cl, , , p)
  y2, h2 = GRU <hidden_size = 3, layout = 1, linear_before_reset = 1> (xb, gw, gr, gb)
  y3, h3 = RNN <hidden_size = 3, direction = "bidirectional", activations = ["Relu", "Tanh"]> (x, rw, rr, rb, lens)
  y4, h4, c4 = LSTM <hidden_size = 3, input_forget = 1, activations = ["HardSigmoid", "ScaledTanh", "Affine"], activation_alpha = [0.3, 0.9, 1.5], activation_beta = [0.4, 1.1, 0.2]> (x, w, r, b, , , , p)
  y5, h5 = GRU <hidden_size = 3, direction = "bidirectional"> (x, gwi, gr2, , lens)
}
)";

using kiln::testing::runModel;

size_t countOps(const Graph& graph, const std::string& op) {
  size_t n = 0;
  for (const auto& node : graph.nodes())
    n += node->opType() == op;
  return n;
}

} // namespace

TEST(ExpandRnn, UnrolledGraphMatchesTheKernels) {
  Model model = modelFromOnnxText(kStress);
  auto feeds = makeDeterministicInputs(*model.graph, 3);
  ASSERT_TRUE(feeds) << feeds.status().toString();
  (*feeds)["lens"] = rt::RtValue::ofTensor(
      Tensor::fromValues<int32_t>(DType::Int32, {3}, std::vector<int32_t>{4, 1, 3}));
  const std::vector<Tensor> expected = runModel(model, *feeds);

  auto unrolled = unrollRnnNodes(*model.graph, [](const Node&) { return true; });
  ASSERT_TRUE(unrolled);
  EXPECT_EQ(*unrolled, 5u);
  EXPECT_TRUE(verifyModel(model).isOk());
  for (const char* op : {"LSTM", "GRU", "RNN"})
    EXPECT_EQ(countOps(*model.graph, op), 0u) << op;
  const std::vector<std::string> names = {"y1", "h1", "c1", "y2", "h2", "y3",
                                          "h3", "y4", "c4", "y5", "h5"};
  ASSERT_EQ(model.graph->outputs().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(model.graph->outputs()[i]->name(), names[i]);

  const std::vector<Tensor> got = runModel(model, *feeds);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dims(), expected[i].dims()) << names[i];
    auto a = got[i].copyValues<float>(), e = expected[i].copyValues<float>();
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], e[k], 1e-5) << names[i] << "[" << k << "]";
  }
}

TEST(ExpandRnn, UnrollsOnlyWhatTheTargetRefuses) {
  Model model = modelFromOnnxText(kStress);
  auto unrolled =
      unrollRnnNodes(*model.graph, [](const Node& n) { return n.opType() == "GRU"; });
  ASSERT_TRUE(unrolled);
  EXPECT_EQ(*unrolled, 2u);
  EXPECT_EQ(countOps(*model.graph, "GRU"), 0u);
  EXPECT_EQ(countOps(*model.graph, "LSTM"), 2u);
  EXPECT_EQ(countOps(*model.graph, "RNN"), 1u);
  EXPECT_TRUE(verifyModel(model).isOk());
}

TEST(ExpandRnn, LeavesADynamicSequenceAndSaysWhy) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 14]>
g (float[T,1,2] x, float[1,3,2] w, float[1,3,3] r) => (float[1,1,3] h) {
  y, h = RNN <hidden_size = 3> (x, w, r)
}
)");
  const Node& rnn = *model.graph->nodes().front();
  EXPECT_NE(rnnUnrollBlocker(rnn).find("sequence length of X is not static"), std::string::npos)
      << rnnUnrollBlocker(rnn);
  auto unrolled = unrollRnnNodes(*model.graph, [](const Node&) { return true; });
  ASSERT_TRUE(unrolled);
  EXPECT_EQ(*unrolled, 0u);
  EXPECT_EQ(countOps(*model.graph, "RNN"), 1u);
}

TEST(ExpandRnn, PassExpandsEverything) {
  Model model = modelFromOnnxText(kStress);
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, {"expand-rnn"}, options);
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_TRUE(result->stats[0].changed);
  EXPECT_EQ(countOps(*model.graph, "LSTM") + countOps(*model.graph, "GRU"), 0u);
}
