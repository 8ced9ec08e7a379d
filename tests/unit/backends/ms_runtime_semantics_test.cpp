// .ms lowerings that route around the MindSpore Lite runtime's own semantics (docs/ms_backend.md,
// "Where the runtime differs from ONNX"): Round, TopK largest=0, float ReduceMax, grouped Conv
// with a batch, dilated ConvTranspose. Each test pins the op the runtime must not see and checks
// that the .ms, read back and run, still computes the ONNX numbers.
#include <cmath>
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

const fb::MetaGraph* root(const std::vector<uint8_t>& bytes) {
  return kiln::testing::msRoot(bytes);
}

std::vector<const fb::CNode*> nodesOfType(const fb::MetaGraph* g, fb::PrimitiveType type) {
  return kiln::testing::msNodesOfType(g, type);
}

struct Lowered {
  std::vector<uint8_t> bytes;
  Model original, readBack;
};

Lowered lower(const char* text) {
  Lowered l;
  l.original = modelFromOnnxText(text);
  auto bytes = buildMsBuffer(l.original, MsWriteOptions{});
  EXPECT_TRUE(bytes) << bytes.status().toString();
  if (!bytes) return l;
  l.bytes = *bytes;
  auto owned = std::make_shared<std::vector<uint8_t>>(l.bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "semantics.ms", "");
  EXPECT_TRUE(model) << model.status().toString();
  if (model) l.readBack = std::move(*model);
  return l;
}

// Output `index` of `model` on float input `x` of `dims`, as floats.
std::vector<float> run(const Model& model, const std::vector<int64_t>& dims,
                       const std::vector<float>& x, size_t index = 0) {
  rt::Executor exec(model);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, dims, x));
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  if (!out) return {};
  return out->outputs.at(index).tensor.copyValues<float>();
}

std::vector<float> ramp(size_t count, float start, float step) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = start + step * static_cast<float>(i);
  return v;
}

} // namespace

// The runtime's Round rounds halves away from zero: the .ms carries no Round, and its arithmetic
// rounds halves to even, also for floats too large to have a fraction.
TEST(MsRuntimeSemantics, RoundRoundsHalvesToEvenWithoutTheRuntimesRound) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[10] x) => (float[10] y) {
  y = Round (x)
}
)");
  const auto* g = root(l.bytes);
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_Round).empty());
  const std::vector<float> x = {-2.5f, -1.5f,      -0.5f, 0.5f,       1.5f,
                                2.5f,  2.4999998f, -3.7f, 8388609.0f, 4194304.5f};
  const std::vector<float> expected = {-2, -2, -0, 0, 2, 2, 2, -4, 8388609, 4194304};
  EXPECT_EQ(run(l.readBack, {10}, x), expected);
  EXPECT_EQ(run(l.original, {10}, x), expected);
}

// The runtime's TopK never reads `largest`: the k smallest are the k largest of Neg(x).
TEST(MsRuntimeSemantics, TopKSmallestGoesThroughNeg) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4] x) => (float[2,2] v, int64[2,2] i) <int64[1] k = {2}> {
  v, i = TopK <axis = 1, largest = 0> (x, k)
}
)");
  const auto* g = root(l.bytes);
  auto topk = nodesOfType(g, fb::PrimitiveType_TopKFusion);
  ASSERT_EQ(topk.size(), 1u);
  EXPECT_TRUE(topk[0]->primitive()->value_as_TopKFusion()->largest());
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Neg).size(), 2u);
  const std::vector<float> x = {3, 1, 2, 0, -1, -5, 7, -5};
  EXPECT_EQ(run(l.readBack, {2, 4}, x), (std::vector<float>{0, 1, -5, -5}));
}

// The runtime's float ReduceMax starts from FLT_MIN: an all-negative reduction goes through
// ReduceMin of the negated data.
TEST(MsRuntimeSemantics, FloatReduceMaxIsNegatedReduceMin) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 18]>
g (float[2,3] x) => (float[3] y) <int64[1] axes = {0}> {
  y = ReduceMax <keepdims = 0> (x, axes)
}
)");
  const auto* g = root(l.bytes);
  auto reduce = nodesOfType(g, fb::PrimitiveType_ReduceFusion);
  ASSERT_EQ(reduce.size(), 1u);
  EXPECT_EQ(reduce[0]->primitive()->value_as_ReduceFusion()->mode(), fb::ReduceMode_ReduceMin);
  const std::vector<float> x = {-4, -1, 2, -3, -2, -7};
  EXPECT_EQ(run(l.readBack, {2, 3}, x), (std::vector<float>{-3, -1, 2}));
}

// The runtime's grouped convolution fills in the first image only: a batch of 2 becomes one
// Conv2DFusion per image, with the ONNX numbers.
TEST(MsRuntimeSemantics, GroupedConvWithABatchRunsPerImage) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4,3,3] x) => (float[2,6,3,3] y) <float[6,2,1,1] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}> {
  y = Conv <group = 2> (x, w)
}
)");
  const auto* g = root(l.bytes);
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Conv2DFusion).size(), 2u);
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Split).size(), 1u);
  const auto x = ramp(72, -3.0f, 0.25f);
  const auto expected = run(l.original, {2, 4, 3, 3}, x);
  ASSERT_EQ(expected.size(), 108u);
  EXPECT_EQ(run(l.readBack, {2, 4, 3, 3}, x), expected);
}

// Depthwise and ungrouped convolutions keep one Conv2DFusion whatever the batch.
TEST(MsRuntimeSemantics, DepthwiseConvWithABatchStaysOneOp) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2,3,3] x) => (float[2,2,3,3] y) <float[2,1,1,1] w = {2, 3}> {
  y = Conv <group = 2> (x, w)
}
)");
  EXPECT_EQ(nodesOfType(root(l.bytes), fb::PrimitiveType_Conv2DFusion).size(), 1u);
}

// The runtime's deconvolution refuses dilations: a constant kernel is written with its taps
// spread apart (dilation 1, kernel (k - 1) * d + 1) and computes the same numbers.
TEST(MsRuntimeSemantics, DilatedConvTransposeSpreadsAConstantKernel) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3,3] x) => (float[1,1,5,5] y) <float[1,1,2,2] w = {1, 2, 3, 4}> {
  y = ConvTranspose <dilations = [2, 2]> (x, w)
}
)");
  const auto* g = root(l.bytes);
  auto deconv = nodesOfType(g, fb::PrimitiveType_Conv2dTransposeFusion);
  ASSERT_EQ(deconv.size(), 1u);
  const auto* attrs = deconv[0]->primitive()->value_as_Conv2dTransposeFusion();
  EXPECT_EQ(std::vector<int64_t>(attrs->dilation()->begin(), attrs->dilation()->end()),
            (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(std::vector<int64_t>(attrs->kernel_size()->begin(), attrs->kernel_size()->end()),
            (std::vector<int64_t>{3, 3}));
  const auto x = ramp(9, 1.0f, 1.0f);
  const auto expected = run(l.original, {1, 1, 3, 3}, x);
  ASSERT_EQ(expected.size(), 25u);
  EXPECT_EQ(run(l.readBack, {1, 1, 3, 3}, x), expected);
}

// A kernel fed at run time is spread by ops (Pad of views, StridedSlice): same numbers.
TEST(MsRuntimeSemantics, DilatedConvTransposeSpreadsARunTimeKernel) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3,3] x, float[1,2,2,2] w) => (float[1,2,5,5] y) {
  y = ConvTranspose <dilations = [2, 2]> (x, w)
}
)");
  const auto* g = root(l.bytes);
  auto deconv = nodesOfType(g, fb::PrimitiveType_Conv2dTransposeFusion);
  ASSERT_EQ(deconv.size(), 1u);
  const auto* attrs = deconv[0]->primitive()->value_as_Conv2dTransposeFusion();
  EXPECT_EQ(std::vector<int64_t>(attrs->dilation()->begin(), attrs->dilation()->end()),
            (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_PadFusion).size(), 2u);
  auto runBoth = [](const Model& m) {
    rt::Executor exec(m);
    std::map<std::string, rt::RtValue> feeds;
    feeds["x"] = rt::RtValue::ofTensor(
        Tensor::fromValues<float>(DType::Float32, {1, 1, 3, 3}, ramp(9, 1.0f, 1.0f)));
    feeds["w"] = rt::RtValue::ofTensor(
        Tensor::fromValues<float>(DType::Float32, {1, 2, 2, 2}, ramp(8, -2.0f, 0.5f)));
    auto out = exec.run(feeds);
    EXPECT_TRUE(out) << out.status().toString();
    return out ? out->outputs.at(0).tensor.copyValues<float>() : std::vector<float>{};
  };
  const auto expected = runBoth(l.original);
  ASSERT_EQ(expected.size(), 50u);
  EXPECT_EQ(runBoth(l.readBack), expected);
}

// The runtime's nearest Resize never reads nearest_mode: a static one becomes Gathers with the
// source rows and columns kiln picks (ONNX Runtime's float32 rule: 9 -> 3 by 0.33333334 reads
// 0, 3, 6).
TEST(MsRuntimeSemantics, NearestResizeIsGathersWithOnnxSourcePixels) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,9,9] x) => (float[1,1,3,3] y, float[1,1,18,18] z) <float[4] third = {1, 1, 0.33333334, 0.33333334}, int64[4] up = {1, 1, 18, 18}> {
  y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , third)
  z = Resize <mode = "nearest", coordinate_transformation_mode = "half_pixel", nearest_mode = "round_prefer_ceil"> (x, , , up)
}
)");
  const auto* g = root(l.bytes);
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_Resize).empty());
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Gather).size(), 4u);
  const auto x = ramp(81, 0.0f, 1.0f);
  EXPECT_EQ(run(l.readBack, {1, 1, 9, 9}, x),
            (std::vector<float>{0, 3, 6, 27, 30, 33, 54, 57, 60}));
  EXPECT_EQ(run(l.readBack, {1, 1, 9, 9}, x, 1), run(l.original, {1, 1, 9, 9}, x, 1));
}

// The runtime's cubic Resize takes other border taps: a static one becomes MatMuls with the
// executor's interpolation tables, and gives the executor's numbers.
TEST(MsRuntimeSemantics, CubicResizeIsMatMulsWithTheExecutorsTaps) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,4,4] x) => (float[1,2,8,6] y) <int64[4] sizes = {1, 2, 8, 6}> {
  y = Resize <mode = "cubic", cubic_coeff_a = -0.5, exclude_outside = 1> (x, , , sizes)
}
)");
  const auto* g = root(l.bytes);
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_Resize).empty());
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_MatMulFusion).size(), 2u);
  const auto x = ramp(32, -4.0f, 0.37f);
  const auto expected = run(l.original, {1, 2, 4, 4}, x);
  const auto actual = run(l.readBack, {1, 2, 4, 4}, x);
  ASSERT_EQ(expected.size(), 96u);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i], 1e-5f + 1e-5f * std::fabs(expected[i])) << i;
}

// Over a batch of unknown size the grouped Conv is one plain Conv2DFusion per group on a
// channel Split, with each group's weight and bias rows: the ONNX numbers for a batch of 2.
TEST(MsRuntimeSemantics, GroupedConvOverADynamicBatchRunsPerGroup) {
  Lowered l = lower(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[N,4,3,3] x) => (float[N,6,3,3] y) <float[6,2,1,1] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, float[6] b = {1, -1, 2, -2, 3, -3}> {
  y = Conv <group = 2> (x, w, b)
}
)");
  const auto* g = root(l.bytes);
  auto convs = nodesOfType(g, fb::PrimitiveType_Conv2DFusion);
  ASSERT_EQ(convs.size(), 2u);
  for (const auto* c : convs)
    EXPECT_EQ(c->primitive()->value_as_Conv2DFusion()->group(), 1);
  const auto x = ramp(72, -3.0f, 0.25f);
  const auto expected = run(l.original, {2, 4, 3, 3}, x);
  ASSERT_EQ(expected.size(), 108u);
  EXPECT_EQ(run(l.readBack, {2, 4, 3, 3}, x), expected);
}

} // namespace kiln
