// converter_lite's flag rules, output naming, status codes, and one conversion end to end (written
// file, unsupported-op list with nothing written).
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include <gtest/gtest.h>

#include "backends/ms/ms_model_schema.h"
#include "kiln/backends/ms_convert.h"
#include "kiln/backends/ms_reader.h"
#include "kiln/compare.h"
#include "onnx_text.h"

using namespace kiln;
namespace fb = kiln::msfb;

namespace {

Status flagError(const std::vector<std::string>& args) {
  bool help = false;
  auto options = parseConverterLiteArgs(args, help);
  EXPECT_FALSE(options) << "expected an error";
  return options ? Status::ok() : options.status();
}

std::filesystem::path tempDir() {
  auto dir = std::filesystem::temp_directory_path() /
             ("kiln-ms-convert-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

} // namespace

TEST(MsConvert, OutputNaming) {
  EXPECT_EQ(msOutputPath("model"), "model.ms");
  EXPECT_EQ(msOutputPath("dir/model.ms"), "dir/model.ms");
  EXPECT_EQ(msOutputPath("model.onnx"), "model.onnx.ms");
  EXPECT_EQ(msOutputPath(".ms"), ".ms.ms");
}

TEST(MsConvert, FlagsParse) {
  bool help = false;
  auto options = parseConverterLiteArgs({"--fmk=ONNX", "--modelFile=m.onnx", "--outputFile=out",
                                         "--fp16=on", "--optimize=none", "--inputShape=x:1,3,8,8",
                                         "--inputDataFormat=NHWC"},
                                        help);
  ASSERT_TRUE(options) << options.status().toString();
  EXPECT_FALSE(help);
  EXPECT_EQ(options->modelFile, "m.onnx");
  EXPECT_EQ(options->outputFile, "out");
  EXPECT_TRUE(options->fp16);
  EXPECT_EQ(options->optimize, "none");
  EXPECT_EQ(options->inputShape, "x:1,3,8,8");
  EXPECT_EQ(options->inputDataFormat, "NHWC");
  EXPECT_EQ(options->saveType, "MINDIR_LITE");

  EXPECT_TRUE(parseConverterLiteArgs({"--fmk=ONNX", "--help"}, help));
  EXPECT_TRUE(help);
}

TEST(MsConvert, FlagErrorsCarryConverterLiteCodes) {
  Status s = flagError({"--fmk=ONNX", "--modelFile=m.onnx"});
  EXPECT_EQ(s.peerCode(), "-600");
  EXPECT_NE(s.message().find("Flag missing"), std::string::npos);
  s = flagError({"--fmk=KERAS", "--modelFile=m.onnx", "--outputFile=o"});
  EXPECT_EQ(s.message(), "INPUT ILLEGAL: fmk must be TF|TFLITE|CAFFE|MINDIR|ONNX");
  EXPECT_EQ(s.peerCode(), "-600");
  s = flagError({"--fmk=CAFFE", "--modelFile=m.onnx", "--outputFile=o"});
  EXPECT_EQ(s.code(), ErrorCode::UnsupportedFormat);
  EXPECT_EQ(s.peerCode(), "-7");
  s = flagError({"--fmk=ONNX", "--modelFile=m.onnx", "--outputFile=o", "--inputShape=x:1,-3"});
  EXPECT_EQ(s.peerCode(), "-600");
  EXPECT_NE(s.message().find("INPUT ILLEGAL: Unsupported dim < 0."), std::string::npos);
  s = flagError({"--fmk=ONNX", "--modelFile", "m.onnx", "--outputFile=o"});
  EXPECT_NE(s.message().find("--modelFile has no value"), std::string::npos);
  s = flagError(
      {"--fmk=ONNX", "--modelFile=m.onnx", "--outputFile=o", "--optimize=ascend_oriented"});
  EXPECT_EQ(s.peerCode(), "-7");
  s = flagError({"--configFile=only.cfg"});
  EXPECT_EQ(s.peerCode(), "-7"); // multi-model mode
}

TEST(MsConvert, StatusCodes) {
  EXPECT_EQ(msStatusCode(Status::ok()), 0);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::MsLowerUnsupported, "x")), -300);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::MsLowerBadAttribute, "x")), -302);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::Truncated, "x")), -200);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::ShapeSpecUnknownInput, "x").withPeerCode("E10016")),
            -600);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::Internal, "x").withPeerCode("-7")), -7);
  EXPECT_EQ(msStatusCode(Status(ErrorCode::FileWriteFailed, "x")), -1);
  EXPECT_EQ(msStatusDescription(-300), "Failed to find operator.");
  EXPECT_EQ(msStatusDescription(-600), "Invalid input param by user.");
}

TEST(MsConvert, ConvertsAndListsUnsupportedOps) {
  auto dir = tempDir();
  MsConvertOptions options;
  options.modelFile = std::string(KILN_SOURCE_DIR) + "/samples/tiny_cnn.onnxtxt";
  options.outputFile = (dir / "tiny").string();
  MsConvertReport report;
  Status status = convertToMs(options, &report);
  ASSERT_TRUE(status) << status.toString();
  EXPECT_EQ(report.outputPath, (dir / "tiny.ms").string());
  EXPECT_TRUE(std::filesystem::exists(dir / "tiny.ms"));
  EXPECT_EQ(report.bytes, std::filesystem::file_size(dir / "tiny.ms"));
  EXPECT_TRUE(report.unsupported.empty());

  options.modelFile = std::string(KILN_SOURCE_DIR) + "/tests/cli/models/custom_op.onnxtxt";
  options.outputFile = (dir / "custom").string();
  status = convertToMs(options, &report);
  ASSERT_FALSE(status);
  EXPECT_EQ(status.code(), ErrorCode::MsLowerUnsupported);
  EXPECT_EQ(status.peerCode(), "-300");
  ASSERT_EQ(report.unsupported.size(), 1u);
  EXPECT_EQ(report.unsupported[0].opType, "Frobnicate");
  EXPECT_FALSE(std::filesystem::exists(dir / "custom.ms"));
  std::filesystem::remove_all(dir);
}

namespace {

// The quantizer's chains around constant uint8 weights: ConvInteger (one zero point, and one per
// output channel) → Cast → Mul by the scale product, MatMulInteger (per-column zero points), and
// QLinearConv.
const char* kCodedWeights = R"(<ir_version: 8, opset_import: ["" : 13]>
cw (float[1,2,5,5] x, float[2,3] a) => (float[1,3,5,5] y, float[1,3,5,5] y2, float[2,2] ym, uint8[1,3,5,5] qc)
<uint8[3,2,3,3] w = {130, 120, 128, 0, 255, 7, 99, 128, 140, 128, 128, 127, 1, 2, 3, 250, 251, 252, 128, 128, 128, 129, 127, 200, 60, 61, 62, 128, 90, 80, 70, 128, 128, 111, 222, 33, 5, 128, 255, 254, 0, 128, 64, 192, 32, 160, 96, 224, 128, 17, 34, 51, 68, 85}, uint8 wz = {131}, uint8[3] wzc = {128, 127, 129}, float ws = {0.01}, uint8[3,2] b = {1, 200, 128, 3, 255, 0}, uint8[2] bz = {128, 100}, float bs = {0.03}, float ys = {0.05}, uint8 yz = {100}> {
  xq, xs, xz = DynamicQuantizeLinear (x)
  acc = ConvInteger <pads = [1, 1, 1, 1]> (xq, w, xz, wz)
  accf = Cast <to = 1> (acc)
  s = Mul (xs, ws)
  y = Mul (accf, s)
  acc2 = ConvInteger <pads = [1, 1, 1, 1]> (xq, w, xz, wzc)
  acc2f = Cast <to = 1> (acc2)
  y2 = Mul (acc2f, s)
  aq, as, az = DynamicQuantizeLinear (a)
  macc = MatMulInteger (aq, b, az, bz)
  maccf = Cast <to = 1> (macc)
  ms = Mul (as, bs)
  ym = Mul (maccf, ms)
  qc = QLinearConv <pads = [1, 1, 1, 1]> (xq, xs, xz, w, ws, wz, ys, yz)
})";

std::vector<uint8_t> fileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

} // namespace

// The model's uint8 weights are written as int8 weight-quant tensors (code - 128, zero point - 128,
// scale 1; ms.md §3.2), never widened to float32, with and without 8-bit weight quant (which keeps
// them as they are), and the .ms gives the ONNX model's numbers exactly. Weight quant to another
// width re-quantizes float weights instead (these are too small for it: they stay float).
TEST(MsConvert, QuantizedOpWeightsStayEightBitCodes) {
  auto dir = tempDir();
  const auto modelPath = dir / "coded.onnxtxt";
  std::ofstream(modelPath) << kCodedWeights;
  Model reference = kiln::testing::modelFromOnnxText(kCodedWeights);
  auto inputs = makeDeterministicInputs(*reference.graph, 7);
  ASSERT_TRUE(inputs) << inputs.status().toString();
  const std::vector<uint8_t> w = {
      130, 120, 128, 0,   255, 7,   99, 128, 140, 128, 128, 127, 1,   2,   3,   250, 251, 252,
      128, 128, 128, 129, 127, 200, 60, 61,  62,  128, 90,  80,  70,  128, 128, 111, 222, 33,
      5,   128, 255, 254, 0,   128, 64, 192, 32,  160, 96,  224, 128, 17,  34,  51,  68,  85};
  std::map<std::string, std::vector<uint8_t>> data; // weight tensor → stored bytes (FP32 run)
  for (int bits : {0, 8, 4}) {
    SCOPED_TRACE(bits ? std::to_string(bits) + "-bit weight quant" : "FP32");
    MsConvertOptions options;
    options.modelFile = modelPath.string();
    options.outputFile = (dir / ("out" + std::to_string(bits))).string();
    if (bits) {
      options.config.quantType = "WEIGHT_QUANT";
      options.config.bitNum = bits;
    }
    Status status = convertToMs(options);
    ASSERT_TRUE(status) << status.toString();
    const std::vector<uint8_t> bytes = fileBytes(msOutputPath(options.outputFile));
    const fb::MetaGraph* g = fb::GetMetaGraph(bytes.data());
    size_t coded = 0, floatWeights = 0;
    for (const fb::Tensor* t : *g->allTensors()) {
      if (!t->data() || t->nodeType() != 0) continue;
      const uint64_t count = t->data()->size();
      if (t->dataType() == 43 && count == w.size() * 4) ++floatWeights;
      if (!t->quantParams() || t->quantParams()->size() == 0) continue;
      ++coded;
      const std::string name = t->name()->str();
      EXPECT_EQ(t->dataType(), 32) << name; // int8
      EXPECT_EQ(t->weightQuantCompressType(), fb::WeightQuantCompressType_NONE) << name;
      for (const fb::QuantParam* q : *t->quantParams()) {
        EXPECT_EQ(q->scale(), 1.0) << name;
        EXPECT_EQ(q->numBits(), 8) << name;
      }
      if (bits)
        EXPECT_EQ(std::vector<uint8_t>(t->data()->begin(), t->data()->end()), data[name]);
      else
        data[name].assign(t->data()->begin(), t->data()->end());
    }
    // w three times (two ConvInteger zero-point forms and QLinearConv), b once; at 4 bits the
    // three w are float again.
    EXPECT_EQ(coded, bits == 4 ? 0u : 4u);
    EXPECT_EQ(floatWeights, bits == 4 ? 3u : 0u);
    if (!bits) {
      // KHWC codes of w with the top bit flipped (c - 128): element [k=0, h=0, w=0, c=1] is
      // w[0, 1, 0, 0].
      ASSERT_TRUE(data.count("w"));
      EXPECT_EQ(data["w"].size(), w.size());
      EXPECT_EQ(data["w"][0], static_cast<uint8_t>(w[0] ^ 0x80));
      EXPECT_EQ(data["w"][1], static_cast<uint8_t>(w[9] ^ 0x80));
    }
    auto candidate = readMsFile(msOutputPath(options.outputFile));
    ASSERT_TRUE(candidate) << candidate.status().toString();
    auto compared = compareModels(reference, *candidate, *inputs);
    ASSERT_TRUE(compared) << compared.status().toString();
    ASSERT_EQ(compared->size(), 4u);
    for (const auto& out : *compared)
      EXPECT_EQ(out.metrics.maxAbsError, 0.0) << out.name;
  }
  std::filesystem::remove_all(dir);
}
