// convert-fp16 keeps what its keep list names: with every node of the ONNX model kept (by name or
// by op type, fusions included), the converted model computes exactly what the float model does.
#include <algorithm>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "kiln/compare.h"
#include "kiln/passes/precision_report.h"
#include "kiln/pipelines/conversion.h"
#include "onnx_text.h"
#include "run_model.h"

using namespace kiln;

namespace {

using kiln::testing::modelFromOnnxText;
using kiln::testing::runModel;

// A graph input fed straight to a Conv, a Constant node the pipeline folds into a weight, a
// MatMul + Add the pipeline fuses into one Gemm, an intermediate graph output and a Sigmoid
// output.
// Values that are not fp16 numbers, varied in sign and size.
std::string values(size_t count, double scale) {
  std::string out;
  for (size_t i = 0; i < count; ++i)
    out += (out.empty() ? "" : ", ") +
           std::to_string(scale * (0.013 + 0.0917 * static_cast<double>((i * 7) % 11)) *
                          (i % 3 == 0 ? -1.0 : 1.0));
  return out;
}

std::string modelText() {
  return "<ir_version: 8, opset_import: [\"\" : 13]>\n"
         "g (float[1,2,4,4] x) => (float[1,4] p, float[1,32] h) <float[2,2,3,3] w = {" +
         values(36, 1.0) + "}, float[32,4] m = {" + values(128, 0.5) +
         "}, float[4] b = {0.3001, -0.2002, 0.1003, 0.4004}> {\n"
         "  k = Constant <value = float[1] {1.0009765625}> ()\n"
         "  c = Conv <pads = [1, 1, 1, 1]> (x, w)\n"
         "  s = Mul (c, k)\n"
         "  r = Relu (s)\n"
         "  h = Flatten (r)\n"
         "  y = MatMul (h, m)\n"
         "  z = Add (y, b)\n"
         "  p = Sigmoid (z)\n"
         "}\n";
}
const std::vector<std::string> kNames = {"const",   "conv", "scale", "relu",
                                         "flatten", "mm",   "bias",  "sigmoid"};

// The model through the converting CLIs' conversion pipeline with `precision` (none: FP32).
Model converted(const PrecisionOptions* precision, PrecisionReport* report = nullptr) {
  Model model = modelFromOnnxText(modelText(), true, kNames);
  ConversionOptions options;
  options.precision = precision;
  options.precisionReport = report;
  auto ran = runConversionPipeline(model, options);
  EXPECT_TRUE(ran) << ran.status().toString();
  return model;
}

std::vector<Tensor> outputsOf(const Model& model) {
  auto inputs = makeDeterministicInputs(*model.graph, 7);
  EXPECT_TRUE(inputs) << inputs.status().toString();
  return inputs ? runModel(model, *inputs) : std::vector<Tensor>{};
}

bool bitIdentical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].dtype() != b[i].dtype() || a[i].byteSize() != b[i].byteSize() ||
        std::memcmp(a[i].data(), b[i].data(), a[i].byteSize()) != 0)
      return false;
  return true;
}

bool keptFor(const PrecisionReport& report, const std::string& reason) {
  return std::any_of(report.keptFp32.begin(), report.keptFp32.end(),
                     [&](const PrecisionKeptNode& k) { return k.reason == reason; });
}

} // namespace

TEST(ConvertFp16Keep, EveryNodeKeptByNameGivesTheFloatModel) {
  const std::vector<Tensor> reference = outputsOf(converted(nullptr));
  ASSERT_EQ(reference.size(), 2u);
  for (PrecisionMode mode : {PrecisionMode::ForceFp16, PrecisionMode::AllowMixPrecision,
                             PrecisionMode::AllowFp32ToFp16, PrecisionMode::WeightsOnlyFp16}) {
    PrecisionOptions precision;
    precision.mode = mode;
    // Converting changes the numbers (the test can fail) ...
    const std::vector<Tensor> lowered = outputsOf(converted(&precision));
    EXPECT_FALSE(bitIdentical(reference, lowered)) << static_cast<int>(mode);
    // ... and keeping the ONNX model's nodes, named as the user's file names them, gives them back:
    // "mm" and "bias" are one Gemm after fusion.
    precision.keepNodeNames = kNames;
    EXPECT_TRUE(bitIdentical(reference, outputsOf(converted(&precision))))
        << static_cast<int>(mode);
  }
}

TEST(ConvertFp16Keep, EveryOpTypeKeptGivesTheFloatModel) {
  const std::vector<Tensor> reference = outputsOf(converted(nullptr));
  PrecisionOptions precision;
  precision.mode = PrecisionMode::ForceFp16;
  // The ONNX model's op types: MatMul and Add no longer exist after the Gemm fusion.
  for (const char* type : {"Constant", "Conv", "Mul", "Relu", "Flatten", "MatMul", "Add"})
    precision.keepNodeNames.push_back(std::string("OpType::") + type);
  EXPECT_TRUE(bitIdentical(reference, outputsOf(converted(&precision))));
}

TEST(ConvertFp16Keep, AnIntegerAccumulatorIsReadInFp32) {
  // A MatMulInteger's int32 result, cast to float, passes fp16's 65504 (here 255·255·4 = 260100)
  // before its scale Mul brings it back: read in fp16 it would be inf.
  Model model = modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                  "g (uint8[1,4] a) => (float[1,4] y) "
                                  "<uint8[4,4] b = {255, 255, 255, 255, 255, 255, 255, 255, 255,"
                                  " 255, 255, 255, 255, 255, 255, 255}, float[1] s = {1e-5}> {\n"
                                  "  acc = MatMulInteger (a, b)\n"
                                  "  f = Cast <to = 1> (acc)\n"
                                  "  scaled = Mul (f, s)\n"
                                  "  y = Relu (scaled)\n"
                                  "}\n",
                                  true, {"mmi", "cast", "scale", "relu"});
  PrecisionOptions precision;
  precision.mode = PrecisionMode::ForceFp16;
  PrecisionReport report;
  ConversionOptions options;
  options.precision = &precision;
  options.precisionReport = &report;
  ASSERT_TRUE(runConversionPipeline(model, options));
  EXPECT_TRUE(keptFor(report, "integer_accumulator"));
  auto feeds = makeDeterministicInputs(*model.graph, 3);
  ASSERT_TRUE(feeds) << feeds.status().toString();
  // Feed the largest codes: the accumulator is 260100 in every column.
  std::vector<uint8_t> codes(4, 255);
  (*feeds)["a"] = rt::RtValue::ofTensor(Tensor::fromValues<uint8_t>(DType::UInt8, {1, 4}, codes));
  std::vector<Tensor> out = runModel(model, *feeds);
  ASSERT_EQ(out.size(), 1u);
  for (float v : out[0].copyValues<float>())
    EXPECT_NEAR(v, 2.601f, 1e-3f);
}
