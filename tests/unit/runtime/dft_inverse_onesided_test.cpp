// DFT with inverse and onesided is the inverse of a one-sided transform (numpy's irfft): the
// input's bins 0..n/2 stand for the whole Hermitian spectrum and the output is the real signal.
#include <gtest/gtest.h>

#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

// The one-sided spectrum of the real signal [1, 2, 3, 4]: 10, -2 + 2i, -2.
const char* kIrfft = R"(
<ir_version: 10, opset_import: ["" : 20]>
g (float[1,3,2] x) => (y) {
  y = DFT <inverse = 1, onesided = 1> (x)
}
)";

TEST(DftInverseOnesided, GivesTheRealSignalOfTwiceTheBinsLessOne) {
  Model model = kiln::testing::modelFromOnnxText(kIrfft);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(
      Tensor::fromValues<float>(DType::Float32, {1, 3, 2}, {10, 0, -2, 2, -2, 0}));
  auto out = kiln::testing::runModel(model, feeds);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{1, 4, 1})) << "was [1, 2, 2]: half of an ifft";
  const auto y = out[0].copyValues<float>();
  const std::vector<float> signal = {1, 2, 3, 4};
  ASSERT_EQ(y.size(), signal.size());
  for (size_t i = 0; i < signal.size(); ++i)
    EXPECT_NEAR(y[i], signal[i], 1e-6) << i;
}

} // namespace
