// libFuzzer entry point: arbitrary bytes as a .npy file must parse or give a coded Status, never a
// crash; a file that parses is summarised (kiln tensor show), written back and must read back as
// the same tensor.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "fuzz_support.h"
#include "kiln/tensor_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto tensor = kiln::parseNpy(bytes, "fuzz.npy");
  if (!tensor) {
    if (tensor.status().code() != kiln::ErrorCode::ConformanceDataBad) std::abort();
    return 0;
  }
  (void)kiln::tensorSummaryText({"", *tensor}, 8);
  const std::string written = kiln::npyBytes(*tensor);
  auto again = kiln::parseNpy(written, "written.npy");
  if (!again || again->dtype() != tensor->dtype() || again->dims() != tensor->dims() ||
      again->byteSize() != tensor->byteSize() ||
      (tensor->byteSize() > 0 &&
       std::memcmp(again->data(), tensor->data(), tensor->byteSize()) != 0))
    std::abort();
  return 0;
}
