// Attribute helpers.
#include "kiln/ir/attribute.h"

namespace kiln {

const char* attrKindName(AttrKind kind) {
  switch (kind) {
  case AttrKind::Float:
    return "float";
  case AttrKind::Int:
    return "int";
  case AttrKind::String:
    return "string";
  case AttrKind::Tensor:
    return "tensor";
  case AttrKind::Graph:
    return "graph";
  case AttrKind::SparseTensor:
    return "sparse_tensor";
  case AttrKind::TypeProto:
    return "type_proto";
  case AttrKind::Floats:
    return "floats";
  case AttrKind::Ints:
    return "ints";
  case AttrKind::Strings:
    return "strings";
  case AttrKind::Tensors:
    return "tensors";
  case AttrKind::Graphs:
    return "graphs";
  case AttrKind::SparseTensors:
    return "sparse_tensors";
  case AttrKind::TypeProtos:
    return "type_protos";
  }
  return "?";
}

std::vector<Graph*> Attribute::subgraphs() const {
  std::vector<Graph*> out;
  if (kind_ == AttrKind::Graph && asGraph()) out.push_back(asGraph().get());
  if (kind_ == AttrKind::Graphs)
    for (const GraphPtr& g : asGraphs())
      out.push_back(g.get());
  return out;
}

} // namespace kiln
