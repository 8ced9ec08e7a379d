// libFuzzer entry point for the whole conversion: bytes -> ONNX import -> the conversion pipeline
// for each target -> .ms / .om written in memory -> read back -> a small model run. Every stage
// must give a Status or a result, never a crash.
#include <cstddef>
#include <cstdint>

#include "fuzz_support.h"
#include "kiln/backends/target.h"
#include "kiln/pipelines/conversion.h"

namespace {

void convertAndReadBack(const uint8_t* data, size_t size, const char* targetName) {
  // baseDir "" refuses external data: the fuzzer cannot make the importer open files.
  auto model = kiln::importOnnxBytes(data, size, nullptr, "fuzz-input.onnx", "");
  if (!model) return;
  kiln::ConversionOptions options;
  options.target = targetName;
  if (!kiln::runConversionPipeline(*model, options)) return;
  const kiln::TargetHooks* target = kiln::findTarget(targetName);
  if (!target) std::abort();
  // Lowers, writes the artifact in memory and reads it back with the target's reader.
  auto readBack = target->roundTrip(model.take(), kiln::RoundTripOptions{});
  if (readBack) kiln::fuzz::runIfSmall(*readBack);
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::fuzz::quietLogs();
  // Conversion of a large model is slow, not wrong: keep the fuzzer on many small inputs.
  if (size > 64 * 1024) return 0;
  convertAndReadBack(data, size, "ms");
  convertAndReadBack(data, size, "om");
  return 0;
}
