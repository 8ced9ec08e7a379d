// The executor checks every fed tensor against its graph input before running: element type,
// rank and fixed dims, with a layout hint when the data is the model's shape in NCHW <-> NHWC.
#include <gtest/gtest.h>

#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

Status runWith(const char* text, const Tensor& x) {
  Model model = kiln::testing::modelFromOnnxText(text);
  rt::Executor exec(model);
  auto out = exec.run({{"x", rt::RtValue::ofTensor(x)}});
  return out ? Status::ok() : out.status();
}

Tensor zeros(DType dtype, std::vector<int64_t> dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  return dtype == DType::Float32
             ? Tensor::fromValues<float>(dtype, dims, std::vector<float>(size_t(n), 0.f))
             : Tensor::fromValues<double>(dtype, dims, std::vector<double>(size_t(n), 0.0));
}

const char* kNhwcModel = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[1,8,8,3] x) => (float[1,8,8,3] y) { y = Relu (x) })";

} // namespace

TEST(FeedCheck, MatchingDataRuns) {
  EXPECT_TRUE(runWith(kNhwcModel, zeros(DType::Float32, {1, 8, 8, 3})));
}

TEST(FeedCheck, NchwDataForAnNhwcModelNamesTheTranspose) {
  Status s = runWith(kNhwcModel, zeros(DType::Float32, {1, 3, 8, 8}));
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), ErrorCode::RuntimeBadInput);
  EXPECT_EQ(s.message(), "input 'x': the model takes f32[1,8,8,3], the data is f32[1,3,8,8]; the "
                         "data looks NCHW and the model takes NHWC: transpose it (0,2,3,1)");
}

TEST(FeedCheck, WrongSizeWrongRankAndWrongTypeAreRefused) {
  EXPECT_EQ(runWith(kNhwcModel, zeros(DType::Float32, {1, 16, 16, 3})).message(),
            "input 'x': the model takes f32[1,8,8,3], the data is f32[1,16,16,3]");
  EXPECT_EQ(runWith(kNhwcModel, zeros(DType::Float32, {8, 8, 3})).message(),
            "input 'x': the model takes f32[1,8,8,3], the data is f32[8,8,3]");
  EXPECT_EQ(runWith(kNhwcModel, zeros(DType::Float64, {1, 8, 8, 3})).message(),
            "input 'x': the model takes f32[1,8,8,3], the data is f64[1,8,8,3]");
}

TEST(FeedCheck, SymbolicDimsTakeAnySize) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 13]>
g (float[N,3] x) => (float[N,3] y) { y = Relu (x) })";
  EXPECT_TRUE(runWith(text, zeros(DType::Float32, {5, 3})));
  EXPECT_FALSE(runWith(text, zeros(DType::Float32, {5, 4})));
}
