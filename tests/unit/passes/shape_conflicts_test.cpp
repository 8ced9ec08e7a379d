// shapeConflicts: a Conv whose input channels contradict its weight, and a MatMul ONNX's strict
// inference rejects, each named; a consistent model has none.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

// Node i named "n<i>", value types inferred (as the default pipeline leaves them).
Model parse(const char* text) {
  Model model = kiln::testing::modelFromOnnxText(text);
  EXPECT_TRUE(runPipeline(model, {"infer-shapes"}));
  return model;
}

} // namespace

TEST(ShapeConflicts, ConvChannelsAgainstTheWeight) {
  Model model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,8,8] x) => (float[1,6,8,8] y) <float[6,1,3,3] w = {0,0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0, 0,0,0,0,0,0,0,0,0}> {
  y = Conv <pads = [1, 1, 1, 1], group = 3> (x, w)
})");
  auto conflicts = shapeConflicts(model);
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].node, "n0");
  EXPECT_EQ(conflicts[0].opType, "Conv");
  EXPECT_EQ(conflicts[0].status.code(), ErrorCode::ShapeConflict);
  EXPECT_EQ(conflicts[0].status.message(),
            "node 'n0' (Conv): input 'x' [1,2,8,8] has 2 channels, the weight 'w' [6,1,3,3] "
            "expects 3 (1 per group x 3 groups)");
}

TEST(ShapeConflicts, MatMulDimensionsFromOnnxInference) {
  Model model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,5] x) => (float[1,4] y) <float[3,4] w = {1,1,1,1, 1,1,1,1, 1,1,1,1}> {
  y = MatMul (x, w)
})");
  auto conflicts = shapeConflicts(model);
  ASSERT_EQ(conflicts.size(), 1u);
  EXPECT_EQ(conflicts[0].node, "n0");
  EXPECT_EQ(conflicts[0].opType, "MatMul");
  EXPECT_NE(conflicts[0].status.message().find("node 'n0' (MatMul): "), std::string::npos)
      << conflicts[0].status.message();
  EXPECT_NE(conflicts[0].status.message().find("Incompatible dimensions"), std::string::npos)
      << conflicts[0].status.message();
}

TEST(ShapeConflicts, ConsistentModelHasNone) {
  Model model = parse(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3] x) => (float[1,4] y) <float[3,4] w = {1,1,1,1, 1,1,1,1, 1,1,1,1}> {
  y = MatMul (x, w)
})");
  EXPECT_TRUE(shapeConflicts(model).empty());
}

// Before IR 4 an initializer needs a graph input to be typed; one a pass added (scan-to-loop's
// accumulator) has none, and ONNX's inference then called the Loop reading it untyped.
TEST(ShapeConflicts, InitializersOfAnOldIrModelAreTyped) {
  Model model = parse(R"(<ir_version: 3, opset_import: ["" : 8]>
g (float[2] x) => (float[2] y) {
  y = Add (x, x)
})");
  Value* bias =
      model.graph->addInitializer("bias", Tensor::fromValues<float>(DType::Float32, {2}, {1, 2}));
  (*model.graph->nodes().begin())->setInput(1, bias);
  EXPECT_TRUE(shapeConflicts(model).empty());
}
