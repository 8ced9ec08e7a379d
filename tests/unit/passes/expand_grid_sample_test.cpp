// expand-grid-sample: the rewrite of 2-D GridSample into Gather and elementwise ops computes what
// the GridSample kernel computes for every mode (nearest, bilinear, bicubic), padding mode (zeros,
// border, reflection) and align_corners, with grid points far outside [-1, 1], keeps the output
// names, and leaves what it cannot rewrite.
#include <cmath>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "kiln/compare.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/expand_grid_sample.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

const char* kEveryMode = R"(
<ir_version: 8, opset_import: ["" : 16]>
gs (float[2,3,4,6] x, float[2,5,7,2] g) => (float[2,3,5,7] y0, float[2,3,5,7] y1, float[2,3,5,7] y2, float[2,3,5,7] y3, float[2,3,5,7] y4, float[2,3,5,7] y5, float[2,3,5,7] y6, float[2,3,5,7] y7, float[2,3,5,7] y8, float[2,3,5,7] y9, float[2,3,5,7] y10, float[2,3,5,7] y11, float[2,3,5,7] y12, float[2,3,5,7] y13, float[2,3,5,7] y14, float[2,3,5,7] y15, float[2,3,5,7] y16, float[2,3,5,7] y17) {
  y0 = GridSample <mode = "nearest", padding_mode = "zeros", align_corners = 0> (x, g)
  y1 = GridSample <mode = "nearest", padding_mode = "zeros", align_corners = 1> (x, g)
  y2 = GridSample <mode = "nearest", padding_mode = "border", align_corners = 0> (x, g)
  y3 = GridSample <mode = "nearest", padding_mode = "border", align_corners = 1> (x, g)
  y4 = GridSample <mode = "nearest", padding_mode = "reflection", align_corners = 0> (x, g)
  y5 = GridSample <mode = "nearest", padding_mode = "reflection", align_corners = 1> (x, g)
  y6 = GridSample <mode = "bilinear", padding_mode = "zeros", align_corners = 0> (x, g)
  y7 = GridSample <mode = "bilinear", padding_mode = "zeros", align_corners = 1> (x, g)
  y8 = GridSample <mode = "bilinear", padding_mode = "border", align_corners = 0> (x, g)
  y9 = GridSample <mode = "bilinear", padding_mode = "border", align_corners = 1> (x, g)
  y10 = GridSample <mode = "bilinear", padding_mode = "reflection", align_corners = 0> (x, g)
  y11 = GridSample <mode = "bilinear", padding_mode = "reflection", align_corners = 1> (x, g)
  y12 = GridSample <mode = "bicubic", padding_mode = "zeros", align_corners = 0> (x, g)
  y13 = GridSample <mode = "bicubic", padding_mode = "zeros", align_corners = 1> (x, g)
  y14 = GridSample <mode = "bicubic", padding_mode = "border", align_corners = 0> (x, g)
  y15 = GridSample <mode = "bicubic", padding_mode = "border", align_corners = 1> (x, g)
  y16 = GridSample <mode = "bicubic", padding_mode = "reflection", align_corners = 0> (x, g)
  y17 = GridSample <mode = "bicubic", padding_mode = "reflection", align_corners = 1> (x, g)
}
)";

using kiln::testing::runModel;

} // namespace

TEST(ExpandGridSample, RewrittenGraphMatchesTheKernel) {
  Model model = modelFromOnnxText(kEveryMode);
  auto feeds = makeDeterministicInputs(*model.graph, 9);
  ASSERT_TRUE(feeds) << feeds.status().toString();
  // Grid points up to 2.7 outside the image on either side, so every padding rule is exercised.
  Tensor& grid = (*feeds)["g"].tensor;
  std::vector<float> g = grid.copyValues<float>();
  for (size_t i = 0; i < g.size(); ++i)
    g[i] = -2.7f + 5.4f * float((i * 37) % 101) / 100.0f;
  grid = Tensor::fromValues<float>(DType::Float32, grid.dims(), g);
  const std::vector<Tensor> expected = runModel(model, *feeds);

  auto expanded = expandGridSampleNodes(*model.graph, 16, [](const Node&) { return true; });
  ASSERT_TRUE(expanded);
  EXPECT_EQ(*expanded, 18u);
  EXPECT_TRUE(verifyModel(model).isOk());
  for (const auto& node : model.graph->nodes())
    EXPECT_NE(node->opType(), "GridSample");
  const std::vector<Tensor> got = runModel(model, *feeds);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(model.graph->outputs()[i]->name(), "y" + std::to_string(i));
    ASSERT_EQ(got[i].dims(), expected[i].dims());
    auto a = got[i].copyValues<float>(), e = expected[i].copyValues<float>();
    for (size_t k = 0; k < a.size(); ++k)
      EXPECT_NEAR(a[k], e[k], 1e-5 * (1 + std::abs(e[k]))) << "y" << i << "[" << k << "]";
  }
}

TEST(ExpandGridSample, LeavesWhatItCannotRewriteAndSaysWhy) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 16]>
gs (float[1,2,3,4] x, float[1,H,6,2] g) => (float[1,2,H,6] y) {
  y = GridSample (x, g)
}
)");
  const Node& node = *model.graph->nodes().front();
  EXPECT_NE(gridSampleExpansionBlocker(node, 16).find("not static"), std::string::npos)
      << gridSampleExpansionBlocker(node, 16);
  auto expanded = expandGridSampleNodes(*model.graph, 16, [](const Node&) { return true; });
  ASSERT_TRUE(expanded);
  EXPECT_EQ(*expanded, 0u);
  EXPECT_EQ(model.graph->nodeCount(), 1u);
}
