// The graph IR: a Graph owns Nodes and Values; each Value has one producer and a use list.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "kiln/ir/attribute.h"
#include "kiln/ir/dtype.h"
#include "kiln/ir/shape.h"
#include "kiln/ir/tensor.h"

namespace kiln {

class Graph;
class Node;

// What a value holds. Non-tensor ONNX types (sequence, map, optional) keep their TypeProto
// verbatim.
enum class TypeKind { Unknown, Tensor, SparseTensor, Sequence, Map, Optional };

struct ValueType {
  TypeKind kind = TypeKind::Unknown;
  DType dtype = DType::Undefined; // element type for tensors
  Shape shape;                    // tensors only; rank may be unknown
  OpaqueProto onnxType;           // verbatim TypeProto for non-tensor kinds
  std::string denotation;
  static ValueType tensor(DType dtype, Shape shape) {
    ValueType t;
    t.kind = TypeKind::Tensor;
    t.dtype = dtype;
    t.shape = std::move(shape);
    return t;
  }
};

// An ONNX node a (possibly fused) IR node came from: diagnostics and accuracy reports name it.
struct Location {
  std::string nodeName;
  std::string opType;
  bool operator==(const Location& other) const = default;
};

struct Use {
  Node* user;
  size_t inputIndex;
  bool operator==(const Use& other) const = default;
};

class Value {
 public:
  const std::string& name() const { return name_; }
  const ValueType& type() const { return type_; }
  DType dtype() const { return type_.dtype; }
  const Shape& shape() const { return type_.shape; }
  void setType(ValueType type) { type_ = std::move(type); }
  void setDType(DType dtype) {
    type_.dtype = dtype;
    if (type_.kind == TypeKind::Unknown) type_.kind = TypeKind::Tensor;
  }
  void setShape(Shape shape) {
    type_.shape = std::move(shape);
    if (type_.kind == TypeKind::Unknown) type_.kind = TypeKind::Tensor;
  }

  Node* producer() const { return producer_; }
  size_t producerOutputIndex() const { return producerIndex_; }
  const std::vector<Use>& uses() const { return uses_; }
  bool hasUses() const { return !uses_.empty(); }
  Graph* owner() const { return owner_; }

  bool isInitializer() const { return initializer_.has_value(); }
  const Tensor& initializer() const { return *initializer_; }
  void setInitializer(Tensor tensor) { initializer_ = std::move(tensor); }
  bool isGraphInput() const;
  bool isGraphOutput() const;

  const std::string& docString() const { return docString_; }
  void setDocString(std::string doc) { docString_ = std::move(doc); }

 private:
  friend class Graph;
  friend class Node;
  Value(Graph* owner, std::string name) : owner_(owner), name_(std::move(name)) {}
  void removeUse(const Use& use);

  Graph* owner_;
  std::string name_;
  ValueType type_;
  Node* producer_ = nullptr;
  size_t producerIndex_ = 0;
  std::vector<Use> uses_;
  std::optional<Tensor> initializer_;
  std::string docString_;
  // Where the owning graph keeps this value, so erasing it needs no search.
  std::list<std::unique_ptr<Value>>::iterator slot_;
  bool annotated_ = false;
};

class Node {
 public:
  using AttributeList = std::vector<std::pair<std::string, Attribute>>;

  const std::string& opType() const { return opType_; }
  const std::string& domain() const { return domain_; }
  void setDomain(std::string domain) { domain_ = std::move(domain); }
  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  const std::string& docString() const { return docString_; }
  void setDocString(std::string doc) { docString_ = std::move(doc); }
  Graph* owner() const { return owner_; }

  // Inputs may be nullptr for omitted optional inputs ("" in ONNX).
  const std::vector<Value*>& inputs() const { return inputs_; }
  Value* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  void setInput(size_t i, Value* value);
  void addInput(Value* value);
  void removeInput(size_t i);
  const std::vector<Value*>& outputs() const { return outputs_; }
  // Outputs may be nullptr for omitted optional outputs.
  Value* output(size_t i) const { return i < outputs_.size() ? outputs_[i] : nullptr; }

  const AttributeList& attributes() const { return attributes_; }
  const Attribute* attribute(const std::string& name) const;
  void setAttribute(const std::string& name, Attribute value);
  bool removeAttribute(const std::string& name);
  std::vector<Graph*> subgraphs() const;

  const std::vector<Location>& locations() const { return locations_; }
  void addLocation(Location location) { locations_.push_back(std::move(location)); }
  // Appends the other node's locations (for fusions).
  void mergeLocations(const Node& other);

 private:
  friend class Graph;
  Node(Graph* owner, std::string opType) : owner_(owner), opType_(std::move(opType)) {}

  // Where the owning graph keeps this node, so erasing or moving it needs no search.
  std::list<std::unique_ptr<Node>>::iterator slot_;

  Graph* owner_;
  std::string opType_;
  std::string domain_;
  std::string name_;
  std::string docString_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  AttributeList attributes_;
  std::vector<Location> locations_;
};

class Graph {
 public:
  using NodeList = std::list<std::unique_ptr<Node>>;
  explicit Graph(std::string name = {}, Graph* parent = nullptr)
      : name_(std::move(name)), parent_(parent) {}
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  const std::string& docString() const { return docString_; }
  void setDocString(std::string doc) { docString_ = std::move(doc); }
  Graph* parent() const { return parent_; }
  void setParent(Graph* parent) { parent_ = parent; }

  // Values.
  // Creates a value owned by this graph; nullptr when the name is already defined here.
  Value* addValue(const std::string& name);
  Value* findLocalValue(const std::string& name) const;
  // Looks the name up here, then in enclosing graphs (subgraphs may read outer values).
  Value* lookupValue(const std::string& name) const;
  std::string uniqueName(const std::string& base);
  // Gives a value a new (unused) name; uses and graph I/O keep pointing at the same Value.
  void renameValue(Value* value, const std::string& name);
  // A list, not a vector: values and nodes are erased in O(1) by their slot (a pass that erases a
  // long chain one node at a time stays linear).
  using ValueList = std::list<std::unique_ptr<Value>>;
  const ValueList& values() const { return values_; }
  // Removes an unused, unproduced value (not an input or output).
  void eraseValue(Value* value);

  const std::vector<Value*>& inputs() const { return inputs_; }
  void addInput(Value* value) { inputs_.push_back(value); }
  const std::vector<Value*>& outputs() const { return outputs_; }
  void addOutput(Value* value) { outputs_.push_back(value); }
  void setOutput(size_t i, Value* value) { outputs_[i] = value; }
  const std::vector<Value*>& initializers() const { return initializers_; }
  Value* addInitializer(const std::string& name, Tensor tensor);
  void removeInitializer(Value* value);
  // Values with type info that are neither inputs nor outputs (ONNX value_info), in import order.
  const std::vector<Value*>& annotatedValues() const { return annotated_; }
  void addAnnotatedValue(Value* value) {
    value->annotated_ = true;
    annotated_.push_back(value);
  }

  // Nodes, in topological order.
  const NodeList& nodes() const { return nodes_; }
  size_t nodeCount() const { return nodes_.size(); }
  // Appends a node whose outputs are new values with these names (names must be fresh).
  Node* appendNode(const std::string& opType, const std::vector<Value*>& inputs,
                   const std::vector<std::string>& outputNames);
  // Inserts before `anchor` (nullptr: at the end).
  Node* insertNodeBefore(Node* anchor, const std::string& opType, const std::vector<Value*>& inputs,
                         const std::vector<std::string>& outputNames);
  // Erases a node whose outputs have no uses and are not graph outputs; its output values go too.
  void eraseNode(Node* node);
  // Constant folding: `node`'s outputs become initializers holding `values` (same Value objects,
  // same names and uses) and the node is removed.
  void replaceNodeWithConstants(Node* node, std::vector<Tensor> values);
  // Rewires every use of `from` (in this graph, its subgraphs and as a graph output) to `to`.
  void replaceAllUsesWith(Value* from, Value* to);
  // Reorders nodes; `order` must be a permutation of nodes().
  void reorderNodes(const std::vector<Node*>& order);

 private:
  NodeList::iterator findNode(Node* node);

  std::string name_;
  std::string docString_;
  Graph* parent_;
  // Values are declared before nodes so nodes (and their subgraphs) die first and can unhook uses.
  ValueList values_;
  std::unordered_map<std::string, Value*> valuesByName_;
  std::vector<Value*> inputs_;
  std::vector<Value*> outputs_;
  std::vector<Value*> initializers_;
  std::vector<Value*> annotated_;
  NodeList nodes_;
  uint64_t nameCounter_ = 0;
};

struct OpsetImport {
  std::string domain;
  int64_t version;
  bool operator==(const OpsetImport& other) const = default;
};

// A whole model: graph plus ONNX model metadata carried through conversion.
// Model metadata key of a gear model (an .om written with atc's --dynamic_batch_size,
// --dynamic_image_size or --dynamic_dims, raised): the input shapes it accepts as JSON, one object
// per gear naming the inputs whose shapes differ between gears: [{"x":[1,3,8,8]},{"x":[2,3,8,8]}].
// The executor refuses a run whose inputs match no gear.
inline constexpr const char* kInputGearsKey = "kiln.input_gears";

struct Model {
  int64_t irVersion = 8;
  std::vector<OpsetImport> opsets;
  std::string producerName;
  std::string producerVersion;
  std::string domain;
  int64_t modelVersion = 0;
  std::string docString;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<OpaqueProto> functions; // FunctionProto, verbatim
  std::string sourcePath;
  GraphPtr graph;
  // Values a converted artifact stores in another layout than the model it came from (an .ms
  // NHWC tensor of an NCHW ONNX value): value name -> the permutation that takes the source
  // layout's dims to this value's. Readers fill it from the file; compare matches through it.
  std::map<std::string, std::vector<int64_t>> sourceLayouts;

  // Opset version for a domain ("" and "ai.onnx" are the same); 0 when not imported.
  int64_t opsetVersion(const std::string& domain) const;
};

} // namespace kiln
