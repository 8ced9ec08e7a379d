// norm ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass), and training-mode Dropout's draws (ops/norm.h).
#include "ops/norm.h"

#include <random>

#include "ops/precision.h"

namespace kiln::ops {

std::vector<double> dropoutDraws(int64_t seed, uint64_t count) {
  std::mt19937 gen(static_cast<uint32_t>(seed));
  std::vector<double> draws(count);
  for (double& u : draws) {
    const uint32_t a = gen() >> 5, b = gen() >> 6;
    u = (a * 67108864.0 + b) / 9007199254740992.0;
  }
  return draws;
}

KILN_OP_FP16("BatchNormalization", kFp16White);
KILN_OP_FP16("InstanceNormalization", kFp16BlockByDefault);
KILN_OP_FP16("LayerNormalization", kFp16BlockByDefault);

} // namespace kiln::ops
