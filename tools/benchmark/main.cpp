// `benchmark`: MindSpore Lite benchmark drop-in (flags → BenchmarkOptions → runBenchmark).
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <malloc.h>

#include "kiln/backends/ms_benchmark.h"
#include "kiln/support/version.h"

int main(int argc, char** argv) {
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
      std::cerr << "benchmark: note: " << note << "\n";
  kiln::Status status = options ? kiln::runBenchmark(*options, std::cout) : options.status();
  std::cout.flush();
  if (status) return 0;
  // benchmark ends every failure with RET_ERROR (-1; the shell sees 255).
  if (status.peerCode().empty()) status = status.withPeerCode("-1");
  std::fprintf(stderr, "benchmark: error %s\n", status.toString().c_str());
  std::cout << "Run Benchmark "
            << (options ? std::filesystem::path(options->modelFile).filename().string() + " "
                        : std::string())
            << "Failed : -1\n";
  return -1;
}
