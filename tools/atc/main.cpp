// atc: ATC-compatible front end (framing lines, error blocks, exit status) over kiln's atc library.
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "kiln/backends/atc.h"
#include "kiln/support/display.h"
#include "kiln/support/exception_status.h"
#include "kiln/support/progress.h"
#include "kiln/support/version.h"

namespace {

constexpr int kFailed = 255; // ATC's ge::FAILED / -1 as an exit status
const char* kFailLine =
    "ATC run failed, Please check the detail log, Try 'atc --help' for more information";

// The one coded line on stderr: kiln's code, ATC's code and message (the block's head, e.g. E10041
// "Failed to load the model" when kiln's error has no ATC code of its own), then kiln's own words
// on the first problem and the fix, so a log that keeps only stderr still says what failed.
std::string stderrLine(const kiln::Status& status, const std::vector<kiln::Status>& errors) {
  const kiln::Status* head = status.peerCode().empty() ? nullptr : &status;
  const kiln::Status* detail = nullptr;
  for (const kiln::Status& e : errors) {
    if (!head && !e.peerCode().empty()) head = &e;
    if (!detail && e.peerCode().empty()) detail = &e;
  }
  if (!head) return status.toString();
  std::string message = head->message();
  const kiln::Status& words = detail ? *detail : status;
  if (words.message() != head->message()) message += " " + words.message();
  return kiln::Status(status.code(), message, status.hint())
      .withPeerCode(head->peerCode())
      .toString();
}

int fail(const kiln::Status& status, const std::vector<kiln::Status>& errors, bool afterRun) {
  if (afterRun) std::cout << "...\n";
  std::cout << kFailLine << "\n";
  std::string block =
      kiln::formatAtcErrorBlock(errors.empty() ? std::vector<kiln::Status>{status} : errors,
                                static_cast<long>(getpid()), kiln::atcTimestamp());
  std::cout << block << "\n" << std::flush;
  if (status.isOk()) return kFailed;
  std::cerr << "atc: error " << stderrLine(status, errors) << "\n";
  return kFailed;
}

// CANN's log environment, read when --log is not given: ASCEND_GLOBAL_LOG_LEVEL 0 debug, 1 info,
// 2 warning, 3 error, 4 null. A value outside 0..4 is said and ignored.
std::string logLevelFromEnvironment() {
  const char* env = std::getenv("ASCEND_GLOBAL_LOG_LEVEL");
  if (!env || !*env) return "null";
  static const char* const levels[] = {"debug", "info", "warning", "error", "null"};
  if (std::strlen(env) == 1 && env[0] >= '0' && env[0] <= '4') return levels[env[0] - '0'];
  std::cerr << "atc: warning: ASCEND_GLOBAL_LOG_LEVEL=" << env
            << " is not one of 0 (debug), 1 (info), 2 (warning), 3 (error), 4 (null); ignored\n";
  return "null";
}

// ATC's --log (or CANN's log environment) sets kiln's log level; the lines go to stderr, or to
// stdout when ASCEND_SLOG_PRINT_TO_STDOUT=1 as CANN's do.
void setLogLevel(const kiln::AtcArgs& parsed) {
  const std::string level = parsed.has("log") ? parsed.get("log") : logLevelFromEnvironment();
  const char* toStdout = std::getenv("ASCEND_SLOG_PRINT_TO_STDOUT");
  auto logger = toStdout && std::string(toStdout) == "1" ? spdlog::stdout_color_mt("atc")
                                                         : spdlog::stderr_color_mt("atc");
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

// In every kiln atc binary: the PATH lookup for CANN's atc skips files that hold it, so kiln never
// hands a model to (a copy of) itself.
extern "C" __attribute__((used)) const char kKilnAtcIdentity[] =
    "kiln-atc-identity: this atc is kiln's drop-in, not CANN's";
// Set for CANN's atc: a kiln atc that finds it (a wrapper script calling kiln's atc) never hands
// off again.
constexpr const char* kHandoffEnv = "KILN_ATC_HANDOFF";

namespace fs = std::filesystem;

bool sameFile(const std::string& a, const std::string& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// This binary, a hard link to it, or any file holding kiln's atc identity string.
bool isKilnAtc(const std::string& path) {
  if (sameFile(path, "/proc/self/exe")) return true;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false; // a FIFO would block the read
  std::ifstream in(path, std::ios::binary);
  const std::string needle = kKilnAtcIdentity;
  std::string carry;
  std::vector<char> chunk(1 << 20);
  while (in) {
    in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    std::string window = carry + std::string(chunk.data(), static_cast<size_t>(in.gcount()));
    if (window.find(needle) != std::string::npos) return true;
    carry = window.size() > needle.size() ? window.substr(window.size() - needle.size()) : window;
  }
  return false;
}

bool isExecutableFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec) && ::access(path.c_str(), X_OK) == 0;
}

struct CannAtc {
  std::string path;
  std::string source; // "--cann_atc", "KILN_CANN_ATC" or "PATH"
};

// CANN's atc for this run: --cann_atc, else KILN_CANN_ATC ("off" for none), else the first atc on
// PATH that is not kiln's. An explicit path that is unusable is an error.
kiln::Expected<std::optional<CannAtc>> findCannAtc(const std::vector<std::string>& args) {
  if (const char* child = std::getenv(kHandoffEnv); child && *child)
    return std::optional<CannAtc>{};
  CannAtc chosen;
  if (std::string flag = kiln::cannAtcFlag(args); !flag.empty()) {
    chosen = {flag, "--cann_atc"};
  } else if (const char* env = std::getenv("KILN_CANN_ATC"); env && *env) {
    chosen = {env, "KILN_CANN_ATC"};
  } else {
    const char* path = std::getenv("PATH");
    std::string dirs = path ? path : "";
    size_t start = 0;
    while (start <= dirs.size()) {
      size_t end = dirs.find(':', start);
      if (end == std::string::npos) end = dirs.size();
      std::string dir = dirs.substr(start, end - start);
      start = end + 1;
      if (dir.empty()) continue;
      std::string candidate = (fs::path(dir) / "atc").string();
      if (isExecutableFile(candidate) && !isKilnAtc(candidate))
        return std::optional<CannAtc>(CannAtc{candidate, "PATH"});
    }
    return std::optional<CannAtc>{};
  }
  if (chosen.path == "off") return std::optional<CannAtc>{};
  const std::string fix =
      chosen.source == "KILN_CANN_ATC"
          ? "set KILN_CANN_ATC to CANN's atc (e.g. "
            "/usr/local/Ascend/ascend-toolkit/latest/bin/atc), "
            "or to off to convert with kiln's own atc"
          : "pass --cann_atc=<CANN's atc> (e.g. /usr/local/Ascend/ascend-toolkit/latest/bin/atc), "
            "or --cann_atc=off to convert with kiln's own atc";
  std::error_code ec;
  if (!fs::exists(chosen.path, ec))
    return kiln::Status(
        kiln::ErrorCode::FileNotFound,
        fmt::format("CANN's atc '{}' (from {}) does not exist", chosen.path, chosen.source), fix);
  if (!isExecutableFile(chosen.path))
    return kiln::Status(kiln::ErrorCode::AtcOptionInvalid,
                        fmt::format("CANN's atc '{}' (from {}) is not an executable file",
                                    chosen.path, chosen.source),
                        fix);
  if (isKilnAtc(chosen.path))
    return kiln::Status(
        kiln::ErrorCode::AtcOptionInvalid,
        fmt::format("'{}' (from {}) is kiln's own atc, not CANN's", chosen.path, chosen.source),
        fix);
  return std::optional<CannAtc>(chosen);
}

// Runs CANN's atc with `args`; its output goes straight to ours. Returns its exit status.
kiln::Expected<int> runCannAtc(const CannAtc& atc, const std::vector<std::string>& args) {
  std::vector<std::string> argvStrings = {atc.path};
  argvStrings.insert(argvStrings.end(), args.begin(), args.end());
  std::vector<char*> argvPointers;
  for (std::string& a : argvStrings)
    argvPointers.push_back(a.data());
  argvPointers.push_back(nullptr);
  ::setenv(kHandoffEnv, "1", 1);
  std::cout << std::flush;
  std::cerr << std::flush;
  pid_t pid = 0;
  if (int err =
          ::posix_spawn(&pid, atc.path.c_str(), nullptr, nullptr, argvPointers.data(), environ);
      err != 0)
    return kiln::Status(
        kiln::ErrorCode::AtcOptionInvalid,
        fmt::format("cannot start CANN's atc '{}': {}", atc.path, std::strerror(err)),
        "check that the file is CANN's atc and runs on this host, or use "
        "--cann_atc=off to convert with kiln's own atc");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return kFailed;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return kFailed;
}

// A temporary folder removed when the run ends.
struct TempDir {
  std::string path;
  TempDir() {
    std::string base = (fs::temp_directory_path() / "kiln-atc-XXXXXX").string();
    if (::mkdtemp(base.data())) path = base;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

int runTool(int argc, char** argv) {
  kiln::enableProgress(); // long conversions show progress on a terminal's stderr
  if (kiln::asksForVersion(argc, argv)) {
    std::cout << kiln::versionBanner("atc") << kiln::omNotDeviceRunnableNote() << "\n";
    return 0;
  }
  std::vector<std::string> args(argv + 1, argv + argc);
  kiln::AtcArgs parsed = kiln::parseAtcCommandLine(args);
  // Conversions go to CANN's atc when there is one; kiln's framing is printed only when kiln
  // itself converts or refuses.
  std::optional<CannAtc> cann;
  if (parsed.errorLines.empty() && parsed.error.isOk() && !parsed.help &&
      parsed.get("mode") == "0") {
    auto found = findCannAtc(args);
    if (!found) {
      std::cout << "ATC start working now, please wait for a moment." << std::endl;
      return fail(found.status(), {}, false);
    }
    cann = *found;
  }
  parsed.handoff = cann.has_value();
  // --help converts nothing: the usage alone, without the conversion's framing lines.
  const bool helpOnly = parsed.help && parsed.errorLines.empty() && parsed.error.isOk();
  if (!cann && !helpOnly)
    std::cout << "ATC start working now, please wait for a moment." << std::endl;
  // A failure after option checks: on the hand-off path the framing line was held back, print it
  // first so the block reads as kiln's own run.
  auto failAfterStart = [&](const kiln::Status& status, const std::vector<kiln::Status>& errors) {
    if (cann) std::cout << "ATC start working now, please wait for a moment." << std::endl;
    return fail(status, errors, true);
  };
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
  setLogLevel(parsed);
  std::string commandLine = "atc";
  for (const std::string& a : args)
    commandLine += " " + a;
  auto options = kiln::validateAtcOptions(parsed, commandLine);
  if (!options) {
    return failAfterStart(options.status(), {});
  }
  if (cann) {
    TempDir temp;
    if (temp.path.empty()) {
      return failAfterStart(kiln::Status(kiln::ErrorCode::FileWriteFailed,
                                         "cannot create a temporary folder for the prepared model",
                                         "set TMPDIR to a writable folder"),
                            {});
    }
    const std::string prepared =
        (fs::path(temp.path) / (fs::path(options->model).stem().string() + ".onnx")).string();
    kiln::AtcResult result;
    if (kiln::Status status = kiln::prepareForCannAtc(*options, prepared, result); !status) {
      return failAfterStart(status, result.errors);
    }
    std::cerr << "atc: kiln's checks and simplification passed; CANN's atc " << cann->path
              << " (from " << cann->source << ") builds the .om" << std::endl;
    auto exitStatus = runCannAtc(*cann, kiln::cannAtcArgs(args, prepared));
    if (!exitStatus) {
      return failAfterStart(exitStatus.status(), {});
    }
    return *exitStatus;
  }
  for (const std::string& w : options->warnings)
    std::cerr << "atc: warning: " << kiln::displayLine(w) << "\n";
  kiln::AtcResult result;
  kiln::Status status = kiln::runAtc(*options, result);
  std::cout << result.text;
  for (const std::string& w : result.warnings)
    std::cerr << "atc: warning: " << kiln::displayLine(w) << "\n";
  if (!status) return fail(status, result.errors, true);
  std::cout << "...\n"
            << "ATC run success, welcome to the next use.\n"
            << kiln::omNotDeviceRunnableNote() << "\n"
            << "\n";
  return 0;
}

} // namespace

// The last resort: an exception the library let through still ends in ATC's failure framing and
// one coded line, not an abort.
int main(int argc, char** argv) {
  try {
    return runTool(argc, argv);
  } catch (...) {
    return fail(kiln::statusFromCurrentException(), {}, true);
  }
}
