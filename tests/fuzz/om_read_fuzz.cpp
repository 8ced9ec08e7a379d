// libFuzzer entry point: arbitrary bytes through the .om reader (and the dumps of `kiln inspect`
// and atc --mode=1/6) must give a Status, never a crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "kiln/backends/om.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  // The input is the only file of a private folder: FileConstant locations resolve there, so the
  // reader finds no weight file of the machine by a relative name.
  std::string path = kiln::fuzz::writePrivateFile("input.om", data, size);
  auto model = kiln::readOmBuffer(data, size, path);
  if (model) {
    kiln::fuzz::touchInitializers(*model);
    kiln::fuzz::runIfSmall(*model);
  }
  auto json = kiln::omToJson(path);
  auto info = kiln::omInfoText(path);
  auto dump = kiln::dumpOmFile(path);
  auto summary = kiln::summarizeOmFile(path);
  (void)json;
  (void)info;
  (void)dump;
  (void)summary;
  return 0;
}
