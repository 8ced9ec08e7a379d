// demote-float64 (src/passes/demote_float64.cpp): a graph that computes in float64 becomes float32
// with one note, whether or not it casts; a graph without float64 is untouched.
#include <gtest/gtest.h>

#include "kiln/passes/pass.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// Runs demote-float64 on `model` and returns the notes it wrote.
std::vector<std::string> demote(Model& model) {
  PipelineOptions options;
  options.verifyEach = true;
  auto result = runPipeline(model, {"demote-float64"}, options);
  EXPECT_TRUE(result) << result.status().toString();
  return result ? result->notes : std::vector<std::string>{};
}

} // namespace

// The MindSpore Lite runtime has no float64 Max (nor any float64 kernel kiln emits): a float64
// Max without a Cast is demoted too, and the note names the changed input and output.
TEST(DemoteFloat64, ComputeWithoutCastIsDemoted) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (double[3] x, double[3] w) => (double[3] y) {
  y = Max (x, w)
}
)");
  auto notes = demote(model);
  EXPECT_EQ(model.graph->inputs()[0]->dtype(), DType::Float32);
  EXPECT_EQ(model.graph->outputs()[0]->dtype(), DType::Float32);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("'x', 'w', 'y' are float32"), std::string::npos) << notes[0];
}

// A float64 constant inside a float32 graph is demoted without a note (no input or output
// changed type).
TEST(DemoteFloat64, Float64ConstantIsDemotedQuietly) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] y) {
  k = Constant <value = double[1] {2.5}> ()
  c = Cast <to = 1> (k)
  y = Mul (x, c)
}
)");
  auto notes = demote(model);
  EXPECT_TRUE(notes.empty());
  const Node* constant = model.graph->findLocalValue("k")->producer();
  ASSERT_NE(constant, nullptr);
  EXPECT_EQ(constant->attribute("value")->asTensor().dtype(), DType::Float32);
}

TEST(DemoteFloat64, Float32GraphIsUntouched) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] y) {
  y = Max (x, x)
}
)");
  EXPECT_TRUE(demote(model).empty());
  EXPECT_EQ(model.graph->outputs()[0]->dtype(), DType::Float32);
}
