// protobuf prints its own parse complaints (invalid UTF-8 in a damaged file, ...) on stderr, beside
// the one coded error kiln reports for that file. They go to the debug log instead (`-v` shows
// them); installed once when the library loads, for every tool.
#include <string>

#include <google/protobuf/stubs/logging.h>
#include <spdlog/spdlog.h>

namespace {

void toDebugLog(google::protobuf::LogLevel, const char* file, int line,
                const std::string& message) {
  spdlog::debug("protobuf {}:{}: {}", file, line, message);
}

[[maybe_unused]] const bool kInstalled = [] {
  google::protobuf::SetLogHandler(&toDebugLog);
  return true;
}();

} // namespace
