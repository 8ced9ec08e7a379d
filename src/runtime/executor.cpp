// Graph interpreter: topological walk, scope chaining for subgraphs, frees values after last use.
#include "kiln/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <set>
#include <stdexcept>
#include <unordered_set>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fusion.h"
#include "kiln/ir/node_equality.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/arena.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/memory.h"
#include "kiln/support/display.h"

namespace kiln::rt {
namespace {

void collectUnsupported(const Graph& graph, std::set<std::string>& ops,
                        std::vector<std::string>& nodes) {
  for (const auto& node : graph.nodes()) {
    if (!findKernel(node->domain(), node->opType())) {
      std::string op = displayName(node->domain().empty() ? node->opType()
                                                          : node->domain() + "::" + node->opType());
      ops.insert(op);
      if (nodes.size() < 20)
        nodes.push_back(fmt::format("'{}' ({})", displayName(node->name()), op));
    }
    for (const Graph* sub : node->subgraphs())
      collectUnsupported(*sub, ops, nodes);
  }
}

// Values of outer scopes that a node's subgraphs read: they must stay alive until the node runs.
void collectOuterReads(const Graph& graph, const Graph& scopeOwner,
                       std::unordered_set<const Value*>& out) {
  for (const auto& node : graph.nodes()) {
    for (const Value* in : node->inputs())
      if (in && in->owner() != &graph) out.insert(in);
    for (const Graph* sub : node->subgraphs())
      collectOuterReads(*sub, scopeOwner, out);
  }
  for (const Value* o : graph.outputs())
    if (o->owner() != &graph) out.insert(o);
}

// Runs one kernel. Allocation failures (a damaged or hostile model can ask for outputs of any size)
// become K5004 naming the node instead of ending the process.
Status callKernel(const KernelFn& kernel, KernelContext& context, const Node& node) {
  try {
    return kernel(context);
  } catch (const AllocationRefused& refused) {
    return Status(ErrorCode::RuntimeOutOfMemory,
                  fmt::format("node '{}' ({}) could not allocate {}", node.name(), node.opType(),
                              refused.reason()),
                  "check the model's shapes and attributes (kiln inspect --ir) and the inputs "
                  "fed to it; a damaged file can ask for any size");
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  std::string shapes;
  for (const Value* out : node.outputs())
    if (out && out->shape().hasRank())
      shapes += (shapes.empty() ? "" : ", ") + out->shape().toString();
  return Status(ErrorCode::RuntimeOutOfMemory,
                fmt::format("node '{}' ({}) could not allocate its output{}",
                            displayName(node.name()), displayName(node.opType()),
                            shapes.empty() ? "" : " (" + shapes + ")"),
                "check the model's shapes and attributes (kiln inspect --ir); a damaged file can "
                "ask for any size");
}

// Ops whose outputs are not a function of their inputs and attributes alone. Dropout draws only
// in training mode, but its training_mode input may be a feed, so it is never folded.
bool isRandomOp(const std::string& op) { return drawsRandomNumbers(op) || op == "Dropout"; }

size_t valueBytes(const RtValue& v) {
  size_t bytes = v.isTensor() ? v.tensor.byteSize() : 0;
  for (const Tensor& t : v.sequence)
    bytes += t.byteSize();
  return bytes;
}

// The data's dims as the model would read them after a layout change, when a 4-D input was fed
// in the other of NCHW / NHWC: the commonest mistake with converted models.
std::string layoutHint(const std::vector<int64_t>& model, const std::vector<int64_t>& data) {
  if (model.size() != 4 || data.size() != 4) return "";
  const std::vector<int64_t> toNhwc{data[0], data[2], data[3], data[1]};
  const std::vector<int64_t> toNchw{data[0], data[3], data[1], data[2]};
  if (toNhwc == model)
    return "; the data looks NCHW and the model takes NHWC: transpose it (0,2,3,1)";
  if (toNchw == model)
    return "; the data looks NHWC and the model takes NCHW: transpose it (0,3,1,2)";
  return "";
}

// Every fed tensor against its graph input: element type, rank and each fixed dim. A kernel
// would otherwise fail deep inside (or worse, compute on the wrong shape and succeed).
Status checkFeeds(const Graph& graph, const std::map<std::string, RtValue>& feeds) {
  for (const Value* in : graph.inputs()) {
    auto it = feeds.find(in->name());
    if (it == feeds.end() || !it->second.isTensor() || in->type().kind != TypeKind::Tensor)
      continue;
    const Tensor& data = it->second.tensor;
    const Shape& shape = in->shape();
    bool fits = in->dtype() == DType::Undefined || data.dtype() == in->dtype();
    if (shape.hasRank()) {
      fits = fits && shape.rank() == data.dims().size();
      for (size_t d = 0; fits && d < shape.rank(); ++d)
        fits = !shape.dims()[d].isStatic() || shape.dims()[d].value() == data.dims()[d];
    }
    if (fits) continue;
    std::vector<int64_t> modelDims;
    if (shape.isStatic()) modelDims = shape.staticDims();
    return Status(
        ErrorCode::RuntimeBadInput,
        fmt::format("input '{}': the model takes {}{}, the data is {}[{}]{}", in->name(),
                    dtypeName(in->dtype()), shape.toString(), dtypeName(data.dtype()),
                    fmt::join(data.dims(), ","),
                    data.dtype() == in->dtype() ? layoutHint(modelDims, data.dims()) : ""),
        "feed data of the model's type and shape (kiln inspect MODEL lists them)");
  }
  return Status::ok();
}

} // namespace

Executor::Executor(const Model& model, ExecutorOptions options)
    : model_(model), options_(options), opset_(model.opsetVersion("")),
      memory_(std::make_unique<ExecutorMemory>()), arena_(std::make_unique<RunArena>()) {
  if (!options_.plannedArena) arena_->disable();
  for (const auto& [key, value] : model.metadata) {
    if (key != kInputGearsKey) continue;
    nlohmann::json gears = nlohmann::json::parse(value, nullptr, false);
    if (!gears.is_array()) continue;
    for (const auto& gear : gears) {
      if (!gear.is_object()) continue;
      std::map<std::string, std::vector<int64_t>> shapes;
      for (const auto& [name, dims] : gear.items())
        if (dims.is_array()) shapes[name] = dims.get<std::vector<int64_t>>();
      gears_.push_back(std::move(shapes));
    }
  }
}

Status Executor::checkGear(const std::map<std::string, RtValue>& feeds) const {
  if (gears_.empty()) return Status::ok();
  auto text = [](const std::map<std::string, std::vector<int64_t>>& shapes) {
    std::vector<std::string> parts;
    for (const auto& [name, dims] : shapes)
      parts.push_back(fmt::format("{}:{}", name, fmt::join(dims, ",")));
    return fmt::format("{}", fmt::join(parts, ";"));
  };
  std::map<std::string, std::vector<int64_t>> given;
  for (const auto& [name, dims] : gears_.front()) {
    auto it = feeds.find(name);
    if (it == feeds.end() || !it->second.isTensor()) return Status::ok(); // reported elsewhere
    given[name] = it->second.tensor.dims();
  }
  for (const auto& gear : gears_)
    if (gear == given) return Status::ok();
  std::vector<std::string> gears;
  for (const auto& gear : gears_)
    gears.push_back(text(gear));
  return Status(ErrorCode::RuntimeBadInput,
                fmt::format("input shape {} matches none of the model's {} gears: {}", text(given),
                            gears_.size(), fmt::join(gears, " | ")),
                "feed inputs of one gear's shape, or convert the model again with this shape "
                "among the gears (atc --dynamic_batch_size / --dynamic_image_size / "
                "--dynamic_dims)");
}

Executor::~Executor() = default;

Executor::MemoryStats Executor::memoryStats() const {
  BufferPool::Stats pool = memory_->pool.stats();
  MemoryStats out;
  out.pooledBytes = pool.heldBytes;
  out.peakLiveBytes = pool.peakLiveBytes;
  out.requests = pool.requests;
  out.reused = pool.reused;
  out.widenedWeightBytes = memory_->widening.bytes();
  out.constantBytes = constantBytes_;
  out.constantNodes = constantNodes_;
  const RunArena::Stats arena = arena_->stats();
  out.arenaBytes = arena.arenaBytes;
  out.recordedPeakBytes = arena.recordedPeak;
  out.arenaServed = arena.served;
  out.divergedRuns = arena.divergedRuns;
  return out;
}

Expected<std::vector<RtValue>>
Executor::evaluateNode(const Node& node, const std::vector<const RtValue*>& inputs, int64_t opset) {
  KernelFn kernel = findKernel(node.domain(), node.opType());
  if (!kernel)
    return Status(ErrorCode::RuntimeUnsupported, fmt::format("no CPU kernel for {}", node.opType()),
                  "");
  static const Model emptyModel;
  Executor executor(emptyModel, ExecutorOptions{});
  Scope scope;
  KernelContext context(executor, node, inputs, scope, opset);
  KILN_TRY(callKernel(kernel, context, node));
  for (size_t i = 0; i < node.outputs().size(); ++i)
    if (node.output(i) && context.outputs()[i].kind == RtValue::Kind::Missing)
      return Status(ErrorCode::Internal,
                    fmt::format("{} did not produce output {}", node.opType(), i), "");
  return std::move(context.outputs());
}

Status Executor::checkSupported() const {
  std::set<std::string> ops;
  std::vector<std::string> nodes;
  collectUnsupported(*model_.graph, ops, nodes);
  if (ops.empty()) return Status::ok();
  return Status(ErrorCode::RuntimeUnsupported,
                fmt::format("no CPU kernel for {} op type(s) [{}], used by {}", ops.size(),
                            fmt::join(ops, ", "), fmt::join(nodes, ", ")),
                "these ops cannot be executed yet");
}

const RtValue& Executor::initializerValue(const Value* value) {
  auto it = initializers_.find(value);
  if (it != initializers_.end()) return it->second;
  const Tensor& t = value->initializer();
  Tensor usable = t;
  // Mapped raw_data can sit at any byte offset; kernels read typed pointers, so re-home those.
  if (t.data() && reinterpret_cast<uintptr_t>(t.data()) % 16 != 0) {
    std::vector<uint8_t> bytes(t.data(), t.data() + t.byteSize());
    usable = Tensor(t.dtype(), t.dims(), Buffer::owned(std::move(bytes)));
  }
  memory_->widening.addInitializer(usable);
  return initializers_.emplace(value, RtValue::ofTensor(std::move(usable))).first->second;
}

Expected<RunResult> Executor::run(const std::map<std::string, RtValue>& feeds) {
  const Graph& graph = *model_.graph;
  std::vector<RtValue> inputs;
  for (const Value* in : graph.inputs()) {
    auto it = feeds.find(in->name());
    if (it != feeds.end()) {
      inputs.push_back(it->second);
    } else if (in->isInitializer()) {
      inputs.push_back(initializerValue(in));
    } else {
      return Status(ErrorCode::RuntimeMissingInput,
                    fmt::format("no value fed for graph input '{}'", in->name()),
                    "pass --input NAME=FILE.pb for every graph input");
    }
  }
  for (const auto& [name, value] : feeds) {
    bool known = false;
    for (const Value* in : graph.inputs())
      known |= in->name() == name;
    if (!known)
      return Status(ErrorCode::RuntimeMissingInput,
                    fmt::format("'{}' is not an input of the graph", name),
                    "feed only the graph's inputs (see kiln inspect)");
  }
  KILN_TRY(checkGear(feeds));
  // A gear model's inputs are declared at the largest gear: checkGear judged their shapes.
  if (gears_.empty() && options_.checkFeeds) KILN_TRY(checkFeeds(graph, feeds));
  RunResult result;
  // Kernel outputs and scratch come from this executor's pool while it runs.
  MemoryScope memoryScope(memory_.get());
  ArenaScope arenaScope(arena_.get());
  current_ = &result;
  arena_->beginRun();
  auto outputs = runGraph(graph, inputs, nullptr);
  // An executor that keeps constant results expects later runs: its arena is made resident now,
  // with the first run's other set-up costs, rather than during the second run.
  arena_->endRun(options_.cacheConstants);
  current_ = nullptr;
  if (!outputs) return outputs.status();
  result.outputs = outputs.take();
  return result;
}

Expected<std::vector<RtValue>>
Executor::runGraph(const Graph& graph, const std::vector<RtValue>& inputs, const Scope* parent) {
  GraphPlan& plan = planFor(graph);
  Scope scope;
  scope.parent = parent;
  scope.slotOf = &plan.slotOf;
  scope.slots.resize(plan.slotValue.size());
  // Every initializer a node of this graph reads was resolved by planFor.
  scope.initializers = &initializers_;
  // Subgraph inputs are positional; a body may declare fewer inputs than the caller passes.
  // Graph inputs take the first slots, in order.
  for (size_t i = 0; i < graph.inputs().size() && i < inputs.size(); ++i)
    scope.slots[i] = inputs[i];
  for (size_t i = inputs.size(); i < graph.inputs().size(); ++i)
    if (graph.inputs()[i]->isInitializer()) scope.slots[i] = initializerValue(graph.inputs()[i]);
  KILN_TRY(runNodes(plan, scope));
  std::vector<RtValue> outputs;
  outputs.reserve(graph.outputs().size());
  for (const Value* out : graph.outputs()) {
    const RtValue* v = scope.find(out);
    if (!v && out->isInitializer()) v = &initializerValue(out);
    if (!v)
      return Status(ErrorCode::Internal,
                    fmt::format("graph output '{}' was not computed", out->name()), "");
    outputs.push_back(*v);
  }
  return outputs;
}

// Constant: an ai.onnx (or ai.onnx.ml) node without subgraphs or randomness whose every input is
// an initializer that no feed can override, or the output of a constant node.
bool Executor::isConstantNode(const Node& node) const {
  if (!node.domain().empty() && node.domain() != "ai.onnx.ml") return false;
  if (isRandomOp(node.opType()) || !node.subgraphs().empty()) return false;
  for (const Value* in : node.inputs())
    if (in && !isConstantValue(in)) return false;
  return true;
}

// Keeps a constant node's outputs for later runs, unless they are large and much larger than
// what they are made from (an Expand or ConstantOfShape to a big shape is cheaper to redo than to
// hold for the executor's life).
void Executor::keepConstantOutputs(GraphPlan& plan, size_t index,
                                   const std::vector<RtValue>& outputs) {
  size_t bytes = 0;
  for (const RtValue& v : outputs)
    bytes += valueBytes(v);
  size_t inputBytes = 0;
  const Node& node = *plan.steps[index].node;
  for (const Value* in : node.inputs())
    if (in && in->isInitializer()) inputBytes += in->initializer().byteSize();
  if (bytes > (size_t{64} << 20) && bytes > 4 * inputBytes) {
    plan.constant[index] = false;
    return;
  }
  plan.cached[index] = outputs;
  for (const RtValue& v : outputs)
    if (v.isTensor()) memory_->widening.addInitializer(v.tensor);
  constantBytes_ += bytes;
  ++constantNodes_;
}

Executor::GraphPlan& Executor::planFor(const Graph& graph) {
  auto found = plans_.find(&graph);
  if (found != plans_.end()) return found->second;
  GraphPlan plan;
  auto addSlot = [&](const Value* v) {
    auto [it, added] = plan.slotOf.try_emplace(v, static_cast<uint32_t>(plan.slotValue.size()));
    if (added) plan.slotValue.push_back(v);
    return it->second;
  };
  // Graph inputs first (runGraph fills slots 0..n-1 positionally), then node outputs in order.
  for (const Value* in : graph.inputs())
    addSlot(in);
  for (const auto& node : graph.nodes())
    for (const Value* out : node->outputs())
      if (out) addSlot(out);
  const bool captureAll = options_.captureIntermediates;
  auto captured = [&](const Value* v) {
    return captureAll || std::find(options_.captureNames.begin(), options_.captureNames.end(),
                                   v->name()) != options_.captureNames.end();
  };
  plan.steps.reserve(graph.nodeCount());
  std::vector<std::vector<uint32_t>> releaseAfter(graph.nodeCount());
  plan.constant.assign(graph.nodeCount(), false);
  plan.cached.resize(graph.nodeCount());
  plan.nodeState.resize(graph.nodeCount());
  // Each local value is released after the node that reads it last (in topological order), or
  // right after the node that makes it when nothing reads it; graph outputs and initializers stay.
  std::unordered_set<const Value*> keep(graph.outputs().begin(), graph.outputs().end());
  std::unordered_map<const Value*, size_t> lastUse;
  std::vector<const Value*> order(graph.inputs().begin(), graph.inputs().end());
  size_t index = 0;
  for (const auto& node : graph.nodes()) {
    Step step;
    step.node = node.get();
    step.kernel = findKernel(node->domain(), node->opType());
    step.firstInput = static_cast<uint32_t>(plan.inputs.size());
    for (const Value* in : node->inputs()) {
      InputRef ref;
      ref.value = in;
      if (!in) {
        ref.kind = InputRef::Kind::Omitted;
      } else if (auto slot = plan.slotOf.find(in); slot != plan.slotOf.end()) {
        ref.kind = InputRef::Kind::Slot;
        ref.slot = slot->second;
      } else if (in->isInitializer() && !in->isGraphInput()) {
        // Kept by the executor for its whole life (unordered_map elements do not move).
        ref.kind = InputRef::Kind::Constant;
        ref.constant = &initializerValue(in);
      } else {
        ref.kind = InputRef::Kind::Outer;
      }
      plan.inputs.push_back(ref);
    }
    step.inputCount = static_cast<uint32_t>(plan.inputs.size()) - step.firstInput;
    step.firstOutput = static_cast<uint32_t>(plan.outputs.size());
    for (const Value* out : node->outputs()) {
      OutputRef ref;
      if (out) ref = {out, plan.slotOf.at(out), captured(out)};
      plan.outputs.push_back(ref);
    }
    step.outputCount = static_cast<uint32_t>(plan.outputs.size()) - step.firstOutput;
    plan.steps.push_back(step);
    // Nodes come in topological order, so a constant node's constant inputs are known by now.
    if (options_.cacheConstants && isConstantNode(*node)) {
      plan.constant[index] = true;
      for (const Value* out : node->outputs())
        if (out) constantValues_.insert(out);
    }

    std::unordered_set<const Value*> nodeReads(node->inputs().begin(), node->inputs().end());
    for (const Graph* sub : node->subgraphs())
      collectOuterReads(*sub, graph, nodeReads);
    nodeReads.erase(nullptr);
    for (const Value* v : nodeReads)
      lastUse[v] = index;
    for (const Value* out : node->outputs())
      if (out) {
        lastUse.try_emplace(out, index);
        order.push_back(out);
      }
    ++index;
  }
  // Values released after one node go in the order they were made, the same on every run.
  for (const Value* v : order) {
    auto it = lastUse.find(v);
    if (it != lastUse.end() && v->owner() == &graph && !keep.count(v) && !v->isInitializer()) {
      if (auto slot = plan.slotOf.find(v); slot != plan.slotOf.end())
        releaseAfter[it->second].push_back(slot->second);
      lastUse.erase(it);
    }
  }
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    plan.steps[i].firstRelease = static_cast<uint32_t>(plan.releases.size());
    plan.releases.insert(plan.releases.end(), releaseAfter[i].begin(), releaseAfter[i].end());
    plan.steps[i].releaseCount = static_cast<uint32_t>(releaseAfter[i].size());
  }
  // Elementwise chains after Conv nodes run inside the Conv (fusion.h); not while every
  // intermediate is captured, and never through a value captured by name.
  if (options_.fuse && !options_.captureIntermediates)
    plan.fusion = planFusion(graph, opset_, options_.captureNames);
  return plans_.emplace(&graph, std::move(plan)).first->second;
}

Status Executor::runNodes(GraphPlan& plan, Scope& scope) {
  std::vector<const RtValue*> inputs;
  std::vector<RtValue> outputs;
  // Nodes whose work a fused Conv already did in this run.
  std::vector<char> fusedAway(plan.fusion ? plan.steps.size() : 0, 0);
  // Nodes whose input X a Conv left channels-last in this run (FusionPlan::handoffTo).
  std::vector<char> channelsLastIn(plan.fusion ? plan.steps.size() : 0, 0);
  // A Cast of FusionPlan::passHalf given float16 data: its output becomes that data as it is (the
  // same buffer), which its one reader, a DynamicQuantizeLinear, widens itself. False (the Cast
  // runs) for any other input, and when the output is captured.
  auto passHalf = [&](const Step& step) {
    const InputRef& in = plan.inputs[step.firstInput];
    const OutputRef& out = plan.outputs[step.firstOutput];
    if (out.capture && current_) return false;
    const RtValue* v = in.kind == InputRef::Kind::Slot       ? &scope.slots[in.slot]
                       : in.kind == InputRef::Kind::Outer    ? scope.find(in.value)
                       : in.kind == InputRef::Kind::Constant ? in.constant
                                                             : nullptr;
    if (!v || !v->isTensor() || v->tensor.dtype() != DType::Float16) return false;
    scope.slots[out.slot] = *v;
    return true;
  };
  auto release = [&](const Step& step) {
    for (uint32_t i = 0; i < step.releaseCount; ++i)
      scope.slots[plan.releases[step.firstRelease + i]] = RtValue();
  };
  for (size_t index = 0; index < plan.steps.size(); ++index) {
    const Step& step = plan.steps[index];
    const Node& node = *step.node;
    if (!fusedAway.empty() && fusedAway[index]) {
      release(step);
      continue;
    }
    if (!step.kernel)
      return Status(ErrorCode::RuntimeUnsupported,
                    fmt::format("node '{}': no CPU kernel for op {}{}", displayName(node.name()),
                                node.domain().empty() ? "" : displayName(node.domain()) + "::",
                                displayName(node.opType())),
                    "this op cannot be executed yet");
    const bool constant = plan.constant[index];
    if (constant && !plan.cached[index].empty()) {
      // Computed on an earlier run: the kept outputs stand in for the node.
      for (uint32_t i = 0; i < step.outputCount; ++i) {
        const OutputRef& ref = plan.outputs[step.firstOutput + i];
        if (!ref.value) continue;
        if (ref.capture && current_) keepCaptured(*ref.value, plan.cached[index][i]);
        scope.slots[ref.slot] = plan.cached[index][i];
      }
      release(step);
      continue;
    }
    if (!constant && plan.fusion && plan.fusion->passHalf[index] && passHalf(step)) {
      release(step);
      continue;
    }
    inputs.resize(step.inputCount);
    for (uint32_t i = 0; i < step.inputCount; ++i) {
      const InputRef& ref = plan.inputs[step.firstInput + i];
      const RtValue* v = nullptr;
      switch (ref.kind) {
      case InputRef::Kind::Omitted:
        inputs[i] = nullptr;
        continue;
      case InputRef::Kind::Slot:
        v = &scope.slots[ref.slot];
        if (v->kind == RtValue::Kind::Missing) v = nullptr;
        break;
      case InputRef::Kind::Constant:
        v = ref.constant;
        break;
      case InputRef::Kind::Outer:
        v = scope.find(ref.value);
        break;
      }
      if (!v)
        return Status(ErrorCode::Internal,
                      fmt::format("node '{}': input '{}' has no value", displayName(node.name()),
                                  displayName(ref.value->name())),
                      "");
      inputs[i] = v;
    }
    KernelContext context(*this, node, std::move(inputs), scope, opset_, std::move(outputs));
    context.setNodeState(&plan.nodeState[index]);
    const FusedChain* chain = nullptr;
    std::optional<Epilogue> epilogue;
    if (plan.fusion && plan.fusion->chainAt[index] >= 0) {
      chain = &plan.fusion->chains[static_cast<size_t>(plan.fusion->chainAt[index])];
      if ((epilogue = bindChain(*chain, scope))) context.setEpilogue(&*epilogue);
    }
    if (plan.fusion) {
      // Not for a node computed once and kept (its outputs outlive the hand-off), nor when its
      // chain could not be bound (the chain's nodes would then run on the channels-last data).
      if (plan.fusion->handoffTo[index] >= 0 && !constant && (!chain || epilogue))
        context.allowChannelsLastOutput();
      context.setChannelsLastInput(channelsLastIn[index] != 0);
    }
    auto start = options_.profile ? std::chrono::steady_clock::now()
                                  : std::chrono::steady_clock::time_point{};
    Status status = Status::ok();
    if (constant) {
      // Kept outputs live outside the pool: they are not part of any run's traffic.
      MemoryScope heap(nullptr);
      ArenaScope noArena(nullptr);
      status = callKernel(step.kernel, context, node);
    } else {
      status = callKernel(step.kernel, context, node);
    }
    if (options_.profile && current_) {
      OpProfile& entry = current_->profile[node.opType()];
      entry.millis +=
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      ++entry.calls;
    }
    const bool fused = chain && context.epilogueApplied();
    context.takeStorage(inputs, outputs);
    if (!status) return status;
    if (fused)
      for (size_t j : chain->nodes)
        fusedAway[j] = 1;
    if (context.channelsLastOutput())
      channelsLastIn[static_cast<size_t>(plan.fusion->handoffTo[index])] = 1;
    // A fused Conv's output 0 is its chain's result: not this node's value, so not kept.
    const bool keepOutputs = constant && !fused;
    for (uint32_t i = 0; i < step.outputCount; ++i) {
      // A fused Conv's output 0 is the chain's result: the last absorbed node's output.
      const OutputRef& ref = i == 0 && fused
                                 ? plan.outputs[plan.steps[chain->nodes.back()].firstOutput]
                                 : plan.outputs[step.firstOutput + i];
      if (!ref.value) continue;
      RtValue& produced = outputs[i];
      if (produced.kind == RtValue::Kind::Missing)
        return Status(ErrorCode::Internal,
                      fmt::format("node '{}' ({}) did not produce output '{}'",
                                  displayName(node.name()), displayName(node.opType()),
                                  displayName(ref.value->name())),
                      "");
      if (ref.capture && current_) keepCaptured(*ref.value, produced);
      if (keepOutputs)
        scope.slots[ref.slot] = produced; // `outputs` are kept below
      else
        scope.slots[ref.slot] = std::move(produced);
    }
    if (keepOutputs) keepConstantOutputs(plan, index, outputs);
    release(step);
  }
  return Status::ok();
}

} // namespace kiln::rt
