// norm ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass), and training-mode Dropout's draws (ops/norm.h).
#include "ops/norm.h"

#include <random>

#include <fmt/format.h>

#include "ops/precision.h"
#include "ops/validate.h"

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

namespace {

// Out-of-range axes index dims out of bounds in ONNX's LayerNormalization inference.
std::string axisCheck(const NodeFacts& node) { return axisAttrReason(node, "axis"); }
std::string groupNormCheck(const NodeFacts& node) {
  if (std::string r = atLeastReason(node, "num_groups", 1); !r.empty()) return r;
  std::optional<int64_t> groups = node.intAttr("num_groups");
  std::optional<int64_t> channels = node.inputDim(0, 1);
  if (groups && channels && *channels % *groups != 0)
    return fmt::format("attribute 'num_groups' is {}, which does not divide the input's {} "
                       "channels",
                       *groups, *channels);
  return "";
}
std::string lrnCheck(const NodeFacts& node) { return atLeastReason(node, "size", 1); }

} // namespace

KILN_OP_CHECK("LayerNormalization", axisCheck);
KILN_OP_CHECK("RMSNormalization", axisCheck);
KILN_OP_CHECK("LpNormalization", axisCheck);
KILN_OP_CHECK("GroupNormalization", groupNormCheck);
KILN_OP_CHECK("LRN", lrnCheck);

} // namespace kiln::ops
