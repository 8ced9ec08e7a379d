// libFuzzer entry point: arbitrary bytes through the .ms reader (and `kiln inspect`'s .ms dumps)
// must give a Status, never a crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "kiln/backends/ms.h"
#include "kiln/backends/ms_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  // baseDir "" refuses a .msw side file, so the reader opens no file.
  auto model = kiln::readMsBuffer(data, size, nullptr, "fuzz-input.ms", "");
  if (model) {
    kiln::fuzz::touchInitializers(*model);
    kiln::fuzz::runIfSmall(*model);
  }
  auto text = kiln::msBufferToText(data, size);
  (void)text;
  // `kiln inspect X.ms` reads a path: the input as the only file of the private folder.
  std::string path = kiln::fuzz::writePrivateFile("input.ms", data, size);
  auto dump = kiln::dumpMsFile(path);
  auto summary = kiln::summarizeMsFile(path);
  (void)dump;
  (void)summary;
  return 0;
}
