// The checks the .ms and .om rule tables share (kiln/backends/lowering.h).
#include "kiln/backends/lowering.h"

#include <fmt/format.h>

#include "kiln/support/checked_math.h"
#include "kiln/support/display.h"
#include "ops/attributes.h"

namespace kiln::lowering {

std::string nodeLabel(const Node& node, size_t position) {
  const std::string opType = displayName(node.opType());
  if (!node.name().empty()) return fmt::format("node '{}' ({})", displayName(node.name()), opType);
  for (const Value* out : node.outputs())
    if (out && !out->name().empty())
      return fmt::format("node producing '{}' ({})", displayName(out->name()), opType);
  return fmt::format("node #{} ({})", position, opType);
}

std::string commonReason(const Node& node, const OpContext& context, bool hasRule) {
  if (!node.domain().empty() && node.domain() != "ai.onnx" && !hasRule)
    return fmt::format("op {}::{} is not an ONNX standard op", node.domain(), node.opType());
  if (std::string reason = ops::attributeKindReason(node, context.opset); !reason.empty())
    return reason;
  if (!hasRule) return fmt::format("no lowering for ONNX {}", node.opType());
  // Both writers size tensors from these shapes (tensor descs, buffer sizes, in elements and
  // bytes): one that cannot exist would be written with a wrapped size.
  for (const auto* values : {&node.inputs(), &node.outputs()})
    for (const Value* v : *values) {
      if (!v || v->type().kind != TypeKind::Tensor || !v->shape().hasRank()) continue;
      std::vector<int64_t> known;
      for (const Dim& d : v->shape().dims())
        if (d.isStatic()) known.push_back(d.value());
      auto extent = checkTensorExtent(known, static_cast<unsigned>(dtypeBits(v->dtype())),
                                      dtypeName(v->dtype()), ErrorCode::SizeOverflow,
                                      fmt::format("'{}' {}", v->name(), v->shape().toString()));
      if (!extent) return extent.status().message();
    }
  // If and Loop rules lower their subgraphs themselves (and check every node in them).
  const bool ownsSubgraphs = node.opType() == "If" || node.opType() == "Loop";
  if (!node.subgraphs().empty() && !ownsSubgraphs)
    return fmt::format("{} with subgraphs", node.opType());
  return {};
}

} // namespace kiln::lowering
