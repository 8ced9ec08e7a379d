// The .om op rules (src/backends/om/ops/<family>.cpp) through a write / read-back round trip.
#include <gtest/gtest.h>

#include "kiln/backends/om.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
// lowerModel and its refusals are the backend's internal entry point.
#include "../../../src/backends/om/om_internal.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

std::vector<float> run(const Model& model, const Tensor& x) {
  rt::Executor exec(model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(x);
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  if (!out) return {};
  return out->outputs.at(0).tensor.copyValues<float>();
}

// ONNX's output size is floor(9 * 0.33333334) = 3 and its coordinates x / 0.33333334 (float32,
// as ONNX Runtime) read pixels 0, 3, 6: the .om lowers it and the raised model reads the same.
TEST(OmRules, ResizeByAScaleThatIsNotExactlyOutOverIn) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,9,9] x) => (float[1,1,3,3] y)
<float[4] scales = {1, 1, 0.33333334, 0.33333334}>
{
  y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
}
)");
  ASSERT_TRUE(m.graph);
  EXPECT_EQ(omUnsupportedReason(*m.graph->nodes().front(), "Ascend310P3", 13), "");
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "resize.om");
  ASSERT_TRUE(back) << back.status().toString();
  std::vector<float> iota(81);
  for (size_t i = 0; i < iota.size(); ++i)
    iota[i] = static_cast<float>(i);
  std::vector<float> y = run(*back, Tensor::fromValues<float>(DType::Float32, {1, 1, 9, 9}, iota));
  EXPECT_EQ(y, (std::vector<float>{0, 3, 6, 27, 30, 33, 54, 57, 60}));
}

// A scale whose coordinates GraphEngine's out / in cannot reproduce stays refused.
TEST(OmRules, ResizeByAScaleGraphEngineCannotFollowIsRefused) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,10,10] x) => (float[1,1,3,3] y)
<float[4] scales = {1, 1, 0.35, 0.35}>
{
  y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
}
)");
  ASSERT_TRUE(m.graph);
  EXPECT_EQ(omUnsupportedReason(*m.graph->nodes().front(), "Ascend310P3", 13),
            "Resize by a scale that does not give a whole output size");
}

// Every refused node as data, with one label for unnamed nodes: the ops without a lowering (K8101)
// and the value the chip cannot hold (K8102, isOp false).
TEST(OmRules, LowerModelReturnsEveryRefusal) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, bfloat16[4] z) => (float[2,3] y, bfloat16[4] w)
{
  a = Hardmax (x)
  y = LpNormalization (a)
  w = Relu (z)
}
)",
                              /*nameNodes=*/false);
  std::vector<lowering::Refusal> refusals;
  OmWriteOptions options;
  options.socVersion = "Ascend310P3"; // no bf16
  auto lowered = om::lowerModel(m, options, &refusals);
  ASSERT_FALSE(lowered);
  EXPECT_EQ(lowered.status().code(), ErrorCode::OmLowerUnsupported);
  ASSERT_EQ(refusals.size(), 3u);
  EXPECT_EQ(refusals[0].label, "node producing 'a' (Hardmax)");
  EXPECT_EQ(refusals[0].reason, "op Hardmax has no GraphEngine lowering in kiln");
  EXPECT_TRUE(refusals[0].isOp);
  EXPECT_EQ(refusals[1].label, "node producing 'y' (LpNormalization)");
  EXPECT_TRUE(refusals[1].isOp);
  EXPECT_EQ(refusals[2].label, "node producing 'w' (Relu)");
  EXPECT_NE(refusals[2].reason.find("Ascend310P3"), std::string::npos) << refusals[2].reason;
  EXPECT_FALSE(refusals[2].isOp);
  EXPECT_EQ(refusals[2].node, m.graph->nodes().back().get());
  EXPECT_NE(lowered.status().message().find("node producing 'a' (Hardmax): op Hardmax"),
            std::string::npos)
      << lowered.status().message();
}

} // namespace
