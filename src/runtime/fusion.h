// Executor-level fusion: elementwise chains that run as a Conv's epilogue (kernels/epilogue.h).
// The plan is worked out once per graph; each run binds the chain's outside operands.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/epilogue.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"

namespace kiln::rt {

struct FusedChain {
  // One absorbed node: its step with chain slots filled in, and the outside values to bind.
  struct Step {
    Epilogue::Step step;
    // Values from outside the chain, read at bind time: binary ops' operands a and b (those that
    // are not chain values), Clip's (opset 11+) bounds lo and hi, BatchNormalization's scale, B,
    // input_mean and input_var.
    enum Outside { kA = 0, kB = 1, kLo = 2, kHi = 3, kScale = 0, kBias = 1, kMean = 2, kVar = 3 };
    const Value* outside[4] = {};
    // Outputs of Constant nodes (which may come after the Conv in graph order), taken from the
    // node's attribute once, by the same index.
    std::optional<Tensor> constant[4];
    // Outputs of Cast nodes after the Conv (a scale's Cast to float32): `outside` is then the
    // Cast's input, which exists when the Conv runs, cast at bind time as the Cast kernel casts it.
    DType castTo[4] = {DType::Undefined, DType::Undefined, DType::Undefined, DType::Undefined};
  };
  size_t producer = 0;       // the Conv's node index
  std::vector<size_t> nodes; // absorbed node indices, in graph order
  std::vector<Step> steps;   // one per absorbed node (but a leading Cast)
  // A ConvInteger's chain: nodes[0] is the Cast of its int32 output to float32, which the kernel
  // does itself (no step); the steps run on the Cast's output.
  bool castFirst = false;
  const Value* result = nullptr; // what the Conv's output becomes: the last node's output
};

struct FusionPlan {
  std::vector<int32_t> chainAt; // per node index: its chain in `chains`, or -1
  std::vector<FusedChain> chains;
  // Per node index: for a Conv whose result (its chain's, or its own output 0) is read by one
  // Conv alone, as that Conv's input X, the reader's index; else -1. The reader has group 1 and a
  // kernel larger than 1x1 (the oneDNN path, when built in), so the producer may hand its result
  // over channels-last (KernelContext::allowChannelsLastOutput). The reader may also be a 2-D
  // MaxPool without Indices whose output is handed on so: it pools channels-last data as such.
  // Float16 Convs hand over float16 values, or, where the graph declares the value float16, the
  // float32 values already rounded to float16 (the reader skips widening them); a float16 Conv
  // that never runs on oneDNN (grouped, or 1x1 with stride 1 and no padding) writes planar values
  // and so may hand them to any Conv reading them as X alone, or to several float16 Convs that
  // each read them as X alone (the entry is then the first of them).
  // Planar widened hand-offs also come from float16 ConvTranspose nodes (to a float16 Conv or
  // ConvTranspose) and from float16 Add/Sub/Mul/Div, Concat and Cast to float16 (to a float16
  // Conv), each read by that one node alone; and from float16 Add/Sub/Mul/Div to a Cast to
  // float32 that reads them alone (the Cast passes the widened values on as its output).
  std::vector<int32_t> handoffTo;
  // Per node index: 1 for a Cast to float32 whose output one DynamicQuantizeLinear alone reads
  // (as its x) and that is no graph output nor kept. Given float16 data, the Cast hands it on as
  // it is and the reader widens it a block at a time: the same floats (widening is exact) without
  // a float32 copy of the whole tensor.
  std::vector<char> passHalf;
};

// Finds the chains after each Conv and float16 ConvTranspose (and after each ConvInteger whose
// output goes only to a Cast to float32, the Cast absorbed too): float32 Add/Sub/Mul/Div/Max/Min
// (two inputs)/Relu/LeakyRelu/ Clip/HardSigmoid/HardSwish/BatchNormalization (inference, one
// output) nodes whose chain inputs are read nowhere else, are no graph output and are not named in
// `keep`, and whose other inputs exist before the Conv runs (or are a Cast, to float32 or float16,
// of such a value). A ConvInteger's chain may also pass through Cast to float16, float16 steps and
// Cast back to float32, or end in float16 (the kernel then writes a float16 output). It also holds
// the hand-offs (FusionPlan::handoffTo) and the float16 Casts a DynamicQuantizeLinear reads
// through (FusionPlan::passHalf). nullptr when nothing fuses, hands off or passes.
std::shared_ptr<const FusionPlan> planFusion(const Graph& graph, int64_t opset,
                                             const std::vector<std::string>& keep);

// The chain with its outside operands taken from `scope`; nullopt when one is missing, is not a
// tensor or (Clip bounds) not a float32 scalar: the nodes then run on their own.
std::optional<Epilogue> bindChain(const FusedChain& chain, const Scope& scope);

} // namespace kiln::rt
