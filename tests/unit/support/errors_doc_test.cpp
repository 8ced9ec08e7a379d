// docs/errors.md documents exactly the codes of the ErrorCode enum (parsed from status.h, so a new
// code cannot be added without its entry).
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "kiln/support/status.h"

using namespace kiln;

namespace {

std::string readText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Name → number for every enumerator of `enum class ErrorCode` in the header.
std::map<std::string, int> enumFromHeader(const std::string& header) {
  std::map<std::string, int> out;
  size_t begin = header.find("enum class ErrorCode");
  size_t end = header.find("};", begin);
  if (begin == std::string::npos || end == std::string::npos) return out;
  std::string body = header.substr(begin, end - begin);
  std::regex entry(R"(^\s*([A-Za-z][A-Za-z0-9]*)\s*=\s*([0-9]+)\s*,)");
  std::istringstream lines(body);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, entry)) out[match[1]] = std::stoi(match[2]);
  }
  return out;
}

const std::string kSourceDir = KILN_SOURCE_DIR;

} // namespace

TEST(ErrorsDoc, EveryErrorCodeIsDocumented) {
  std::string header = readText(kSourceDir + "/include/kiln/support/status.h");
  std::string doc = readText(kSourceDir + "/docs/errors.md");
  ASSERT_FALSE(header.empty()) << "cannot read status.h under " << kSourceDir;
  ASSERT_FALSE(doc.empty()) << "cannot read docs/errors.md under " << kSourceDir;

  auto codes = enumFromHeader(header);
  // The parser must see the enum as the compiler does.
  ASSERT_EQ(codes.count("Truncated"), 1u);
  EXPECT_EQ(codes["Truncated"], static_cast<int>(ErrorCode::Truncated));
  EXPECT_EQ(codes["Internal"], static_cast<int>(ErrorCode::Internal));
  EXPECT_GE(codes.size(), 20u);

  std::set<std::string> expectedHeadings;
  for (const auto& [name, number] : codes) {
    if (name == "Ok") continue;
    std::string heading = "### " + codeString(static_cast<ErrorCode>(number)) + " `" + name + "`";
    expectedHeadings.insert(heading);
    EXPECT_NE(doc.find(heading + "\n"), std::string::npos)
        << "docs/errors.md lacks the section '" << heading << "' (meaning, example, fix)";
  }
  // And nothing documented that the enum no longer has.
  std::regex headingPattern(R"(^### K[0-9]{4} `[A-Za-z0-9]+`$)");
  std::istringstream lines(doc);
  for (std::string line; std::getline(lines, line);) {
    if (std::regex_match(line, headingPattern)) {
      EXPECT_TRUE(expectedHeadings.count(line)) << "docs/errors.md documents unknown " << line;
    }
  }
}

TEST(ErrorsDoc, CodeStringsAreFourDigits) {
  EXPECT_EQ(codeString(ErrorCode::FileNotFound), "K1001");
  EXPECT_EQ(codeString(ErrorCode::Truncated), "K2002");
  EXPECT_EQ(Status(ErrorCode::GraphCycle, "m.onnx: graph 'g' has a cycle", "break it").toString(),
            "K2010: m.onnx: graph 'g' has a cycle. Fix: break it");
}
