// int4/uint4 DequantizeLinear on every path: the executor (and so fold-constants), the .ms round
// trip (constOf turns the packed codes into int8 quantized weights) and the .om round trip (after
// the conversion pipeline folds the dequantize). Each once yielded zeros while reporting success.
#include <gtest/gtest.h>

#include <algorithm>

#include <onnx/defs/parser.h>

#include "kiln/backends/target.h"
#include "kiln/frontend/onnx.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

// ONNX 1.12's text parser and enum predate INT4 (22) / UINT4 (21), so the graph is text and the
// 4-bit initializers are TensorProtos built here (data_type is a plain int32 field).
//   wi4: int4[3,3] per-axis (axis 1) codes {-8,-1,0, 7,3,-5, 1,2,-3}, scale {0.5,0.25,2},
//        zero point int4 {1,-2,0}; stored in int32_data (one packed byte per entry).
//   wu4: uint4[2,3] per-tensor codes {0,15,8, 3,12,1}, scale 0.5, zero point uint4 8; raw_data.
const char* kInt4Graph = R"(
  <ir_version: 10, opset_import: ["" : 21]>
  g (float[2,3] x) => (float[2,3] y, float[2,3] z)
  <float[3] si4 = {0.5, 0.25, 2}, float su4 = {0.5}> {
    wi = DequantizeLinear <axis = 1> (wi4, si4, zi4)
    y = MatMul (x, wi)
    wu = DequantizeLinear (wu4, su4, zu4)
    z = Add (x, wu)
  })";

void addPacked(onnx::GraphProto& graph, const std::string& name, int32_t dataType,
               const std::vector<int64_t>& dims, const std::vector<uint8_t>& bytes, bool raw) {
  onnx::TensorProto* t = graph.add_initializer();
  t->set_name(name);
  t->set_data_type(dataType);
  for (int64_t d : dims)
    t->add_dims(d);
  if (raw)
    t->set_raw_data(std::string(bytes.begin(), bytes.end()));
  else
    for (uint8_t b : bytes)
      t->add_int32_data(b);
}

Model int4Model() {
  onnx::ModelProto proto;
  auto parsed = onnx::OnnxParser::Parse(proto, kInt4Graph);
  EXPECT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  constexpr int32_t kUInt4 = 21, kInt4 = 22;
  onnx::GraphProto& g = *proto.mutable_graph();
  // Low nibble first: -8,-1 → 0xF8; 0,7 → 0x70; 3,-5 → 0xB3; 1,2 → 0x21; -3 (pad 0) → 0x0D.
  addPacked(g, "wi4", kInt4, {3, 3}, {0xF8, 0x70, 0xB3, 0x21, 0x0D}, /*raw=*/false);
  addPacked(g, "zi4", kInt4, {3}, {0xE1, 0x00}, /*raw=*/true); // 1,-2 → 0xE1; 0 → 0x00
  addPacked(g, "wu4", kUInt4, {2, 3}, {0xF0, 0x38, 0x1C}, /*raw=*/true);
  addPacked(g, "zu4", kUInt4, {}, {0x08}, /*raw=*/false);
  for (int i = 0; i < g.node_size(); ++i)
    g.mutable_node(i)->set_name("n" + std::to_string(i));
  auto model = importOnnxProto(proto, "int4", ".");
  EXPECT_TRUE(model) << model.status().toString();
  return model ? model.take() : Model{};
}

// By hand: wi = {-4.5,0.25,0, 3,1.25,-10, 0,1,-6}, wu = {-4,3.5,0, -2.5,2,-3.5}.
const std::vector<float> kX = {1, 2, 3, -1, 0, 2};
const std::vector<float> kY = {1.5f, 5.75f, -38, 4.5f, 1.75f, -12};
const std::vector<float> kZ = {-3, 5.5f, 3, -3.5f, 2, -1.5f};

void expectOutputs(const Model& model, const std::string& path) {
  rt::Executor executor(model);
  auto result = executor.run(
      {{"x", rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {2, 3}, kX))}});
  ASSERT_TRUE(result) << path << ": " << result.status().toString();
  ASSERT_EQ(result->outputs.size(), 2u) << path;
  EXPECT_EQ(result->outputs[0].tensor.copyValues<float>(), kY) << path << ": y (int4 MatMul)";
  EXPECT_EQ(result->outputs[1].tensor.copyValues<float>(), kZ) << path << ": z (uint4 Add)";
}

Model converted() {
  Model model = int4Model();
  auto ran = runConversionPipeline(model, ConversionOptions{});
  EXPECT_TRUE(ran) << ran.status().toString();
  return model;
}

TEST(QuantInt4, ImporterKeepsPackedCodes) {
  Model model = int4Model();
  const Value* wi4 = model.graph->findLocalValue("wi4");
  ASSERT_NE(wi4, nullptr);
  ASSERT_TRUE(wi4->isInitializer());
  EXPECT_EQ(wi4->initializer().dtype(), DType::Int4);
  EXPECT_EQ(wi4->initializer().byteSize(), 5u); // 9 nibbles, rounded up
}

TEST(QuantInt4, ExecutorDequantizesInt4AndUInt4) { expectOutputs(int4Model(), "executor"); }

TEST(QuantInt4, FoldedConversionKeepsValues) { expectOutputs(converted(), "fold-constants"); }

TEST(QuantInt4, MsRoundTripKeepsValues) {
  const TargetHooks* ms = findTarget("ms");
  ASSERT_NE(ms, nullptr);
  // Unfolded: the .ms lowering makes int8 quantized weights from the 4-bit codes.
  auto back = ms->roundTrip(int4Model(), RoundTripOptions{});
  ASSERT_TRUE(back) << back.status().toString();
  expectOutputs(*back, "ms (unfolded)");
  auto folded = ms->roundTrip(converted(), RoundTripOptions{});
  ASSERT_TRUE(folded) << folded.status().toString();
  expectOutputs(*folded, "ms (folded)");
}

TEST(QuantInt4, OmRoundTripKeepsValuesOnceFolded) {
  const TargetHooks* om = findTarget("om");
  ASSERT_NE(om, nullptr);
  // atc runs the conversion pipeline first, which folds DequantizeLinear over constants.
  auto back = om->roundTrip(converted(), RoundTripOptions{});
  ASSERT_TRUE(back) << back.status().toString();
  expectOutputs(*back, "om (folded)");
  // Unfolded (a weight above the fold size limit), .om has no DequantizeLinear lowering: a coded
  // refusal, not zeros.
  auto unfolded = om->roundTrip(int4Model(), RoundTripOptions{});
  ASSERT_FALSE(unfolded);
  EXPECT_NE(
      std::find(om->unsupportedCodes.begin(), om->unsupportedCodes.end(), unfolded.status().code()),
      om->unsupportedCodes.end())
      << unfolded.status().toString();
}

// QuantizeLinear to int4/uint4 (the zero point's dtype) saturates to the 4-bit range and packs;
// DequantizeLinear reads it back. x/0.5 = {-8,-1.2,0,2.4,7,20}, rounded half to even.
TEST(QuantInt4, QuantizeLinearSaturatesToFourBits) {
  onnx::ModelProto proto;
  auto parsed = onnx::OnnxParser::Parse(proto, R"(
    <ir_version: 10, opset_import: ["" : 21]>
    g (float[6] x) => (float[6] y, float[6] z) <float s = {0.5}> {
      qi = QuantizeLinear (x, s, zi)
      y = DequantizeLinear (qi, s, zi)
      qu = QuantizeLinear (x, s, zu)
      z = DequantizeLinear (qu, s, zu)
    })");
  ASSERT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  addPacked(*proto.mutable_graph(), "zi", 22, {}, {0x0F}, /*raw=*/true); // int4 -1
  addPacked(*proto.mutable_graph(), "zu", 21, {}, {0x03}, /*raw=*/true); // uint4 3
  auto model = importOnnxProto(proto, "int4_quantize", ".");
  ASSERT_TRUE(model) << model.status().toString();
  rt::Executor executor(*model);
  const std::vector<float> x = {-4, -0.6f, 0, 1.2f, 3.5f, 10};
  auto result = executor.run(
      {{"x", rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {6}, x))}});
  ASSERT_TRUE(result) << result.status().toString();
  // int4: codes {-8,-2,-1,1,6,7} (-9 and 19 saturate); uint4: {0,2,3,5,10,15}.
  EXPECT_EQ(result->outputs[0].tensor.copyValues<float>(),
            (std::vector<float>{-3.5f, -0.5f, 0, 1, 3.5f, 4}));
  EXPECT_EQ(result->outputs[1].tensor.copyValues<float>(),
            (std::vector<float>{-1.5f, -0.5f, 0, 1, 3.5f, 6}));
}

// A constant DequantizeLinear .ms cannot hold is refused with what it got, not as "non-constant".
TEST(QuantInt4, MsRefusesConstantCodesItCannotHoldByTheirDtype) {
  Model model = kiln::testing::modelFromOnnxText(R"(
    <ir_version: 8, opset_import: ["" : 19]>
    g (float[2] x) => (float[2] y) <int32[2] w = {1, 2}, float s = {0.5}> {
      d = DequantizeLinear (w, s)
      y = Add (x, d)
    })");
  auto back = findTarget("ms")->roundTrip(std::move(model), RoundTripOptions{});
  ASSERT_FALSE(back);
  EXPECT_EQ(codeString(back.status().code()), codeString(ErrorCode::MsLowerBadAttribute));
  EXPECT_NE(back.status().message().find("node 'n0' (DequantizeLinear): DequantizeLinear over "
                                         "constant i32 codes with a f32 scale"),
            std::string::npos)
      << back.status().toString();
}

// Opset 21's output_dtype picks QuantizeLinear's code type when no zero point does; a number that
// names no tensor type is refused with the node and the number, not run as uint8.
TEST(QuantInt4, QuantizeLinearRefusesAnOutputDtypeThatNamesNoType) {
  onnx::ModelProto proto;
  auto parsed = onnx::OnnxParser::Parse(proto, R"(
    <ir_version: 10, opset_import: ["" : 21]>
    g (float[3] x) => (float[3] y) <float s = {0.5}> {
      q = QuantizeLinear <output_dtype = 99> (x, s)
      y = DequantizeLinear (q, s)
    })");
  ASSERT_TRUE(parsed.IsOK()) << parsed.ErrorMessage();
  auto model = importOnnxProto(proto, "bad_output_dtype", ".");
  ASSERT_TRUE(model) << model.status().toString();
  rt::Executor executor(*model);
  auto result = executor.run({{"x", rt::RtValue::ofTensor(Tensor::fromValues<float>(
                                        DType::Float32, {3}, {1.0f, 2.0f, 3.0f}))}});
  ASSERT_FALSE(result);
  EXPECT_NE(result.status().message().find("output_dtype 99 is not a tensor type"),
            std::string::npos)
      << result.status().toString();
  // The node has no name: the message names it by its output.
  EXPECT_NE(result.status().message().find("node producing 'q' (QuantizeLinear): "),
            std::string::npos)
      << result.status().toString();
}

} // namespace
