// Crash-and-hang scan: every tool and mode of kiln, atc, converter_lite and benchmark on every
// model of tests/, Debian's ONNX test data and the newer ONNX node tests. The matrix, the known
// list and the time it takes are described in tests/cli/README.md.
//
// Starting a tool costs ~40 ms of CPU (loading and relocating its libraries), more than most runs
// themselves. So this program links the four tools' own main() (tools/*/main.cpp built with main
// renamed), and a fork of it (a runner) calls them for step after step, model after model, each
// with its own output files and deadline; a step that does not finish there is run again alone in
// a fresh fork, and that run is what gets recorded (StepRunner). --exec runs the installed
// binaries, one per step.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kiln/conformance.h"

extern char** environ;

// The tools' main() functions, compiled from tools/*/main.cpp under these names (CMakeLists.txt).
int kiln_tool_kiln_main(int argc, char** argv);
int kiln_tool_atc_main(int argc, char** argv);
int kiln_tool_converter_lite_main(int argc, char** argv);
int kiln_tool_benchmark_main(int argc, char** argv);

namespace fs = std::filesystem;

namespace {

enum class Tool { Kiln, Atc, ConverterLite, Benchmark };

struct Tools {
  std::string kiln, atc, converterLite, benchmark;
  const std::string& path(Tool tool) const {
    switch (tool) {
    case Tool::Kiln:
      return kiln;
    case Tool::Atc:
      return atc;
    case Tool::ConverterLite:
      return converterLite;
    case Tool::Benchmark:
      return benchmark;
    }
    return kiln;
  }
};

int toolMain(Tool tool, int argc, char** argv) {
  switch (tool) {
  case Tool::Kiln:
    return kiln_tool_kiln_main(argc, argv);
  case Tool::Atc:
    return kiln_tool_atc_main(argc, argv);
  case Tool::ConverterLite:
    return kiln_tool_converter_lite_main(argc, argv);
  case Tool::Benchmark:
    return kiln_tool_benchmark_main(argc, argv);
  }
  return 127;
}

struct Options {
  Tools tools;
  fs::path source; // the repository (tests/, samples/)
  fs::path work;   // scratch folder, emptied first
  // Where each model's scratch folder is made (WORK when empty). Tens of thousands of small files
  // are made and deleted there: on a tmpfs that costs ~15% less CPU than on ext4. A kept folder
  // (crash, hang, --keep-all) is moved to WORK/models.
  fs::path scratch;
  fs::path testData;     // Debian's libonnx-testdata data folder
  fs::path newNodeTests; // the newer ONNX node tests (skipped when absent)
  fs::path knownList;    // the known-crash list
  int jobs = 2;
  double timeoutSeconds = 10;
  std::string only;                // substring a model id must contain (for reproducing)
  std::set<std::string> onlySteps; // steps to run (empty: all)
  bool keepAll = false;            // keep every model's scratch folder, not only crashing ones
  bool exec = false;               // run the tools' binaries instead of forks of this program
  // Scan only every shardCount-th model, starting at shardIndex (0-based): ctest runs the scan as
  // shards, one core each, that its scheduler can start as early as any other test.
  size_t shardIndex = 0, shardCount = 1;
};

// One model to scan. `caseDir` holds test_data_set_0 for ONNX test cases.
struct Model {
  std::string id; // stable name used in the known list: "<set>/<relative path>"
  fs::path path;
  fs::path caseDir;
};

enum class Outcome { Ok, Coded, Uncoded, Signal, Hang, NotRun };

struct RunResult {
  Outcome outcome = Outcome::NotRun;
  int code = 0; // exit status or signal number
  double seconds = 0;
  bool slow = false; // passed the deadline once, then finished within 4x it
  std::string firstErrorLine;
};

// A step's outcome as recorded for the summary.
struct Record {
  std::string step;
  std::string modelId;
  RunResult result;
  std::string command;
  std::string known; // the known list's note, when listed
};

std::string shellQuote(const std::string& s) {
  if (!s.empty() && s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                        "0123456789_-./=:,+@%") == std::string::npos)
    return s;
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string commandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv)
    out += (out.empty() ? "" : " ") + shellQuote(a);
  return out;
}

// Model-derived text reaches this report: keep it printable and short.
std::string printable(const std::string& s, size_t cap = 200) {
  std::string out;
  for (unsigned char c : s) {
    if (out.size() >= cap) return out + "...";
    out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return out;
}

// At most `cap` bytes of the file. The buffer is the file's size, not `cap`: a run's .out/.err are
// read after every step, and zero-filling 1 MiB for each cost the scan ~18 ms of page faults per
// model.
std::string readFile(const fs::path& path, size_t cap = 1 << 20) {
  std::ifstream in(path, std::ios::binary);
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  std::string text(ec ? cap : static_cast<size_t>(std::min<std::uintmax_t>(size, cap)), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

// A clean failure carries a coded line: kiln's K#### (drop-in tools add their own code to it).
bool hasCodedLine(const std::string& text) {
  static const std::regex coded(R"((^|[^A-Za-z0-9])K[0-9]{4}([^0-9]|$))");
  return std::regex_search(text, coded);
}

std::string firstNonEmptyLine(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
  return "";
}

// One run of a tool: its step name, which main() it calls, and its command line (argv[0] is the
// tool's binary, so the printed command reproduces the run).
struct Step {
  std::string name;
  Tool tool;
  std::vector<std::string> argv;
};

// Points the standard streams of a run's process at empty stdin and the step's output files.
bool redirect(const fs::path& out, const fs::path& err) {
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  int in = open("/dev/null", O_RDONLY);
  int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (in < 0 || o < 0 || e < 0) return false;
  dup2(in, 0);
  dup2(o, 1);
  dup2(e, 2);
  close(in);
  close(o);
  close(e);
  return true;
}

// Puts spdlog back as a fresh process has it: only the default logger, at its first level. The
// tools change it (atc registers a logger named "atc" and makes it the default; kiln sets the
// level), and a second atc step in one fork used to stop at once with K9001 "logger with name
// 'atc' already exists", so atc's modes 1, 3 and 6 were never exercised.
void resetLogging() {
  static const std::shared_ptr<spdlog::logger> initial = spdlog::default_logger();
  static const spdlog::level::level_enum initialLevel = initial->level();
  spdlog::drop_all();
  spdlog::set_default_logger(initial);
  spdlog::set_level(initialLevel);
}

// Calls the step's tool main() in this process and flushes what it printed.
int callMain(const Step& step) {
  resetLogging();
  std::vector<std::string> argv = step.argv; // main() may modify its arguments
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  int status = toolMain(step.tool, static_cast<int>(argv.size()), args.data());
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  return status;
}

// Forks a child in its own process group with the signals at their defaults; -1 on failure.
pid_t forkRun() {
  std::cout.flush();
  std::fflush(nullptr); // nothing buffered here is written twice by the child
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    for (int sig = 1; sig < NSIG; ++sig)
      signal(sig, SIG_DFL);
  }
  return pid;
}

// Waits for `pid` until `deadline` (also returning early when `fd` >= 0 becomes readable).
// Returns true when the child ended (status in `status`).
bool waitUntil(pid_t pid, int pidfd, int fd, std::chrono::steady_clock::time_point deadline,
               int& status) {
  while (true) {
    if (waitpid(pid, &status, WNOHANG) == pid) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    int waitMs = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1);
    pollfd fds[2] = {{pidfd, POLLIN, 0}, {fd, POLLIN, 0}};
    if (pidfd < 0) waitMs = std::min(waitMs, 2);
    int ready = poll(fds, 2, waitMs);
    if (ready > 0 && fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP))) return false;
  }
}

// The outcome of a run that ended with `status` (or was killed at its deadline).
RunResult classify(bool timedOut, int status, double seconds, const fs::path& out,
                   const fs::path& err, bool codedOnStdout) {
  RunResult result;
  result.seconds = seconds;
  const std::string errText = readFile(err);
  result.firstErrorLine = printable(firstNonEmptyLine(errText));
  if (timedOut) {
    result.outcome = Outcome::Hang;
  } else if (WIFSIGNALED(status)) {
    result.outcome = Outcome::Signal;
    result.code = WTERMSIG(status);
  } else if (WEXITSTATUS(status) == 0) {
    result.outcome = Outcome::Ok;
  } else {
    result.code = WEXITSTATUS(status);
    bool coded = hasCodedLine(errText);
    if (!coded && codedOnStdout) { // kiln check: a report ending in FAIL is its answer
      const std::string outText = readFile(out);
      coded = hasCodedLine(outText) || outText.find("problem(s): FAIL\n") != std::string::npos;
    }
    result.outcome = coded ? Outcome::Coded : Outcome::Uncoded;
  }
  return result;
}

// kiln check prints its report, and the problems it found, on stdout.
bool codedOnStdout(const Step& step) { return step.name.rfind("check-", 0) == 0; }

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::chrono::steady_clock::duration toDuration(double seconds) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(seconds));
}

// Runs one step as its own process (a fork calling main(), or the binary with --exec) with a
// deadline; past it the process group is killed and the run is a hang.
RunResult runAlone(const Step& step, const fs::path& dir, double timeoutSeconds, bool exec) {
  const fs::path out = dir / (step.name + ".out"), err = dir / (step.name + ".err");
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = forkRun();
  if (pid < 0) {
    RunResult failed;
    failed.outcome = Outcome::Uncoded;
    failed.code = -1;
    failed.firstErrorLine = std::string("cannot fork: ") + std::strerror(errno);
    return failed;
  }
  if (pid == 0) {
    if (!redirect(out, err)) _exit(126);
    if (exec) {
      std::vector<char*> args;
      for (const auto& a : step.argv)
        args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      execv(args[0], args.data());
      _exit(127);
    }
    _exit(callMain(step)); // static destructors skipped: they would only cost time here
  }
  int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  int status = 0;
  bool ended = waitUntil(pid, pidfd, -1, start + toDuration(timeoutSeconds), status);
  if (!ended) {
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  if (pidfd >= 0) close(pidfd);
  kill(-pid, SIGKILL); // anything the tool left running in its group
  return classify(!ended, status, secondsSince(start), out, err, codedOnStdout(step));
}

// A signal or hang is always the outcome of the step run on its own: a busy machine can stretch a
// run past the deadline, so a hang must also outlast 4x it.
RunResult runConfirmed(const Step& step, const fs::path& dir, double timeoutSeconds, bool exec) {
  RunResult r = runAlone(step, dir, timeoutSeconds, exec);
  if (r.outcome == Outcome::Hang) {
    r = runAlone(step, dir, timeoutSeconds * 4, exec);
    r.slow = r.outcome != Outcome::Hang;
  }
  return r;
}

// Writes or reads all `size` bytes on a pipe, retrying after a signal; false when the pipe closes
// or fails first.
bool writeAll(int fd, const char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = write(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}
bool readAll(int fd, char* data, size_t size) {
  for (size_t done = 0; done < size;) {
    const ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// A forked process that runs the steps it is sent, one at a time, for model after model: a fresh
// fork per model cost more than most of its steps (the child faults in the pages it touches
// again, and its heap starts cold every time). The scanner sends each step on a pipe and waits
// for its exit status with the step's deadline. When the runner does not finish a step (signal,
// hang, exit() from inside a tool), that step runs again on its own in a fresh fork and is
// recorded from there, and the next step starts a new runner: every signal and hang recorded
// comes from a process that ran only that step. A runner is replaced after kMaxSteps steps, so
// what the tools leave behind (leaks, stray threads) stays bounded.
class StepRunner {
 public:
  StepRunner(double timeoutSeconds, bool exec) : timeoutSeconds_(timeoutSeconds), exec_(exec) {}
  StepRunner(const StepRunner&) = delete;
  StepRunner& operator=(const StepRunner&) = delete;
  ~StepRunner() { stop(); }

  RunResult run(const Step& step, const fs::path& dir) {
    if (exec_ || (pid_ < 0 && !start())) return runConfirmed(step, dir, timeoutSeconds_, exec_);
    const fs::path out = dir / (step.name + ".out"), err = dir / (step.name + ".err");
    const auto start = std::chrono::steady_clock::now();
    if (!send(step, out, err)) { // the runner is gone: the step runs on its own
      stop();
      return runConfirmed(step, dir, timeoutSeconds_, exec_);
    }
    ++steps_;
    const auto deadline = start + toDuration(timeoutSeconds_);
    std::string pending;
    int status = 0;
    bool ended = false;
    while (pending.find('\n') == std::string::npos) {
      ended = waitUntil(pid_, pidfd_, fromRunner_, deadline, status);
      char buffer[64];
      ssize_t n;
      while ((n = read(fromRunner_, buffer, sizeof buffer)) > 0)
        pending.append(buffer, static_cast<size_t>(n));
      if (ended || std::chrono::steady_clock::now() >= deadline) break;
    }
    if (pending.find('\n') != std::string::npos) {
      // Encode the exit status as waitpid would, so classify reads it the same way.
      const int exitStatus = std::atoi(pending.c_str());
      if (ended) reaped_ = true;
      if (ended || steps_ >= kMaxSteps) stop();
      return classify(false, (exitStatus & 0xff) << 8, secondsSince(start), out, err,
                      codedOnStdout(step));
    }
    if (ended) { // ended inside the step: signal or exit() from a tool
      reaped_ = true;
      stop();
      return runConfirmed(step, dir, timeoutSeconds_, exec_);
    }
    stop(); // past the deadline once: alone, it gets 4x
    RunResult r = runAlone(step, dir, timeoutSeconds_ * 4, exec_);
    r.slow = r.outcome != Outcome::Hang;
    return r;
  }

  // Ends the runner (and anything a tool left running in its process group).
  void stop() {
    if (pid_ < 0) return;
    close(toRunner_);
    close(fromRunner_);
    if (!reaped_) {
      int status = 0;
      kill(-pid_, SIGKILL);
      waitpid(pid_, &status, 0);
    }
    kill(-pid_, SIGKILL);
    if (pidfd_ >= 0) close(pidfd_);
    pid_ = -1;
  }

 private:
  static constexpr size_t kMaxSteps = 1000;

  bool start() {
    int toRunner[2], fromRunner[2];
    if (pipe2(toRunner, O_CLOEXEC) != 0) return false;
    if (pipe2(fromRunner, O_CLOEXEC) != 0) {
      close(toRunner[0]);
      close(toRunner[1]);
      return false;
    }
    pid_t pid = forkRun();
    if (pid == 0) {
      close(toRunner[1]);
      close(fromRunner[0]);
      serve(toRunner[0], fromRunner[1]);
    }
    close(toRunner[0]);
    close(fromRunner[1]);
    if (pid < 0 || fcntl(fromRunner[0], F_SETFL, O_NONBLOCK) != 0) {
      close(toRunner[1]);
      close(fromRunner[0]);
      if (pid > 0) {
        kill(-pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      return false;
    }
    pid_ = pid;
    pidfd_ = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    toRunner_ = toRunner[1];
    fromRunner_ = fromRunner[0];
    reaped_ = false;
    steps_ = 0;
    return true;
  }

  // A request: the tool, the output files and the arguments, each string length-prefixed.
  bool send(const Step& step, const fs::path& out, const fs::path& err) {
    std::string message;
    auto add = [&](const std::string& s) { message += std::to_string(s.size()) + ":" + s; };
    add(std::to_string(static_cast<int>(step.tool)));
    add(out.string());
    add(err.string());
    add(std::to_string(step.argv.size()));
    for (const auto& a : step.argv)
      add(a);
    return writeAll(toRunner_, message.data(), message.size());
  }

  // The runner's side: reads requests until the pipe closes, answering each with "STATUS\n".
  [[noreturn]] static void serve(int requests, int answers) {
    auto readString = [&](std::string& s) {
      std::string length;
      char c;
      while (true) {
        if (!readAll(requests, &c, 1)) return false;
        if (c == ':') break;
        length += c;
      }
      s.assign(static_cast<size_t>(std::atol(length.c_str())), '\0');
      return readAll(requests, s.data(), s.size());
    };
    std::string tool, out, err, count;
    while (readString(tool) && readString(out) && readString(err) && readString(count)) {
      Step step{"", static_cast<Tool>(std::atoi(tool.c_str())), {}};
      step.argv.resize(static_cast<size_t>(std::atol(count.c_str())));
      for (auto& a : step.argv)
        if (!readString(a)) _exit(0);
      if (!redirect(out, err)) _exit(126);
      const std::string line = std::to_string(callMain(step)) + "\n";
      // A status line is shorter than PIPE_BUF, so it is written whole.
      if (write(answers, line.data(), line.size()) < 0) _exit(126);
    }
    _exit(0);
  }

  double timeoutSeconds_;
  bool exec_;
  pid_t pid_ = -1;
  int pidfd_ = -1;
  int toRunner_ = -1;
  int fromRunner_ = -1;
  bool reaped_ = false; // waitUntil already collected the runner's exit status
  size_t steps_ = 0;    // steps this runner has run
};

// input_10.pb sorts after input_9.pb.
std::vector<fs::path> inputFiles(const fs::path& set) {
  std::vector<std::pair<long, fs::path>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(set, ec)) {
    std::string name = entry.path().filename().string();
    if (name.rfind("input_", 0) == 0 && entry.path().extension() == ".pb")
      found.emplace_back(std::atol(name.c_str() + 6), entry.path());
  }
  std::sort(found.begin(), found.end());
  std::vector<fs::path> out;
  for (auto& f : found)
    out.push_back(f.second);
  return out;
}

// The scan's steps, in the order they run on a model; later steps read what earlier ones write.
const std::vector<std::pair<std::string, std::string>>& stepTable() {
  static const std::vector<std::pair<std::string, std::string>> steps = {
      {"inspect", "kiln inspect M"},
      {"inspect-json", "kiln inspect --json M"},
      {"inspect-ir", "kiln inspect --ir M"},
      {"convert-onnx", "kiln convert M --to onnx"},
      {"check-ms", "kiln check M --target ms"},
      {"check-om", "kiln check M --target om"},
      {"lower-ms", "kiln lower M --target ms"},
      {"lower-om", "kiln lower M --target om"},
      {"opt", "kiln opt M --pipeline default -o"},
      {"atc-0", "atc --mode=0 (M -> X.om)"},
      {"atc-1-onnx", "atc --mode=1 --om=M"},
      {"atc-3", "atc --mode=3 (precheck M)"},
      {"converter_lite", "converter_lite (M -> X.ms)"},
      {"run", "kiln run M [--input test_data_set_0]"},
      {"compare", "kiln compare M X.ms (M M without X.ms)"},
      {"atc-1-om", "atc --mode=1 --om=X.om"},
      {"atc-6", "atc --mode=6 --om=X.om"},
      {"om-inspect", "kiln inspect X.om"},
      {"om-convert", "kiln convert X.om --to onnx"},
      {"om-run", "kiln run X.om [inputs]"},
      {"benchmark", "benchmark --modelFile=X.ms"},
      {"ms-inspect", "kiln inspect X.ms"},
      {"ms-inspect-json", "kiln inspect --json X.ms"},
      {"ms-convert", "kiln convert X.ms --to onnx"},
      {"ms-run", "kiln run X.ms [inputs]"},
  };
  return steps;
}

class Scanner {
 public:
  explicit Scanner(const Options& options)
      : options_(options), runner_(options.timeoutSeconds, options.exec) {}

  // Runs every step on one model in `dir`; returns whether the folder should be kept.
  bool scanModel(const Model& model, const fs::path& dir) {
    fs::create_directories(dir);
    const Tools& t = options_.tools;
    const std::string m = model.path.string();
    const std::string d = dir.string();
    bool crashed = false;
    std::vector<Step> steps;
    auto add = [&](const std::string& name, Tool tool, std::vector<std::string> args) {
      if (!options_.onlySteps.empty() && !options_.onlySteps.count(name)) return;
      args.insert(args.begin(), t.path(tool));
      steps.push_back({name, tool, std::move(args)});
    };
    auto runAdded = [&]() {
      for (size_t i = 0; i < steps.size(); ++i) {
        const RunResult r = runner_.run(steps[i], dir);
        if (r.outcome == Outcome::Signal || r.outcome == Outcome::Hang) crashed = true;
        records_.push_back({steps[i].name, model.id, r, commandLine(steps[i].argv), ""});
      }
      steps.clear();
    };

    // Phase 1: the model itself.
    add("inspect", Tool::Kiln, {"inspect", m});
    add("inspect-json", Tool::Kiln, {"inspect", "--json", m});
    add("inspect-ir", Tool::Kiln, {"inspect", "--ir", m});
    add("convert-onnx", Tool::Kiln, {"convert", m, "--to", "onnx", "-o", d + "/converted.onnx"});
    add("check-ms", Tool::Kiln, {"check", m, "--target", "ms"});
    add("check-om", Tool::Kiln, {"check", m, "--target", "om"});
    add("lower-ms", Tool::Kiln, {"lower", m, "--target", "ms"});
    add("lower-om", Tool::Kiln, {"lower", m, "--target", "om"});
    add("opt", Tool::Kiln, {"opt", m, "--pipeline", "default", "-o", d + "/opt.onnx"});
    add("atc-0", Tool::Atc,
        {"--mode=0", "--framework=5", "--model=" + m, "--output=" + d + "/x",
         "--soc_version=Ascend310P3"});
    add("atc-1-onnx", Tool::Atc,
        {"--mode=1", "--framework=5", "--om=" + m, "--json=" + d + "/onnx.json"});
    add("atc-3", Tool::Atc,
        {"--mode=3", "--framework=5", "--model=" + m, "--soc_version=Ascend310P3",
         "--check_report=" + d + "/check_report.json"});
    add("converter_lite", Tool::ConverterLite,
        {"--fmk=ONNX", "--modelFile=" + m, "--outputFile=" + d + "/x"});
    runAdded();

    // Phase 2: runs with the case's own inputs, and the .om / .ms phase 1 wrote. The inputs are
    // bound by position to the graph's inputs as `kiln inspect --json` lists them.
    std::vector<std::string> feeds;
    if (!model.caseDir.empty()) {
      auto parsed = nlohmann::json::parse(readFile(dir / "inspect-json.out"), nullptr, false);
      std::vector<fs::path> files = inputFiles(model.caseDir / "test_data_set_0");
      if (parsed.is_object() && parsed["inputs"].is_array())
        for (size_t i = 0; i < files.size() && i < parsed["inputs"].size(); ++i)
          if (parsed["inputs"][i]["name"].is_string())
            feeds.push_back(parsed["inputs"][i]["name"].get<std::string>() + "=" +
                            files[i].string());
    }
    auto withFeeds = [&](std::vector<std::string> args) {
      for (const auto& f : feeds) {
        args.push_back("--input");
        args.push_back(f);
      }
      return args;
    };
    const std::string om = d + "/x.om", ms = d + "/x.ms";
    const bool haveOm = fs::exists(om), haveMs = fs::exists(ms);
    add("run", Tool::Kiln, withFeeds({"run", m, "--output-dir", d + "/run"}));
    add("compare", Tool::Kiln, withFeeds({"compare", m, haveMs ? ms : m}));
    if (haveOm) {
      add("atc-1-om", Tool::Atc, {"--mode=1", "--om=" + om, "--json=" + d + "/om.json"});
      add("atc-6", Tool::Atc, {"--mode=6", "--om=" + om});
      add("om-inspect", Tool::Kiln, {"inspect", om});
      add("om-convert", Tool::Kiln, {"convert", om, "--to", "onnx", "-o", d + "/from_om.onnx"});
      add("om-run", Tool::Kiln, withFeeds({"run", om, "--output-dir", d + "/run_om"}));
    }
    if (haveMs) {
      add("benchmark", Tool::Benchmark,
          {"--modelFile=" + ms, "--loopCount=1", "--warmUpLoopCount=0", "--numThreads=1"});
      add("ms-inspect", Tool::Kiln, {"inspect", ms});
      add("ms-inspect-json", Tool::Kiln, {"inspect", "--json", ms});
      add("ms-convert", Tool::Kiln, {"convert", ms, "--to", "onnx", "-o", d + "/from_ms.onnx"});
      add("ms-run", Tool::Kiln, withFeeds({"run", ms, "--output-dir", d + "/run_ms"}));
    }
    runAdded();
    return crashed;
  }

  // Scans models[next++] until none is left (`next` is shared by the worker processes).
  void scanQueue(const std::vector<Model>& models, std::atomic<size_t>& next) {
    while (true) {
      size_t i = next++;
      if (i >= models.size()) return;
      if (i > 0 && i % 250 == 0) // CI logs show the scan moving
        std::cout << "kiln_scan: " << i << " of " << models.size() << " models started"
                  << std::endl;
      const fs::path kept = options_.work / "models" / std::to_string(i);
      const fs::path dir = options_.scratch / "models" / std::to_string(i);
      const size_t firstRecord = records_.size();
      bool keep = scanModel(models[i], dir) || options_.keepAll;
      std::error_code ec;
      if (keep && dir != kept) {
        // The printed commands name the folder the files are kept in.
        fs::create_directories(kept.parent_path(), ec);
        fs::copy(dir, kept, fs::copy_options::recursive, ec);
        for (size_t r = firstRecord; r < records_.size(); ++r)
          for (size_t at; (at = records_[r].command.find(dir.string())) != std::string::npos;)
            records_[r].command.replace(at, dir.string().size(), kept.string());
      }
      if (!keep || dir != kept) fs::remove_all(dir, ec);
      if (keep)
        std::ofstream(kept / "MODEL") << models[i].id << "\n" << models[i].path.string() << "\n";
    }
  }

  std::vector<Record>& records() { return records_; }
  void stop() { runner_.stop(); }

 private:
  const Options& options_;
  StepRunner runner_;
  std::vector<Record> records_;
};

// Records cross from the worker processes to the main one as tab-separated lines.
void writeRecords(const std::vector<Record>& records, const fs::path& path) {
  std::ofstream out(path);
  for (const auto& r : records)
    out << r.step << '\t' << r.modelId << '\t' << static_cast<int>(r.result.outcome) << '\t'
        << r.result.code << '\t' << r.result.seconds << '\t' << r.result.slow << '\t'
        << r.result.firstErrorLine << '\t' << r.command << '\n';
}

void readRecords(const fs::path& path, std::vector<Record>& records) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    size_t pos = 0;
    for (int k = 0; k < 7; ++k) {
      size_t tab = line.find('\t', pos);
      if (tab == std::string::npos) break;
      f.push_back(line.substr(pos, tab - pos));
      pos = tab + 1;
    }
    if (f.size() != 7) continue;
    Record r;
    r.step = f[0];
    r.modelId = f[1];
    r.result.outcome = static_cast<Outcome>(std::atoi(f[2].c_str()));
    r.result.code = std::atoi(f[3].c_str());
    r.result.seconds = std::atof(f[4].c_str());
    r.result.slow = f[5] == "1";
    r.result.firstErrorLine = f[6];
    r.command = line.substr(pos);
    records.push_back(std::move(r));
  }
}

// Each worker is a single-threaded process (forking a multi-threaded one could copy a held lock
// into a run); they share the queue's counter through an anonymous shared mapping.
std::vector<Record> scanAll(const Options& options, const std::vector<Model>& models) {
  void* shared = mmap(nullptr, sizeof(std::atomic<size_t>), PROT_READ | PROT_WRITE,
                      MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) {
    std::perror("kiln_scan: mmap");
    std::exit(2);
  }
  auto* next = new (shared) std::atomic<size_t>(0);
  std::vector<pid_t> workers;
  for (int j = 0; j < options.jobs; ++j) {
    std::cout.flush();
    std::fflush(nullptr);
    pid_t pid = fork();
    if (pid == 0) {
      Scanner scanner(options);
      signal(SIGPIPE, SIG_IGN); // a runner that died is seen on its pipe's write, not as a signal
      scanner.scanQueue(models, *next);
      scanner.stop();
      writeRecords(scanner.records(), options.work / ("records." + std::to_string(j)));
      _exit(0);
    }
    if (pid < 0) {
      std::perror("kiln_scan: fork");
      std::exit(2);
    }
    workers.push_back(pid);
  }
  std::vector<Record> records;
  for (size_t j = 0; j < workers.size(); ++j) {
    int status = 0;
    waitpid(workers[j], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "kiln_scan: worker " << j << " failed (status " << status << ")\n";
      std::exit(2);
    }
    readRecords(options.work / ("records." + std::to_string(j)), records);
  }
  return records;
}

// The known list: "STEP MODEL_ID  # class, owner: what" per line; STEP may be "*".
std::map<std::pair<std::string, std::string>, std::string> readKnownList(const fs::path& path) {
  std::map<std::pair<std::string, std::string>, std::string> known;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::string note;
    if (auto hash = line.find('#'); hash != std::string::npos) {
      note = line.substr(hash + 1);
      line = line.substr(0, hash);
    }
    std::istringstream fields(line);
    std::string step, model;
    if (!(fields >> step >> model)) continue;
    note.erase(0, note.find_first_not_of(' '));
    known[{step, model}] = note.empty() ? "listed" : note;
  }
  return known;
}

// Every .onnx / .onnxtxt under the folder, sorted.
void addModelFiles(const fs::path& root, const fs::path& base, const std::string& set,
                   std::vector<Model>& models) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec);
       it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const fs::path& p = it->path();
    if (it->is_regular_file() && (p.extension() == ".onnx" || p.extension() == ".onnxtxt"))
      found.push_back(p);
  }
  std::sort(found.begin(), found.end());
  for (const auto& p : found)
    models.push_back({set + "/" + fs::relative(p, base).string(), p, {}});
}

// ONNX backend test cases: folders holding model.onnx (and test_data_set_*).
size_t addCases(const fs::path& root, const std::string& set, std::vector<Model>& models) {
  std::vector<fs::path> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(root, ec))
    if (fs::exists(entry.path() / "model.onnx")) found.push_back(entry.path());
  std::sort(found.begin(), found.end());
  for (const auto& c : found)
    models.push_back({set + "/" + c.filename().string(), c / "model.onnx", c});
  return found.size();
}

// What every run on a case depends on: its model and its first data set's inputs, byte for byte.
std::string caseBytes(const Model& model) {
  std::string bytes;
  std::vector<fs::path> files = inputFiles(model.caseDir / "test_data_set_0");
  files.insert(files.begin(), model.path);
  for (const auto& file : files) {
    std::error_code ec;
    const auto size = fs::file_size(file, ec);
    if (ec) continue;
    std::string contents = readFile(file, static_cast<size_t>(size));
    bytes += std::to_string(contents.size()) + ":" + contents;
  }
  return bytes;
}

// Drops the cases of models[from...] whose model and inputs are byte-identical to one of
// models[0, from): each step would run the same bytes again (528 of the 1,802 newer node tests
// repeat a libonnx-testdata case). Returns how many were dropped.
size_t dropRepeatedCases(std::vector<Model>& models, size_t from) {
  std::map<size_t, std::vector<size_t>> byHash; // hash of caseBytes -> indexes below `from`
  for (size_t i = 0; i < from; ++i)
    if (!models[i].caseDir.empty())
      byHash[std::hash<std::string>{}(caseBytes(models[i]))].push_back(i);
  size_t kept = from;
  for (size_t i = from; i < models.size(); ++i) {
    const std::string bytes = caseBytes(models[i]);
    bool repeated = false;
    if (auto it = byHash.find(std::hash<std::string>{}(bytes)); it != byHash.end())
      for (size_t j : it->second)
        repeated = repeated || caseBytes(models[j]) == bytes;
    if (!repeated) models[kept++] = std::move(models[i]);
  }
  const size_t dropped = models.size() - kept;
  models.resize(kept);
  return dropped;
}

int usage() {
  std::cerr << "usage: kiln_scan --kiln K --atc A --converter-lite C --benchmark B --source DIR "
               "--work DIR [--scratch DIR] [--testdata DIR] [--new-node-tests DIR] [--known FILE] "
               "[--jobs N] [--timeout SECONDS] [--only SUBSTRING] [--steps a,b] [--keep-all] "
               "[--exec] [--shard K/N]\n";
  return 2;
}

} // namespace

int main(int argc, char** argv) {
  Options options;
  options.testData = "/usr/share/libonnx-testdata/data";
  options.newNodeTests = "/work/shared/onnx-node-tests/node";
  if (const char* env = std::getenv("KILN_SCAN_NEW_NODE_TESTS")) options.newNodeTests = env;
  if (const char* env = std::getenv("KILN_SCAN_TIMEOUT")) options.timeoutSeconds = std::atof(env);
  if (const char* env = std::getenv("KILN_SCAN_JOBS")) options.jobs = std::atoi(env);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--kiln")
      options.tools.kiln = value();
    else if (a == "--atc")
      options.tools.atc = value();
    else if (a == "--converter-lite")
      options.tools.converterLite = value();
    else if (a == "--benchmark")
      options.tools.benchmark = value();
    else if (a == "--source")
      options.source = value();
    else if (a == "--work")
      options.work = value();
    else if (a == "--scratch")
      options.scratch = value();
    else if (a == "--testdata")
      options.testData = value();
    else if (a == "--new-node-tests")
      options.newNodeTests = value();
    else if (a == "--known")
      options.knownList = value();
    else if (a == "--jobs")
      options.jobs = std::max(1, std::atoi(value().c_str()));
    else if (a == "--timeout")
      options.timeoutSeconds = std::atof(value().c_str());
    else if (a == "--only")
      options.only = value();
    else if (a == "--keep-all")
      options.keepAll = true;
    else if (a == "--exec")
      options.exec = true;
    else if (a == "--shard") { // K/N, K in 1..N
      const std::string shard = value();
      const size_t slash = shard.find('/');
      const long k = std::atol(shard.c_str());
      const long n = slash == std::string::npos ? 0 : std::atol(shard.c_str() + slash + 1);
      if (k < 1 || n < 1 || k > n) return usage();
      options.shardIndex = static_cast<size_t>(k - 1);
      options.shardCount = static_cast<size_t>(n);
    } else if (a == "--steps") {
      std::istringstream list(value());
      std::string s;
      while (std::getline(list, s, ','))
        options.onlySteps.insert(s);
    } else
      return usage();
  }
  if (options.tools.kiln.empty() || options.tools.atc.empty() ||
      options.tools.converterLite.empty() || options.tools.benchmark.empty() ||
      options.source.empty() || options.work.empty())
    return usage();
  for (const auto& s : options.onlySteps)
    if (std::none_of(stepTable().begin(), stepTable().end(),
                     [&](const auto& row) { return row.first == s; })) {
      std::cerr << "kiln_scan: no step '" << s << "'\n";
      return 2;
    }
  // kiln's own atc is under test, not a CANN atc on PATH. The library thread settings the tools
  // would re-execute themselves to add (tools/library_threads.cpp) are given up front.
  setenv("KILN_CANN_ATC", "off", 1);
  setenv("OMP_WAIT_POLICY", "PASSIVE", 0);
  setenv("OPENBLAS_NUM_THREADS", "1", 0);

  std::vector<Model> models;
  std::vector<std::string> skipped;
  std::map<std::string, size_t> perSet;
  auto count = [&](const std::string& set, size_t before) { perSet[set] = models.size() - before; };
  size_t before = models.size();
  addModelFiles(options.source / "tests", options.source, "src", models);
  addModelFiles(options.source / "samples", options.source, "src", models);
  count("tests/ and samples/ (.onnx, .onnxtxt)", before);
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple", "real"}) {
    fs::path dir = options.testData / suite;
    before = models.size();
    if (!fs::is_directory(dir)) {
      skipped.push_back(std::string("libonnx-testdata ") + suite + ": " + dir.string() +
                        " is absent (apt-get install libonnx-testdata)");
      continue;
    }
    if (addCases(dir, std::string("onnx-testdata/") + suite, models) == 0)
      skipped.push_back(std::string("libonnx-testdata ") + suite +
                        ": no case holds a model.onnx (Debian ships only the data.json "
                        "download manifests)");
    else
      count(std::string("libonnx-testdata ") + suite, before);
  }
  before = models.size();
  if (fs::is_directory(options.newNodeTests) &&
      addCases(options.newNodeTests, "onnx-node-tests", models) > 0) {
    const size_t listed = models.size() - before;
    const size_t repeated = dropRepeatedCases(models, before);
    count("newer ONNX node tests (" + options.newNodeTests.string() + "; " +
              std::to_string(listed) + " cases, " + std::to_string(repeated) +
              " left out as byte-identical to a libonnx-testdata case, model and inputs)",
          before);
  } else
    skipped.push_back("newer ONNX node tests: " + options.newNodeTests.string() +
                      " is absent (set KILN_SCAN_NEW_NODE_TESTS to a folder of node test cases)");
  if (!options.only.empty())
    models.erase(std::remove_if(
                     models.begin(), models.end(),
                     [&](const Model& m) { return m.id.find(options.only) == std::string::npos; }),
                 models.end());
  const size_t beforeShard = models.size();
  if (options.shardCount > 1) {
    size_t kept = 0;
    for (size_t i = 0; i < models.size(); ++i)
      if (i % options.shardCount == options.shardIndex) models[kept++] = std::move(models[i]);
    models.resize(kept);
  }
  std::set<std::string> scannedIds;
  for (const auto& m : models)
    scannedIds.insert(m.id);

  std::error_code ec;
  fs::remove_all(options.work, ec);
  fs::create_directories(options.work);
  fs::path scratchRoot; // this run's own folder under --scratch, removed at the end
  if (!options.scratch.empty()) {
    std::string pattern = (options.scratch / "kiln_scan.XXXXXX").string();
    if (mkdtemp(pattern.data()))
      scratchRoot = pattern;
    else
      std::cout << "kiln_scan: cannot make a folder under " << options.scratch.string() << " ("
                << std::strerror(errno) << "): the scratch folders go under --work\n";
  }
  options.scratch = scratchRoot.empty() ? options.work : scratchRoot;
  auto known =
      options.knownList.empty() ? decltype(readKnownList({})){} : readKnownList(options.knownList);

  std::cout << "kiln_scan: " << models.size() << " models";
  if (options.shardCount > 1)
    std::cout << " (shard " << options.shardIndex + 1 << " of " << options.shardCount << ", of "
              << beforeShard << " models)";
  std::cout << ", " << options.jobs << " jobs, timeout " << options.timeoutSeconds
            << " s per run\n";
  for (const auto& [set, n] : perSet)
    std::cout << "  " << n << " from " << set << "\n";
  for (const auto& s : skipped)
    std::cout << "  skipped: " << s << "\n";
  std::cout.flush();

  const auto start = std::chrono::steady_clock::now();
  // What the libraries build on first use (ONNX's schema registry, protobuf descriptors, oneDNN's
  // kernels), built once here rather than in every model's child.
  kiln::warmUpBeforeForking();
  resetLogging(); // records the pristine logger state before any tool runs
  std::vector<Record> records = scanAll(options, models);
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!scratchRoot.empty()) fs::remove_all(scratchRoot, ec);

  struct Row {
    size_t runs = 0, ok = 0, coded = 0, uncoded = 0, signals = 0, hangs = 0, known = 0, slow = 0;
    double seconds = 0, maxSeconds = 0;
  };
  std::map<std::string, Row> rows;
  Row total;
  std::vector<const Record*> crashes, uncoded, slow;
  std::set<std::pair<std::string, std::string>> knownSeen;
  for (auto& r : records) {
    Row& row = rows[r.step];
    for (Row* x : {&row, &total}) {
      ++x->runs;
      x->seconds += r.result.seconds;
      x->maxSeconds = std::max(x->maxSeconds, r.result.seconds);
      if (r.result.slow) ++x->slow;
    }
    if (r.result.slow) slow.push_back(&r);
    switch (r.result.outcome) {
    case Outcome::Ok:
      ++row.ok, ++total.ok;
      break;
    case Outcome::Coded:
      ++row.coded, ++total.coded;
      break;
    case Outcome::Uncoded:
      ++row.uncoded, ++total.uncoded;
      uncoded.push_back(&r);
      break;
    case Outcome::Signal:
    case Outcome::Hang: {
      auto it = known.find({r.step, r.modelId});
      if (it == known.end()) it = known.find({"*", r.modelId});
      if (it != known.end()) {
        r.known = it->second;
        knownSeen.insert(it->first);
        ++row.known, ++total.known;
      }
      if (r.result.outcome == Outcome::Signal)
        ++row.signals, ++total.signals;
      else
        ++row.hangs, ++total.hangs;
      crashes.push_back(&r);
      break;
    }
    case Outcome::NotRun:
      break;
    }
  }

  std::sort(crashes.begin(), crashes.end(), [](const Record* a, const Record* b) {
    return std::tie(a->modelId, a->step) < std::tie(b->modelId, b->step);
  });
  for (const Record* r : crashes)
    std::cout << (r->result.outcome == Outcome::Hang ? "HANG"
                                                     : "SIGNAL " + std::to_string(r->result.code) +
                                                           " (" + strsignal(r->result.code) + ")")
              << " " << r->step << " " << r->modelId
              << (r->known.empty() ? "" : "  [known: " + r->known + "]")
              << "\n  repro: " << r->command << "\n";
  const size_t uncodedShown = std::min<size_t>(uncoded.size(), 40);
  for (size_t i = 0; i < uncodedShown; ++i)
    std::cout << "UNCODED exit " << uncoded[i]->result.code << " " << uncoded[i]->step << " "
              << uncoded[i]->modelId << ": " << uncoded[i]->result.firstErrorLine
              << "\n  repro: " << uncoded[i]->command << "\n";
  if (uncoded.size() > uncodedShown)
    std::cout << "(" << uncoded.size() - uncodedShown << " more failures without a coded line)\n";
  for (const Record* r : slow)
    std::cout << "SLOW " << r->step << " " << r->modelId << ": " << r->result.seconds
              << " s (past the " << options.timeoutSeconds << " s deadline, finished on retry)\n";
  // An entry for a model this run did not scan (another shard's, or left out by --only) says
  // nothing.
  for (const auto& [key, note] : known)
    if (!knownSeen.count(key) && scannedIds.count(key.second))
      std::cout << "NOTE known entry no longer crashes, remove it: " << key.first << " "
                << key.second << "\n";

  std::printf("\n%-16s %-40s %6s %6s %6s %8s %7s %5s %5s %5s %8s %6s\n", "step", "command", "runs",
              "ok", "coded", "uncoded", "signal", "hang", "known", "slow", "total s", "max s");
  for (const auto& [name, command] : stepTable()) {
    const Row& r = rows[name];
    std::printf("%-16s %-40s %6zu %6zu %6zu %8zu %7zu %5zu %5zu %5zu %8.1f %6.2f\n", name.c_str(),
                command.c_str(), r.runs, r.ok, r.coded, r.uncoded, r.signals, r.hangs, r.known,
                r.slow, r.seconds, r.maxSeconds);
  }
  std::printf("%-16s %-40s %6zu %6zu %6zu %8zu %7zu %5zu %5zu %5zu %8.1f %6.2f\n", "all", "",
              total.runs, total.ok, total.coded, total.uncoded, total.signals, total.hangs,
              total.known, total.slow, total.seconds, total.maxSeconds);
  const size_t unlisted = total.signals + total.hangs - total.known;
  std::printf("kiln_scan: %zu models, %zu runs in %.0f s: %zu signals, %zu hangs (%zu of them on "
              "the known list), %zu failures without a coded line\n",
              models.size(), total.runs, wall, total.signals, total.hangs, total.known,
              total.uncoded);
  return unlisted > 0 ? 1 : 0;
}
