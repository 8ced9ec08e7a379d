// writeFileAtomically's read-back hook: a file its writer's check refuses never replaces the
// target.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include <gtest/gtest.h>

#include "kiln/support/atomic_file.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(WriteFileAtomically, VerifySeesTheWrittenBytesBeforeTheRename) {
  // Per process: ctest may run another copy of the suite at the same time.
  const fs::path folder =
      fs::temp_directory_path() / ("kiln-atomic-verify-test-" + std::to_string(::getpid()));
  fs::remove_all(folder);
  fs::create_directories(folder);
  const fs::path target = folder / "out.bin";
  { std::ofstream(target) << "old"; }
  std::string seen;
  Status refused = writeFileAtomically(
      target.string(),
      [](std::ostream& os) {
        os << "new bytes";
        return Status::ok();
      },
      [&](const std::string& written) {
        seen = contents(written);
        return Status(ErrorCode::Internal, "does not read back", "report it");
      });
  EXPECT_EQ(refused.code(), ErrorCode::Internal) << refused.toString();
  EXPECT_EQ(seen, "new bytes");       // the check read what was written, flushed
  EXPECT_EQ(contents(target), "old"); // and the target was left alone
  EXPECT_EQ(std::distance(fs::directory_iterator(folder), fs::directory_iterator()), 1);

  Status accepted = writeFileAtomically(
      target.string(),
      [](std::ostream& os) {
        os << "new bytes";
        return Status::ok();
      },
      [](const std::string&) { return Status::ok(); });
  EXPECT_TRUE(accepted.isOk()) << accepted.toString();
  EXPECT_EQ(contents(target), "new bytes");
  fs::remove_all(folder);
}

} // namespace
} // namespace kiln
