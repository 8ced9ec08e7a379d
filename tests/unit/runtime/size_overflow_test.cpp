// Shapes whose element count or byte size overflows: every kernel that makes such a shape refuses
// it with K5002/K5004 naming the node, instead of wrapping to a short buffer that later kernels
// (Slice, Transpose, the kernel itself) read or write past.
#include <chrono>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kiln/backends/ms_writer.h"
#include "kiln/backends/om.h"
#include "kiln/compare.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/executor.h"
#include "kiln/support/checked_math.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;

// Runs `text` on the given float feeds and returns the failure (an OK status when it ran).
Status runFailure(const std::string& text, const std::map<std::string, Tensor>& feeds = {}) {
  Model model = modelFromOnnxText(text);
  if (!model.graph) return Status(ErrorCode::Internal, "model did not import");
  rt::Executor executor(model);
  std::map<std::string, rt::RtValue> values;
  for (const auto& [name, tensor] : feeds)
    values[name] = rt::RtValue::ofTensor(tensor);
  auto result = executor.run(values);
  return result ? Status::ok() : result.status();
}

Tensor floats(std::vector<int64_t> dims, const std::vector<float>& v) {
  return Tensor::fromValues<float>(DType::Float32, std::move(dims), v);
}

} // namespace

TEST(CheckedMath, ElementCountsAndByteSizesStopAtInt64Max) {
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{2, 3, 4}), 24u);
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{}), 1u);
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{3, 0, 5}), 0u);
  EXPECT_EQ(checkedElementCount(std::vector<int64_t>{INT64_MAX}), uint64_t(INT64_MAX));
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{-1, 4}));
  // Wraps to exactly 4 in 64 bits: the count a Reshape of 4 elements would have compared.
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{4611686018427387905, 4}));
  // Above int64 but within uint64.
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{4294967296, 4294967295}));
  // A zero dim does not excuse the others: strides of the empty tensor would still wrap.
  EXPECT_FALSE(checkedElementCount(std::vector<int64_t>{0, 4294967296, 4294967296}));
  EXPECT_EQ(checkedStorageBytes(3, 4), 2u);
  EXPECT_EQ(checkedStorageBytes(5, 32), 20u);
  EXPECT_FALSE(checkedStorageBytes(uint64_t{1} << 61, 32));
  EXPECT_FALSE(checkedMul<int64_t>(INT64_MAX, 2));
  EXPECT_EQ(checkedAdd<int64_t>(INT64_MAX - 1, 1), INT64_MAX);
  EXPECT_FALSE(checkedSub<int64_t>(INT64_MIN, 1));

  auto extent = checkTensorExtent(std::vector<int64_t>{4294967296, 4294967296}, 32, "f32",
                                  ErrorCode::SizeOverflow, "tensor 'w'");
  ASSERT_FALSE(extent);
  EXPECT_EQ(extent.status().code(), ErrorCode::SizeOverflow);
  EXPECT_EQ(extent.status().message(),
            "tensor 'w': element count of [4294967296,4294967296] overflows");
  extent = checkTensorExtent(std::vector<int64_t>{4611686018427387904}, 32, "f32",
                             ErrorCode::RuntimeOutOfMemory, "its output");
  ASSERT_FALSE(extent);
  EXPECT_EQ(extent.status().message(),
            "its output: 4611686018427387904 elements of f32 overflow the byte size");
}

// [4] reshaped to [4611686018427387905, 4]: the product wraps to 4 in 64 bits. The old kernel
// accepted it, and the Transpose after it wrote 4 elements into a 0-byte buffer.
TEST(SizeOverflow, ReshapeWhoseCountWrapsToTheInputsIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[4] x) => (float[A,B] y)
<int64[2] shape = {4611686018427387905, 4}>
{
  r = Reshape(x, shape)
  y = Transpose(r)
})",
                        {{"x", floats({4}, {1, 2, 3, 4})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeBadInput) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (Reshape): cannot reshape [4] to [4611686018427387905,4]: "
                         "the element count overflows");
}

// Expand to [2^32, 2^32]: the old output was a 0-byte tensor with those dims, and the Slice after
// it read 4 elements from it.
TEST(SizeOverflow, ExpandToAnOverflowingShapeIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1] x) => (float[A,B] y)
<int64[2] shape = {4294967296, 4294967296}, int64[2] starts = {0, 0}, int64[2] ends = {1, 4}>
{
  e = Expand(x, shape)
  y = Slice(e, starts, ends)
})",
                        {{"x", floats({1, 1}, {7})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeOutOfMemory) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (Expand) could not allocate its output: element count of "
                         "[4294967296,4294967296] overflows");
}

// The old kernel returned a 0-byte tensor of dims [2^32, 2^32] and the run succeeded.
TEST(SizeOverflow, ConstantOfShapeWithAnOverflowingCountIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1] x) => (float[A,B] y)
<int64[2] shape = {4294967296, 4294967296}>
{
  y = ConstantOfShape(shape)
})",
                        {{"x", floats({1}, {0})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeOutOfMemory) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (ConstantOfShape) could not allocate its output: element "
                         "count of [4294967296,4294967296] overflows");
}

// 2^40 floats (4 TiB) fit int64 but not the machine: refused before any allocation is tried, so
// the run fails at once instead of faulting in pages until the OOM killer comes.
TEST(SizeOverflow, ConstantOfShapeLargerThanMemoryFailsFast) {
  const auto start = std::chrono::steady_clock::now();
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1] x) => (float[A] y)
<int64[1] shape = {1099511627776}>
{
  y = ConstantOfShape(shape)
})",
                        {{"x", floats({1}, {0})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeOutOfMemory) << s.toString();
  EXPECT_EQ(s.message(),
            fmt::format("node 'n0' (ConstantOfShape) could not allocate a buffer of "
                        "4398046511104 bytes: more than this machine's memory ({} bytes)",
                        rt::allocationLimitBytes()));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

// Pads of 2^62 give a pooled axis of 2^62 + 1 floats, whose byte size overflows: the old
// kernel wrote its output into a 0-byte buffer.
TEST(SizeOverflow, PoolOutputWhoseByteSizeOverflowsIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,1,1] x) => (float[N,C,H,W] y)
{
  y = AveragePool<kernel_shape = [1, 1], pads = [0, 0, 0, 4611686018427387904]>(x)
})",
                        {{"x", floats({1, 1, 1, 1}, {3})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeOutOfMemory) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (AveragePool) could not allocate its output: "
                         "4611686018427387905 elements of f32 overflow the byte size");
}

// in + pads and the dilated kernel both wrap: the old geometry came out as a huge positive size.
TEST(SizeOverflow, ConvWindowArithmeticThatOverflowsIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,4] x) => (float[N,C,L] y)
<float[1,1,2] w = {1, 1}>
{
  y = Conv<dilations = [4611686018427387904], pads = [4611686018427387904, 4611686018427387904]>(x, w)
})",
                        {{"x", floats({1, 1, 4}, {1, 2, 3, 4})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeBadInput) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (Conv): window arithmetic overflows on spatial axis 0 (input "
                         "4, kernel 2, stride 1, dilation 4611686018427387904, pads "
                         "4611686018427387904+4611686018427387904)");
}

// stride * (5 - 1) is 2^64, which wrapped to 0: the old kernel ran and wrote a 2-element output.
TEST(SizeOverflow, ConvTransposeOutputSizeThatOverflowsIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[1,1,5] x) => (float[N,C,L] y)
<float[1,1,2] w = {1, 1}>
{
  y = ConvTranspose<strides = [4611686018427387904]>(x, w)
})",
                        {{"x", floats({1, 1, 5}, {1, 2, 3, 4, 5})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeBadInput) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (ConvTranspose): output size arithmetic overflows on spatial "
                         "axis 0 (input 5, kernel 2, stride 4611686018427387904, dilation 1, pads "
                         "0+0, output_padding 0)");
}

TEST(SizeOverflow, TileWhoseRepeatsOverflowIsRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[A] y)
<int64[1] repeats = {9223372036854775807}>
{
  y = Tile(x, repeats)
})",
                        {{"x", floats({2}, {1, 2})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeOutOfMemory) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (Tile) could not allocate its output: element count of "
                         "[9223372036854775807,2] overflows");
}

// 2 + 2 * INT64_MAX wraps to 0: the old kernel returned an empty tensor.
TEST(SizeOverflow, PadsThatOverflowAnAxisAreRefused) {
  Status s = runFailure(R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[2] x) => (float[A] y)
<int64[2] pads = {9223372036854775807, 9223372036854775807}>
{
  y = Pad(x, pads)
})",
                        {{"x", floats({2}, {1, 2})}});
  EXPECT_EQ(s.code(), ErrorCode::RuntimeBadInput) << s.toString();
  EXPECT_EQ(s.message(), "node 'n0' (Pad): pads 9223372036854775807+9223372036854775807 on axis 0 "
                         "of size 2 overflow");
}

// Inputs generated for benchmark, converter_lite's accuracy run and kiln compare: 2^62 floats
// overflow the byte size, and the old generator wrote them into a 0-byte buffer.
TEST(SizeOverflow, GeneratedInputsOfAnOverflowingShapeAreRefused) {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  x->setType(ValueType::tensor(DType::Float32, Shape::fromStatic({4611686018427387904})));
  auto feeds = makeDeterministicInputs(*model.graph, 1);
  ASSERT_FALSE(feeds);
  EXPECT_EQ(feeds.status().code(), ErrorCode::RuntimeBadInput);
  EXPECT_EQ(feeds.status().message(),
            "input 'x': 4611686018427387904 elements of f32 overflow the byte size");
}

// Both writers size tensor descs and buffers from value shapes: a shape whose bytes overflow is
// refused by the lowering check every target shares (kiln check --target, atc, converter_lite),
// where the old writers computed a wrapped size.
TEST(SizeOverflow, LoweringRefusesValuesWhoseSizeOverflows) {
  Model model;
  Value* x = kiln::testing::startModelWithInput(model);
  x->setType(ValueType::tensor(DType::Float32, Shape::fromStatic({4611686018427387904})));
  Node* relu = model.graph->appendNode("Relu", {x}, {"y"});
  model.graph->addOutput(relu->output(0));
  const std::string expected =
      "'x' [4611686018427387904]: 4611686018427387904 elements of f32 overflow the byte size";
  EXPECT_EQ(msUnsupportedReason(*relu, 17), expected);
  EXPECT_EQ(omUnsupportedReason(*relu, "Ascend310P3", 17), expected);
}
