// The shared machinery of .ms lowering (slots, layouts, constants, weights, emit) and the rule
// table the op families in ops/<family>.cpp register into.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kiln/backends/lowering.h"
#include "ms_lower.h"
#include "ms_model_schema.h"
#include "ms_type_ids.h"

namespace kiln::ms {

namespace fb = kiln::msfb;
using FBB = flatbuffers::FlatBufferBuilder;

enum class Layout { Onnx, Nhwc };

inline const std::vector<int64_t> kToNhwc = {0, 2, 3, 1}; // NCHW dims → NHWC dims
inline const std::vector<int64_t> kToNchw = {0, 3, 1, 2};

// A constant as the lowering sees it: plain values, or integer codes with per-channel
// (scale, zero point) along `axis` from a DequantizeLinear the quantize-weights pass made.
struct Const {
  Tensor tensor;
  bool quantized = false;
  std::vector<float> scales;
  std::vector<int64_t> zeros;
  int64_t axis = 0;
  std::string name;
  // quantize-weights' bias correction: per-channel offsets added after dequantizing (the
  // QuantParam meanCorr); empty when none.
  std::vector<float> meanCorr;
  // Codes a quantized op of the model brought (kModelWeightCodesDoc).
  bool modelCodes = false;
  // Blocked (opset-21 DequantizeLinear block_size): scales and zeros have the codes' dims with
  // `axis` counted in blocks of blockSize, flattened in that order; 0: per tensor / per axis.
  int64_t blockSize = 0;
};

std::vector<int64_t> intValues(const Tensor& t);
std::optional<double> scalarValue(const Tensor& t);
// out[i] = in[perm[i]] on dims; data moved accordingly (any element size).
Tensor permuteTensor(const Tensor& t, const std::vector<int64_t>& perm);
Tensor dequantize(const Const& c);
Tensor scaleFloat(const Tensor& t, double factor);

// An attribute-free op table: an empty table of the right union member.
template <typename T> AttrBuilder emptyTable() {
  return [](FBB& b) { return typename T::Builder(b).Finish().Union(); };
}

// A refusal from `lower`: the reason alone (the caller adds the node's label), K7102.
template <typename... Args> Status bad(fmt::format_string<Args...> format, Args&&... args) {
  return Status(ErrorCode::MsLowerBadAttribute, fmt::format(format, std::forward<Args>(args)...),
                "change the attribute in the exporter or keep this model on another target");
}

// A refusal from `lower` that fixed input shapes would lift: the rule needs a size, rank or
// constant the model leaves dynamic (K7104 when the graph has dynamic inputs, else K7102).
template <typename... Args>
Status dynamicShape(fmt::format_string<Args...> format, Args&&... args) {
  return Status(ErrorCode::MsLowerDynamicShape, fmt::format(format, std::forward<Args>(args)...),
                "fix the dynamic input shapes (converter_lite --inputShape, kiln --input-shape)");
}

// Inputs the runtime reads while it builds the model (CumSum's axis, a reduction's axes, OneHot's
// depth: its kernels size their outputs from them then) must be constants
// (ms_runtime_operands.cpp). The check's reason for such an input fed by the graph's caller (empty
// when it is not), and lower's K7102 refusal for one known only at run time.
std::string buildTimeInputReason(const Node& n, size_t input, const char* what);
// Whether `v` is declared with no elements: its value (empty) is known whatever feeds it.
bool heldEmpty(const Value* v);
Status buildTimeInputRefusal(const Node& n, size_t input, const char* what);

// Whether optional output `i` of `n` is read (by a node or as a graph output).
inline bool outputUsed(const Node& n, size_t i) {
  return n.outputs().size() > i && n.output(i) &&
         (n.output(i)->hasUses() || n.output(i)->isGraphOutput());
}

// The rank `v` is declared with, -1 when unknown: what a check sees from the node alone (lowering
// may still learn it from a constant).
inline int declaredRank(const Value* v) {
  return v && v->shape().hasRank() ? static_cast<int>(v->shape().rank()) : -1;
}

// A conv/pool refusal (`why`, "" when taken) with what the conversion pipeline does about it:
// expand-conv-pool rewrites 3-D Conv/ConvTranspose/pooling and 1-D ConvTranspose into 2-D ops
// (kiln/passes/expand_conv_pool.h), or says why it cannot.
std::string withConvPoolExpansion(const Node& n, const lowering::OpContext& context,
                                  std::string why);

// ONNX pads [x1_begin, x2_begin, x1_end, x2_end] → .ms [top, bottom, left, right], resolving
// auto_pad SAME_* from static spatial sizes.
struct Padding {
  std::vector<int64_t> list; // top, bottom, left, right
  int mode = fb::PadMode_PAD;
};
std::optional<Padding> convPadding(const Node& n, const std::vector<int64_t>& inHW,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& dilations, std::string* error);
// The static H, W of a 4-D value (-1 where unknown); empty when it is not 4-D.
std::vector<int64_t> inputHW(const Value* v);

// One model's lowering: every rule's `lower` emits through it.
class LoweringContext {
 public:
  struct Slots {
    std::optional<uint32_t> onnx, nhwc;
  };

  LoweringContext(const Model& model, const MsWriteOptions& options)
      : model_(model), graph_(*model.graph), options_(options), opset_(model.opsetVersion("")) {}

  // Lowers the whole graph; every refusal (check- and lower-time) lands in `refusals`.
  Expected<MsGraph> run(std::vector<lowering::Refusal>* refusals);

  int64_t opset() const { return opset_; }
  const MsWriteOptions& options() const { return options_; }

  // --- values
  const Value* resolve(const Value* v) const {
    while (v) {
      auto it = alias_.find(v);
      if (it == alias_.end()) break;
      v = it->second;
    }
    return v;
  }
  // `to` stands for `from` from now on (Identity, Dropout, a Clip without bounds).
  void setAlias(const Value* from, const Value* to) { alias_[from] = resolve(to); }
  void clearAlias(const Value* v) { alias_.erase(v); }
  std::optional<Const> constOf(const Value* v) const;
  // constOf of a DequantizeLinear's output: its constant codes as a quantized weight.
  std::optional<Const> dequantizedConst(const Node& dq) const;
  int rankOf(const Value* v) const {
    v = resolve(v);
    if (auto c = constOf(v)) return static_cast<int>(c->tensor.dims().size());
    return v->shape().hasRank() ? static_cast<int>(v->shape().rank()) : -1;
  }
  std::optional<int64_t> dimOf(const Value* v, size_t i) const {
    v = resolve(v);
    if (auto c = constOf(v)) return c->tensor.dims()[i];
    if (!v->shape().hasRank() || i >= v->shape().rank() || !v->shape()[i].isStatic())
      return std::nullopt;
    return v->shape()[i].value();
  }
  // `v`'s dims as .ms writes them, -1 where dynamic (rank must be known).
  std::vector<int32_t> dimsOf(const Value* v) const {
    v = resolve(v);
    if (auto c = constOf(v))
      return std::vector<int32_t>(c->tensor.dims().begin(), c->tensor.dims().end());
    std::vector<int32_t> out;
    for (const Dim& d : v->shape().dims())
      out.push_back(d.isStatic() ? static_cast<int32_t>(d.value()) : -1);
    return out;
  }
  std::optional<std::vector<int64_t>> staticShape(const Value* v) const {
    v = resolve(v);
    if (auto c = constOf(v)) return c->tensor.dims();
    if (!v->shape().hasRank() || !v->shape().isStatic()) return std::nullopt;
    return v->shape().staticDims();
  }
  bool availableNhwc(const Value* v) const {
    v = resolve(v);
    auto it = slots_.find(v);
    return it != slots_.end() && it->second.nhwc.has_value();
  }
  // The lowered tensors of `v` (nullptr when none yet).
  Slots* slotsOf(const Value* v) {
    auto it = slots_.find(v);
    return it == slots_.end() ? nullptr : &it->second;
  }
  Slots& slots(const Value* v) { return slots_[v]; }
  // An attribute list or, from opset versions that moved it there, a constant input.
  Expected<std::optional<std::vector<int64_t>>> intsOf(const Node& n, const char* attr,
                                                       size_t input) const;

  // --- tensors
  MsTensor& tensor(uint32_t id) { return out_.tensors[id]; }
  uint32_t tensorCount() const { return static_cast<uint32_t>(out_.tensors.size()); }
  std::string uniqueName(const std::string& base) {
    std::string name = base.empty() ? std::string("tensor") : base;
    for (int i = 1; usedNames_.count(name); ++i)
      name = fmt::format("{}_{}", base, i);
    usedNames_.insert(name);
    return name;
  }
  uint32_t addTensor(MsTensor t) {
    t.name = uniqueName(t.name);
    out_.tensors.push_back(std::move(t));
    return static_cast<uint32_t>(out_.tensors.size() - 1);
  }
  // Gives tensor `id` the name `name`; a tensor already holding it is renamed out of the way.
  void claimName(uint32_t id, const std::string& name) {
    if (out_.tensors[id].name == name) return;
    for (auto& t : out_.tensors)
      if (t.name == name) t.name = uniqueName(name + "_0");
    out_.tensors[id].name = name;
    usedNames_.insert(name);
  }
  Expected<uint32_t> constTensor(const Tensor& t, const std::string& name, int format = 0);
  // constTensor of `t` permuted by `perm` (permuteTensor's meaning), without the copy: the writer
  // permutes the bytes while writing them (MsTensor::writePerm).
  Expected<uint32_t> permutedConstTensor(const Tensor& t, const std::vector<int64_t>& perm,
                                         const std::string& name, int format = 0);
  uint32_t intConst(const std::vector<int64_t>& values, const std::string& name,
                    std::optional<std::vector<int32_t>> dims = std::nullopt);
  uint32_t floatConst(const std::vector<float>& values, const std::string& name,
                      std::vector<int32_t> dims);
  // The .ms tensor holding `v` in `layout` (Transposes inserted as needed).
  Expected<uint32_t> input(const Value* v, Layout layout);
  // Every input of `n` in `layout`, in order; an omitted one is refused.
  Expected<std::vector<uint32_t>> inputs(const Node& n, Layout layout);
  // A constant operand of a binary op whose other operand is NHWC: rank-padded and permuted.
  Expected<uint32_t> broadcastConstNhwc(const Const& c);
  Expected<uint32_t> output(const Value* v, Layout layout);
  // Weight tensor: permuted by `perm`; quantized codes stay integers when their channel axis lands
  // on `preferredDim` (the runtime's per-channel dequant axis), else they are dequantized.
  Expected<uint32_t> weightTensor(const Value* v, const std::vector<int64_t>& perm,
                                  int64_t preferredDim, int format, bool* quantized);
  // The .ms tensor of an index-like input (axes, k, repeats) read at run time, as int32.
  Expected<uint32_t> int32Input(const Value* v);
  // A copy of tensor `from` (dtype, dims) named `name`, to be produced by a node.
  uint32_t intermediate(uint32_t from, const std::string& name) {
    MsTensor t = out_.tensors[from];
    t.name = name;
    t.nodeType = kNodeCNode;
    t.data.reset();
    t.quantParams.clear();
    return addTensor(std::move(t));
  }
  uint32_t reshapeTensor(uint32_t from, const std::vector<int64_t>& dims, const std::string& name);
  uint32_t transposeTensor(uint32_t from, bool toNhwc, const std::string& name);

  // 1-D Conv / MaxPool / AveragePool over [N, C, L]: viewed as [N, C, 1, L] and run as the 2-D op
  // with a 1×k window (the converter maps 1-D convolutions the same way, ms.md §5.2). begin1d
  // makes the NHWC input view and the NHWC output tensor; end1d turns the output back.
  struct View1d {
    uint32_t x = 0, y = 0; // NHWC [N, 1, L, C] tensors
    std::vector<int64_t> strides, dilations, padList, outShape;
  };
  Expected<View1d> begin1d(const Node& n);
  Status end1d(const Node& n, const View1d& view);

  // --- nodes
  // Every op is emitted here; a Where gets its operands broadcast first (ms_runtime_operands.cpp).
  void emit(fb::PrimitiveType type, AttrBuilder attrs, std::vector<uint32_t> inputs,
            std::vector<uint32_t> outputs, bool quantized = false);
  // The node emitted last runs the runtime's int8 kernels (CNode.quantType QUANT_ALL, ms.md §3.4).
  void markQuantAll() { out_.nodes.back().quantType = 5; }
  // The node emit() made last gets this CNode.quantType (6: QUANT_DYNAMIC, ops/quant_dynamic.cpp).
  void setLastQuantType(int quantType) { out_.nodes.back().quantType = quantType; }
  // --- subgraphs (control flow, ops/control_flow.cpp; ms.md §4.2)
  // A new (empty) subgraph; the main graph is 0. Its index is what PartialFusion names.
  uint32_t newSubgraph(const std::string& name);
  // What entering a subgraph sets aside; leaveSubgraph puts it back.
  struct SubgraphScope {
    uint32_t subgraph = 0;
    const Node* node = nullptr;
    std::unordered_map<const Value*, Slots> slots;
    std::unordered_map<const Value*, const Value*> alias;
    std::map<std::pair<const Value*, int>, uint32_t> constCache;
    std::optional<uint32_t> permToNhwc, permToNchw;
  };
  // Nodes emitted from now on belong to subgraph `index`; constants are made afresh in it.
  SubgraphScope enterSubgraph(uint32_t index);
  void leaveSubgraph(SubgraphScope scope);
  // A parameter of the current subgraph shaped like tensor `like`, standing for `v` (when given).
  uint32_t subgraphInput(uint32_t like, const std::string& name, const Value* v = nullptr);
  void setSubgraphOutputs(std::vector<uint32_t> outputs);
  // Every node of `g` through its rule, into the current subgraph (a failure is returned).
  Status lowerNodes(const Graph& g);
  // A subgraph result for `v`: its tensor, or a node-made copy when `v` is a constant or already
  // a result (ms.md §6.1: results other than parameters are produced by a node).
  Expected<uint32_t> subgraphResult(const Value* v, const std::vector<uint32_t>& taken);
  void setNode(const Node* n) { node_ = n; }
  uint32_t subgraphCount() const { return static_cast<uint32_t>(subgraphs_.size()); }

  int activationFor(const Node& n) const {
    auto it = fusedActivation_.find(&n);
    return it == fusedActivation_.end() ? fb::ActivationType_NO_ACTIVATION : it->second.second;
  }
  // The value a node's output 0 stands for after fusion (the activation's output when fused).
  const Value* fusedOutput(const Node& n) const {
    auto it = fusedActivation_.find(&n);
    return it == fusedActivation_.end() ? n.output(0) : it->second.first->output(0);
  }

 private:
  std::optional<uint32_t>& permConst(bool toNhwc);
  void fuseActivations();
  Status lowerInputs();
  Status lowerOutputs();
  void placeholders(const Node& n);
  // Moves every op onto a data type the runtime has a kernel for (ms_data_types.cpp): casts in,
  // computes there, casts back; a constant that does not fit the computing type is refused.
  Status legalizeDataTypes();
  // Broadcasts the operands of a Where the runtime cannot broadcast itself (emit calls it).
  void broadcastWhereOperands(std::vector<uint32_t>& inputs, const std::vector<uint32_t>& outputs);
  // Drops the tensors of `candidates` no node, graph or subgraph reads or makes; renumbers.
  void dropUnread(const std::set<uint32_t>& candidates);

  const Model& model_;
  const Graph& graph_;
  const MsWriteOptions& options_;
  int64_t opset_;
  MsGraph out_;
  const Node* node_ = nullptr;
  std::set<std::string> usedNames_;
  std::set<std::string> nodeNames_;
  std::unordered_map<const Value*, Slots> slots_;
  std::unordered_map<const Value*, const Value*> alias_;
  std::map<std::pair<const Value*, int>, uint32_t> constCache_;
  mutable std::unordered_map<const Value*, Const>
      dequantized_; // constOf of DequantizeLinear outputs
  // producer → (activation node folded into it, ActivationType)
  std::unordered_map<const Node*, std::pair<const Node*, int>> fusedActivation_;
  std::set<const Node*> folded_;
  std::optional<uint32_t> permToNhwc_, permToNchw_;
  // Subgraphs of a control-flow model (subgraphs_[0] is the main graph) and the one nodes go to.
  std::vector<MsSubGraph> subgraphs_ = {MsSubGraph{}};
  uint32_t current_ = 0;
  void pushNode(MsNode n) {
    subgraphs_[current_].nodes.push_back(static_cast<uint32_t>(out_.nodes.size()));
    out_.nodes.push_back(std::move(n));
  }
};

using MsLoweringRule = lowering::LoweringRule<LoweringContext>;
using MsLoweringRules = lowering::RuleTable<MsLoweringRule>;

// ONNX op → .ms lowering rule, filled by the family files' static initializers.
MsLoweringRules& msLoweringRules();

// A check that takes every node of the op.
inline std::string acceptAll(const Node&, const lowering::OpContext&) { return {}; }

} // namespace kiln::ms

// Registers the .ms lowering of ONNX `op` (one line per op, in its family file).
#define KILN_MS_LOWERING(op, check, lower)                                                         \
  KILN_REGISTER_RULE(::kiln::ms::msLoweringRules(), op,                                            \
                     ::kiln::ms::MsLoweringRule{check, lower, __FILE__})
