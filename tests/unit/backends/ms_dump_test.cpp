// dumpMsFile on a real converter_lite 1.5.0 file (LeNet) and on a truncated copy of it.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <unistd.h>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/ms.h"

using namespace kiln;

namespace {

// The shared conformance folder sits beside the source tree; CI has it, some checkouts do not.
const std::string kLenetPath = std::string(KILN_SHARED_CONFORMANCE_DIR) + "/ms/lenet_tod_infer.ms";

#define SKIP_WITHOUT_LENET()                                                                       \
  if (!std::filesystem::exists(kLenetPath))                                                        \
  GTEST_SKIP() << "the shared conformance folder is absent (no " << kLenetPath << ")"

} // namespace

TEST(MsDump, LenetVerifiesAndDumps) {
  SKIP_WITHOUT_LENET();
  auto text = dumpMsFile(kLenetPath);
  ASSERT_TRUE(text) << text.status().toString();
  auto dump = nlohmann::json::parse(*text);

  EXPECT_EQ(dump["version"], "MindSpore Lite 1.5.0");
  ASSERT_EQ(dump["inputs"].size(), 1u);
  EXPECT_EQ(dump["inputs"][0]["name"], "inputs0");
  EXPECT_EQ(dump["inputs"][0]["dims"], nlohmann::json({2, 32, 32, 1}));
  ASSERT_EQ(dump["outputs"].size(), 1u);
  EXPECT_EQ(dump["outputs"][0]["dims"], nlohmann::json({2, 10}));

  std::set<std::string> ops;
  for (const auto& node : dump["nodes"])
    ops.insert(node["type"].get<std::string>());
  for (const char* op :
       {"Conv2DFusion", "MaxPoolFusion", "MatMulFusion", "Reshape", "Transpose", "Activation"})
    EXPECT_TRUE(ops.count(op)) << "no " << op << " node in the dump";

  // Attribute slots decode to the values the LeNet conv really has.
  const auto& conv = dump["nodes"][0];
  ASSERT_EQ(conv["type"], "Conv2DFusion");
  EXPECT_EQ(conv["attributes"]["kernel_size"], nlohmann::json({5, 5}));
  EXPECT_EQ(conv["attributes"]["out_channel"], 6);
  EXPECT_EQ(conv["attributes"]["pad_mode"], "VALID");
  ASSERT_EQ(dump["subgraphs"].size(), 1u);
}

TEST(MsDump, TruncatedFileFailsVerification) {
  SKIP_WITHOUT_LENET();
  std::ifstream in(kLenetPath, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  auto truncated = std::filesystem::temp_directory_path() /
                   ("kiln_ms_truncated_" + std::to_string(::getpid()) + ".ms");
  {
    std::ofstream out(truncated, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
  }
  auto text = dumpMsFile(truncated.string());
  std::filesystem::remove(truncated);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().code(), ErrorCode::MsFileInvalid) << text.status().toString();
}

TEST(MsDump, NonMsBytesFailVerification) {
  auto path = std::filesystem::temp_directory_path() /
              ("kiln_ms_garbage_" + std::to_string(::getpid()) + ".ms");
  {
    std::ofstream out(path, std::ios::binary);
    out << "this is not a flatbuffer at all, just text";
  }
  auto text = dumpMsFile(path.string());
  std::filesystem::remove(path);
  ASSERT_FALSE(text);
  EXPECT_EQ(text.status().code(), ErrorCode::MsFileInvalid);
}
