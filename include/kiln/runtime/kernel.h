// Kernel interface of the CPU reference executor and the registry that maps op types to kernels.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/runtime/value.h"
#include "kiln/support/status.h"

namespace kiln::rt {

class Executor;
struct Scope;
class Epilogue;

// What a kernel sees of one node execution: inputs, attributes, outputs to fill, subgraph runner.
class KernelContext {
 public:
  KernelContext(Executor& executor, const Node& node, std::vector<const RtValue*> inputs,
                const Scope& scope, int64_t opset)
      : executor_(executor), node_(node), inputs_(std::move(inputs)), scope_(scope), opset_(opset),
        outputs_(node.outputs().size()) {}
  // The same, filling `inputs` and `outputs` storage handed back by a previous context (see
  // takeStorage): the executor runs node after node without allocating these vectors.
  KernelContext(Executor& executor, const Node& node, std::vector<const RtValue*> inputs,
                const Scope& scope, int64_t opset, std::vector<RtValue> outputs)
      : executor_(executor), node_(node), inputs_(std::move(inputs)), scope_(scope), opset_(opset),
        outputs_(std::move(outputs)) {
    outputs_.clear();
    outputs_.resize(node.outputs().size());
  }
  // Gives the input and output vectors back (their capacity) for the next node's context.
  void takeStorage(std::vector<const RtValue*>& inputs, std::vector<RtValue>& outputs) {
    inputs = std::move(inputs_);
    inputs.clear();
    outputs = std::move(outputs_);
  }

  const Node& node() const { return node_; }
  // ai.onnx opset version of the model (kernels switch behaviour on it where ONNX changed).
  int64_t opset() const { return opset_; }
  int threads() const;

  size_t inputCount() const { return inputs_.size(); }
  // True when input i exists and is not an omitted optional input or an empty optional.
  bool hasInput(size_t i) const {
    return i < inputs_.size() && inputs_[i] && inputs_[i]->kind != RtValue::Kind::Missing &&
           inputs_[i]->kind != RtValue::Kind::OptionalNone;
  }
  const RtValue& inputValue(size_t i) const { return *inputs_[i]; }
  // Input i as a tensor; only call after hasInput(i) (checked by the executor for required inputs).
  const Tensor& input(size_t i) const { return inputs_[i]->tensor; }
  template <typename T> const T* inputData(size_t i) const {
    return reinterpret_cast<const T*>(input(i).data());
  }
  const std::vector<int64_t>& inputDims(size_t i) const { return input(i).dims(); }
  std::vector<int64_t> inputInts(size_t i) const { return toInt64Vector(input(i)); }

  size_t outputCount() const { return outputs_.size(); }
  // True when the node names output i (optional outputs may be omitted).
  bool wantsOutput(size_t i) const { return i < node_.outputs().size() && node_.output(i); }
  void setOutput(size_t i, Tensor t) {
    if (i < outputs_.size()) outputs_[i] = RtValue::ofTensor(std::move(t));
  }
  void setOutputValue(size_t i, RtValue v) {
    if (i < outputs_.size()) outputs_[i] = std::move(v);
  }
  std::vector<RtValue>& outputs() { return outputs_; }

  // An elementwise chain the executor fused after this node (Conv), or nullptr. A kernel that runs
  // it on its output 0 calls markEpilogueApplied(); otherwise the chain's nodes run on their own.
  Epilogue* epilogue() const { return epilogue_; }
  void setEpilogue(Epilogue* epilogue) { epilogue_ = epilogue; }
  void markEpilogueApplied() { epilogueApplied_ = true; }
  bool epilogueApplied() const { return epilogueApplied_; }

  // Channels-last hand-off between two oneDNN convolutions (FusionPlan::handoffTo): a Conv whose
  // result only another Conv reads may leave its output 0 as [N, H, W, C] data under its NCHW
  // dims (markChannelsLastOutput), and the reader is then told so (channelsLastInput). Saves the
  // two layout copies oneDNN would make around the NCHW tensor between them.
  void allowChannelsLastOutput() { channelsLastAllowed_ = true; }
  bool channelsLastOutputAllowed() const { return channelsLastAllowed_; }
  void markChannelsLastOutput() { channelsLastOutput_ = true; }
  bool channelsLastOutput() const { return channelsLastOutput_; }
  void setChannelsLastInput(bool on) { channelsLastInput_ = on; }
  bool channelsLastInput() const { return channelsLastInput_; }

  // State the kernel keeps about this node for the executor's lifetime (prepared constant
  // weights), or nullptr when there is none (constant folding). The kernel must check that what it
  // finds still fits the inputs it is given.
  std::shared_ptr<void>* nodeState() const { return nodeState_; }
  void setNodeState(std::shared_ptr<void>* state) { nodeState_ = state; }
  // True when input i is the same on every run (see Executor::isConstantValue).
  bool inputIsConstant(size_t i) const;

  bool hasAttr(const std::string& name) const { return node_.attribute(name) != nullptr; }
  const Attribute* attr(const std::string& name) const { return node_.attribute(name); }
  int64_t attrInt(const std::string& name, int64_t fallback) const;
  float attrFloat(const std::string& name, float fallback) const;
  std::string attrString(const std::string& name, const std::string& fallback = "") const;
  std::vector<int64_t> attrInts(const std::string& name, std::vector<int64_t> fallback = {}) const;
  std::vector<float> attrFloats(const std::string& name, std::vector<float> fallback = {}) const;

  // Runs a subgraph (If/Loop/Scan body) with positional inputs; it reads outer values from this
  // node's scope.
  Expected<std::vector<RtValue>> runSubgraph(const Graph& graph,
                                             const std::vector<RtValue>& inputs);

  // How messages name this node: "node 'conv1' (Conv)", or when it has no name (as exporters
  // often leave it) "node producing 'y' (Conv)", its first named output.
  std::string nodeLabel() const;
  // A K5002 error naming this node: bad shapes, values or attribute combinations.
  template <typename... Args>
  Status fail(fmt::format_string<Args...> format, Args&&... args) const {
    return Status(
        ErrorCode::RuntimeBadInput,
        fmt::format("{}: {}", nodeLabel(), fmt::format(format, std::forward<Args>(args)...)),
        "check the model's shapes and the inputs fed to it");
  }
  // A K5001 error: this dtype / attribute combination has no kernel yet.
  template <typename... Args>
  Status unsupported(fmt::format_string<Args...> format, Args&&... args) const {
    return Status(
        ErrorCode::RuntimeUnsupported,
        fmt::format("{}: {}", nodeLabel(), fmt::format(format, std::forward<Args>(args)...)),
        "this case has no CPU kernel yet");
  }

 private:
  Executor& executor_;
  const Node& node_;
  std::vector<const RtValue*> inputs_;
  const Scope& scope_;
  int64_t opset_;
  std::vector<RtValue> outputs_;
  Epilogue* epilogue_ = nullptr;
  std::shared_ptr<void>* nodeState_ = nullptr;
  bool epilogueApplied_ = false;
  bool channelsLastAllowed_ = false, channelsLastOutput_ = false, channelsLastInput_ = false;
};

using KernelFn = Status (*)(KernelContext&);

// Registers a kernel for (domain, opType); "" is the ai.onnx domain. Returns true (for static
// init).
// `file` is the kernel family file that registers it (docs/ops.md names the family).
bool registerKernel(const std::string& domain, const std::string& opType, KernelFn fn,
                    const char* file = "");
KernelFn findKernel(const std::string& domain, const std::string& opType);
std::vector<std::string> registeredOps();
// The file that registered the kernel for (domain, opType); "" when none.
std::string kernelFile(const std::string& domain, const std::string& opType);

} // namespace kiln::rt

// Registers `fn` for ai.onnx `opType` at static-initialization time (kernel files are linked
// whole).
#define KILN_REGISTER_KERNEL(opType, fn)                                                           \
  static const bool KILN_CONCAT(kilnKernelRegistered_, __LINE__) =                                 \
      ::kiln::rt::registerKernel("", opType, fn, __FILE__)
