// libFuzzer entry point: arbitrary text as a converter_lite --configFile must parse or give a
// coded Status, never a crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "kiln/backends/converter_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = kiln::parseConverterConfigText(text, "fuzz.cfg");
  if (config) {
    kiln::WeightQuantOptions quant;
    (void)kiln::weightQuantOptionsFor(*config, quant);
    auto notes = kiln::ignoredConfigNotes(*config);
    (void)notes;
  }
  // The rewrite `kiln sensitivity` applies to a user's config, then the rewritten text parsed
  // again.
  std::string rewritten = kiln::withSkipQuantNodes(text, {"conv1", "matmul1"}, 8);
  auto again = kiln::parseConverterConfigText(rewritten, "fuzz-rewritten.cfg");
  (void)again;
  return 0;
}
