// convert-fp16 with the activation peaks of an fp32 run (kiln opt --precision-report): a node whose
// output passes fp16's range stays fp32 in allow_mix_precision and is reported under force_fp16.
#include <gtest/gtest.h>

#include "../onnx_text.h"
#include "kiln/compare.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/precision_report.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln {
namespace {

// x = 1 drives the MatMul to 4 * 30000 = 120000; every weight fits fp16.
const char* kModel = R"(
<ir_version: 8, opset_import: ["" : 13]>
g (float[1,4] x) => (float[1,4] y) <float[4,4] w = {30000, 30000, 30000, 30000, 30000, 30000,
  30000, 30000, 30000, 30000, 30000, 30000, 30000, 30000, 30000, 30000}> {
  p = MatMul (x, w)
  y = Relu (p)
}
)";

std::map<std::string, rt::RtValue> ones() {
  rt::OutTensor x(DType::Float32, {1, 4});
  for (int i = 0; i < 4; ++i)
    x.data<float>()[i] = 1.0f;
  return {{"x", rt::RtValue::ofTensor(std::move(x).finish())}};
}

TEST(ActivationPeaks, MeasuresEveryFloatTensor) {
  Model model = testing::modelFromOnnxText(kModel);
  auto peaks = measureValuePeaks(model, ones());
  ASSERT_TRUE(peaks) << peaks.status().toString();
  EXPECT_EQ(peaks->at("x"), 1.0);
  EXPECT_EQ(peaks->at("p"), 120000.0);
  EXPECT_EQ(peaks->at("y"), 120000.0);
}

PrecisionReport convert(PrecisionMode mode, bool measure) {
  Model model = testing::modelFromOnnxText(kModel);
  PrecisionOptions precision;
  precision.mode = mode;
  if (measure)
    precision.measureActivationPeaks = [](const Model& m) { return measureValuePeaks(m, ones()); };
  PrecisionReport report;
  PipelineOptions options;
  options.precision = &precision;
  options.precisionReport = &report;
  auto result = runPipeline(model, {"infer-shapes", "convert-fp16"}, options);
  EXPECT_TRUE(result) << result.status().toString();
  return report;
}

TEST(ActivationPeaks, MixedPrecisionKeepsTheOverflowingNode) {
  PrecisionReport report = convert(PrecisionMode::AllowMixPrecision, true);
  EXPECT_TRUE(report.activationsMeasured);
  ASSERT_EQ(report.activationOverflows.size(), 1u);
  EXPECT_EQ(report.activationOverflows[0].node, "n0");
  EXPECT_EQ(report.activationOverflows[0].maxAbs, 120000.0);
  EXPECT_TRUE(report.activationOverflows[0].keptFp32);
  bool kept = false;
  for (const auto& k : report.keptFp32)
    kept |= k.node == "n0" && k.reason == "activation_out_of_range";
  EXPECT_TRUE(kept);
  EXPECT_EQ(report.nodesLowered, 0u);
}

TEST(ActivationPeaks, ForceFp16ConvertsAndReports) {
  PrecisionReport report = convert(PrecisionMode::ForceFp16, true);
  ASSERT_EQ(report.activationOverflows.size(), 1u);
  EXPECT_FALSE(report.activationOverflows[0].keptFp32);
  EXPECT_EQ(report.nodesLowered, 1u);
}

TEST(ActivationPeaks, UnmeasuredMixedPrecisionLowersTheMatMul) {
  PrecisionReport report = convert(PrecisionMode::AllowMixPrecision, false);
  EXPECT_FALSE(report.activationsMeasured);
  EXPECT_TRUE(report.activationOverflows.empty());
  EXPECT_EQ(report.nodesLowered, 1u);
}

} // namespace
} // namespace kiln
