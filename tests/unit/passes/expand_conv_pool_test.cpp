// expand-conv-pool: the 2-D rewrite of 3-D Conv/ConvTranspose/MaxPool/AveragePool and 1-D
// ConvTranspose computes what the N-D kernels compute (auto_pad, ceil_mode, count_include_pad,
// dilations, groups, output_shape, output_padding, biases, weights as inputs and as constants),
// keeps the output names, and leaves what it cannot rewrite.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kiln/compare.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/expand_conv_pool.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

const char* kStress = R"(
<ir_version: 8, opset_import: ["" : 13]>
stress (float[2,4,5,6,7] x1, float[6,2,3,2,3] w1, float[6] b1, float[1,3,7,5,6] x2, float[4,3,2,2,2] w2, float[2,3,9,8,7] x3, float[2,3,6,7,5] x4, float[1,2,7,6,5] x5, float[2,4,3,4,3] x6, float[4,3,2,3,2] w6, float[6] b6, float[1,2,3,4,3] x7, float[2,2,3,3,2] w7, float[2,4,5] x8, float[4,3,3] w8, float[6] b8, float[1,2,5] x9) => (float[2,6,3,6,4] c1, float[1,4,3,2,4] c2, float[2,3,4,5,4] m3, float[1,2,4,3,3] m5, float[2,3,3,4,3] a4, float[2,3,3,4,3] a4b, float[1,2,4,4,3] a5, float[1,2,4,3,3] a5b, float[2,6,5,8,5] t6, float[1,2,6,8,6] t7, float[1,2,7,9,6] t7b, float[2,6,15] t8, float[1,3,10] t9) <float[2,3,4] w9 = {0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.75, -0.25, 1.0, 0.5, -1.0, 0.25, 2.0, -0.5, 1.5, 0.75, -0.25, 1.0, 0.5, -1.0, 0.25, 2.0, -0.5, 1.5}> {
  c1 = Conv <auto_pad = "SAME_UPPER", strides = [2, 1, 2], dilations = [1, 2, 1], group = 2> (x1, w1, b1)
  c2 = Conv <pads = [1, 0, 2, 0, 1, 1], strides = [3, 3, 2]> (x2, w2)
  m3 = MaxPool <kernel_shape = [3, 2, 3], strides = [2, 2, 2], pads = [1, 1, 1, 0, 0, 1], dilations = [2, 1, 1], ceil_mode = 1> (x3)
  m5 = MaxPool <kernel_shape = [3, 3, 2], strides = [2, 2, 2], auto_pad = "SAME_UPPER"> (x5)
  a4 = AveragePool <kernel_shape = [3, 3, 2], strides = [2, 2, 2], pads = [1, 1, 1, 1, 1, 0], count_include_pad = 1> (x4)
  a4b = AveragePool <kernel_shape = [3, 3, 2], strides = [2, 2, 2], pads = [1, 1, 1, 1, 1, 0]> (x4)
  a5 = AveragePool <kernel_shape = [3, 2, 2], strides = [2, 2, 2], pads = [1, 1, 0, 1, 1, 1], ceil_mode = 1> (x5)
  a5b = AveragePool <kernel_shape = [3, 2, 2], strides = [2, 2, 2], auto_pad = "SAME_LOWER"> (x5)
  t6 = ConvTranspose <strides = [2, 2, 1], pads = [1, 0, 0, 1, 1, 0], output_padding = [1, 0, 0], dilations = [1, 1, 2], group = 2> (x6, w6, b6)
  t7 = ConvTranspose <strides = [2, 2, 2], auto_pad = "SAME_LOWER"> (x7, w7)
  t7b = ConvTranspose <strides = [2, 2, 2], output_shape = [7, 9, 6]> (x7, w7)
  t8 = ConvTranspose <strides = [3], pads = [1, 2], output_padding = [1], dilations = [2], group = 2> (x8, w8, b8)
  t9 = ConvTranspose <strides = [2], auto_pad = "SAME_UPPER"> (x9, w9)
}
)";

using kiln::testing::runModel;

// Nodes of `op` whose input has rank `rank`.
size_t countOps(const Graph& graph, const std::string& op, size_t rank) {
  size_t n = 0;
  for (const auto& node : graph.nodes())
    n += node->opType() == op && node->input(0)->shape().hasRank() &&
         node->input(0)->shape().rank() == rank;
  return n;
}

} // namespace

TEST(ExpandConvPool, RewrittenGraphMatchesTheKernels) {
  Model model = modelFromOnnxText(kStress);
  auto feeds = makeDeterministicInputs(*model.graph, 5);
  ASSERT_TRUE(feeds) << feeds.status().toString();
  const std::vector<Tensor> expected = runModel(model, *feeds);

  auto expanded = expandConvPoolNodes(*model.graph, 13, [](const Node&) { return true; });
  ASSERT_TRUE(expanded);
  EXPECT_EQ(*expanded, 13u);
  EXPECT_TRUE(verifyModel(model).isOk());
  for (const char* op : {"Conv", "ConvTranspose", "MaxPool", "AveragePool"}) {
    EXPECT_EQ(countOps(*model.graph, op, 5), 0u) << op;
    EXPECT_EQ(countOps(*model.graph, op, 3), 0u) << op;
  }
  const std::vector<std::string> names = {"c1", "c2", "m3", "m5", "a4", "a4b", "a5",
                                          "a5b", "t6", "t7", "t7b", "t8", "t9"};
  ASSERT_EQ(model.graph->outputs().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i)
    EXPECT_EQ(model.graph->outputs()[i]->name(), names[i]);

  const std::vector<Tensor> got = runModel(model, *feeds);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].dims(), expected[i].dims()) << names[i];
    auto a = got[i].copyValues<float>(), e = expected[i].copyValues<float>();
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], e[k], 1e-5 * (1 + std::abs(e[k]))) << names[i] << "[" << k << "]";
  }
}

TEST(ExpandConvPool, RewritesOnlyWhatIsSelected) {
  Model model = modelFromOnnxText(kStress);
  auto expanded = expandConvPoolNodes(*model.graph, 13, [](const Node& n) {
    return n.opType() == "MaxPool";
  });
  ASSERT_TRUE(expanded);
  EXPECT_EQ(*expanded, 2u);
  EXPECT_EQ(countOps(*model.graph, "MaxPool", 5), 0u);
  EXPECT_EQ(countOps(*model.graph, "AveragePool", 5), 4u);
  EXPECT_EQ(countOps(*model.graph, "Conv", 5), 2u);
  EXPECT_TRUE(verifyModel(model).isOk());
}

TEST(ExpandConvPool, LeavesWhatItCannotRewriteAndSaysWhy) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3,4,4,4] x, float[1,2,4,4,4] z, float[1,2,4,4] q) => (float[N,3,3,3,3] y, float[1,2,3,3,3] m, int64[1,2,3,3,3] i, float[1,2,3,3] p) {
  y = AveragePool <kernel_shape = [2, 2, 2]> (x)
  m, i = MaxPool <kernel_shape = [2, 2, 2]> (z)
  p = MaxPool <kernel_shape = [2, 2]> (q)
}
)");
  const auto& nodes = model.graph->nodes();
  auto it = nodes.begin();
  const Node& avg = **it++;
  const Node& max = **it++;
  const Node& max2d = **it;
  EXPECT_TRUE(isNdConvPool(avg));
  EXPECT_FALSE(isNdConvPool(max2d));
  EXPECT_NE(convPoolExpansionBlocker(avg, 13).find("input shape is not static"), std::string::npos)
      << convPoolExpansionBlocker(avg, 13);
  EXPECT_NE(convPoolExpansionBlocker(max, 13).find("Indices output is used"), std::string::npos)
      << convPoolExpansionBlocker(max, 13);
  EXPECT_NE(convPoolExpansionBlocker(max, 4).find("opset 4"), std::string::npos);
  auto expanded = expandConvPoolNodes(*model.graph, 13, [](const Node&) { return true; });
  ASSERT_TRUE(expanded);
  EXPECT_EQ(*expanded, 0u);
  EXPECT_EQ(model.graph->nodeCount(), 3u);
}

TEST(ExpandConvPool, PassRewritesEverything) {
  Model model = modelFromOnnxText(kStress);
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, {"expand-conv-pool"}, options);
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_TRUE(result->stats[0].changed);
  EXPECT_EQ(countOps(*model.graph, "Conv", 5) + countOps(*model.graph, "ConvTranspose", 5), 0u);
}
