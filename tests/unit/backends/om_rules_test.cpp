// The .om op rules (src/backends/om/ops/<family>.cpp) through a write / read-back round trip.
#include <algorithm>
#include <cmath>

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

// Lowers `text` (one input x of `dims`), writes the .om, reads it back and runs both models on
// the same deterministic data: the raised graph must compute what the ONNX graph does.
void expectSameAfterOm(const std::string& text, const std::vector<int64_t>& dims) {
  Model m = modelFromOnnxText(text);
  ASSERT_TRUE(m.graph);
  for (const auto& n : m.graph->nodes())
    EXPECT_EQ(omUnsupportedReason(*n, "Ascend310P3", 13), "") << n->opType();
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "rules.om");
  ASSERT_TRUE(back) << back.status().toString();
  int64_t count = 1;
  for (int64_t d : dims)
    count *= d;
  std::vector<float> data(static_cast<size_t>(count));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>((i * 37) % 23) / 11.0f - 1.0f;
  Tensor x = Tensor::fromValues<float>(DType::Float32, dims, data);
  std::vector<float> want = run(m, x), got = run(*back, x);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  float maxDiff = 0;
  for (size_t i = 0; i < want.size(); ++i)
    maxDiff = std::max(maxDiff, std::abs(got[i] - want[i]));
  EXPECT_LT(maxDiff, 1e-5f);
}

// 1-D Conv runs as Conv2D over [N, C, 1, L]: group, dilation, explicit pads and a bias.
TEST(OmRules, Conv1dWithGroupDilationPads) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,4,11] x) => (float[2,6,9] y)
<float[6,2,3] w = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 1.2, 0.2, 0.1, -0.3, 0.5, 0.4, -0.6, 0.8, -0.7, 0.9, -1.2, 1.1, 1.0, 0.3, 0.3, -0.1, 0.2, 0.7, -0.4, 0.6, -0.9, 0.5, 0.4, -0.2, 0.1}, float[6] b = {0.1, 0.2, -0.3, 0.4, -0.5, 0.6}>
{
  y = Conv <group = 2, dilations = [2], pads = [1, 2], strides = [1]> (x, w, b)
}
)",
                    {2, 4, 11});
}

// SAME_UPPER resolves on the L axis (ops::samePadding) with a stride that leaves an odd pad.
TEST(OmRules, Conv1dSameUpperStrided) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,10] x) => (float[1,3,4] y)
<float[3,2,4] w = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 1.2, 0.2, 0.1, -0.3, 0.5, 0.4, -0.6, 0.8, -0.7, 0.9, -1.2, 1.1, 1.0}>
{
  y = Conv <auto_pad = "SAME_UPPER", strides = [3]> (x, w)
}
)",
                    {1, 2, 10});
}

// A weight two convolutions share is not re-described in place: the second gets its own view.
TEST(OmRules, Conv1dSharedWeight) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,6] x) => (float[1,2,5] y)
<float[2,2,3] w = {0.1, -0.2, 0.3, 0.4, -0.5, 0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 1.2}>
{
  a = Conv <strides = [2]> (x, w)
  c = Conv <pads = [1, 1], strides = [2]> (x, w)
  y = Concat <axis = 2> (a, c)
}
)",
                    {1, 2, 6});
}

TEST(OmRules, MaxPool1dSameUpper) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,3,10] x) => (float[1,3,5] y)
{
  y = MaxPool <kernel_shape = [3], strides = [2], auto_pad = "SAME_UPPER"> (x)
}
)",
                    {1, 3, 10});
}

TEST(OmRules, AveragePool1dPadsExcludingPad) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3,9] x) => (float[2,3,5] y)
{
  y = AveragePool <kernel_shape = [3], strides = [2], pads = [1, 1]> (x)
}
)",
                    {2, 3, 9});
}

TEST(OmRules, AveragePool1dCountIncludePadCeil) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,8] x) => (float[1,2,4] y)
{
  y = AveragePool <kernel_shape = [2], strides = [2], pads = [1, 0], count_include_pad = 1, ceil_mode = 1> (x)
}
)",
                    {1, 2, 8});
}

// GE's alpha multiplies the plain square sum; ONNX's is divided by size first.
TEST(OmRules, LrnAcrossChannels) {
  expectSameAfterOm(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,7,3,2] x) => (float[1,7,3,2] y)
{
  y = LRN <size = 5, alpha = 0.3, beta = 0.6, bias = 1.5> (x)
}
)",
                    {1, 7, 3, 2});
}

TEST(OmRules, LrnEvenSizeIsRefused) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4,2,2] x) => (float[1,4,2,2] y)
{
  y = LRN <size = 4> (x)
}
)");
  ASSERT_TRUE(m.graph);
  EXPECT_EQ(omUnsupportedReason(*m.graph->nodes().front(), "Ascend310P3", 13),
            "LRN with size 4 (only an odd size is a centred window)");
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

// A scale whose coordinates GraphEngine's out / in cannot reproduce goes to the ONNX-semantics
// Resize op (coordinates by the scale: rows 0, 2, 5 of 10 for 0.35, where out / in picks 0, 3, 6).
TEST(OmRules, ResizeByAScaleTheV2OpsCannotFollowLowersToResize) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,10,10] x) => (float[1,1,3,3] y)
<float[4] scales = {1, 1, 0.35, 0.35}>
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
  std::vector<float> iota(100);
  for (size_t i = 0; i < iota.size(); ++i)
    iota[i] = static_cast<float>(i);
  std::vector<float> y =
      run(*back, Tensor::fromValues<float>(DType::Float32, {1, 1, 10, 10}, iota));
  EXPECT_EQ(y, (std::vector<float>{0, 2, 5, 20, 22, 25, 50, 52, 55}));
}

// Every refused node as data, with one label for unnamed nodes: the ops without a lowering (K8101)
// and the value the chip cannot hold (K8102, isOp false).
TEST(OmRules, LowerModelReturnsEveryRefusal) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[2,3] x, bfloat16[4] z) => (float[2,3] y, bfloat16[4] w)
{
  a = Unique (x)
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
  EXPECT_EQ(refusals[0].label, "node producing 'a' (Unique)");
  EXPECT_EQ(refusals[0].reason, "op Unique has no GraphEngine lowering in kiln");
  EXPECT_TRUE(refusals[0].isOp);
  EXPECT_EQ(refusals[1].label, "node producing 'y' (LpNormalization)");
  EXPECT_TRUE(refusals[1].isOp);
  EXPECT_EQ(refusals[2].label, "node producing 'w' (Relu)");
  EXPECT_NE(refusals[2].reason.find("Ascend310P3"), std::string::npos) << refusals[2].reason;
  EXPECT_FALSE(refusals[2].isOp);
  EXPECT_EQ(refusals[2].node, m.graph->nodes().back().get());
  EXPECT_NE(lowered.status().message().find("node producing 'a' (Unique): op Unique"),
            std::string::npos)
      << lowered.status().message();
}

} // namespace

// An absent optional input keeps its slot as GraphEngine writes one (an entry and a placeholder
// desc): without the desc GE put `scales` on slot 1 of 2 and refused the node ("doesn't have data
// input 2"). Every op's input entries and descs are one list.
TEST(OmRules, AnAbsentOptionalInputKeepsAPlaceholderDesc) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,10,10] x) => (float[1,1,3,3] y)
<float[4] scales = {1, 1, 0.35, 0.35}>
{
  y = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric", nearest_mode = "floor"> (x, , scales)
}
)");
  ASSERT_TRUE(m.graph);
  auto lowered = om::lowerModel(m, OmWriteOptions{});
  ASSERT_TRUE(lowered) << lowered.status().toString();
  bool sawPlaceholder = false;
  for (const auto& graph : lowered->modelDef.graph())
    for (const auto& op : graph.op()) {
      EXPECT_EQ(op.input_size(), op.input_desc_size()) << op.type() << " " << op.name();
      for (int i = 0; i < op.input_size() && i < op.input_desc_size(); ++i)
        if (op.input(i).empty() && op.type() != "Data") { // Data's "" input is the fed tensor
          sawPlaceholder = true;
          EXPECT_EQ(op.input_desc(i).layout(), "RESERVED");
          EXPECT_EQ(op.input_desc(i).dtype(), ge::proto::DT_UNDEFINED);
        }
    }
  EXPECT_TRUE(sawPlaceholder);
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "resize.om");
  ASSERT_TRUE(back) << back.status().toString();
}

// Each edge's two descs name one layout (as in graphs GraphEngine builds): a 4-D NCHW input read
// by a Flatten (whose rule asks for no format) and a rank-2 result (which cannot be NCHW).
TEST(OmRules, BothEndsOfAnEdgeNameOneLayout) {
  Model m = modelFromOnnxText(R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,2,3,4] x) => (float[1,24] y, float[1,2,3,4] z)
{
  y = Flatten (x)
  z = Relu (x)
}
)");
  ASSERT_TRUE(m.graph);
  auto lowered = om::lowerModel(m, OmWriteOptions{});
  ASSERT_TRUE(lowered) << lowered.status().toString();
  for (const auto& graph : lowered->modelDef.graph()) {
    std::map<std::string, std::string> produced; // "op:k" -> layout
    for (const auto& op : graph.op())
      for (int k = 0; k < op.output_desc_size(); ++k)
        produced[op.name() + ":" + std::to_string(k)] = op.output_desc(k).layout();
    int edges = 0;
    for (const auto& op : graph.op())
      for (int i = 0; i < op.input_size() && i < op.input_desc_size(); ++i) {
        auto it = produced.find(op.input(i));
        if (it == produced.end()) continue;
        ++edges;
        EXPECT_EQ(op.input_desc(i).layout(), it->second) << op.input(i) << " -> " << op.name();
        const int rank = op.input_desc(i).shape().dim_size();
        if (it->second == "NCHW") EXPECT_EQ(rank, 4) << op.input(i);
      }
    EXPECT_GE(edges, 3);
  }
}

// Conv2DTranspose has no float32 data kernel in CANN's IR: float32 data goes in as float16 (Casts)
// and comes out float32; the .om read back computes ConvTranspose on the rounded inputs.
TEST(OmRules, Float32ConvTransposeTakesFloat16Data) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,1,3,3] x) => (float[1,2,5,5] y)
<float[1,2,3,3] w = {1, 0.5, 0.25, 2, 1, 0.5, 4, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, float[2] b = {0.5, -1}>
{
  y = ConvTranspose (x, w, b)
}
)";
  Model m = modelFromOnnxText(text);
  ASSERT_TRUE(m.graph);
  auto lowered = om::lowerModel(m, OmWriteOptions{});
  ASSERT_TRUE(lowered) << lowered.status().toString();
  int deconvs = 0;
  for (const auto& op : lowered->modelDef.graph(0).op())
    if (op.type() == "Conv2DTranspose") {
      ++deconvs;
      EXPECT_EQ(op.input_desc(1).dtype(), ge::proto::DT_FLOAT16); // x
      EXPECT_EQ(op.input_desc(2).dtype(), ge::proto::DT_FLOAT16); // filter
      EXPECT_EQ(op.output_desc(0).dtype(), ge::proto::DT_FLOAT);
    }
  EXPECT_EQ(deconvs, 1);
  // Data exact in float16 (quarters): the read-back .om computes what the ONNX model does.
  auto bytes = buildOmBuffer(m, OmWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  auto back = readOmBuffer(bytes->data(), bytes->size(), "deconv.om");
  ASSERT_TRUE(back) << back.status().toString();
  Tensor x = Tensor::fromValues<float>(DType::Float32, {1, 1, 3, 3},
                                       {0.25f, -1, 2, 0.5f, 1.75f, -0.75f, 3, 1, -2});
  std::vector<float> want = run(m, x), got = run(*back, x);
  ASSERT_EQ(want.size(), 50u);
  EXPECT_EQ(got, want);
}
