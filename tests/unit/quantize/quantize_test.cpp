// Calibration methods on known histograms and data sets, the calibration folder, and the QDQ
// rewrite's node counts and weight codes.
#include <cmath>
#include <filesystem>
#include <map>

#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include "kiln/frontend/onnx.h"
#include "kiln/ir/verifier.h"

#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"
#include "kiln/tensor_files.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

namespace fs = std::filesystem;
using kiln::testing::modelFromOnnxText;

AbsHistogram histogramOf(const std::vector<float>& values, double limit) {
  AbsHistogram h(limit, kCalibrationBins);
  h.add(values.data(), values.size());
  return h;
}

// A Conv with a bias and a Gemm without one, named so --exclude can pick them.
Model convGemm() {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 13]>\n"
                     "g (float[1,1,4,4] x) => (float[1,3] y, float[1,2,4,4] c) "
                     "<float[2,1,1,1] w = {0.5, -0.25}, float[2] b = {0.1, -0.2}, "
                     "float[32,3] fc = {" +
                     [] {
                       std::string s;
                       for (int i = 0; i < 96; ++i)
                         s += (i ? ", " : "") + std::to_string(0.01 * ((i * 7) % 19) - 0.09);
                       return s;
                     }() +
                     "}, int64[2] flat = {1, 32}> {\n"
                     "  c = Conv (x, w, b)\n"
                     "  r = Relu (c)\n"
                     "  f = Reshape (r, flat)\n"
                     "  y = Gemm (f, fc)\n"
                     "}\n";
  return modelFromOnnxText(text, true, {"conv", "relu", "reshape", "fc"});
}

// A calibration folder of `count` samples for input `x` (subfolder layout), values from `fill`.
std::string writeSamples(const std::string& name, size_t count, float (*fill)(size_t, size_t)) {
  fs::path dir = fs::temp_directory_path() / ("kiln-quantize-test-" + name);
  fs::remove_all(dir);
  for (size_t s = 0; s < count; ++s) {
    fs::create_directories(dir / ("s" + std::to_string(s)));
    std::vector<float> v(16);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = fill(s, i);
    Tensor t = Tensor::fromValues<float>(DType::Float32, {1, 1, 4, 4}, v);
    EXPECT_TRUE(writeTensorFile((dir / ("s" + std::to_string(s)) / "x.npy").string(), "x", t));
  }
  return dir.string();
}

size_t countOps(const Model& model, const std::string& op) {
  size_t n = 0;
  for (const auto& node : model.graph->nodes())
    n += node->opType() == op;
  return n;
}

} // namespace

TEST(Calibration, PercentileIsWithinOneBinOfTheTruePercentile) {
  std::vector<float> values;
  for (int i = 1; i <= 1000; ++i)
    values.push_back(float(i));
  AbsHistogram h = histogramOf(values, 1000);
  EXPECT_EQ(h.total(), 1000u);
  const double t99 = percentileThreshold(h, 99.0); // the 990th value is 990
  EXPECT_GE(t99, 990.0);
  EXPECT_LE(t99, 990.0 + h.binWidth());
  EXPECT_DOUBLE_EQ(percentileThreshold(h, 100.0), 1000.0);
  const double t50 = percentileThreshold(h, 50.0);
  EXPECT_GE(t50, 500.0);
  EXPECT_LE(t50, 500.0 + h.binWidth());
}

TEST(Calibration, EntropyClipsAHeavyTailBelowTheMaximum) {
  // Laplace-like |x| (exponential quantiles, scale 1) plus a few outliers at 100: the max would
  // spend almost every code on empty range.
  std::vector<float> values;
  const int n = 100000;
  for (int i = 0; i < n; ++i)
    values.push_back(float(-std::log(1.0 - (i + 0.5) / n)));
  for (int i = 0; i < 5; ++i)
    values.push_back(100.0f);
  AbsHistogram h = histogramOf(values, 100);
  const double threshold = entropyThreshold(h, 128);
  EXPECT_LT(threshold, 50.0);
  EXPECT_GT(threshold, 3.0); // keeps the body of the distribution
}

TEST(Calibration, EntropyKeepsTheWholeRangeOfAUniformDistribution) {
  std::vector<float> values;
  for (int i = 0; i < 100000; ++i)
    values.push_back(float(i) / 100000.0f * 8.0f);
  AbsHistogram h = histogramOf(values, 8);
  EXPECT_GT(entropyThreshold(h, 128), 0.9 * 8);
}

TEST(Calibration, QuantParams) {
  QuantParam u8 = activationQuantParam(-1, 3, false);
  EXPECT_FLOAT_EQ(u8.scale, 4.0f / 255.0f);
  EXPECT_EQ(u8.zeroPoint, 64);                           // round(1 / (4/255)) = round(63.75)
  QuantParam relu = activationQuantParam(0.5, 2, false); // widened to hold 0
  EXPECT_FLOAT_EQ(relu.scale, 2.0f / 255.0f);
  EXPECT_EQ(relu.zeroPoint, 0);
  QuantParam s8 = activationQuantParam(-1, 3, true);
  EXPECT_FLOAT_EQ(s8.scale, 3.0f / 127.0f);
  EXPECT_EQ(s8.zeroPoint, 0);
  QuantParam none = activationQuantParam(0, 0, false);
  EXPECT_FLOAT_EQ(none.scale, 1.0f);
  EXPECT_EQ(none.zeroPoint, 0);
}

TEST(Calibration, MinMaxIsExactAndStatisticsDoNotDependOnThreads) {
  Model model = convGemm();
  std::string dir = writeSamples("minmax", 5, [](size_t s, size_t i) {
    return float(int(s * 16 + i) - 40) * 0.125f; // -5 ... 4.875 over all samples
  });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  ASSERT_EQ(data->size(), 5u);
  CalibrationOptions options;
  options.method = CalibrationMethod::Entropy;
  auto one = calibrate(model, *data, {"x", "f"}, options);
  ASSERT_TRUE(one) << one.status().toString();
  EXPECT_EQ(one->runs, 10u); // min/max pass + histogram pass
  const ActivationStats& x = one->tensors.at("x");
  EXPECT_DOUBLE_EQ(x.min, -5.0);
  EXPECT_DOUBLE_EQ(x.max, 4.875);
  EXPECT_EQ(x.count, 80u);
  EXPECT_EQ(x.histogram.total(), 80u);
  EXPECT_DOUBLE_EQ(x.histogram.limit, 5.0);
  // Relu then Reshape: f = max(0, 0.5x + 0.1) on channel 0, max(0, -0.25x - 0.2) on channel 1.
  const ActivationStats& f = one->tensors.at("f");
  EXPECT_DOUBLE_EQ(f.min, 0.0);
  EXPECT_NEAR(f.max, 0.5 * 4.875 + 0.1, 1e-6);
  options.threads = 2;
  auto two = calibrate(model, *data, {"x", "f"}, options);
  ASSERT_TRUE(two) << two.status().toString();
  for (const auto& [name, stats] : one->tensors) {
    EXPECT_EQ(stats.min, two->tensors.at(name).min) << name;
    EXPECT_EQ(stats.max, two->tensors.at(name).max) << name;
    EXPECT_EQ(stats.histogram.counts, two->tensors.at(name).histogram.counts) << name;
  }
  fs::remove_all(dir);
}

TEST(Calibration, FolderWithoutAnInputFileIsRefused) {
  Model model = convGemm();
  std::string dir = writeSamples("missing", 2, [](size_t, size_t) { return 1.0f; });
  fs::rename(fs::path(dir) / "s1" / "x.npy", fs::path(dir) / "s1" / "y.npy");
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_FALSE(data);
  EXPECT_EQ(data.status().code(), ErrorCode::BadFlag);
  EXPECT_NE(data.status().message().find("sample 's1' has no file for input 'x'"),
            std::string::npos)
      << data.status().message();
  fs::remove_all(dir);
}

TEST(Qdq, ConvAndGemmGetQdqInputsAndPerChannelInt8Weights) {
  Model model = convGemm();
  std::string dir =
      writeSamples("qdq", 4, [](size_t s, size_t i) { return std::sin(float(s * 16 + i)) * 2.0f; });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  auto report = quantizeToQdq(model, *data, QdqOptions{});
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(report->quantizedNodes, 2u);
  EXPECT_EQ(report->quantizeLinear, 2u);   // x and f
  EXPECT_EQ(report->dequantizeLinear, 5u); // x, f, w, fc, and the Conv bias
  EXPECT_EQ(countOps(model, "QuantizeLinear"), 2u);
  // Conv weights: int8 codes, one scale per output channel, axis 0; max|w| maps to 127.
  const Node* conv = nullptr;
  for (const auto& node : model.graph->nodes())
    if (node->opType() == "Conv") conv = node.get();
  ASSERT_NE(conv, nullptr);
  const Node* wdq = conv->input(1)->producer();
  ASSERT_NE(wdq, nullptr);
  EXPECT_EQ(wdq->opType(), "DequantizeLinear");
  EXPECT_EQ(wdq->attribute("axis")->asInt(), 0);
  const Tensor& codes = wdq->input(0)->initializer();
  EXPECT_EQ(codes.dtype(), DType::Int8);
  EXPECT_EQ(codes.copyValues<int8_t>(), (std::vector<int8_t>{127, -127}));
  EXPECT_EQ(wdq->input(1)->initializer().copyValues<float>(),
            (std::vector<float>{0.5f / 127, 0.25f / 127}));
  // Bias int32 with scale x_scale * w_scale.
  const Node* bdq = conv->input(2)->producer();
  ASSERT_NE(bdq, nullptr);
  EXPECT_EQ(bdq->input(0)->initializer().dtype(), DType::Int32);
  // The float originals are gone.
  EXPECT_EQ(model.graph->findLocalValue("w"), nullptr);
  fs::remove_all(dir);
}

TEST(Qdq, ExcludedNodesStayFloat) {
  Model model = convGemm();
  std::string dir = writeSamples("exclude", 2, [](size_t s, size_t i) { return float(s + i); });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  QdqOptions options;
  options.exclude = {"fc"};
  options.int8Activations = true;
  auto report = quantizeToQdq(model, *data, options);
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(report->quantizedNodes, 1u);
  EXPECT_EQ(report->excludedNodes, 1u);
  EXPECT_EQ(countOps(model, "QuantizeLinear"), 1u);
  for (const auto& node : model.graph->nodes()) {
    if (node->opType() == "Gemm") EXPECT_TRUE(node->input(1)->isInitializer());
    if (node->opType() == "QuantizeLinear")
      EXPECT_EQ(node->input(2)->initializer().dtype(), DType::Int8);
  }
  fs::remove_all(dir);
}

namespace {

// "" when the model verifies in kiln and passes onnx::checker and strict, type-checking shape
// inference once exported; else what failed.
std::string validOnnx(const Model& model) {
  if (Status s = verifyModel(model); !s) return "verify: " + s.toString();
  onnx::ModelProto proto;
  if (Status s = exportOnnx(model, proto); !s) return "export: " + s.toString();
  try {
    onnx::checker::check_model(proto);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(),
                                       onnx::ShapeInferenceOptions(true, 1, false));
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

} // namespace

TEST(Qdq, OutputPassesTheOnnxChecker) {
  Model model = convGemm();
  std::string dir =
      writeSamples("checker", 3, [](size_t s, size_t i) { return float(s) - i * 0.1f; });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  QdqOptions options;
  options.calibration.method = CalibrationMethod::Percentile;
  auto report = quantizeToQdq(model, *data, options);
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(validOnnx(model), "");
  fs::remove_all(dir);
}

TEST(Qdq, OpsetNineModelIsRaisedAndPassesTheOnnxChecker) {
  // Clip and Slice with attributes, Softmax over the last axis of a 2-D tensor: opset 9 forms.
  std::string text = "<ir_version: 4, opset_import: [\"\" : 9]>\n"
                     "g (float[1,1,4,4] x) => (float[1,2] y) "
                     "<float[2,1,1,1] w = {0.5, -0.25}, float[16,2] fc = {" +
                     [] {
                       std::string s;
                       for (int i = 0; i < 32; ++i)
                         s += (i ? ", " : "") + std::to_string(0.02 * ((i * 5) % 11) - 0.1);
                       return s;
                     }() +
                     "}> {\n"
                     "  c = Conv (x, w)\n"
                     "  r = Clip <min = 0.0, max = 6.0> (c)\n"
                     "  s = Slice <starts = [0], ends = [1], axes = [1]> (r)\n"
                     "  f = Flatten (s)\n"
                     "  l = MatMul (f, fc)\n"
                     "  y = Softmax (l)\n"
                     "}\n";
  Model model = modelFromOnnxText(text);
  std::string dir =
      writeSamples("opset9", 3, [](size_t s, size_t i) { return float(s + i) * 0.3f - 2; });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  auto report = quantizeToQdq(model, *data, QdqOptions{});
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(model.opsetVersion(""), 13);
  EXPECT_EQ(report->quantizedNodes, 2u);
  for (const auto& node : model.graph->nodes()) {
    if (node->opType() == "Clip") EXPECT_EQ(node->inputs().size(), 3u);
    if (node->opType() == "Slice") EXPECT_EQ(node->inputs().size(), 4u);
    if (node->opType() == "Softmax") EXPECT_EQ(node->attribute("axis")->asInt(), -1);
  }
  EXPECT_EQ(validOnnx(model), "");
  fs::remove_all(dir);
}

TEST(Calibration, InputFoldersPairSamplesByName) {
  Model model = modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                                  "g (float[2] a, float[2] b) => (float[2] y) {\n"
                                  "  y = Add (a, b)\n"
                                  "}\n");
  fs::path dir = fs::temp_directory_path() / "kiln-quantize-test-folders";
  fs::remove_all(dir);
  fs::create_directories(dir / "a");
  fs::create_directories(dir / "b");
  for (int k = 0; k < 3; ++k) {
    const std::string file = "sample" + std::to_string(k) + ".npy";
    ASSERT_TRUE(writeTensorFile((dir / "a" / file).string(), "a",
                                Tensor::fromValues<float>(DType::Float32, {2}, {float(k), 0})));
    ASSERT_TRUE(writeTensorFile((dir / "b" / file).string(), "b",
                                Tensor::fromValues<float>(DType::Float32, {2}, {0, -float(k)})));
  }
  auto data = CalibrationData::fromInputFolders(
      *model.graph, {{"a", (dir / "a").string()}, {"b", (dir / "b").string()}}, "calibrate_path");
  ASSERT_TRUE(data) << data.status().toString();
  ASSERT_EQ(data->size(), 3u);
  auto result = calibrate(model, *data, {"a", "b", "y"}, CalibrationOptions{});
  ASSERT_TRUE(result) << result.status().toString();
  EXPECT_EQ(result->tensors.at("y").min, -2.0);
  EXPECT_EQ(result->tensors.at("y").max, 2.0);
  // One file fewer for b: refused, naming both counts.
  fs::remove(dir / "b" / "sample2.npy");
  auto uneven = CalibrationData::fromInputFolders(
      *model.graph, {{"a", (dir / "a").string()}, {"b", (dir / "b").string()}}, "calibrate_path");
  ASSERT_FALSE(uneven);
  EXPECT_EQ(uneven.status().code(), ErrorCode::BadFlag);
  EXPECT_NE(uneven.status().message().find("input 'a' has 3 sample file(s), input 'b' 2"),
            std::string::npos)
      << uneven.status().message();
  auto missing = CalibrationData::fromInputFolders(*model.graph, {{"a", (dir / "a").string()}},
                                                   "calibrate_path");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.status().message().find("no folder for input 'b'"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Calibration, MseClipsALaplaceTailWhereTheoryPutsIt) {
  // Laplace(b = 1) quantiles, both signs: 8-bit codes lose least clipped near 9.9 b (rounding
  // error step²/12 on every value against (|x| - T)² on the tail), below the largest |x| (12.9).
  std::vector<float> laplace;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const float v = float(-std::log(1.0 - (i + 0.5) / n));
    laplace.push_back(i % 2 ? -v : v);
  }
  const double limit = -std::log(0.5 / n);
  const double clipped = mseThreshold(histogramOf(laplace, limit), -limit, limit, false);
  EXPECT_GT(clipped, 9.4);
  EXPECT_LT(clipped, 10.4);
  // Nothing to gain from clipping a uniform distribution.
  std::vector<float> uniform;
  for (int i = 0; i < 100000; ++i)
    uniform.push_back(float(i) / 100000.0f * 2.0f);
  EXPECT_GT(mseThreshold(histogramOf(uniform, 2), 0, 2, false), 0.95 * 2);
}

namespace {

// x → Conv (output channels a hundredfold apart) → Tanh → depthwise Conv → y, and the same
// Conv read directly by a pointwise Conv (z).
Model unevenChannels() {
  return modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                           "g (float[1,1,4,4] x) => (float[1,2,4,4] y, float[1,1,4,4] z) "
                           "<float[2,1,1,1] w = {3.0, 0.03}, float[2] b = {0.5, -0.01}, "
                           "float[2,1,3,3] dw = {1, 2, 1, 0, 1, 0, -1, 1, 2, "
                           "0.5, 0.5, 1, 1, 1, 0, 0, 2, 1}, "
                           "float[1,2,1,1] pw = {0.2, 30.0}, float[1,2,4,4] c, "
                           "float[1,2,4,4] s> {\n"
                           "  c = Conv (x, w, b)\n"
                           "  s = Tanh (c)\n"
                           "  y = Conv <group = 2, pads = [1, 1, 1, 1]> (s, dw)\n"
                           "  z = Conv (c, pw)\n"
                           "}\n",
                           true, {"conv", "tanh", "depthwise", "pointwise"});
}

std::vector<Tensor> runOn(const Model& model, const CalibrationData& data, size_t sample) {
  rt::Executor executor(model, rt::ExecutorOptions{});
  auto feeds = data.load(sample);
  EXPECT_TRUE(feeds);
  auto run = executor.run(*feeds);
  EXPECT_TRUE(run) << run.status().toString();
  std::vector<Tensor> out;
  for (const rt::RtValue& v : run->outputs)
    out.push_back(v.tensor);
  return out;
}

} // namespace

TEST(Qdq, ChannelEqualizationKeepsTheFloatFunctionAndEvensThePeaks) {
  Model model = unevenChannels();
  std::string dir = writeSamples(
      "equalize", 4, [](size_t s, size_t i) { return std::sin(float(s * 16 + i) * 0.7f) * 2.0f; });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  const std::vector<Tensor> before = runOn(model, *data, 3);
  std::vector<const Node*> targets;
  for (const auto& node : model.graph->nodes())
    if (node->opType() == "Conv") targets.push_back(node.get());
  auto rescaled = equalizeChannels(model, *data, targets, CalibrationOptions{});
  ASSERT_TRUE(rescaled) << rescaled.status().toString();
  // c (folded into z's weights, restored by a Mul for the Tanh) and the depthwise input.
  EXPECT_EQ(*rescaled, 2u);
  EXPECT_EQ(countOps(model, "Mul"), 2u);
  EXPECT_EQ(validOnnx(model), "");
  const std::vector<Tensor> after = runOn(model, *data, 3);
  ASSERT_EQ(after.size(), before.size());
  for (size_t o = 0; o < before.size(); ++o) {
    const auto a = before[o].copyValues<float>(), b = after[o].copyValues<float>();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(a[i], b[i], 1e-4 * (1 + std::fabs(a[i]))) << "output " << o << " at " << i;
  }
  // Both channels of the Conv's output now reach the same peak on the calibration samples.
  auto peaks = calibrate(model, *data, {"c"}, CalibrationOptions{});
  ASSERT_TRUE(peaks) << peaks.status().toString();
  const std::vector<double>& p = peaks->tensors.at("c").channelPeak;
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NEAR(p[0], p[1], 1e-4 * p[0]);
  fs::remove_all(dir);
}

TEST(Qdq, ConvReadingAQuantizedConvOutputIsQuantizedToo) {
  // Full-integer form: z's Conv reads c, which the first Conv's output codes already cover; it
  // used to be left float ("not float32 in the calibration runs").
  Model model = unevenChannels();
  std::string dir =
      writeSamples("chain", 2, [](size_t s, size_t i) { return float(s + i) * 0.1f; });
  auto data = CalibrationData::open(*model.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  QdqOptions options;
  options.quantizeOutputs = true;
  auto report = quantizeToQdq(model, *data, options);
  ASSERT_TRUE(report) << report.status().toString();
  EXPECT_EQ(report->quantizedNodes, 3u);
  for (const std::string& note : report->notes)
    EXPECT_EQ(note.find("left float"), std::string::npos) << note;
  EXPECT_EQ(validOnnx(model), "");
  fs::remove_all(dir);
}

namespace {

// A 3x3 Conv whose small weights (0.75 of an int8 step of the channel's 1.0) all round up in
// channel 0 and down in channel 1, so with positive inputs the int8 layer's output mean is
// shifted per channel by a known sign.
Model roundingShiftedConv() {
  std::string weights;
  for (int c = 0; c < 2; ++c)
    for (int k = 0; k < 9; ++k) {
      const double sign = c == 0 ? 1.0 : -1.0;
      weights += (weights.empty() ? "" : ", ") + std::to_string(sign * (k == 4 ? 1.0 : 0.0059));
    }
  return modelFromOnnxText("<ir_version: 8, opset_import: [\"\" : 13]>\n"
                           "g (float[1,1,4,4] x) => (float[1,2,4,4] c) "
                           "<float[2,1,3,3] w = {" +
                               weights +
                               "}, float[2] b = {0.1, -0.2}> {\n"
                               "  c = Conv <pads = [1, 1, 1, 1]> (x, w, b)\n"
                               "}\n",
                           true, {"conv"});
}

// Per-channel mean of (quantized - float) output over the first `samples` samples.
std::vector<double> channelMeanError(const Model& reference, const Model& quantized,
                                     const CalibrationData& data, size_t samples) {
  std::vector<double> error(2, 0.0);
  for (size_t s = 0; s < samples; ++s) {
    const auto f = runOn(reference, data, s)[0].copyValues<float>();
    const auto q = runOn(quantized, data, s)[0].copyValues<float>();
    for (size_t i = 0; i < f.size(); ++i)
      error[i / 16] += (double(q[i]) - f[i]) / double(16 * samples);
  }
  return error;
}

} // namespace

TEST(Qdq, BiasCorrectionCancelsTheMeanShiftOfWeightRounding) {
  std::string dir = writeSamples(
      "biascorr", 6, [](size_t s, size_t i) { return 1.0f + 0.5f * std::sin(float(s * 16 + i)); });
  const Model reference = roundingShiftedConv();
  auto data = CalibrationData::open(*reference.graph, dir);
  ASSERT_TRUE(data) << data.status().toString();
  auto quantizedWith = [&](bool correct, int threads) {
    Model model = roundingShiftedConv();
    QdqOptions options;
    options.biasCorrection = correct;
    options.calibration.threads = threads;
    auto report = quantizeToQdq(model, *data, options);
    EXPECT_TRUE(report) << report.status().toString();
    EXPECT_EQ(report->correctedBiases, correct ? 1u : 0u);
    return model;
  };
  const Model plain = quantizedWith(false, 1);
  const Model corrected = quantizedWith(true, 1);
  const std::vector<double> before = channelMeanError(reference, plain, *data, 6);
  const std::vector<double> after = channelMeanError(reference, corrected, *data, 6);
  // Rounding 8 weights by +-0.0019 over inputs near 1 (fewer at the padded border): ~+-0.01.
  EXPECT_GT(before[0], 5e-3);
  EXPECT_LT(before[1], -5e-3);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_LT(std::fabs(after[c]), 1e-4) << "channel " << c;
    EXPECT_LT(std::fabs(after[c]), std::fabs(before[c]) / 20) << "channel " << c;
  }
  EXPECT_EQ(validOnnx(corrected), "");
  // The shift does not depend on the executor's thread count.
  const Model twoThreads = quantizedWith(true, 2);
  auto biasCodes = [](const Model& m) {
    for (const auto& node : m.graph->nodes())
      if (node->opType() == "Conv")
        return node->input(2)->producer()->input(0)->initializer().copyValues<int32_t>();
    return std::vector<int32_t>{};
  };
  EXPECT_EQ(biasCodes(corrected), biasCodes(twoThreads));
  EXPECT_NE(biasCodes(corrected), biasCodes(plain));
  fs::remove_all(dir);
}
