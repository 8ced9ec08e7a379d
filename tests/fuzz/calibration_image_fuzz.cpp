// libFuzzer entry point: arbitrary bytes as a calibration image (converter_lite input_type=IMAGE)
// must decode and preprocess into the input's tensor or give a coded Status, never crash or
// allocate without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "fuzz_support.h"
#include "kiln/quantize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // The last byte picks the preprocessing, so every path (channel orders, resize methods, crop)
  // sees hostile pixels.
  const uint8_t pick = size ? data[size - 1] : 0; // decoders ignore trailing bytes
  kiln::ImagePreprocess prep;
  prep.toFormat = pick % 3 == 0 ? "GRAY" : pick % 3 == 1 ? "RGB" : "BGR";
  const char* methods[] = {"LINEAR", "NEAREST", "CUBIC"};
  prep.resizeMethod = methods[(pick / 3) % 3];
  prep.resizeWidth = prep.resizeHeight = (pick & 0x10) ? 12 : 0;
  prep.cropWidth = prep.cropHeight = (pick & 0x20) ? 8 : 0;
  prep.mean = {127.5f};
  prep.std = {64.0f};
  const int64_t channels = prep.toFormat == "GRAY" ? 1 : 3;
  const auto input = kiln::ValueType::tensor(
      kiln::DType::Float32, kiln::Shape({kiln::Dim::known(1), kiln::Dim::known(channels),
                                         kiln::Dim::known(8), kiln::Dim::known(8)}));
  auto tensor = kiln::calibrationImageFromBytes(bytes, "fuzz.png", input, prep);
  if (!tensor && tensor.status().code() != kiln::ErrorCode::BadFlag) std::abort();
  if (tensor && tensor->elementCount() != uint64_t(channels * 64)) std::abort();
  return 0;
}
