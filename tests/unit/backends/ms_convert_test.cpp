// converter_lite's flag rules, output naming, status codes, and one conversion end to end (written
// file, unsupported-op list with nothing written).
#include <filesystem>
#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln/backends/ms_convert.h"

using namespace kiln;

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
