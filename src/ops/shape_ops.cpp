// shape ops ops: the decisions every consumer shares; here, how each takes FP16 conversion
// (read by the convert-fp16 pass).
#include <fmt/format.h>

#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("ConstantOfShape", kFp16Never);
KILN_OP_FP16("EyeLike", kFp16Never);
KILN_OP_FP16("Range", kFp16BlockByDefault | kFp16Never);

namespace {

std::string axisCheck(const NodeFacts& node) { return axisAttrReason(node, "axis"); }
std::string flattenCheck(const NodeFacts& node) {
  return axisAttrReason(node, "axis", 0, /*inclusiveEnd=*/true);
}
std::string oneHotCheck(const NodeFacts& node) {
  return axisAttrReason(node, "axis", 0, false, /*extraRank=*/1);
}
std::string squeezeCheck(const NodeFacts& node) { return axesAttrReason(node, "axes"); }
std::string unsqueezeCheck(const NodeFacts& node) {
  return axesAttrReason(node, "axes", 0, /*extraRank=*/-1);
}
std::string blockCheck(const NodeFacts& node) { return atLeastReason(node, "blocksize", 1); }
std::string reverseSequenceCheck(const NodeFacts& node) {
  if (std::string r = axisAttrReason(node, "batch_axis"); !r.empty()) return r;
  return axisAttrReason(node, "time_axis");
}
// perm must be a permutation of the input's axes.
std::string transposeCheck(const NodeFacts& node) {
  std::optional<std::vector<int64_t>> perm = node.intsAttr("perm");
  if (!perm) return "";
  const int64_t n = static_cast<int64_t>(perm->size());
  if (std::optional<int64_t> rank = node.inputRank(0); rank && *rank != n)
    return fmt::format("attribute 'perm' has {} entries for the rank-{} input", n, *rank);
  std::vector<bool> seen(perm->size(), false);
  for (int64_t axis : *perm) {
    if (axis < 0 || axis >= n || seen[static_cast<size_t>(axis)])
      return fmt::format("attribute 'perm' is not a permutation of 0..{} (entry {})", n - 1, axis);
    seen[static_cast<size_t>(axis)] = true;
  }
  return "";
}

} // namespace

KILN_OP_CHECK("Concat", axisCheck);
KILN_OP_CHECK("Gather", axisCheck);
KILN_OP_CHECK("GatherElements", axisCheck);
KILN_OP_CHECK("ScatterElements", axisCheck);
KILN_OP_CHECK("Split", axisCheck);
KILN_OP_CHECK("Compress", axisCheck);
KILN_OP_CHECK("Unique", axisCheck);
KILN_OP_CHECK("Flatten", flattenCheck);
KILN_OP_CHECK("OneHot", oneHotCheck);
KILN_OP_CHECK("Squeeze", squeezeCheck);
KILN_OP_CHECK("Unsqueeze", unsqueezeCheck);
KILN_OP_CHECK("DepthToSpace", blockCheck);
KILN_OP_CHECK("SpaceToDepth", blockCheck);
KILN_OP_CHECK("ReverseSequence", reverseSequenceCheck);
KILN_OP_CHECK("Transpose", transposeCheck);

} // namespace kiln::ops
