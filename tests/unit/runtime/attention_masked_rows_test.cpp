// Attention (opsets 23/24) on a query row its mask hides entirely: the row attends to nothing, so
// its probabilities and output are 0 (the spec's errata), in the kernel and in the expansion.
#include <cmath>

#include <gtest/gtest.h>

#include "kiln/passes/pass.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

// Q, K, V [1, 1, 2, 4]; the bool mask hides both keys from query row 1.
const char* kMaskedRowModel = R"(
<ir_version: 10, opset_import: ["" : 24]>
g (float[1,1,2,4] q, float[1,1,2,4] k, float[1,1,2,4] v) => (float[1,1,2,4] y, float[1,1,2,2] qk) {
  mask = Constant <value = bool[2,2] {1,0, 0,0}> ()
  y, , , qk = Attention <qk_matmul_output_mode = 3> (q, k, v, mask)
}
)";

std::map<std::string, rt::RtValue> feeds() {
  std::map<std::string, rt::RtValue> out;
  uint32_t seed = 1;
  for (const char* name : {"q", "k", "v"})
    out[name] = rt::RtValue::ofTensor(Tensor::fromValues<float>(
        DType::Float32, {1, 1, 2, 4}, kiln::testing::randomFloats(8, seed++)));
  return out;
}

// Row 0 sees key 0 only (probability 1, output = V's row 0); row 1 sees nothing (all 0).
void expectMaskedRowIsZero(const std::vector<Tensor>& outputs) {
  ASSERT_EQ(outputs.size(), 2u);
  const auto y = outputs[0].copyValues<float>();
  const auto qk = outputs[1].copyValues<float>();
  const auto v = feeds()["v"].tensor.copyValues<float>();
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_NEAR(y[e], v[e], 1e-6) << "row 0, feature " << e;
    EXPECT_EQ(y[4 + e], 0.0f) << "row 1, feature " << e << " (NaN from 0/0 before the fix)";
  }
  EXPECT_EQ(qk[0], 1.0f);
  EXPECT_EQ(qk[1], 0.0f);
  EXPECT_EQ(qk[2], 0.0f);
  EXPECT_EQ(qk[3], 0.0f);
}

TEST(AttentionMaskedRows, KernelGivesZeroForAFullyMaskedRow) {
  Model model = kiln::testing::modelFromOnnxText(kMaskedRowModel);
  expectMaskedRowIsZero(kiln::testing::runModel(model, feeds()));
}

TEST(AttentionMaskedRows, ExpansionGivesZeroForAFullyMaskedRow) {
  Model model = kiln::testing::modelFromOnnxText(kMaskedRowModel);
  PipelineOptions options;
  options.verifyEach = true;
  auto ran = runPipeline(model, {"infer-shapes", "expand-new-ops"}, options);
  ASSERT_TRUE(ran) << ran.status().toString();
  for (const auto& node : model.graph->nodes())
    ASSERT_NE(node->opType(), "Attention") << "the node was not expanded";
  expectMaskedRowIsZero(kiln::testing::runModel(model, feeds()));
}

} // namespace
