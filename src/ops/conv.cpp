// conv ops: the decisions every consumer shares (auto_pad SAME padding, how each takes FP16
// conversion, which window attributes are possible).
#include <algorithm>

#include <fmt/format.h>

#include "ops/conv.h"
#include "ops/precision.h"
#include "ops/validate.h"

namespace kiln::ops {

KILN_OP_FP16("Conv", kFp16White | kFp16Cube);
KILN_OP_FP16("ConvTranspose", kFp16White | kFp16Cube);

AxisPads samePadding(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, bool upper) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + (kernel - 1) * dilation + 1 - in);
  const int64_t small = total / 2;
  const int64_t begin = upper ? small : total - small;
  return {begin, total - begin};
}

std::string windowReason(const NodeFacts& node, size_t dataInput, std::optional<size_t> weightInput,
                         bool hasGroup) {
  // Spatial rank: from the data input, else the weight, else whichever attribute names it.
  std::optional<int64_t> spatial;
  size_t rankFrom = dataInput;
  if (auto r = node.inputRank(dataInput)) {
    spatial = *r - 2;
  } else if (weightInput) {
    if (auto w = node.inputRank(*weightInput)) {
      spatial = *w - 2;
      rankFrom = *weightInput;
    }
  }
  if (spatial && *spatial < 1)
    return fmt::format("input #{} has rank {}, but {} needs a batch, a channel and at least one "
                       "spatial axis",
                       rankFrom, *spatial + 2, node.opType());
  for (const char* name : {"kernel_shape", "strides", "dilations"}) {
    std::optional<std::vector<int64_t>> values = node.intsAttr(name);
    if (!values) continue;
    for (size_t i = 0; i < values->size(); ++i)
      if ((*values)[i] < 1)
        return fmt::format("attribute '{}' has {} at axis {}; it must be >= 1", name, (*values)[i],
                           i);
    if (!spatial) spatial = static_cast<int64_t>(values->size());
    if (static_cast<int64_t>(values->size()) != *spatial)
      return fmt::format("attribute '{}' has {} entries for {} spatial axes", name, values->size(),
                         *spatial);
  }
  if (std::optional<std::vector<int64_t>> pads = node.intsAttr("pads")) {
    for (size_t i = 0; i < pads->size(); ++i)
      if ((*pads)[i] < 0)
        return fmt::format("attribute 'pads' has {} at position {}; pads must be >= 0", (*pads)[i],
                           i);
    if (pads->size() % 2 != 0 || (spatial && static_cast<int64_t>(pads->size()) != 2 * *spatial))
      return fmt::format("attribute 'pads' has {} entries; it needs 2 per spatial axis{}",
                         pads->size(),
                         spatial ? fmt::format(" ({} for {})", 2 * *spatial, *spatial) : "");
  }
  if (std::optional<std::string> autoPad = node.stringAttr("auto_pad"))
    if (*autoPad != "NOTSET" && *autoPad != "SAME_UPPER" && *autoPad != "SAME_LOWER" &&
        *autoPad != "VALID")
      return fmt::format("attribute 'auto_pad' is '{}'; it must be NOTSET, SAME_UPPER, SAME_LOWER "
                         "or VALID",
                         *autoPad);
  // Whether the groups fit the input's channels is a shape question (an --input-shape with the
  // wrong channel count), which shapeConflicts answers as K3002 naming both shapes.
  if (hasGroup)
    if (std::optional<int64_t> group = node.intAttr("group"); group && *group < 1)
      return fmt::format("attribute 'group' is {}; it must be >= 1", *group);
  return "";
}

namespace {

std::string convCheck(const NodeFacts& node) { return windowReason(node, 0, 1, true); }
std::string qlinearConvCheck(const NodeFacts& node) { return windowReason(node, 0, 3, true); }

} // namespace

KILN_OP_CHECK("Conv", convCheck);
KILN_OP_CHECK("ConvTranspose", convCheck);
KILN_OP_CHECK("ConvInteger", convCheck);
KILN_OP_CHECK("QLinearConv", qlinearConvCheck);
KILN_OP_CHECK("DeformConv", convCheck);

} // namespace kiln::ops
