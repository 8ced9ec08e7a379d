// A chain of float32 elementwise nodes (Add/Sub/Mul/Div/Max/Min with a constant, a per-channel
// constant, a same-shape tensor or another chain value; Relu, LeakyRelu, Clip, HardSigmoid,
// HardSwish; inference BatchNormalization) that the executor hands to the Conv kernel producing
// the chain's input, so that the chain runs on each block of the convolution's output while it is
// still in cache instead of one pass over the whole tensor per node. Every step calls the same
// loop (vec_loops.h) as the node's own kernel, with the same per-channel factors, so the fused
// result is bit-identical to running the nodes one by one.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "half_steps.h"
#include "kiln/ir/tensor.h"
#include "vec_loops.h"

namespace kiln::rt {
class Epilogue {
 public:
  // An operand of a step: slot 0 is the convolution's output, slot i the result of step i - 1;
  // `tensor` (slot < 0) is a value from outside the chain.
  struct Operand {
    int slot = -1;
    const Tensor* tensor = nullptr;
  };
  // ToHalf / ToFloat: a Cast of a float32 chain value to float16 and back (a ConvInteger chain's
  // float16 stretch); the steps between them compute in float16 as a half chain's do (see bind).
  enum class Kind : uint8_t { Unary, Binary, BatchNorm, ToHalf, ToFloat };
  struct Step {
    Kind kind = Kind::Unary;
    vec::BinOp binOp = vec::BinOp::Add;
    vec::UnOp unOp = vec::UnOp::Relu;
    float p0 = 0, p1 = 0; // unary parameters (vec::unary)
    Operand a, b;         // unary and BatchNorm steps read a
    // BatchNorm: scale, B, input_mean, input_var (float32, one value per channel) and epsilon.
    const Tensor* norm[4] = {};
    double epsilon = 1e-5;
  };

  void add(Step step) { steps_.push_back(step); }
  // Keeps an outside operand made for this chain at bind time (fusion.h's cast operands) alive
  // as long as the epilogue.
  const Tensor* own(Tensor t) {
    owned_.push_back(std::make_shared<const Tensor>(std::move(t)));
    return owned_.back().get();
  }
  size_t size() const { return steps_.size(); }

  // Checks every outside operand against the convolution's output dims [N, C, spatial...]: a
  // float32 scalar, a per-channel float32 tensor or a float32 tensor of exactly those dims (none
  // may change the output's shape); BatchNorm inputs are float32 with one value per channel (their
  // factors are worked out here; float32 chains only). False leaves the chain to the nodes' own
  // kernels.
  // With `half` the chain's values are float16 (the convolution computes in float and rounds its
  // output): the operands must be float16 (widened here, once per bind), and apply rounds the
  // convolution's values and each step's result to float16 as the nodes' own kernels do, so the
  // fused result is again bit-identical.
  // `narrowBase` (half chains only): the float16 output the chain's result is written to, at
  // each block's flat offset, when apply is not handed a `narrowTo` of its own. A chain without
  // steps then only rounds the convolution's output into it.
  // A float32 chain may hold a float16 stretch, ToHalf ... ToFloat, or end in one (endsHalf; the
  // result is then narrowed into setNarrowBase's output, which must be set before apply):
  // its steps take float16 operands and round their results as a half chain's do; ToHalf rounds
  // as the Cast kernel does, ToFloat gives the Cast's float32 value (NaN as floatsToHalves makes
  // it), so the result is again bit-identical to the nodes' own kernels.
  // `kept` (half chains): float32 copies of the chain's constant operands (the executor's
  // widening cache's) that the caller keeps between binds of the same chain (a Conv's node state),
  // so that a bind does not look each up in that cache again.
  struct KeptOperands {
    struct Slot {
      const Buffer* from = nullptr;
      Tensor floats;
    };
    std::vector<Slot> slots; // per step operand, a then b
  };
  bool bind(const std::vector<int64_t>& outDims, bool half = false, uint16_t* narrowBase = nullptr,
            KeptOperands* kept = nullptr);

  // Runs the chain in place over y[0, n), elements of channel `channel` starting at flat offset
  // `offset` of the output (after bind); a half chain also writes the float16 result to
  // `narrowTo[0, n)` when given. With `bias`, *bias is added to each y value first (the
  // convolution's bias, in the pass that reads the values anyway; the same float adds).
  // Thread-safe.
  void apply(float* y, int64_t n, int64_t channel, int64_t offset, uint16_t* narrowTo = nullptr,
             const float* bias = nullptr) const;
  // The whole NC... output, planes spread over `threads`.
  void applyAll(int threads, float* y) const;
  // True (after bind) when every step treats all elements alike: no BatchNorm and only scalar
  // outside operands; float32 without a float16 stretch, or a half chain. Such a chain gives the
  // same result on the output in any layout (applyAll then also runs it on channels-last data).
  bool channelAgnostic() const;
  // After bind: the chain's result is float16 (a float32 chain that ends in a float16 stretch).
  bool endsHalf() const { return !stepHalf_.empty() && stepHalf_.back(); }
  void setNarrowBase(uint16_t* base) { narrowBase_ = base; }

 private:
  enum class Shape { Scalar, PerChannel, Full };
  struct Bound {
    Shape shape = Shape::Scalar;
    const float* data = nullptr;
  };
  std::vector<Step> steps_;
  std::vector<Bound> boundA_, boundB_;
  std::vector<std::vector<float>> factors_; // BatchNorm steps: mul per channel, then add
  std::vector<Tensor> widened_;             // float32 copies of a half chain's outside operands
  // Per step of a half chain: its result is already a float16 value whenever its operands are
  // (Relu, Max, Min, Clip to float16 bounds pick one of their inputs), so rounding it is skipped.
  std::vector<bool> picksAHalf_;
  std::vector<std::shared_ptr<const Tensor>> owned_;
  std::vector<bool> stepHalf_; // per step: computes in float16 (all of a half chain's steps)
  // Per step: the first of a decomposed HardSwish, x + c, Clip, x * that, / d (each result read
  // only by the next), which apply runs as one pass (vec::hardSwishSteps).
  std::vector<bool> hardSwishAt_;
  // Per such step, bound once: the pass's parameters and rounding, apply setting only where the
  // result goes (narrow, roundLast).
  std::vector<vec::HardSwishSteps> hardSwish_;
  // Step 0 is such a HardSwish on the convolution's values, which no later step reads: its pass
  // adds the bias and rounds them itself.
  bool hardSwishTakesInput_ = false;
  void findHardSwishes();
  bool half_ = false;
  uint16_t* narrowBase_ = nullptr;
  int64_t batch_ = 0, channels_ = 0, plane_ = 0;
};

} // namespace kiln::rt
