// The .ms reader's raising context: the state of one read and the helpers the per-family raising
// rules (src/backends/ms/ops/<family>_raise.cpp, KILN_MS_RAISING) use to rebuild a .ms node as
// ONNX-semantics IR (inputs, decoded constants, emitted nodes, fused activations, bound outputs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>

#include "kiln/backends/lowering.h"
#include "kiln/ir/graph.h"
#include "kiln/support/mapped_file.h"
#include "kiln/support/status.h"
#include "ms_model_schema.h"
#include "ms_type_ids.h"

namespace kiln::ms {

class RaisingContext;

// The reader's rule for one .ms primitive, keyed by its PrimitiveType name.
using MsRaisingRule = lowering::RaisingRule<RaisingContext, msfb::Primitive>;
lowering::RuleTable<MsRaisingRule>& msRaisingRules();

// How a consumer wants a float constant: its element type, and an optional axis permutation
// (KHWC → OIHW for conv weights).
struct RaiseConstRequest {
  std::optional<DType> floatType; // widen/narrow float16/float32 constants to this
  std::vector<int64_t> perm;      // empty: keep the layout
  int channelAxis = -1;           // per-channel dequant axis of the stored layout (-1: guess)
  std::string key() const;
};

class RaisingContext {
 public:
  using ConstRequest = RaiseConstRequest;

  RaisingContext(const msfb::MetaGraph* meta, std::shared_ptr<const void> owner,
                 const MappedFile* file, std::string displayName, std::string baseDir)
      : meta_(meta), owner_(std::move(owner)), file_(file), name_(std::move(displayName)),
        baseDir_(std::move(baseDir)) {}

  Expected<Model> read();

  // --- errors ---
  template <typename... Args> Status invalid(fmt::format_string<Args...> f, Args&&... args) {
    return invalidStatus(fmt::format(f, std::forward<Args>(args)...));
  }
  template <typename... Args> Status unsupported(fmt::format_string<Args...> f, Args&&... args) {
    return unsupportedStatus(fmt::format(f, std::forward<Args>(args)...));
  }
  Status nodeUnsupported(const std::string& what) {
    return unsupported("node '{}' ({}): {}", nodeName_, opName_, what);
  }

  // --- tensors ---
  const msfb::Tensor* tensor(uint32_t i) const { return meta_->allTensors()->Get(i); }
  std::string tensorName(uint32_t i) const;
  std::vector<int64_t> dims(uint32_t i) const { return longs(tensor(i)->dims()); }
  bool isConstant(uint32_t i) const { return constant_.count(i) != 0; }
  template <typename T> static std::vector<int64_t> longs(const flatbuffers::Vector<T>* v) {
    std::vector<int64_t> out;
    if (v)
      for (auto x : *v)
        out.push_back(static_cast<int64_t>(x));
    return out;
  }

  // --- values of the node being read ---
  Expected<Value*> in(size_t pos, ConstRequest request = {});
  size_t inputCount() const { return node_->inputIndex() ? node_->inputIndex()->size() : 0; }
  uint32_t inIndex(size_t pos) const { return node_->inputIndex()->Get(pos); }
  // The node's outputs (readNode checks it has at least one before any rule runs).
  size_t outputCount() const { return node_->outputIndex()->size(); }
  uint32_t outIndex(size_t pos) const { return node_->outputIndex()->Get(pos); }
  Expected<std::vector<int64_t>> constInts(size_t pos);
  Expected<std::vector<float>> constFloats(size_t pos);
  Expected<Value*> int64Input(size_t pos); // index-like input as int64 (constant or Cast)
  DType floatType() const { return floatType_; }
  // The node's CNode.quantType (ms.md §3.4).
  int quantType() const { return node_ ? static_cast<int>(node_->quantType()) : 0; }

  // --- building ---
  Node* emitNode(const std::string& op, const std::vector<Value*>& inputs, size_t outputs,
                 Node::AttributeList attrs = {});
  Value* emit(const std::string& op, const std::vector<Value*>& inputs,
              Node::AttributeList attrs = {}) {
    return emitNode(op, inputs, 1, std::move(attrs))->output(0);
  }
  Value* constant(Tensor t, const std::string& base = "ms_const");
  Value* ints(const std::vector<int64_t>& v) {
    return constant(Tensor::fromValues(DType::Int64, {int64_t(v.size())}, v), "ms_ints");
  }
  Value* scalar(float v, DType dt);
  Value* transpose(Value* x, const std::vector<int64_t>& perm) {
    return emit("Transpose", {x}, {{"perm", Attribute::ofInts(perm)}});
  }
  Value* toNchw(Value* x) { return transpose(x, {0, 3, 1, 2}); }
  Value* toNhwc(Value* x) { return transpose(x, {0, 2, 3, 1}); }
  static Node::AttributeList axisAttr(int64_t a) { return {{"axis", Attribute::ofInt(a)}}; }
  Expected<Value*> activation(Value* x, msfb::ActivationType type, float alpha = 0,
                              float minVal = 0, float maxVal = 0, bool approximate = false);
  Status bind(size_t outPos, Value* v);

  // --- control flow (ops/control_flow.cpp): PartialFusion and Switch only note what they name;
  // the Call that runs them becomes an If or a Loop.
  struct Partial {
    int64_t subgraph = 0;
    std::vector<uint32_t> args;
  };
  struct SwitchOf {
    uint32_t cond = 0, onTrue = 0, onFalse = 0;
  };
  void notePartial(uint32_t out, int64_t subgraph, std::vector<uint32_t> args) {
    partials_[out] = Partial{subgraph, std::move(args)};
  }
  void noteSwitch(uint32_t out, SwitchOf s) { switches_[out] = s; }
  const Partial* partialOf(uint32_t t) const {
    auto it = partials_.find(t);
    return it == partials_.end() ? nullptr : &it->second;
  }
  const SwitchOf* switchOf(uint32_t t) const {
    auto it = switches_.find(t);
    return it == switches_.end() ? nullptr : &it->second;
  }
  Status raiseIf(const SwitchOf& s);
  Status raiseLoop(const Partial& start);
  const msfb::SubGraph* subgraph(int64_t index) const {
    auto list = meta_->subGraph();
    return list && index >= 0 && index < int64_t(list->size()) ? list->Get(index) : nullptr;
  }
  const msfb::CNode* nodeAt(uint32_t n) const { return meta_->nodes()->Get(n); }
  // The value of tensor `t` here: what produced it, or its decoded constant.
  Expected<Value*> valueOf(uint32_t t);
  // Subgraph `index` as an IR graph nested in the current one: parameter k reads bound[k] when
  // set (an outer value), else becomes a graph input; its nodes but the last `dropTail` are read;
  // `outputs` (tensors) are its results.
  Expected<std::shared_ptr<Graph>> readSubgraph(int64_t index, const std::vector<Value*>& bound,
                                                size_t dropTail,
                                                const std::vector<uint32_t>& outputs);

  // --- one-op raisings shared by several families (inputs as they come, output 0) ---
  Status binary(const std::string& op, msfb::ActivationType act);
  Status unary(const std::string& op, Node::AttributeList attrs = {});

 private:
  // Records tensor t (raised as `name`) in Model::sourceLayouts when the file stores it NHWC: it
  // holds the NCHW value of the same name transposed (the writer names the NCHW twin apart).
  void noteLayout(uint32_t t, const std::string& name) {
    if (tensor(t)->format() == msfb::Format_NHWC && dims(t).size() == 4)
      model_.sourceLayouts[name] = {0, 2, 3, 1};
  }
  Status invalidStatus(std::string message);
  Status unsupportedStatus(std::string message);
  Status checkIndices();
  // A constant's stored bytes and what keeps them alive (the model, or its .msw side file).
  struct RawBytes {
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::shared_ptr<const void> owner;
    const MappedFile* file = nullptr;
  };
  Expected<RawBytes> rawBytes(uint32_t i);
  Expected<Tensor> decodeConstant(uint32_t i, const ConstRequest& request);
  Expected<std::vector<float>> dequantize(uint32_t i, const uint8_t* data, size_t size, DType dt,
                                          int channelAxis);
  std::string fresh(const std::string& base);
  Status readNode(const msfb::CNode* node);
  Status readOp(const msfb::Primitive* p);

  const msfb::MetaGraph* meta_;
  std::shared_ptr<const void> owner_;
  const MappedFile* file_;
  std::string name_;
  std::string baseDir_;
  Model model_;
  Graph* g_ = nullptr;
  std::set<std::string> reserved_;
  uint64_t counter_ = 0;
  std::unordered_map<uint32_t, Value*> values_; // tensor index → value (inputs, produced)
  std::set<const Value*> ownValues_;            // values made by the node being read
  std::set<const Value*> bound_;                // values that already carry a tensor's name
  std::set<uint32_t> constant_;
  std::map<std::pair<uint32_t, std::string>, Value*> constants_; // decoded constants by request
  std::map<std::string, std::shared_ptr<const MappedFile>> sideFiles_;
  std::map<uint32_t, Partial> partials_;
  std::map<uint32_t, SwitchOf> switches_;
  // The node being read.
  const msfb::CNode* node_ = nullptr;
  std::string nodeName_;
  std::string opName_;
  DType floatType_ = DType::Float32;
};

} // namespace kiln::ms

// Registers the raising rule for the .ms primitive `primitive` (a PrimitiveType name, checked at
// compile time) from a family file: KILN_MS_RAISING(Conv2DFusion, raiseConv2DFusion);
#define KILN_MS_RAISING(primitive, ...)                                                            \
  KILN_REGISTER_RULE(::kiln::ms::msRaisingRules(),                                                 \
                     ::kiln::msfb::EnumNamePrimitiveType(::kiln::msfb::PrimitiveType_##primitive), \
                     ::kiln::ms::MsRaisingRule{__VA_ARGS__, __FILE__})
