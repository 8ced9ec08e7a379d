// Attribute kinds checked against the ONNX operator schemas (onnx's OpSchemaRegistry), so a node
// whose attribute has the wrong kind is one coded error wherever it is read.
#include "ops/attributes.h"

#include <fmt/format.h>
#include <onnx/defs/schema.h>

namespace kiln::ops {
namespace {

using ProtoKind = onnx::AttributeProto::AttributeType;

ProtoKind protoKindOf(AttrKind kind) {
  switch (kind) {
  case AttrKind::Float:
    return onnx::AttributeProto::FLOAT;
  case AttrKind::Int:
    return onnx::AttributeProto::INT;
  case AttrKind::String:
    return onnx::AttributeProto::STRING;
  case AttrKind::Tensor:
    return onnx::AttributeProto::TENSOR;
  case AttrKind::Graph:
    return onnx::AttributeProto::GRAPH;
  case AttrKind::SparseTensor:
    return onnx::AttributeProto::SPARSE_TENSOR;
  case AttrKind::TypeProto:
    return onnx::AttributeProto::TYPE_PROTO;
  case AttrKind::Floats:
    return onnx::AttributeProto::FLOATS;
  case AttrKind::Ints:
    return onnx::AttributeProto::INTS;
  case AttrKind::Strings:
    return onnx::AttributeProto::STRINGS;
  case AttrKind::Tensors:
    return onnx::AttributeProto::TENSORS;
  case AttrKind::Graphs:
    return onnx::AttributeProto::GRAPHS;
  case AttrKind::SparseTensors:
    return onnx::AttributeProto::SPARSE_TENSORS;
  case AttrKind::TypeProtos:
    return onnx::AttributeProto::TYPE_PROTOS;
  }
  return onnx::AttributeProto::UNDEFINED;
}

// The schema's spelling of a kind (AttributeProto.AttributeType: "INT", "FLOATS", ...).
std::string protoKindName(ProtoKind kind) { return onnx::AttributeProto::AttributeType_Name(kind); }

Status kindError(const Node& node, const char* name, AttrKind have, ProtoKind want) {
  return makeError(ErrorCode::BadAttribute,
                   fmt::format("set '{}' as {} in the exporter (the ONNX schema's kind)", name,
                               protoKindName(want)),
                   "node '{}' ({}): attribute '{}' has kind {}, but {} declares it {}", node.name(),
                   node.opType(), name, protoKindName(protoKindOf(have)), node.opType(),
                   protoKindName(want));
}

} // namespace

std::string attributeKindReason(const Node& node, int64_t opset) {
  if (opset <= 0) return {};
  const std::string domain = node.domain() == "ai.onnx" ? std::string() : node.domain();
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), domain);
  if (!schema) return {};
  for (const auto& [name, attr] : node.attributes()) {
    if (!attr.refAttrName().empty()) continue; // bound by the calling function
    auto it = schema->attributes().find(name);
    if (it == schema->attributes().end()) continue; // unknown attributes are each rule's call
    ProtoKind want = it->second.type;
    if (want == onnx::AttributeProto::UNDEFINED || protoKindOf(attr.kind()) == want) continue;
    return fmt::format("attribute '{}' has kind {}, but {} (opset {}) declares it {}", name,
                       protoKindName(protoKindOf(attr.kind())), node.opType(), opset,
                       protoKindName(want));
  }
  return {};
}

Status checkAttributeKinds(const Node& node, int64_t opset) {
  std::string reason = attributeKindReason(node, opset);
  if (reason.empty()) return Status::ok();
  return Status(ErrorCode::BadAttribute,
                fmt::format("node '{}' ({}): {}", node.name(), node.opType(), reason),
                "give the attribute the kind the ONNX operator schema names, in the exporter");
}

Expected<int64_t> intAttr(const Node& node, const char* name, int64_t def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Int)
    return kindError(node, name, a->kind(), onnx::AttributeProto::INT);
  return a->asInt();
}

Expected<float> floatAttr(const Node& node, const char* name, float def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Float)
    return kindError(node, name, a->kind(), onnx::AttributeProto::FLOAT);
  return a->asFloat();
}

Expected<std::string> stringAttr(const Node& node, const char* name, std::string def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::String)
    return kindError(node, name, a->kind(), onnx::AttributeProto::STRING);
  return a->asString();
}

Expected<std::vector<int64_t>> intsAttr(const Node& node, const char* name,
                                        std::vector<int64_t> def) {
  const Attribute* a = node.attribute(name);
  if (!a) return def;
  if (a->kind() != AttrKind::Ints)
    return kindError(node, name, a->kind(), onnx::AttributeProto::INTS);
  return a->asInts();
}

} // namespace kiln::ops
