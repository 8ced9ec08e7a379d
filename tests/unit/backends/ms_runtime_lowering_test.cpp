// .ms lowerings shaped by what the real MindSpore Lite runtime can run: Where operands it cannot
// broadcast, NonZero without a runtime kernel, BatchNormalization with run-time parameters, and
// inputs the runtime must read as constants while building (CumSum axis, ReduceSum axes, OneHot
// depth).
#include <cstring>
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

int64_t elementCount(const fb::MetaGraph* g, uint32_t tensor) {
  int64_t count = 1;
  for (int32_t d : *g->allTensors()->Get(tensor)->dims())
    count *= d;
  return count;
}

Model readBack(const std::vector<uint8_t>& bytes) {
  auto owned = std::make_shared<std::vector<uint8_t>>(bytes);
  auto model = readMsBuffer(owned->data(), owned->size(), owned, "lowering.ms", "");
  EXPECT_TRUE(model) << model.status().toString();
  return model ? std::move(*model) : Model{};
}

// Runs `model` on `feeds` and returns output 0.
Tensor runFirstOutput(const Model& model, std::map<std::string, rt::RtValue> feeds) {
  rt::Executor exec(model);
  auto out = exec.run(feeds);
  EXPECT_TRUE(out) << out.status().toString();
  if (!out) return Tensor();
  return out->outputs.at(0).tensor;
}

rt::RtValue floats(std::vector<int64_t> dims, std::vector<float> values) {
  return rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, std::move(dims), values));
}

} // namespace

// Trilu over a batch of matrices emits Where(mask [3,3], x [2,3,3], 0): the runtime reads each
// operand as one element or the output's count, so the mask is broadcast to [2,3,3] first.
TEST(MsRuntimeLowering, WhereOperandsHoldOneElementOrTheOutputsCount) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3,3] x) => (float[2,3,3] y) {
  y = Trilu <upper = 0> (x)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto wheres = nodesOfType(g, fb::PrimitiveType_Where);
  ASSERT_EQ(wheres.size(), 1u);
  const int64_t outCount = elementCount(g, wheres[0]->outputIndex()->Get(0));
  EXPECT_EQ(outCount, 18);
  for (uint32_t in : *wheres[0]->inputIndex()) {
    const int64_t count = elementCount(g, in);
    EXPECT_TRUE(count == 1 || count == outCount) << "operand of " << count << " elements";
  }
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_BroadcastTo).size(), 1u);

  std::vector<float> x(18);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i + 1);
  Tensor y = runFirstOutput(readBack(*bytes), {{"x", floats({2, 3, 3}, x)}});
  EXPECT_EQ(y.copyValues<float>(), (std::vector<float>{1, 0, 0, 4, 5, 0, 7, 8, 9, //
                                                       10, 0, 0, 13, 14, 0, 16, 17, 18}));
}

// The runtime has no NonZero kernel: NonZero is its one-input Where ([count, rank] positions)
// transposed to ONNX's [rank, count].
TEST(MsRuntimeLowering, NonZeroIsTheOneInputWhereTransposed) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2] x) => (int64[2,?] y) {
  y = NonZero (x)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_NonZero).empty());
  auto wheres = nodesOfType(g, fb::PrimitiveType_Where);
  ASSERT_EQ(wheres.size(), 1u);
  EXPECT_EQ(wheres[0]->inputIndex()->size(), 1u);

  Tensor y = runFirstOutput(readBack(*bytes), {{"x", floats({2, 2}, {1, 0, 3, 4})}});
  EXPECT_EQ(y.dtype(), DType::Int64);
  EXPECT_EQ(y.dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(y.copyValues<int64_t>(), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
}

// FusedBatchNorm reads scale/bias/mean/var as weights while the runtime builds the model (it
// crashes on run-time tensors): computed parameters take the elementwise form.
TEST(MsRuntimeLowering, BatchNormWithRunTimeParametersIsArithmetic) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1,2,1,2] x, float[2] s, float[2] b, float[2] m, float[2] v) => (float[1,2,1,2] y) {
  y = BatchNormalization <epsilon = 0.5> (x, s, b, m, v)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_FusedBatchNorm).empty());
  EXPECT_TRUE(nodesOfType(g, fb::PrimitiveType_BatchNorm).empty());

  Tensor y = runFirstOutput(readBack(*bytes), {{"x", floats({1, 2, 1, 2}, {1, 2, 3, 4})},
                                               {"s", floats({2}, {2, 1})},
                                               {"b", floats({2}, {1, -1})},
                                               {"m", floats({2}, {1, 3})},
                                               {"v", floats({2}, {0.5f, 3.5f})}});
  // (x - m) / sqrt(v + 0.5) * s + b: channel 0 divides by 1, channel 1 by 2.
  EXPECT_EQ(y.copyValues<float>(), (std::vector<float>{1, 3, -1, -0.5f}));
}

// Constant parameters keep the one FusedBatchNorm.
TEST(MsRuntimeLowering, BatchNormWithConstantParametersStaysFused) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 15]>
g (float[1,2,1,2] x) => (float[1,2,1,2] y)
  <float[2] s = {2, 1}, float[2] b = {1, -1}, float[2] m = {1, 3}, float[2] v = {0.5, 3.5}> {
  y = BatchNormalization <epsilon = 0.5> (x, s, b, m, v)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  EXPECT_EQ(nodesOfType(root(*bytes), fb::PrimitiveType_FusedBatchNorm).size(), 1u);
}

// A rank-1 input has one axis: CumSum's run-time axis becomes the constant the runtime reads while
// it builds the model.
TEST(MsRuntimeLowering, CumSumOverOneAxisTakesAConstantAxis) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 14]>
g (float[3] x, int32 axis) => (float[3] y) {
  y = CumSum (x, axis)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto sums = nodesOfType(g, fb::PrimitiveType_CumSum);
  ASSERT_EQ(sums.size(), 1u);
  const auto* axis = g->allTensors()->Get(sums[0]->inputIndex()->Get(1));
  ASSERT_NE(axis->data(), nullptr);
  EXPECT_EQ(axis->data()->size(), 4u);
}

// An input the runtime reads while building (CumSum's axis over more than one axis, a reduction's
// axes, OneHot's depth) fed at run time is refused with K7102 naming it.
TEST(MsRuntimeLowering, BuildTimeInputsFedAtRunTimeAreRefused) {
  const char* models[] = {R"(
<ir_version: 8, opset_import: ["" : 14]>
g (float[2,3] x, int32 axis) => (float[2,3] y) {
  y = CumSum (x, axis)
}
)",
                          R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[3,2] x, int64[1] axes) => (float[3,1] y) {
  y = ReduceSum <keepdims = 1> (x, axes)
}
)",
                          R"(
<ir_version: 8, opset_import: ["" : 11]>
g (float[3] x, float depth, float[2] values) => (float[3,4] y) {
  y = OneHot (x, depth, values)
}
)"};
  const char* names[] = {"axis 'axis'", "axes 'axes'", "depth 'depth'"};
  for (size_t i = 0; i < 3; ++i) {
    auto bytes = buildMsBuffer(modelFromOnnxText(models[i]), MsWriteOptions{});
    ASSERT_FALSE(bytes) << names[i];
    EXPECT_EQ(bytes.status().code(), ErrorCode::MsLowerBadAttribute);
    EXPECT_NE(bytes.status().message().find(names[i]), std::string::npos)
        << bytes.status().message();
    EXPECT_NE(bytes.status().message().find("must be a constant"), std::string::npos);
  }
}

// Axes declared empty are known whatever feeds them: every axis, as a constant list.
TEST(MsRuntimeLowering, EmptyRunTimeAxesReduceEveryAxis) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[2,2] x, int64[0] axes) => (float[1,1] y) {
  y = ReduceSum <keepdims = 1> (x, axes)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto reduces = nodesOfType(g, fb::PrimitiveType_ReduceFusion);
  ASSERT_EQ(reduces.size(), 1u);
  const auto* axes = g->allTensors()->Get(reduces[0]->inputIndex()->Get(1));
  ASSERT_NE(axes->data(), nullptr);
  EXPECT_EQ(axes->data()->size(), 8u); // int32 {0, 1}
}

// The runtime's five-input StridedSlice reads x, begin, end, axes, strides (StridedSliceInferShape:
// axes at 3, strides at 4): a Slice fed at run time keeps that order, and reads back the same.
TEST(MsRuntimeLowering, RunTimeSliceWritesAxesBeforeStrides) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[4,4] x, int64[2] starts) => (float[2,2] y) <int64[2] ends = {4, 4}, int64[2] axes = {1, 0},
                                                       int64[2] steps = {2, 3}> {
  y = Slice (x, starts, ends, axes, steps)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto slices = nodesOfType(g, fb::PrimitiveType_StridedSlice);
  ASSERT_EQ(slices.size(), 1u);
  ASSERT_EQ(slices[0]->inputIndex()->size(), 5u);
  auto values = [&](uint32_t input) {
    const auto* t = g->allTensors()->Get(slices[0]->inputIndex()->Get(input));
    std::vector<int32_t> out(t->data()->size() / 4);
    std::memcpy(out.data(), t->data()->data(), t->data()->size());
    return out;
  };
  EXPECT_EQ(values(3), (std::vector<int32_t>{1, 0})); // axes
  EXPECT_EQ(values(4), (std::vector<int32_t>{2, 3})); // strides

  std::vector<float> x(16);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i);
  Tensor y = runFirstOutput(
      readBack(*bytes),
      {{"x", floats({4, 4}, x)},
       {"starts", rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {2}, {0, 0}))}});
  // Rows 0 and 3, columns 0 and 2.
  EXPECT_EQ(y.copyValues<float>(), (std::vector<float>{0, 2, 12, 14}));
}

// The runtime infers no shape for a PartialFusion without inputs ("No input!"): If branches that
// capture nothing take the condition as a parameter.
TEST(MsRuntimeLowering, IfBranchesCapturingNothingTakeTheCondition) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (bool c) => (float[2] y) {
  y = If (c) <then_branch = t () => (float[2] a) { a = Constant <value = float[2] {1, 2}> () },
              else_branch = e () => (float[2] b) { b = Constant <value = float[2] {3, 4}> () }>
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  auto partials = nodesOfType(g, fb::PrimitiveType_PartialFusion);
  ASSERT_EQ(partials.size(), 2u);
  for (const auto* p : partials)
    EXPECT_EQ(p->inputIndex()->size(), 1u);
  Model back = readBack(*bytes);
  auto flag = [](bool v) {
    return rt::RtValue::ofTensor(
        Tensor::fromValues<uint8_t>(DType::Bool, {}, {uint8_t(v ? 1 : 0)}));
  };
  EXPECT_EQ(runFirstOutput(back, {{"c", flag(true)}}).copyValues<float>(),
            (std::vector<float>{1, 2}));
  EXPECT_EQ(runFirstOutput(back, {{"c", flag(false)}}).copyValues<float>(),
            (std::vector<float>{3, 4}));
}

// The runtime splits a graph after its last non-tail Call and reads the op after it: a Loop's
// results are copied out of its Call, so the Call never ends the graph.
TEST(MsRuntimeLowering, LoopCallIsNotTheLastNodeOfItsGraph) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 11]>
g (int64 m, bool c, float[1] x) => (float[1] y) {
  y = Loop (m, c, x) <body = b (int64 i, bool ci, float[1] xi) => (bool co, float[1] xo) {
    co = Identity (ci)
    one = Constant <value = float[1] {1}> ()
    xo = Add (xi, one)
  }>
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  ASSERT_NE(g->subGraph(), nullptr);
  const auto* main = g->subGraph()->Get(0);
  ASSERT_GT(main->nodeIndices()->size(), 0u);
  const auto* last = g->nodes()->Get(main->nodeIndices()->Get(main->nodeIndices()->size() - 1));
  EXPECT_NE(last->primitive()->value_type(), fb::PrimitiveType_Call);

  Tensor y = runFirstOutput(
      readBack(*bytes),
      {{"m", rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {}, {3}))},
       {"c", rt::RtValue::ofTensor(Tensor::fromValues<uint8_t>(DType::Bool, {}, {uint8_t(1)}))},
       {"x", floats({1}, {5})}});
  EXPECT_EQ(y.copyValues<float>(), (std::vector<float>{8}));
}

// ONNX clamps a negative-step start to the axis' last element; the runtime keeps a start past the
// end: the start is capped (Minimum) before the StridedSlice, with the same numbers read back.
TEST(MsRuntimeLowering, RunTimeNegativeStepStartIsCappedAtTheLastElement) {
  Model model = modelFromOnnxText(R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[4] x, int64[1] starts) => (float[4] y) <int64[1] ends = {-100}, int64[1] axes = {0},
                                                 int64[1] steps = {-1}> {
  y = Slice (x, starts, ends, axes, steps)
}
)");
  auto bytes = buildMsBuffer(model, MsWriteOptions{});
  ASSERT_TRUE(bytes) << bytes.status().toString();
  const auto* g = root(*bytes);
  EXPECT_EQ(nodesOfType(g, fb::PrimitiveType_Minimum).size(), 1u);
  Tensor y = runFirstOutput(
      readBack(*bytes),
      {{"x", floats({4}, {1, 2, 3, 4})},
       {"starts", rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {1}, {10}))}});
  EXPECT_EQ(y.copyValues<float>(), (std::vector<float>{4, 3, 2, 1}));
}

} // namespace kiln
