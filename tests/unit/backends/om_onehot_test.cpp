// OneHot through the .om target: indices in [-depth, -1] count from depth, and an index outside
// [-depth, depth) leaves its row all off_value (ONNX's rule), as the executor computes.
#include <gtest/gtest.h>

#include "kiln/backends/target.h"
#include "kiln/pipelines/conversion.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

// depth 5, values [off = 2, on = 3]; indices 1, -2 (class 3), 5 and -7 (both out of range).
const char* kOneHot = R"(
<ir_version: 8, opset_import: ["" : 11]>
g (int64[4] indices) => (float[4,5] y) {
  depth = Constant <value = float {5}> ()
  values = Constant <value = float[2] {2, 3}> ()
  y = OneHot <axis = 1> (indices, depth, values)
}
)";

TEST(OmOneHot, OutOfRangeIndicesLeaveTheirRowOff) {
  std::map<std::string, rt::RtValue> feeds;
  feeds["indices"] =
      rt::RtValue::ofTensor(Tensor::fromValues<int64_t>(DType::Int64, {4}, {1, -2, 5, -7}));
  const std::vector<float> expected = {2, 3, 2, 2, 2,  // 1
                                       2, 2, 2, 3, 2,  // -2 → 3
                                       2, 2, 2, 2, 2,  // 5: out of range
                                       2, 2, 2, 2, 2}; // -7: out of range
  Model source = kiln::testing::modelFromOnnxText(kOneHot);
  auto reference = kiln::testing::runModel(source, feeds);
  ASSERT_EQ(reference.size(), 1u);
  EXPECT_EQ(reference[0].copyValues<float>(), expected);

  Model model = kiln::testing::modelFromOnnxText(kOneHot);
  ConversionOptions conversion;
  conversion.target = "om";
  auto ran = runConversionPipeline(model, conversion);
  ASSERT_TRUE(ran) << ran.status().toString();
  auto back = findTarget("om")->roundTrip(std::move(model), RoundTripOptions{});
  ASSERT_TRUE(back) << back.status().toString();
  auto got = kiln::testing::runModel(*back, feeds);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].copyValues<float>(), expected) << "5 and -7 were wrapped onto a class";
}

} // namespace
