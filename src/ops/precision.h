// How an ONNX op takes FP16 conversion (ATC precision modes): registered beside the op's other
// shared decisions in src/ops/<family>.cpp, read by the convert-fp16 pass.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::ops {

enum Fp16Trait : uint8_t {
  kFp16BlockByDefault = 1, // kept in fp32 by default: large ranges or long accumulations
  kFp16White = 2,          // allow_mix_precision may always run it in fp16
  kFp16Cube = 4,           // a cube-unit op: allow_fp32_to_fp16 prefers fp16 for it
  kFp16Never = 8,          // never in fp16: float inputs are indices/sizes, or the output type is
                           // set by an attribute; fp16 consumers get a Cast
};

// Registers `traits` for ai.onnx `op` (static initialization); a second registration aborts.
bool registerFp16Traits(const char* op, uint8_t traits);
// The traits of `op` (0 when none are registered).
uint8_t fp16Traits(const std::string& op);

} // namespace kiln::ops

#define KILN_OPS_CONCAT_INNER(a, b) a##b
#define KILN_OPS_CONCAT(a, b) KILN_OPS_CONCAT_INNER(a, b)
#define KILN_OP_FP16(op, traits)                                                                   \
  static const bool KILN_OPS_CONCAT(kilnFp16Registered_, __LINE__) =                               \
      ::kiln::ops::registerFp16Traits(op, traits)
