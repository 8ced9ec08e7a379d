// readKeepDtypeFile / parseKeepDtypeText / checkKeepDtypeEntries (ATC --keep_dtype files) and the
// precision report JSON.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/precision_report.h"

namespace kiln {
namespace {

std::string writeTemp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("kiln_keep_dtype_" + name);
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TEST(KeepDtype, ReadsNamesAndOpTypesSkippingBlankLines) {
  std::string path = writeTemp("ok.txt", "conv1\r\n\n   OpType::  Softmax  \n relu_2 \n");
  auto entries = readKeepDtypeFile(path);
  ASSERT_TRUE(entries) << entries.status().toString();
  EXPECT_EQ(*entries, (std::vector<std::string>{"conv1", "OpType::Softmax", "relu_2"}));
  std::remove(path.c_str());
}

TEST(KeepDtype, ErrorsNameTheFileAndLine) {
  auto missing = readKeepDtypeFile("/nonexistent/keep.txt");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.status().code(), ErrorCode::PrecisionConfigInvalid);
  EXPECT_EQ(missing.status().peerCode(), "E10410");
  EXPECT_NE(missing.status().message().find("/nonexistent/keep.txt"), std::string::npos);

  std::string empty = writeTemp("empty.txt", "\n  \n");
  auto none = readKeepDtypeFile(empty);
  ASSERT_FALSE(none);
  EXPECT_NE(none.status().message().find("holds no entry"), std::string::npos);
  std::remove(empty.c_str());

  std::string bad = writeTemp("bad.txt", "a\nOpType::\n");
  auto noType = readKeepDtypeFile(bad);
  ASSERT_FALSE(noType);
  EXPECT_NE(noType.status().message().find(bad + ":2"), std::string::npos)
      << noType.status().message();
  std::remove(bad.c_str());
}

// The text form the file reader and the fuzz target share: same entries, errors name the given
// display name and line.
TEST(KeepDtype, ParsesTextInMemory) {
  auto entries = parseKeepDtypeText("conv1\r\n\n   OpType::  Softmax  \n", "mem.keep");
  ASSERT_TRUE(entries) << entries.status().toString();
  EXPECT_EQ(*entries, (std::vector<std::string>{"conv1", "OpType::Softmax"}));

  auto control = parseKeepDtypeText("a\nb\x1b[2Jc\n", "mem.keep");
  ASSERT_FALSE(control);
  EXPECT_EQ(control.status().code(), ErrorCode::PrecisionConfigInvalid);
  EXPECT_EQ(control.status().message(), "keep_dtype file mem.keep:2: holds control character 0x1b");

  auto none = parseKeepDtypeText("\n  \r\n", "mem.keep");
  ASSERT_FALSE(none);
  EXPECT_EQ(none.status().message(), "keep_dtype file mem.keep: holds no entry");
}

TEST(KeepDtype, ReportsEntriesThatMatchNothing) {
  Graph graph("g");
  Value* x = graph.addValue("x");
  graph.addInput(x);
  Node* relu = graph.appendNode("Relu", {x}, {"y"});
  relu->setName("relu_1");
  graph.addOutput(relu->output(0));
  auto check =
      checkKeepDtypeEntries(graph, {"relu_1", "OpType::Relu", "nope", "OpType::Conv"}, "f");
  ASSERT_TRUE(check) << check.status().toString();
  EXPECT_EQ(check->unknown, (std::vector<std::string>{"nope", "OpType::Conv"}));
  auto nothing = checkKeepDtypeEntries(graph, {"nope"}, "keep.txt");
  ASSERT_FALSE(nothing);
  EXPECT_EQ(nothing.status().code(), ErrorCode::PrecisionConfigInvalid);
  EXPECT_NE(nothing.status().message().find("keep.txt"), std::string::npos);
}

TEST(PrecisionReport, JsonHoldsEveryDecision) {
  PrecisionReport report;
  report.mode = "allow_mix_precision";
  report.nodesLowered = 3;
  report.keptFp32.push_back({"mm", "MatMul", "weight_out_of_range", "why", "big", 70000});
  report.casts.push_back({"x_fp16", "x", "float16", "mm"});
  report.valuesFlushedToZero = 2;
  report.quantized.push_back({"w", "conv", "Conv", 8, 0, true, 400, 120});
  report.skipped.push_back({"w2", "conv2", "Conv", "min_quant_weight_channel"});
  auto json = nlohmann::json::parse(precisionReportToJson(report));
  EXPECT_EQ(json["precision_mode"], "allow_mix_precision");
  EXPECT_EQ(json["kept_fp32"][0]["reason"], "weight_out_of_range");
  EXPECT_EQ(json["kept_fp32"][0]["max_abs_weight"], 70000.0);
  EXPECT_EQ(json["casts_inserted"][0]["for_node"], "mm");
  EXPECT_EQ(json["weight_values_flushed_to_zero"], 2);
  EXPECT_EQ(json["weights_quantized"][0]["bytes_after"], 120);
  EXPECT_EQ(json["weights_skipped"][0]["reason"], "min_quant_weight_channel");
  EXPECT_EQ(precisionReportToJson(report), precisionReportToJson(report)); // deterministic
}

} // namespace
} // namespace kiln
