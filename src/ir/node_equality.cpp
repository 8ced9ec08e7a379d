// When two nodes compute the same thing (kiln/ir/node_equality.h).
#include "kiln/ir/node_equality.h"

#include <bit>
#include <map>

namespace kiln {

bool sameAttribute(const Attribute& a, const Attribute& b) {
  if (a.kind() != b.kind() || a.refAttrName() != b.refAttrName()) return false;
  switch (a.kind()) {
  case AttrKind::Float:
    return std::bit_cast<uint32_t>(a.asFloat()) == std::bit_cast<uint32_t>(b.asFloat());
  case AttrKind::Int:
    return a.asInt() == b.asInt();
  case AttrKind::String:
    return a.asString() == b.asString();
  case AttrKind::Tensor:
    return a.asTensor().sameContents(b.asTensor());
  case AttrKind::SparseTensor:
    return a.asSparseTensor() == b.asSparseTensor();
  case AttrKind::TypeProto:
    return a.asTypeProto() == b.asTypeProto();
  case AttrKind::Floats: {
    const auto &x = a.asFloats(), &y = b.asFloats();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::bit_cast<uint32_t>(x[i]) != std::bit_cast<uint32_t>(y[i])) return false;
    return true;
  }
  case AttrKind::Ints:
    return a.asInts() == b.asInts();
  case AttrKind::Strings:
    return a.asStrings() == b.asStrings();
  case AttrKind::Tensors: {
    const auto &x = a.asTensors(), &y = b.asTensors();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i)
      if (!x[i].sameContents(y[i])) return false;
    return true;
  }
  case AttrKind::SparseTensors:
    return a.asSparseTensors() == b.asSparseTensors();
  case AttrKind::TypeProtos:
    return a.asTypeProtos() == b.asTypeProtos();
  case AttrKind::Graph:
  case AttrKind::Graphs:
    return false;
  }
  return false;
}

bool sameAttributes(const Node& a, const Node& b) {
  if (a.attributes().size() != b.attributes().size()) return false;
  std::map<std::string, const Attribute*> am, bm;
  for (const auto& [name, value] : a.attributes())
    am.emplace(name, &value);
  for (const auto& [name, value] : b.attributes())
    bm.emplace(name, &value);
  if (am.size() != bm.size()) return false;
  for (auto ai = am.begin(), bi = bm.begin(); ai != am.end(); ++ai, ++bi)
    if (ai->first != bi->first || !sameAttribute(*ai->second, *bi->second)) return false;
  return true;
}

bool drawsRandomNumbers(const std::string& opType) {
  return opType == "RandomNormal" || opType == "RandomUniform" || opType == "RandomNormalLike" ||
         opType == "RandomUniformLike" || opType == "Multinomial" || opType == "Bernoulli";
}

} // namespace kiln
