// atc's command-line parser (ATC's getopt behaviour), option validation order and error blocks.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/backends/atc.h"

using namespace kiln;

namespace {

AtcArgs parse(std::vector<std::string> args) { return parseAtcCommandLine(args); }

// A model file that exists, for the checks that look at --model.
std::string modelPath() {
  static const std::string path = [] {
    std::string p =
        (std::filesystem::temp_directory_path() / "kiln_atc_options_model.onnx").string();
    std::ofstream(p) << "x";
    return p;
  }();
  return path;
}

Status validate(std::vector<std::string> args) {
  AtcArgs parsed = parse(std::move(args));
  EXPECT_TRUE(parsed.error.isOk()) << parsed.error.toString();
  auto options = validateAtcOptions(parsed);
  return options ? Status::ok() : options.status();
}

std::vector<std::string> base() {
  return {"--mode=0", "--framework=5", "--model=" + modelPath(), "--output=/tmp/kiln_atc_out",
          "--soc_version=Ascend310P3"};
}

} // namespace

TEST(AtcParse, DashesEqualsAndSeparateValues) {
  AtcArgs a = parse({"-model=m.onnx", "--soc-version", "Ascend310", "--output=o", "--output=p"});
  EXPECT_TRUE(a.error.isOk());
  EXPECT_TRUE(a.errorLines.empty());
  EXPECT_EQ(a.get("model"), "m.onnx");
  EXPECT_EQ(a.get("soc_version"), "Ascend310");
  EXPECT_EQ(a.get("output"), "p"); // last one wins
  EXPECT_EQ(a.get("mode"), "0");   // default
  EXPECT_FALSE(a.has("mode"));
}

TEST(AtcParse, ErrorLinesAsAtcPrintsThem) {
  AtcArgs a = parse({"--bogus=1", "stray", "--output"});
  ASSERT_EQ(a.errorLines.size(), 3u);
  EXPECT_EQ(a.errorLines[0], "ERROR: unknown command line flag 'bogus'");
  EXPECT_EQ(a.errorLines[1].rfind("ERROR: flag '--output' is missing its argument", 0), 0u);
  EXPECT_EQ(a.errorLines[2], "ERROR: Non-option parameter: stray");
  EXPECT_FALSE(a.error.isOk());
  EXPECT_TRUE(a.error.peerCode().empty()); // ATC registers no code for these
}

TEST(AtcParse, HelpForms) {
  EXPECT_TRUE(parse({"-h"}).help);
  EXPECT_TRUE(parse({"--h"}).help);
  EXPECT_TRUE(parse({"--help"}).help);
  EXPECT_FALSE(parse({"--help=false"}).help);
}

TEST(AtcParse, ValueSetsBeforeTypes) {
  AtcArgs mode = parse({"--mode=00"});
  EXPECT_EQ(mode.error.peerCode(), "E10001");
  EXPECT_EQ(mode.error.message(),
            "Value 00 for parameter --mode is invalid. Reason: The value is not within the range "
            "of values. The valid range is [0] [1] [30] [3] [5] [6] [7] .");
  AtcArgs fw = parse({"--framework=2"});
  EXPECT_EQ(fw.error.peerCode(), "E10007");
  AtcArgs sparsity = parse({"--sparsity=2"});
  EXPECT_EQ(sparsity.error.peerCode(), "E10006");
  EXPECT_EQ(sparsity.error.message(),
            "Value 2 for parameter --sparsity is invalid. The value must be either 1 or 0.");
  AtcArgs log = parse({"--log=verbose"});
  EXPECT_EQ(log.error.peerCode(), "E10010");
  AtcArgs core = parse({"--core_type=Cube"});
  EXPECT_EQ(core.error.message(), "Value Cube for parameter --core_type is invalid. Reason: The "
                                  "value is not within the range of values. The valid range is "
                                  "[AiCore] [VectorCore] .");
  AtcArgs boolFlag = parse({"--raw_ge_options_ignore_unsupported=maybe"});
  EXPECT_EQ(boolFlag.error.peerCode(), "E10003");
}

TEST(AtcValidate, AtcOrderAndCodes) {
  EXPECT_TRUE(validate(base()).isOk());

  auto without = [](const std::string& prefix) {
    std::vector<std::string> v;
    for (const std::string& a : base())
      if (a.rfind(prefix, 0) != 0) v.push_back(a);
    return v;
  };
  EXPECT_EQ(validate(without("--framework")).peerCode(), "E10007");
  EXPECT_EQ(validate(without("--soc_version")).peerCode(), "E10054");
  Status noOutput = validate(without("--output"));
  EXPECT_EQ(noOutput.peerCode(), "E10054");
  EXPECT_NE(noOutput.message().find("--output"), std::string::npos);

  auto with = [](std::string extra) {
    auto v = base();
    v.push_back(std::move(extra));
    return v;
  };
  Status soc = validate(with("--soc_version=Ascend999"));
  EXPECT_EQ(soc.code(), ErrorCode::SocVersionUnknown);
  EXPECT_NE(soc.message().find("Ascend310P3"), std::string::npos);
  EXPECT_EQ(validate(with("--soc_version=Ascend035")).peerCode(), "E10055");
  EXPECT_EQ(validate(with("--model=/nonexistent/x.onnx")).code(), ErrorCode::FileNotFound);
  EXPECT_EQ(validate(with("--output=/tmp/dir/")).peerCode(), "E10022");
  EXPECT_EQ(validate(with("--auto_tune_mode=GA")).peerCode(), "E10001");
  EXPECT_EQ(validate(with("--input_format=NHWC")).message(),
            "Value NHWC for parameter --input_format is invalid. Reason: The value must be NCHW, "
            "ND or NCDHW in ONNX model.");
  Status both = validate(with("--precision_mode=force_fp16"));
  EXPECT_TRUE(both.isOk());
  auto twoModes = with("--precision_mode=force_fp16");
  twoModes.push_back("--precision_mode_v2=fp16");
  EXPECT_EQ(validate(twoModes).peerCode(), "E10056");
  EXPECT_EQ(validate(with("--precision_mode=allow_mix_precision_bf16")).peerCode(), "E10001");
  EXPECT_EQ(validate(with("--input_shape=x:1,3,a,4")).peerCode(), "E10002");
  EXPECT_EQ(validate(with("--input_shape=x:0,3,4,4")).peerCode(), "E10011");
  auto gears = with("--input_shape=x:-1,3,4,4");
  gears.push_back("--dynamic_batch_size=1");
  EXPECT_EQ(validate(gears).peerCode(), "E10035");
  EXPECT_EQ(validate(with("--output_type=INT16")).peerCode(), "E10001");
  EXPECT_EQ(validate(with("--out_nodes=a:0")).code(), ErrorCode::AtcOptionInvalid);
  EXPECT_EQ(validate(with("--enable_single_stream=yes")).peerCode(), "E10005");
}

TEST(AtcValidate, IgnoredFlagsWarn) {
  auto args = base();
  args.push_back("--op_debug_level=2");
  args.push_back("--weight=" + modelPath());
  auto options = validateAtcOptions(parse(args));
  ASSERT_TRUE(options) << options.status().toString();
  ASSERT_EQ(options->warnings.size(), 2u);
  EXPECT_EQ(options->warnings[0], "Parameter weight is ignored for TensorFlow/Onnx.");
  EXPECT_NE(options->warnings[1].find("--op_debug_level=2"), std::string::npos);
}

TEST(AtcErrorBlock, LayoutAndTraceBack) {
  Status head =
      Status(ErrorCode::AtcOptionInvalid, "Value for --om is empty.", "x").withPeerCode("E10004");
  Status detail(ErrorCode::AtcOptionInvalid, "more detail", "y");
  std::string block = formatAtcErrorBlock({head, detail}, 42, "2025-10-01-12:00:00.123.456");
  EXPECT_EQ(block, "[PID: 42] 2025-10-01-12:00:00.123.456 Invalid_Argument(E10004): Value for "
                   "--om is empty.\n"
                   "        Solution: Set a valid parameter value.\n"
                   "TraceBack (most recent call last):\n"
                   "        more detail\n");
  EXPECT_EQ(formatAtcErrorBlock({detail}, 42, "t"), "");
}
