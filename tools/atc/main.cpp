// atc: ATC-compatible front end (framing lines, error blocks, exit status) over kiln's atc library.
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "kiln/backends/atc.h"
#include "kiln/support/version.h"
#include "kiln/support/progress.h"

namespace {

constexpr int kFailed = 255; // ATC's ge::FAILED / -1 as an exit status
const char* kFailLine =
    "ATC run failed, Please check the detail log, Try 'atc --help' for more information";

int fail(const kiln::Status& status, const std::vector<kiln::Status>& errors, bool afterRun) {
  if (afterRun) std::cout << "...\n";
  std::cout << kFailLine << "\n";
  std::string block = kiln::formatAtcErrorBlock(
      errors.empty() ? std::vector<kiln::Status>{status} : errors, static_cast<long>(getpid()),
      kiln::atcTimestamp());
  std::cout << block << "\n" << std::flush;
  if (status.isOk()) return kFailed;
  // Each error is printed once: when the block on stdout already holds the message, stderr adds
  // only kiln's code and the fix.
  if (block.find(status.message()) == std::string::npos) {
    std::cerr << "atc: error " << status.toString() << "\n";
  } else {
    std::string code = kiln::codeString(status.code());
    if (!status.peerCode().empty()) code += " (" + status.peerCode() + ")";
    std::cerr << "atc: error " << code
              << (status.hint().empty() ? std::string(": see the message above")
                                        : ": fix: " + status.hint())
              << "\n";
  }
  return kFailed;
}

void setLogLevel(const std::string& level) {
  // ATC's --log sets its debug log; kiln's log goes to stderr.
  auto logger = spdlog::stderr_color_mt("atc");
  spdlog::set_default_logger(logger);
  if (level == "debug")
    spdlog::set_level(spdlog::level::debug);
  else if (level == "info")
    spdlog::set_level(spdlog::level::info);
  else if (level == "warning")
    spdlog::set_level(spdlog::level::warn);
  else if (level == "error")
    spdlog::set_level(spdlog::level::err);
  else
    spdlog::set_level(spdlog::level::off);
}

} // namespace

int main(int argc, char** argv) {
  kiln::enableProgress(); // long conversions show progress on a terminal's stderr
  if (kiln::asksForVersion(argc, argv)) {
    std::cout << kiln::versionBanner("atc") << kiln::omNotDeviceRunnableNote() << "\n";
    return 0;
  }
  std::cout << "ATC start working now, please wait for a moment." << std::endl;
  std::vector<std::string> args(argv + 1, argv + argc);
  kiln::AtcArgs parsed = kiln::parseAtcCommandLine(args);
  if (!parsed.errorLines.empty() || !parsed.error.isOk()) {
    for (const std::string& line : parsed.errorLines)
      std::cerr << line << "\n";
    std::cerr << std::flush;
    return fail(parsed.error, {}, false);
  }
  if (parsed.help) {
    std::cout << kiln::atcUsageText();
    return 0;
  }
  setLogLevel(parsed.get("log"));
  std::string commandLine = "atc";
  for (const std::string& a : args)
    commandLine += " " + a;
  auto options = kiln::validateAtcOptions(parsed, commandLine);
  if (!options) return fail(options.status(), {}, true);
  for (const std::string& w : options->warnings)
    std::cerr << "atc: warning: " << w << "\n";
  kiln::AtcResult result;
  kiln::Status status = kiln::runAtc(*options, result);
  std::cout << result.text;
  for (const std::string& w : result.warnings)
    std::cerr << "atc: warning: " << w << "\n";
  if (!status) return fail(status, result.errors, true);
  std::cout << "...\n"
            << "ATC run success, welcome to the next use.\n"
            << kiln::omNotDeviceRunnableNote() << "\n"
            << "\n";
  return 0;
}
