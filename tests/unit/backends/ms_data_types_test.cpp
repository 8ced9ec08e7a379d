// The .ms data-type pass (src/backends/ms/ms_data_types.cpp): ops the runtime has no kernel for in
// the model's type compute in a supported one between casts, the graph keeps its declared types.
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ms/ms_model_schema.h"
#include "kiln/backends/ms_reader.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/runtime/executor.h"
#include "ms_graph_view.h"
#include "onnx_text.h"

namespace kiln {
namespace {

namespace fb = kiln::msfb;
using kiln::testing::modelFromOnnxText;

constexpr int kInt32 = 34, kInt64 = 35;

const fb::MetaGraph* root(const std::vector<uint8_t>& bytes) {
  return kiln::testing::msRoot(bytes);
}

std::vector<const fb::CNode*> nodesOfType(const fb::MetaGraph* g, fb::PrimitiveType type) {
  return kiln::testing::msNodesOfType(g, type);
}

int typeOf(const fb::MetaGraph* g, uint32_t tensor) {
  return g->allTensors()->Get(tensor)->dataType();
}

// Runs `model` on int64 input `x` and returns output 0 as int64.
std::vector<int64_t> runInt64(const Model& model, const std::vector<int64_t>& x) {
  rt::Executor exec(model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(
      Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(x.size())}, x));
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  if (!out) return {};
  EXPECT_EQ(out->outputs.at(0).tensor.dtype(), DType::Int64);
  return out->outputs.at(0).tensor.copyValues<int64_t>();
}

Model readBack(const std::vector<uint8_t>& bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "types.ms", "");
  EXPECT_TRUE(model) << model.status().toString();
  return model ? std::move(*model) : Model{};
}

const char* kInt64Add = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (int64[4] x) => (int64[4] y) <int64[4] c = {1, -2, 3, 2147483000}> {
  y = Add (x, c)
}
)";

} // namespace

// AddFusion has no int64 kernel: the .ms keeps int64 I/O, adds in int32 between casts, and the
// model read back computes what the ONNX model does.
TEST(MsDataTypes, Int64AddComputesInInt32WithInt64Io) {
  Model model = modelFromOnnxText(kInt64Add);
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  EXPECT_EQ(typeOf(g, g->inputIndex()->Get(0)), kInt64);
  EXPECT_EQ(typeOf(g, g->outputIndex()->Get(0)), kInt64);
  auto adds = nodesOfType(g, fb::PrimitiveType_AddFusion);
  ASSERT_EQ(adds.size(), 1u);
  for (uint32_t in : *adds[0]->inputIndex())
    EXPECT_EQ(typeOf(g, in), kInt32);
  EXPECT_EQ(typeOf(g, adds[0]->outputIndex()->Get(0)), kInt32);
  // One cast in (the constant is narrowed where it is stored), one back.
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Cast).size(), 2u);

  const std::vector<int64_t> x = {5, 7, -9, 600};
  const std::vector<int64_t> expected = {6, 5, -6, 2147483600};
  EXPECT_EQ(runInt64(model, x), expected);
  EXPECT_EQ(runInt64(readBack(*bytes), x), expected);
}

// A constant outside int32 cannot be narrowed: refused, naming the node and the constant.
TEST(MsDataTypes, ConstantOutsideInt32IsRefused) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (int64[2] x) => (int64[2] y) <int64[2] big = {1, 5000000000}> {
  y = Add (x, big)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.status().code(), ErrorCode::MsLowerBadAttribute);
  EXPECT_NE(bytes.status().message().find("AddFusion"), std::string::npos)
      << bytes.status().message();
  EXPECT_NE(bytes.status().message().find("'big'"), std::string::npos);
  EXPECT_NE(bytes.status().message().find("5000000000"), std::string::npos);
}

// The runtime writes ArgMax indices as int32: the op's output says so and a Cast restores the
// model's int64 output.
TEST(MsDataTypes, ArgMaxIndicesCastBackToInt64) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (int64[4] x) => (int64[1] y) {
  y = ArgMax <axis = 0, keepdims = 1> (x)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto argmax = nodesOfType(g, fb::PrimitiveType_ArgMaxFusion);
  ASSERT_EQ(argmax.size(), 1u);
  EXPECT_EQ(typeOf(g, argmax[0]->inputIndex()->Get(0)), kInt32);
  EXPECT_EQ(typeOf(g, argmax[0]->outputIndex()->Get(0)), kInt32);
  EXPECT_EQ(typeOf(g, g->outputIndex()->Get(0)), kInt64);
  const std::vector<int64_t> x = {3, 9, -1, 4};
  EXPECT_EQ(runInt64(readBack(*bytes), x), (std::vector<int64_t>{1}));
}

// PowFusion reads its exponent in the base's type: an int64 exponent read at run time is cast to
// float32 (the runtime would read its bytes as floats).
TEST(MsDataTypes, MixedTypePowCastsTheExponent) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[2] x, int64[2] e) => (float[2] y) {
  y = Pow (x, e)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto pow = nodesOfType(g, fb::PrimitiveType_PowFusion);
  ASSERT_EQ(pow.size(), 1u);
  for (uint32_t in : *pow[0]->inputIndex())
    EXPECT_EQ(typeOf(g, in), 43);
  EXPECT_EQ(typeOf(g, g->inputIndex()->Get(1)), kInt64);
}

// Slice ends fed at run time as INT64_MAX ("to the end") survive the narrowing to int32: they
// saturate instead of wrapping.
TEST(MsDataTypes, RunTimeSliceSentinelSaturates) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[5] v, int64[1] s, int64[1] e) => (float[3] y) {
  y = Slice (v, s, e)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  Model raised = readBack(*bytes);
  rt::Executor exec(raised);
  std::map<std::string, rt::RtValue> feeds;
  feeds["v"] =
      rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {5}, {1, 2, 3, 4, 5}));
  feeds["s"] = rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {1}, {2}));
  feeds["e"] = rt::RtValue::ofTensor(
      Tensor::fromValues<int64_t>(DType::Int64, {1}, {std::numeric_limits<int64_t>::max()}));
  auto out = exec.run(feeds);
  ASSERT_TRUE(out) << out.status().toString();
  EXPECT_EQ(out->outputs.at(0).tensor.copyValues<float>(), (std::vector<float>{3, 4, 5}));
}

// The runtime's Cast converts no int8 tensor: an int8 Max computes in int32 between
// QuantDTypeCasts (scale 1, zero point 0) and float32 Casts, with int8 I/O and the same numbers.
TEST(MsDataTypes, Int8MaxGoesThroughQuantDTypeCast) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (int8[3] x, int8[3] w) => (int8[3] y) {
  y = Max (x, w)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  constexpr int kInt8 = 32;
  EXPECT_EQ(typeOf(g, g->inputIndex()->Get(0)), kInt8);
  EXPECT_EQ(typeOf(g, g->outputIndex()->Get(0)), kInt8);
  auto max = nodesOfType(g, fb::PrimitiveType_Maximum);
  ASSERT_EQ(max.size(), 1u);
  EXPECT_EQ(typeOf(g, max[0]->inputIndex()->Get(0)), kInt32);
  // Two int8 inputs in, one int8 output back; the int8 ends carry the unit parameter.
  auto qdc = nodesOfType(g, fb::PrimitiveType_QuantDTypeCast);
  ASSERT_EQ(qdc.size(), 3u);
  for (const auto* n : qdc)
    for (uint32_t t : {n->inputIndex()->Get(0), n->outputIndex()->Get(0)}) {
      const auto* params = g->allTensors()->Get(t)->quantParams();
      ASSERT_TRUE(params && params->size() == 1);
      EXPECT_EQ(params->Get(0)->scale(), 1.0);
      EXPECT_EQ(params->Get(0)->zeroPoint(), 0);
    }
  Model raised = readBack(*bytes);
  rt::Executor exec(raised);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<int8_t>(DType::Int8, {3}, {-128, 5, 0}));
  feeds["w"] = rt::RtValue::ofTensor(Tensor::fromValues<int8_t>(DType::Int8, {3}, {-1, 127, -7}));
  auto out = exec.run(feeds);
  ASSERT_TRUE(out) << out.status().toString();
  EXPECT_EQ(out->outputs.at(0).tensor.dtype(), DType::Int8);
  EXPECT_EQ(out->outputs.at(0).tensor.copyValues<int8_t>(), (std::vector<int8_t>{-1, 127, 0}));
}

// A float op is untouched: no casts.
TEST(MsDataTypes, FloatOpsKeepTheirType) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2] x) => (float[2] y) {
  y = Add (x, x)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  EXPECT_TRUE(nodesOfType(root(*bytes), fb::PrimitiveType_Cast).empty());
}

} // namespace kiln
