// libFuzzer entry point: arbitrary text as an ATC --insert_op_conf (AIPP) file must parse or give
// a coded Status, never a crash; a valid configuration is inserted into a small model and run.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_support.h"
#include "kiln/backends/aipp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  std::string text(reinterpret_cast<const char*>(data), size);
  auto config = kiln::parseAippConfigText(text, "fuzz-aipp.cfg");
  if (!config) return 0;
  kiln::Model model = kiln::fuzz::fixtureModel();
  kiln::AippContext context;
  // The last byte picks the --input_format the insertion is checked under.
  static const char* formats[] = {"", "NCHW", "NHWC", "ND"};
  if (size) context.inputFormat = formats[data[size - 1] % 4];
  if (!kiln::insertAipp(model, *config, context).isOk()) return 0;
  // The source image size comes from the file: run only small ones.
  kiln::fuzz::runIfSmall(model, 1 << 16);
  return 0;
}
