// libFuzzer entry point: arbitrary text as an ATC --keep_dtype file must parse or give a coded
// Status, never a crash; parsed entries are checked against a small model.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "kiln/passes/keep_dtype.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  static const kiln::Model model = kiln::fuzz::fixtureModel();
  std::string text(reinterpret_cast<const char*>(data), size);
  auto entries = kiln::parseKeepDtypeText(text, "fuzz.keep");
  if (entries) {
    auto check = kiln::checkKeepDtypeEntries(*model.graph, *entries, "fuzz.keep");
    (void)check;
  }
  return 0;
}
