// .ms lowerings around the MindSpore Lite runtime's kernel limits: Reciprocal and Sqrt kernels
// that fail the run outside their domain, PowFusion's exponent shape rule, the truncating
// float32 → float16 Cast (src/backends/ms/ops/elementwise.cpp, elementwise_math.cpp).
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/ms/ms_model_schema.h"
#include "kiln/backends/ms_reader.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "onnx_text.h"

namespace kiln {
namespace {

namespace fb = kiln::msfb;
using kiln::testing::modelFromOnnxText;

std::vector<uint8_t> lowered(const char* text) {
  Model model = modelFromOnnxText(text);
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  EXPECT_TRUE(bytes) << bytes.status().toString();
  return bytes ? *bytes : std::vector<uint8_t>{};
}

int count(const std::vector<uint8_t>& bytes, fb::PrimitiveType type) {
  const fb::MetaGraph* g = fb::GetMetaGraph(bytes.data());
  int n = 0;
  for (const auto* node : *g->nodes())
    n += node->primitive()->value_type() == type;
  return n;
}

// Runs the .ms read back on float input `x` and returns output 0.
std::vector<float> run(const std::vector<uint8_t>& bytes, std::vector<int64_t> dims,
                       std::vector<float> x) {
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "t.ms", "");
  EXPECT_TRUE(model) << model.status().toString();
  if (!model) return {};
  rt::Executor exec(*model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, dims, x));
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  return out ? out->outputs.at(0).tensor.copyValues<float>() : std::vector<float>{};
}

} // namespace

// The runtime's Reciprocal fails the run on a zero: Reciprocal and atan's 1/|x| are DivFusions,
// giving inf there (atan(0) = 0 through the Where that keeps |x| <= 1).
TEST(MsRuntimeDomains, ReciprocalIsDivision) {
  auto bytes = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] r, float[3] a) {
  r = Reciprocal (x)
  a = Atan (x)
}
)");
  EXPECT_EQ(count(bytes, fb::PrimitiveType_Reciprocal), 0);
  EXPECT_GE(count(bytes, fb::PrimitiveType_DivFusion), 2);
  const std::vector<float> r = run(bytes, {3}, {0, 2, -4});
  ASSERT_EQ(r.size(), 3u);
  EXPECT_TRUE(std::isinf(r[0]));
  EXPECT_FLOAT_EQ(r[1], 0.5f);
}

// The runtime's Sqrt fails the run on a negative: a Sqrt of a value that may be negative is
// PowFusion(x, 0.5) (NaN there, as ONNX); a Sqrt of |x| keeps its kernel.
TEST(MsRuntimeDomains, SqrtOfPossiblyNegativeIsPow) {
  auto bytes = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] s) {
  s = Sqrt (x)
}
)");
  EXPECT_EQ(count(bytes, fb::PrimitiveType_Sqrt), 0);
  EXPECT_EQ(count(bytes, fb::PrimitiveType_PowFusion), 1);
  const std::vector<float> s = run(bytes, {3}, {4, -1, 0});
  ASSERT_EQ(s.size(), 3u);
  EXPECT_FLOAT_EQ(s[0], 2.0f);
  EXPECT_TRUE(std::isnan(s[1]));

  auto kept = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[3] s) {
  a = Abs (x)
  s = Sqrt (a)
}
)");
  EXPECT_EQ(count(kept, fb::PrimitiveType_Sqrt), 1);
  EXPECT_EQ(count(kept, fb::PrimitiveType_PowFusion), 0);

  // A variance: the mean of (x − m)² is non-negative, its Sqrt keeps the kernel.
  auto variance = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[1] s) <float[1] m = {1}, float[1] two = {2}, float[1] eps = {0.001},
    float[3] d, float[3] q, float[1] v, float[1] e> {
  d = Sub (x, m)
  q = Pow (d, two)
  v = ReduceMean <keepdims = 1> (q)
  e = Add (v, eps)
  s = Sqrt (e)
}
)");
  EXPECT_EQ(count(variance, fb::PrimitiveType_Sqrt), 1);
}

// PowFusion's exponent must have the base's shape or one element, and the output takes the
// base's shape: a broadcast exponent (or base) is broadcast to the output shape first.
TEST(MsRuntimeDomains, PowBroadcastsItsOperands) {
  auto bytes = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, float[3] e) => (float[2,3] y) {
  y = Pow (x, e)
}
)");
  EXPECT_EQ(count(bytes, fb::PrimitiveType_BroadcastTo), 1);
  auto scalar = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, float[1] e) => (float[2,3] y) {
  y = Pow (x, e)
}
)");
  EXPECT_EQ(count(scalar, fb::PrimitiveType_BroadcastTo), 0);
  auto base = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float[2,3] y) <float[2,3] e = {1, 2, 3, 1, 2, 3}> {
  y = Pow (x, e)
}
)");
  EXPECT_EQ(count(base, fb::PrimitiveType_BroadcastTo), 1);
  EXPECT_EQ(run(base, {3}, {2, 2, 2}), (std::vector<float>{2, 4, 8, 2, 4, 8}));
}

// The runtime's float32 → float16 Cast truncates: the lowering rounds the value to float16's
// 11 significant bits in float32 first, so the Cast reads an exactly representable value.
TEST(MsRuntimeDomains, CastToHalfRoundsFirst) {
  auto bytes = lowered(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3] x) => (float16[3] y) {
  y = Cast <to = 10> (x)
}
)");
  const fb::MetaGraph* g = fb::GetMetaGraph(bytes.data());
  const fb::CNode* cast = nullptr;
  for (const auto* node : *g->nodes())
    if (node->primitive()->value_type() == fb::PrimitiveType_Cast) cast = node;
  ASSERT_NE(cast, nullptr);
  // The Cast reads the rounded value, not the graph input.
  EXPECT_NE(cast->inputIndex()->Get(0), g->inputIndex()->Get(0));
  EXPECT_EQ(count(bytes, fb::PrimitiveType_MulFusion), 1);
  EXPECT_EQ(count(bytes, fb::PrimitiveType_Where), 1);
  // 0.54881352 rounds up to 0.548828125 (truncation would give 0.54833984375); inf stays inf.
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "t.ms", "");
  ASSERT_TRUE(model) << model.status().toString();
  rt::Executor exec(*model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(
      Tensor::fromValues<float>(DType::Float32, {3}, {0.54881352f, INFINITY, 1e6f}));
  auto out = exec.run(feeds);
  ASSERT_TRUE(out) << out.status().toString();
  auto y = rt::castTensor(out->outputs.at(0).tensor, DType::Float32);
  ASSERT_TRUE(y);
  const std::vector<float> v = y->copyValues<float>();
  EXPECT_FLOAT_EQ(v[0], 0.548828125f);
  EXPECT_TRUE(std::isinf(v[1]));
  EXPECT_TRUE(std::isinf(v[2]));
}

// The runtime refuses to load a model without inputs: the conversion refuses it with K7102.
TEST(MsRuntimeDomains, ModelWithoutInputsIsRefused) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g () => (float[2] y) {
  y = Constant <value = float[2] {1, 2}> ()
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_FALSE(bytes);
  EXPECT_EQ(bytes.status().code(), ErrorCode::MsLowerBadAttribute);
  EXPECT_NE(bytes.status().message().find("has no inputs"), std::string::npos)
      << bytes.status().message();
}

} // namespace kiln
