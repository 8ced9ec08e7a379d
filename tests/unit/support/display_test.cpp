// displayName/displayLine/isValidUtf8/jsonText: model-derived text cannot forge lines, drive the
// terminal or flood the log, and what JSON/protobuf get is UTF-8.
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/support/display.h"
#include "kiln/support/json_text.h"
#include "kiln/support/status.h"

namespace kiln {
namespace {

TEST(DisplayName, KeepsOrdinaryNamesAsTheyAre) {
  EXPECT_EQ(displayName("model/conv_1/BiasAdd:0"), "model/conv_1/BiasAdd:0");
  EXPECT_EQ(displayName("образ 图像 ü"), "образ 图像 ü");
  EXPECT_EQ(displayName("C:\\models\\a b"), "C:\\models\\a b");
}

TEST(DisplayName, EscapesControlCharacters) {
  EXPECT_EQ(displayName("a\nK0000: forged"), "a\\nK0000: forged");
  EXPECT_EQ(displayName("x\r\ty"), "x\\r\\ty");
  EXPECT_EQ(displayName("\x1b[2J\x1b]0;title\x07"), "\\x1b[2J\\x1b]0;title\\x07");
  EXPECT_EQ(displayName(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(displayName("del\x7f"), "del\\x7f");
  EXPECT_EQ(displayName("csi\xc2\x9b"
                        "31m"),
            "csi\\u009b31m"); // C1 CSI
  EXPECT_EQ(displayName("abc\xe2\x80\xae"
                        "fed"),
            "abc\\u202efed"); // right-to-left override
}

TEST(DisplayName, ShowsInvalidUtf8AsBytes) {
  EXPECT_EQ(displayName("a\xff\xfe"), "a\\xff\\xfe");
  EXPECT_EQ(displayName("\xc0\xaf"), "\\xc0\\xaf");          // overlong '/'
  EXPECT_EQ(displayName("\xed\xa0\x80"), "\\xed\\xa0\\x80"); // surrogate
  EXPECT_EQ(displayName("cut\xe2\x82"), "cut\\xe2\\x82");    // truncated sequence
}

TEST(DisplayName, CapsLongNamesWithTheirLength) {
  const std::string huge(10 << 20, 'n');
  const std::string shown = displayName(huge);
  EXPECT_EQ(shown, std::string(kDisplayNameMaxBytes, 'n') + "... (10485760 bytes)");
  EXPECT_EQ(displayName("abcdef", 3), "abc... (6 bytes)");
  // The cut never splits a character.
  EXPECT_EQ(displayName("ab\xc3\xbc", 3), "ab... (4 bytes)");
  EXPECT_EQ(displayName("abc", 3), "abc");
}

TEST(DisplayLine, CapsTheWholeLine) {
  const std::string line = "node '" + std::string(1 << 20, 'x') + "' failed";
  const std::string shown = displayLine(line);
  EXPECT_EQ(shown.size(), kDisplayLineMaxBytes + std::string("... (1048590 bytes)").size());
  EXPECT_EQ(shown.find('\n'), std::string::npos);
}

TEST(IsValidUtf8, RefusesEachIllFormedSequence) {
  EXPECT_TRUE(isValidUtf8("plain ü 图 😀"));
  EXPECT_FALSE(isValidUtf8("a\xff"));
  EXPECT_FALSE(isValidUtf8("\xf4\x90\x80\x80")); // past U+10FFFF
  EXPECT_FALSE(isValidUtf8("\xc0\xaf"));         // overlong '/'
  EXPECT_FALSE(isValidUtf8("\xed\xa0\x80"));     // surrogate
  EXPECT_FALSE(isValidUtf8("cut\xe2\x82"));      // truncated
}

// JSON of names that are not UTF-8 is written, not thrown on (atc mode 3 used to abort).
TEST(JsonText, ReplacesIllFormedUtf8) {
  nlohmann::json doc = {{"name", "n\xff\xfe"}};
  EXPECT_EQ(jsonText(doc, -1), "{\"name\":\"n\xef\xbf\xbd\xef\xbf\xbd\"}");
}

// The one line users see cannot be split or flooded by a name inside the message.
TEST(StatusToString, EscapesAndCapsModelText) {
  Status forged(ErrorCode::BadAttribute, "node 'a\nK0000: forged\x1b[31m' (Relu): bad", "fix\rit");
  EXPECT_EQ(forged.toString(),
            "K2013: node 'a\\nK0000: forged\\x1b[31m' (Relu): bad. Fix: fix\\rit");
  Status flood(ErrorCode::BadAttribute, std::string(10 << 20, 'y'), "check the model");
  const std::string line = flood.toString();
  EXPECT_LT(line.size(), kDisplayLineMaxBytes + 100);
  EXPECT_NE(line.find("... (10485760 bytes). Fix: check the model"), std::string::npos);
}

} // namespace
} // namespace kiln
