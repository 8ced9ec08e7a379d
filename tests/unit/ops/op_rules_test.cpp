// Regression tests for decisions every consumer of an op must share (docs/ops.md): attribute
// kinds, the Resize coordinate rule, keep_dtype files, node labels. Each case once gave different
// outcomes in the executor, the .ms and .om backends and `kiln check`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <onnx/defs/parser.h>

#include "kiln/backends/lowering.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/backends/om.h"
#include "kiln/backends/target.h"
#include "kiln/check.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"
#include "ops/conv.h"
#include "ops/resize.h"

using namespace kiln;

namespace {

Expected<Model> importText(const std::string& text) {
  onnx::ModelProto proto;
  auto parsed = onnx::OnnxParser::Parse(proto, text.c_str());
  EXPECT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  for (int i = 0; i < proto.graph().node_size(); ++i)
    proto.mutable_graph()->mutable_node(i)->set_name("n" + std::to_string(i));
  return importOnnxProto(proto, "test.onnx", ".");
}

const char* kLayerNormFloatAxis = R"(
  <ir_version: 8, opset_import: ["" : 17]>
  g (float[2,4] x, float[4] scale) => (float[2,4] y) {
    y = LayerNormalization <axis = 1.0> (x, scale)
  })";

TEST(OpRules, AttributeOfTheWrongKindIsOneImportError) {
  // A FLOAT where the schema says INT: refused once, at import, so run, check, atc and
  // converter_lite all report K2013 (the .ms lowering used to abort with bad_variant_access).
  auto model = importText(kLayerNormFloatAxis);
  ASSERT_FALSE(model);
  EXPECT_EQ(model.status().code(), ErrorCode::BadAttribute);
  EXPECT_NE(model.status().message().find(
                "node 'n0' (LayerNormalization): attribute 'axis' has kind FLOAT, but "
                "LayerNormalization (opset 17) declares it INT"),
            std::string::npos)
      << model.status().toString();
}

TEST(OpRules, WrongKindBuiltInMemoryIsRefusedByEveryConsumerWithoutThrowing) {
  // IR built by code skips the importer: the shared rule check refuses it in both backends and
  // in `kiln check`, and nothing throws.
  auto makeModel = [] {
    Model model = kiln::testing::modelFromOnnxText(R"(
      <ir_version: 8, opset_import: ["" : 17]>
      g (float[2,4] x, float[4] scale) => (float[2,4] y) {
        y = LayerNormalization <axis = 1> (x, scale)
      })");
    model.graph->nodes().front()->setAttribute("axis", Attribute::ofFloat(1.0f));
    return model;
  };
  Model model = makeModel();
  const std::string reason = "attribute 'axis' has kind FLOAT, but LayerNormalization (opset 17) "
                             "declares it INT";
  auto ms = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_FALSE(ms);
  EXPECT_NE(ms.status().message().find(reason), std::string::npos) << ms.status().toString();
  auto om = buildOmBuffer(model, OmWriteOptions{});
  ASSERT_FALSE(om);
  EXPECT_NE(om.status().message().find(reason), std::string::npos) << om.status().toString();
  for (const char* target : {"ms", "om"}) {
    Model copy = makeModel();
    CheckOptions options;
    options.target = target;
    auto report = checkModel(copy, options);
    ASSERT_TRUE(report) << report.status().toString();
    EXPECT_EQ(report->unsupportedNodes, 1u) << target;
    EXPECT_EQ(report->nodes.front().reason, reason) << target;
  }
}

// 9x9 iota resized by 0.33333334 (asymmetric, floor): ONNX Runtime computes the source coordinate
// in float32, 1 / 0.33333334f == 3.0f, so the output reads pixels 0, 3, 6 of each axis.
const char* kResizeThird = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[1,1,9,9] x) => (float[1,1,3,3] y)
  <float[0] roi = {}, float[4] scales = {1, 1, 0.33333334, 0.33333334}> {
    y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric",
                nearest_mode = "floor"> (x, roi, scales)
  })";

std::vector<float> runIota(const Model& model) {
  std::vector<float> iota(81);
  for (size_t i = 0; i < iota.size(); ++i)
    iota[i] = static_cast<float>(i);
  rt::Executor executor(model);
  auto result = executor.run({{"x", rt::RtValue::ofTensor(Tensor::fromValues<float>(
                                        DType::Float32, {1, 1, 9, 9}, iota))}});
  EXPECT_TRUE(result) << result.status().toString();
  if (!result) return {};
  return result->outputs.front().tensor.copyValues<float>();
}

TEST(OpRules, ResizeCoordinatesAreFloat32OnEveryPath) {
  const std::vector<float> expected = {0, 3, 6, 27, 30, 33, 54, 57, 60};
  Model model = kiln::testing::modelFromOnnxText(kResizeThird);
  EXPECT_EQ(runIota(model), expected) << "executor";
  for (const char* via : {"ms", "om"}) {
    const TargetHooks* target = findTarget(via);
    ASSERT_NE(target, nullptr);
    auto back =
        target->roundTrip(kiln::testing::modelFromOnnxText(kResizeThird), RoundTripOptions{});
    ASSERT_TRUE(back) << via << ": " << back.status().toString();
    EXPECT_EQ(runIota(*back), expected) << via;
  }
}

TEST(OpRules, EmptyKeepDtypeFileIsK4201ForEveryFrontEnd) {
  // atc and `kiln opt` read keep_dtype files through addKeepDtypeFile (atc used to accept an
  // empty one silently).
  auto path = std::filesystem::temp_directory_path() / "kiln_empty_keep_dtype.cfg";
  std::ofstream(path) << "\n  \n";
  Model model = kiln::testing::modelFromOnnxText(kResizeThird);
  PrecisionOptions precision;
  auto added = addKeepDtypeFile(*model.graph, path.string(), precision);
  ASSERT_FALSE(added);
  EXPECT_EQ(added.status().code(), ErrorCode::PrecisionConfigInvalid);
  EXPECT_NE(added.status().message().find("holds no entry"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(OpRules, UnnamedNodesHaveOneLabel) {
  Model model = kiln::testing::modelFromOnnxText(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Relu (x) })",
                                                 /*nameNodes=*/false);
  const Node& relu = *model.graph->nodes().front();
  EXPECT_EQ(lowering::nodeLabel(relu, 1), "node producing 'y' (Relu)");
  Model named = kiln::testing::modelFromOnnxText(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { y = Relu (x) })");
  EXPECT_EQ(lowering::nodeLabel(*named.graph->nodes().front(), 1), "node 'n0' (Relu)");
}

TEST(OpRules, SamePaddingPutsTheOddPixelWhereAutoPadSays) {
  // One rule for the executor, the .ms and the .om lowering (each once had its own copy).
  auto even = ops::samePadding(5, 3, 2, 1, /*upper=*/true); // 3 outputs need 2 pixels
  EXPECT_EQ(even.begin, 1);
  EXPECT_EQ(even.end, 1);
  auto upper = ops::samePadding(4, 3, 2, 1, true); // 2 outputs need 1 pixel
  auto lower = ops::samePadding(4, 3, 2, 1, false);
  EXPECT_EQ(upper.begin, 0);
  EXPECT_EQ(upper.end, 1);
  EXPECT_EQ(lower.begin, 1);
  EXPECT_EQ(lower.end, 0);
  auto dilated = ops::samePadding(7, 3, 1, 2, true); // effective kernel 5
  EXPECT_EQ(dilated.begin + dilated.end, 4);
}

TEST(OpRules, ResizeSourceCoordinateIsFloat32) {
  ops::ResizeCoordinateRule rule;
  rule.transform = "asymmetric";
  rule.nearestMode = "floor";
  // 1 / 0.33333334f rounds to 3.0f in float32 (2.99999991 in double would pick pixel 2).
  const float x = ops::resizeSourceCoordinate(rule, 1, 0.33333334f, 9, 3, 0, 1);
  EXPECT_EQ(x, 3.0f);
  EXPECT_EQ(ops::resizeNearestIndex(rule, x, 0.33333334f), 3);
}

} // namespace
