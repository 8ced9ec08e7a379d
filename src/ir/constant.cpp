// Constant node values: one reading shared by the executor's kernel and the backends' lowerings.
#include "kiln/ir/constant.h"

namespace kiln {

std::optional<Tensor> constantNodeValue(const Node& node) {
  auto length = [](size_t n) { return std::vector<int64_t>{static_cast<int64_t>(n)}; };
  if (const Attribute* a = node.attribute("value"); a && a->kind() == AttrKind::Tensor)
    return a->asTensor();
  if (const Attribute* a = node.attribute("value_float"))
    return Tensor::fromValues<float>(DType::Float32, {}, std::vector<float>{a->asFloat()});
  if (const Attribute* a = node.attribute("value_floats"))
    return Tensor::fromValues<float>(DType::Float32, length(a->asFloats().size()), a->asFloats());
  if (const Attribute* a = node.attribute("value_int"))
    return Tensor::fromValues<int64_t>(DType::Int64, {}, std::vector<int64_t>{a->asInt()});
  if (const Attribute* a = node.attribute("value_ints"))
    return Tensor::fromValues<int64_t>(DType::Int64, length(a->asInts().size()), a->asInts());
  if (const Attribute* a = node.attribute("value_string"))
    return Tensor::strings({}, {a->asString()});
  if (const Attribute* a = node.attribute("value_strings"))
    return Tensor::strings(length(a->asStrings().size()), a->asStrings());
  return std::nullopt;
}

} // namespace kiln
