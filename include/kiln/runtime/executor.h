// CPU reference executor: runs an IR graph node by node, optionally capturing every tensor.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/kernel.h"
#include "kiln/runtime/value.h"
#include "kiln/support/status.h"

namespace kiln::rt {

struct ExecutorOptions {
  int threads = 1;
  // Keep every intermediate value (by value name) for layer-by-layer comparison.
  bool captureIntermediates = false;
  // Keep just these values (by name), e.g. one tensor before a saturating activation.
  std::vector<std::string> captureNames;
  // Accumulate wall time per op type (RunResult::profile).
  bool profile = false;
  // Nodes whose inputs are all initializers (or outputs of such nodes) run once per executor and
  // their outputs are kept for later runs; off: every node runs on every run.
  bool cacheConstants = true;
  // Buffers of later runs at offsets in one block planned from the first run (RunArena); off: all
  // from the buffer pool.
  bool plannedArena = true;
  // Run elementwise chains after a Conv (Mul/Add/Clip/Div/activations) inside the Conv kernel
  // (bit-identical results, less memory traffic). Off while every intermediate is captured.
  bool fuse = true;
  // Refuse fed tensors whose element type, rank or fixed dims differ from the graph input's
  // (K5002). Off only for ONNX's backend test data, which has such cases (bfloat16 stored as
  // uint16, a [1] tensor for a [3,4] input that only lends its type).
  bool checkFeeds = true;
  // When set, captured values are handed to it as they are produced instead of being kept in
  // RunResult::captured: statistics over every tensor of a model in bounded memory.
  std::function<void(const Value&, const RtValue&)> observeCaptured;
};

struct OpProfile {
  double millis = 0;
  uint64_t calls = 0;
};

struct RunResult {
  std::vector<RtValue> outputs; // in graph output order
  std::map<std::string, RtValue> captured;
  std::map<std::string, OpProfile> profile; // by op type
};

// Values visible while a graph runs; subgraph scopes chain to their parent. A graph's own inputs
// and node outputs live in `slots` (numbered once per graph, `slotOf`); initializers are not
// copied in per run: find() falls back to the executor's initializer values (`initializers`).
struct Scope {
  const Scope* parent = nullptr;
  const std::unordered_map<const Value*, uint32_t>* slotOf = nullptr;
  std::vector<RtValue> slots;
  const std::unordered_map<const Value*, RtValue>* initializers = nullptr;
  const RtValue* find(const Value* value) const {
    for (const Scope* s = this; s; s = s->parent) {
      if (!s->slotOf) continue;
      auto it = s->slotOf->find(value);
      if (it != s->slotOf->end() && s->slots[it->second].kind != RtValue::Kind::Missing)
        return &s->slots[it->second];
    }
    if (initializers) {
      auto it = initializers->find(value);
      if (it != initializers->end()) return &it->second;
    }
    return nullptr;
  }
};

struct ExecutorMemory;
class RunArena;
struct FusionPlan;

class Executor {
 public:
  Executor(const Model& model, ExecutorOptions options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Every node (including subgraphs) whose op has no kernel, all at once; ok when all are covered.
  Status checkSupported() const;
  // Feeds are keyed by graph input name; inputs backed by initializers may be omitted.
  Expected<RunResult> run(const std::map<std::string, RtValue>& feeds);

  // Runs one node on given inputs (constant folding); nullptr entries are omitted inputs.
  static Expected<std::vector<RtValue>>
  evaluateNode(const Node& node, const std::vector<const RtValue*>& inputs, int64_t opset);

  const ExecutorOptions& options() const { return options_; }
  Expected<std::vector<RtValue>> runGraph(const Graph& graph, const std::vector<RtValue>& inputs,
                                          const Scope* parent);

  // Bytes the executor keeps between runs: pooled buffers (free and in use) and float32 copies
  // of fp16/bf16 weights.
  struct MemoryStats {
    size_t pooledBytes = 0, peakLiveBytes = 0, widenedWeightBytes = 0;
    uint64_t requests = 0, reused = 0;
    // Outputs of constant nodes kept between runs (ExecutorOptions::cacheConstants).
    size_t constantBytes = 0;
    uint64_t constantNodes = 0;
    // The planned arena (RunArena::Stats).
    size_t arenaBytes = 0, recordedPeakBytes = 0;
    uint64_t arenaServed = 0, divergedRuns = 0;
  };
  MemoryStats memoryStats() const;

  // True when `value` is the same on every run of this executor: an initializer that no feed can
  // override, or the output of a constant node.
  bool isConstantValue(const Value* value) const {
    return value && (constantValues_.count(value) ||
                     (value->isInitializer() && !value->isGraphInput()));
  }

 private:
  // What runNodes needs of a graph, worked out on its first run and reused by every later one:
  // each node's kernel, where each of its inputs comes from (a slot of this graph's scope, an
  // initializer, or an outer scope), the slots its outputs go to, and the slots whose last reader
  // it is (released after it runs).
  struct InputRef {
    enum class Kind : uint8_t { Omitted, Slot, Constant, Outer } kind = Kind::Omitted;
    uint32_t slot = 0;
    const RtValue* constant = nullptr; // Kind::Constant
    const Value* value = nullptr;      // Kind::Outer (and for messages)
  };
  struct OutputRef {
    const Value* value = nullptr; // nullptr: an omitted optional output
    uint32_t slot = 0;
    bool capture = false; // kept in RunResult::captured
  };
  struct Step {
    const Node* node = nullptr;
    KernelFn kernel = nullptr;
    uint32_t firstInput = 0, inputCount = 0, firstOutput = 0, outputCount = 0;
    uint32_t firstRelease = 0, releaseCount = 0;
  };
  struct GraphPlan {
    std::unordered_map<const Value*, uint32_t> slotOf;
    std::vector<const Value*> slotValue; // by slot
    std::vector<Step> steps;
    std::vector<InputRef> inputs;
    std::vector<OutputRef> outputs;
    std::vector<uint32_t> releases;
    std::shared_ptr<const FusionPlan> fusion; // null when nothing fuses
    // Constant nodes (inputs all initializers or constant nodes' outputs): their outputs, once
    // computed, are kept in `cached` (by step; empty until the node first runs).
    std::vector<bool> constant;
    std::vector<std::vector<RtValue>> cached;
    // What a kernel keeps about its node between runs (KernelContext::nodeState), by step.
    std::vector<std::shared_ptr<void>> nodeState;
  };
  GraphPlan& planFor(const Graph& graph);
  bool isConstantNode(const Node& node) const;
  void keepConstantOutputs(GraphPlan& plan, size_t index, const std::vector<RtValue>& outputs);
  Status runNodes(GraphPlan& plan, Scope& scope);
  const RtValue& initializerValue(const Value* value);
  // A gear model (kInputGearsKey): the fed shapes must be one gear's.
  Status checkGear(const std::map<std::string, RtValue>& feeds) const;
  void keepCaptured(const Value& value, const RtValue& produced) {
    if (options_.observeCaptured)
      options_.observeCaptured(value, produced);
    else
      current_->captured[value.name()] = produced;
  }

  const Model& model_;
  ExecutorOptions options_;
  int64_t opset_;
  RunResult* current_ = nullptr;
  // Initializers re-homed into aligned buffers when the mapped bytes are misaligned.
  std::unordered_map<const Value*, RtValue> initializers_;
  std::unordered_map<const Graph*, GraphPlan> plans_;
  // Values that are the same on every run: initializers that are not graph inputs, outputs of
  // constant nodes (of this graph or an enclosing one).
  std::unordered_set<const Value*> constantValues_;
  size_t constantBytes_ = 0;
  uint64_t constantNodes_ = 0;
  std::unique_ptr<ExecutorMemory> memory_;
  std::vector<std::map<std::string, std::vector<int64_t>>> gears_; // from kInputGearsKey
  std::unique_ptr<RunArena> arena_;
};

} // namespace kiln::rt
