// `benchmark`: MindSpore Lite benchmark drop-in (flags → BenchmarkOptions → runBenchmark).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <malloc.h>

#include "kiln/backends/ms_benchmark.h"
#include "kiln/support/display.h"
#include "kiln/support/exception_status.h"
#include "kiln/support/version.h"

namespace {

std::string modelFile; // for the failure line, once the flags named it

// benchmark ends every failure with RET_ERROR (-1; the shell sees 255): kiln's coded line on
// stderr, benchmark's failure line on stdout.
int fail(kiln::Status status) {
  if (status.peerCode().empty()) status = status.withPeerCode("-1");
  std::fprintf(stderr, "benchmark: error %s\n", status.toString().c_str());
  std::cout << "Run Benchmark "
            << (modelFile.empty()
                    ? std::string()
                    : kiln::displayName(std::filesystem::path(modelFile).filename().string()) + " ")
            << "Failed : -1\n";
  return -1;
}

int runTool(int argc, char** argv) {
  if (kiln::asksForVersion(argc, argv)) {
    std::cout << kiln::versionBanner("benchmark");
    return 0;
  }
  // Timed loops allocate and free the same large tensors each run; keeping them in the heap
  // keeps page faults out of the measured time (as for `kiln run`).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, -1);
  std::vector<std::string> args(argv + 1, argv + argc);
  bool wantsHelp = false;
  auto options = kiln::parseBenchmarkArgs(args, wantsHelp);
  if (wantsHelp) {
    std::cout << kiln::benchmarkUsage();
    return 0;
  }
  if (options)
    for (const std::string& note : options->notes)
      std::cerr << "benchmark: note: " << kiln::displayLine(note) << "\n";
  if (options) modelFile = options->modelFile;
  kiln::Status status = options ? kiln::runBenchmark(*options, std::cout) : options.status();
  std::cout.flush();
  if (status) return 0;
  return fail(status);
}

} // namespace

// The last resort: an exception the library let through still ends in benchmark's failure line and
// one coded line, not an abort.
int main(int argc, char** argv) {
  try {
    return runTool(argc, argv);
  } catch (...) {
    std::cout.flush();
    return fail(kiln::statusFromCurrentException());
  }
}
