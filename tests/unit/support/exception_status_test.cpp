// statusFromCurrentException: the last resort of every tool's main codes what it catches.
#include <ios>
#include <new>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "kiln/support/exception_status.h"

namespace kiln {
namespace {

template <typename Throw> Status caught(Throw throwIt) {
  try {
    throwIt();
  } catch (...) {
    return statusFromCurrentException();
  }
  return Status::ok();
}

TEST(StatusFromCurrentException, OutOfMemoryIsK5004) {
  Status s = caught([] { throw std::bad_alloc(); });
  EXPECT_EQ(s.toString(), "K5004: out of memory: the model or the inputs ask for more memory than "
                          "there is. Fix: check the model's shapes and the input sizes (kiln "
                          "inspect); a damaged file can ask for any size");
  Status tooLong = caught([] {
    std::vector<char> v;
    v.reserve(v.max_size() + 1);
  });
  EXPECT_EQ(tooLong.code(), ErrorCode::RuntimeOutOfMemory);
}

TEST(StatusFromCurrentException, AnythingElseIsK9001WithItsText) {
  Status s = caught([] { throw std::ios_base::failure("basic_filebuf::underflow error"); });
  EXPECT_EQ(s.code(), ErrorCode::Internal);
  EXPECT_NE(s.message().find("basic_filebuf::underflow error"), std::string::npos);
  Status odd = caught([] { throw 42; });
  EXPECT_EQ(odd.toString(), "K9001: unexpected exception of unknown type. Fix: report it with the "
                            "model and the command line");
}

} // namespace
} // namespace kiln
