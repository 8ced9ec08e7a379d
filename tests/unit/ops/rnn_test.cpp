// RNN/GRU/LSTM through both targets: the .ms LSTM and GRU ops (default cells with constant
// weights) read back as the same ONNX nodes and compute the same outputs; what a target refuses is
// unrolled by the conversion pipeline for that target, and the unrolled artifact computes the same.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/backends/target.h"
#include "kiln/compare.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

const char* kNative = R"(
<ir_version: 8, opset_import: ["" : 14]>
rnn (float[5,2,2] x, float[1,2,3] h0, float[1,2,3] c0) => (float[5,1,2,3] y, float[1,2,3] yh, float[1,2,3] yc, float[5,2,2,3] gy, float[2,2,3] gyh, float[5,1,2,3] ry) <float[1,12,2] w = {-0.4, 0.3, 0.1, -0.2, 0.5, 0.6, -0.1, 0.2, 0.3, -0.5, 0.4, 0.1, 0.2, -0.3, 0.6, 0.0, -0.6, 0.1, 0.2, 0.5, -0.2, 0.3, 0.4, -0.1}, float[1,12,3] r = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.1, 0.2, -0.3, 0.5, 0.1, -0.4, 0.2, 0.3, -0.6, 0.1, 0.0, 0.2, -0.3, 0.4, 0.5, -0.1, 0.2, 0.3, 0.6, -0.4, 0.1, 0.2, -0.2, 0.3, -0.5, 0.1, 0.4, 0.2, -0.1, 0.3}, float[1,24] b = {0.1, 0.2, -0.1, 0.3, -0.2, 0.1, 0.0, 0.4, -0.3, 0.2, 0.1, -0.1, 0.2, -0.2, 0.3, 0.1, 0.0, -0.1, 0.2, 0.3, -0.4, 0.1, 0.2, -0.3}, float[2,9,2] gw = {0.2, -0.1, 0.4, 0.3, -0.5, 0.1, 0.6, -0.2, 0.1, 0.3, -0.4, 0.2, 0.5, -0.1, 0.2, 0.4, -0.3, 0.1, 0.2, -0.1, 0.4, 0.3, -0.5, 0.1, 0.6, -0.2, 0.1, 0.3, -0.4, 0.2, 0.5, -0.1, 0.2, 0.4, -0.3, 0.1}, float[2,9,3] gr = {0.1, 0.2, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.1, -0.4, 0.5, 0.2, 0.1, -0.3, 0.2, 0.6, 0.1, -0.2, 0.3, 0.2, -0.1, 0.4, -0.5, 0.1, 0.2, 0.3, -0.2, 0.2, -0.1, 0.3, 0.1, 0.4, -0.2, -0.3, 0.2, 0.1, 0.4, 0.1, -0.3, 0.2, -0.2, 0.5, 0.1, 0.3, -0.1, 0.1, 0.2, -0.3, 0.4, -0.1, 0.2, 0.3, -0.2, 0.1}> {
  y, yh, yc = LSTM <hidden_size = 3> (x, w, r, b, , h0, c0)
  gy, gyh = GRU <hidden_size = 3, direction = "bidirectional"> (x, gw, gr)
  ry, ryh, ryc = LSTM <hidden_size = 3, direction = "reverse", clip = 0.4> (x, w, r, b, , h0, c0)
}
)";

std::vector<Tensor> run(const Model& model, const std::map<std::string, rt::RtValue>& feeds) {
  rt::Executor executor(model);
  auto result = executor.run(feeds);
  EXPECT_TRUE(result) << result.status().toString();
  std::vector<Tensor> out;
  if (result)
    for (const rt::RtValue& v : result->outputs)
      out.push_back(v.tensor);
  return out;
}

size_t countOps(const Graph& graph, const std::string& op) {
  size_t n = 0;
  for (const auto& node : graph.nodes())
    n += node->opType() == op;
  return n;
}

// Converts for `target` as the converters do (the pipeline with the target's prepare hook), writes
// and reads the artifact back, and compares every output with the source model's.
Model throughTarget(const std::string& target) {
  Model source = modelFromOnnxText(kNative);
  auto feeds = makeDeterministicInputs(*source.graph, 1);
  EXPECT_TRUE(feeds);
  const std::vector<Tensor> expected = run(source, *feeds);

  Model model = modelFromOnnxText(kNative);
  ConversionOptions conversion;
  conversion.target = target;
  auto ran = runConversionPipeline(model, conversion);
  EXPECT_TRUE(ran) << ran.status().toString();
  auto back = findTarget(target)->roundTrip(std::move(model), RoundTripOptions{});
  EXPECT_TRUE(back) << back.status().toString();
  if (!back) return Model{};
  const std::vector<Tensor> got = run(*back, *feeds);
  EXPECT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size() && i < expected.size(); ++i) {
    EXPECT_EQ(got[i].dims(), expected[i].dims()) << target << " output " << i;
    auto a = got[i].copyValues<float>(), e = expected[i].copyValues<float>();
    for (size_t k = 0; k < a.size() && k < e.size(); ++k)
      EXPECT_NEAR(a[k], e[k], 1e-5) << target << " output " << i << "[" << k << "]";
  }
  return back.take();
}

} // namespace

TEST(RnnTargets, MsKeepsDefaultCellsAsLstmAndGruAndUnrollsTheRest) {
  Model back = throughTarget("ms");
  ASSERT_TRUE(back.graph);
  // The forward LSTM and the GRU come back as themselves; the clipped reverse LSTM was unrolled.
  EXPECT_EQ(countOps(*back.graph, "LSTM"), 1u);
  EXPECT_EQ(countOps(*back.graph, "GRU"), 1u);
  EXPECT_GT(countOps(*back.graph, "MatMul") + countOps(*back.graph, "Gemm"), 0u);
}

TEST(RnnTargets, OmUnrollsEveryCell) {
  Model back = throughTarget("om");
  ASSERT_TRUE(back.graph);
  for (const char* op : {"LSTM", "GRU", "RNN"})
    EXPECT_EQ(countOps(*back.graph, op), 0u) << op;
}
