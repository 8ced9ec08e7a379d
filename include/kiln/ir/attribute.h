// Typed node attributes mirroring ONNX AttributeProto kinds.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "kiln/ir/tensor.h"

namespace kiln {

class Graph;
using GraphPtr = std::shared_ptr<Graph>;

// Serialized ONNX message kept verbatim: sparse tensors and type protos are carried, not
// interpreted.
struct OpaqueProto {
  std::string bytes;
  bool operator==(const OpaqueProto& other) const { return bytes == other.bytes; }
};

enum class AttrKind {
  Float,
  Int,
  String,
  Tensor,
  Graph,
  SparseTensor,
  TypeProto,
  Floats,
  Ints,
  Strings,
  Tensors,
  Graphs,
  SparseTensors,
  TypeProtos,
};
const char* attrKindName(AttrKind kind);

class Attribute {
 public:
  using Storage = std::variant<float, int64_t, std::string, Tensor, GraphPtr, OpaqueProto,
                               OpaqueProto, std::vector<float>, std::vector<int64_t>,
                               std::vector<std::string>, std::vector<Tensor>, std::vector<GraphPtr>,
                               std::vector<OpaqueProto>, std::vector<OpaqueProto>>;

  Attribute() = default;
  static Attribute ofFloat(float v) {
    return Attribute(AttrKind::Float, Storage(std::in_place_index<0>, v));
  }
  static Attribute ofInt(int64_t v) {
    return Attribute(AttrKind::Int, Storage(std::in_place_index<1>, v));
  }
  static Attribute ofString(std::string v) {
    return Attribute(AttrKind::String, Storage(std::in_place_index<2>, std::move(v)));
  }
  static Attribute ofTensor(Tensor v) {
    return Attribute(AttrKind::Tensor, Storage(std::in_place_index<3>, std::move(v)));
  }
  static Attribute ofGraph(GraphPtr v) {
    return Attribute(AttrKind::Graph, Storage(std::in_place_index<4>, std::move(v)));
  }
  static Attribute ofSparseTensor(OpaqueProto v) {
    return Attribute(AttrKind::SparseTensor, Storage(std::in_place_index<5>, std::move(v)));
  }
  static Attribute ofTypeProto(OpaqueProto v) {
    return Attribute(AttrKind::TypeProto, Storage(std::in_place_index<6>, std::move(v)));
  }
  static Attribute ofFloats(std::vector<float> v) {
    return Attribute(AttrKind::Floats, Storage(std::in_place_index<7>, std::move(v)));
  }
  static Attribute ofInts(std::vector<int64_t> v) {
    return Attribute(AttrKind::Ints, Storage(std::in_place_index<8>, std::move(v)));
  }
  static Attribute ofStrings(std::vector<std::string> v) {
    return Attribute(AttrKind::Strings, Storage(std::in_place_index<9>, std::move(v)));
  }
  static Attribute ofTensors(std::vector<Tensor> v) {
    return Attribute(AttrKind::Tensors, Storage(std::in_place_index<10>, std::move(v)));
  }
  static Attribute ofGraphs(std::vector<GraphPtr> v) {
    return Attribute(AttrKind::Graphs, Storage(std::in_place_index<11>, std::move(v)));
  }
  static Attribute ofSparseTensors(std::vector<OpaqueProto> v) {
    return Attribute(AttrKind::SparseTensors, Storage(std::in_place_index<12>, std::move(v)));
  }
  static Attribute ofTypeProtos(std::vector<OpaqueProto> v) {
    return Attribute(AttrKind::TypeProtos, Storage(std::in_place_index<13>, std::move(v)));
  }

  AttrKind kind() const { return kind_; }
  float asFloat() const { return std::get<0>(value_); }
  int64_t asInt() const { return std::get<1>(value_); }
  const std::string& asString() const { return std::get<2>(value_); }
  const Tensor& asTensor() const { return std::get<3>(value_); }
  const GraphPtr& asGraph() const { return std::get<4>(value_); }
  const OpaqueProto& asSparseTensor() const { return std::get<5>(value_); }
  const OpaqueProto& asTypeProto() const { return std::get<6>(value_); }
  const std::vector<float>& asFloats() const { return std::get<7>(value_); }
  const std::vector<int64_t>& asInts() const { return std::get<8>(value_); }
  const std::vector<std::string>& asStrings() const { return std::get<9>(value_); }
  const std::vector<Tensor>& asTensors() const { return std::get<10>(value_); }
  const std::vector<GraphPtr>& asGraphs() const { return std::get<11>(value_); }
  const std::vector<OpaqueProto>& asSparseTensors() const { return std::get<12>(value_); }
  const std::vector<OpaqueProto>& asTypeProtos() const { return std::get<13>(value_); }
  // Every subgraph this attribute holds (0, 1 or many).
  std::vector<Graph*> subgraphs() const;

  // Set for attributes of function bodies that refer to a caller attribute.
  const std::string& refAttrName() const { return refAttrName_; }
  void setRefAttrName(std::string name) { refAttrName_ = std::move(name); }
  const std::string& docString() const { return docString_; }
  void setDocString(std::string doc) { docString_ = std::move(doc); }

 private:
  Attribute(AttrKind kind, Storage value) : kind_(kind), value_(std::move(value)) {}
  AttrKind kind_ = AttrKind::Int;
  Storage value_;
  std::string refAttrName_;
  std::string docString_;
};

} // namespace kiln
