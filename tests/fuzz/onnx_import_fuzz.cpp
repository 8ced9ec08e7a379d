// libFuzzer entry point: arbitrary bytes through the ONNX importer must give a Status, never a
// crash.
#include <cstddef>
#include <cstdint>

#include <spdlog/spdlog.h>

#include "fuzz_support.h"
#include "kiln/frontend/onnx.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Warnings about carried-through fields would flood the fuzzer's output.
  static const bool quiet = [] {
    spdlog::set_level(spdlog::level::off);
    return true;
  }();
  (void)quiet;
  // No owner: the input outlives the import. baseDir "" refuses external data, so the fuzzer
  // cannot make the importer open files.
  auto model = kiln::importOnnxBytes(data, size, nullptr, "fuzz-input", "");
  if (model) {
    kiln::fuzz::touchInitializers(*model);
  }
  return 0;
}
