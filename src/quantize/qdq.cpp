// The QDQ rewrite of `kiln quantize`: calibrated QuantizeLinear → DequantizeLinear pairs on the
// activation inputs of Conv / MatMul / Gemm, int8 per-channel weights and int32 biases behind
// DequantizeLinear, the layout ONNX Runtime's static quantization writes.
//
//   %y = Conv(%x, %w: f32[64,3,3,3], %b: f32[64])
//     →  %x_q = QuantizeLinear(%x, %x_scale, %x_zero: u8)
//        %x_dq = DequantizeLinear(%x_q, %x_scale, %x_zero)
//        %w_dq = DequantizeLinear(%w_q: i8[64,3,3,3], %w_scale: f32[64], %w_zero: i8[64]) {axis=0}
//        %b_dq = DequantizeLinear(%b_q: i32[64], %b_scale: f32[64] = x_scale·w_scale) {axis=0}
//        %y = Conv(%x_dq, %w_dq, %b_dq)
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "../runtime/kernels/thread_pool.h"
#include <onnx/onnx_pb.h>

#include "kiln/compare.h"
#include "kiln/frontend/onnx.h"
#include "kiln/ir/constant.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"

namespace kiln {
namespace {

// Which input holds a node's weight and the axis its output channels run along.
struct WeightSlot {
  size_t input;
  int64_t axis;
};

std::optional<WeightSlot> weightSlotOf(const Node& node) {
  const std::string& op = node.opType();
  if (op == "Conv") return WeightSlot{1, 0};
  if (op == "MatMul") return WeightSlot{1, 1};
  if (op == "Gemm") {
    const Attribute* transB = node.attribute("transB");
    return WeightSlot{1, transB && transB->asInt() != 0 ? 0 : 1};
  }
  return std::nullopt;
}

// The tensor whose codes a quantized node's integer result is written as (quantizeOutputs): its
// output, or the output of a Relu that alone reads it, since requantizing to a range that starts
// at 0 clamps like the Relu (the form QLinearConv fusion absorbs the Relu in).
Value* quantizedOutputOf(const Node& node) {
  Value* y = node.output(0);
  if (!y || y->isGraphOutput() || y->uses().size() != 1) return y;
  const Node* reader = y->uses().front().user;
  if (reader->opType() == "Relu" && reader->domain().empty() && reader->owner() == node.owner())
    return reader->output(0);
  return y;
}

// A tensor baked into the model that no feed can replace.
const Tensor* constantOf(const Value* v) {
  if (!v || !v->isInitializer() || v->isGraphInput()) return nullptr;
  return &v->initializer();
}

// Whether `node` is one the rewrite quantizes: a Conv / MatMul / Gemm, and with
// constantWeightsOnly one whose weight is a constant (a MatMul of two activations, as attention
// has, gets no integer kernel on a target, so its codes would only add rounding).
bool quantizable(const Node& node, const QdqOptions& options) {
  auto slot = weightSlotOf(node);
  if (!slot) return false;
  return !options.constantWeightsOnly || constantOf(node.input(slot->input)) != nullptr;
}

// The inputs of a quantized node that carry activations (fed or computed, not constants).
std::vector<size_t> activationInputs(const Node& node) {
  std::vector<size_t> inputs;
  const size_t count = node.opType() == "Conv" ? 1 : 2;
  for (size_t i = 0; i < count && i < node.inputs().size(); ++i)
    if (node.input(i) && !constantOf(node.input(i))) inputs.push_back(i);
  return inputs;
}

struct WeightCodes {
  Tensor codes, scales, zeros;
  std::vector<float> scaleValues; // one per channel (one in all for per-tensor)
};

// int8 symmetric: per channel s = max|w| / 127, q = round(w / s) in [-127, 127]; `axis` < 0 is
// one scale for the whole tensor. An all-zero channel gets scale 1 (its codes are 0 either way).
WeightCodes quantizeWeight(const Tensor& weight, int64_t axis) {
  const auto& dims = weight.dims();
  int64_t outer = 1, channels = 1, inner = 1;
  if (axis >= 0) {
    for (size_t d = 0; d < dims.size(); ++d) {
      const int64_t extent = dims[d];
      if (static_cast<int64_t>(d) < axis)
        outer *= extent;
      else if (static_cast<int64_t>(d) == axis)
        channels = extent;
      else
        inner *= extent;
    }
  } else {
    inner = static_cast<int64_t>(weight.elementCount());
  }
  const float* w = reinterpret_cast<const float*>(weight.data());
  std::vector<float> peak(static_cast<size_t>(channels), 0.0f);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        const float v = std::fabs(w[(o * channels + c) * inner + k]);
        if (std::isfinite(v)) peak[size_t(c)] = std::max(peak[size_t(c)], v);
      }
  WeightCodes out;
  out.scaleValues.resize(size_t(channels));
  for (size_t c = 0; c < peak.size(); ++c)
    out.scaleValues[c] = peak[c] > 0 ? peak[c] / 127.0f : 1.0f;
  std::vector<int8_t> codes(weight.elementCount());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c)
      for (int64_t k = 0; k < inner; ++k) {
        const size_t i = size_t((o * channels + c) * inner + k);
        const float q = std::nearbyint(w[i] / out.scaleValues[size_t(c)]);
        codes[i] = static_cast<int8_t>(std::isfinite(q) ? std::clamp(q, -127.0f, 127.0f) : 0.0f);
      }
  out.codes = Tensor::fromValues<int8_t>(DType::Int8, dims, codes);
  std::vector<int64_t> scaleDims =
      axis >= 0 ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  out.scales = Tensor::fromValues<float>(DType::Float32, scaleDims, out.scaleValues);
  out.zeros =
      Tensor::fromValues<int8_t>(DType::Int8, scaleDims, std::vector<int8_t>(size_t(channels), 0));
  return out;
}

class QdqRewriter {
 public:
  QdqRewriter(Model& model, const QdqOptions& options, const CalibrationResult& calibration,
              const std::map<std::string, std::pair<double, double>>& ranges, QdqReport& report)
      : graph_(*model.graph), options_(options), calibration_(calibration), ranges_(ranges),
        report_(report), opset13_(model.opsetVersion("") >= 13),
        perChannel_(opset13_ && options.perChannelWeights) {}

  // Rewrites one node; false (and a note) when its activations cannot be quantized.
  bool rewrite(Node* node) {
    std::vector<size_t> inputs = activationInputs(*node);
    if (inputs.empty() || inputs.front() != 0) {
      note(fmt::format("'{}' ({}) left float: its first input is a constant",
                       keepDtypeNodeName(*node), node->opType()));
      return false;
    }
    for (size_t i : inputs)
      if (!coded_.count(node->input(i)) && !calibration_.tensors.count(node->input(i)->name())) {
        note(fmt::format("'{}' ({}) left float: input '{}' is not float32 in the calibration runs",
                         keepDtypeNodeName(*node), node->opType(), node->input(i)->name()));
        return false;
      }
    std::vector<float> inputScales;
    for (size_t i : inputs) {
      const Qdq& qdq = activationQdq(node, node->input(i));
      node->setInput(i, qdq.dequantized);
      inputScales.push_back(qdq.scale);
    }
    auto slot = weightSlotOf(*node);
    const Tensor* weight = slot ? constantOf(node->input(slot->input)) : nullptr;
    if (weight && weight->dtype() == DType::Float32) {
      const bool axisFits = static_cast<size_t>(slot->axis) < weight->dims().size() &&
                            (node->opType() == "Conv" || weight->dims().size() == 2);
      const int64_t axis = perChannel_ && axisFits ? slot->axis : -1;
      const Weight& w = weightDq(node, node->input(slot->input), axis);
      node->setInput(slot->input, w.dequantized);
      if (options_.quantizeBias) quantizeBias(node, inputScales.front(), w);
    }
    return true;
  }

  // quantizeOutputs: a QuantizeLinear → DequantizeLinear pair right after the tensor
  // `node`'s result is coded as, read by all its readers; a graph output keeps its name on the
  // dequantized copy.
  void quantizeOutput(Node* node) {
    Value* y = quantizedOutputOf(*node);
    if (!y || activations_.count(y)) return;
    if (!ranges_.count(y->name())) {
      note(fmt::format("output '{}' of '{}' left float: it is not float32 in the calibration runs",
                       y->name(), keepDtypeNodeName(*node)));
      return;
    }
    // The node after y's producer: the pair goes right behind it (nullptr: at the end).
    Node* anchor = nullptr;
    for (auto it = graph_.nodes().begin(); it != graph_.nodes().end(); ++it)
      if (it->get() == y->producer()) {
        auto next = std::next(it);
        anchor = next == graph_.nodes().end() ? nullptr : next->get();
        break;
      }
    const std::vector<Use> readers = y->uses();
    const Qdq& qdq = makeQdq(anchor, y, *node);
    for (const Use& use : readers)
      use.user->setInput(use.inputIndex, qdq.dequantized);
    const auto& outputs = graph_.outputs();
    for (size_t i = 0; i < outputs.size(); ++i)
      if (outputs[i] == y) {
        const std::string name = y->name();
        graph_.renameValue(y, graph_.uniqueName(name + "_float"));
        graph_.renameValue(qdq.dequantized, name);
        graph_.setOutput(i, qdq.dequantized);
      }
    ++report_.quantizedOutputs;
  }

 private:
  struct Qdq {
    Value* dequantized = nullptr;
    float scale = 1;
  };
  struct Weight {
    Value* dequantized = nullptr;
    std::vector<float> scales;
    int64_t axis = -1;
  };

  void note(std::string text) { report_.notes.push_back(std::move(text)); }

  Node* addNode(Node* before, const std::string& opType, const std::vector<Value*>& inputs,
                const std::string& output, const Node& owner) {
    Node* added = graph_.insertNodeBefore(before, opType, inputs, {graph_.uniqueName(output)});
    added->setName(added->output(0)->name());
    added->addLocation({owner.name(), opType});
    if (opType == "QuantizeLinear")
      ++report_.quantizeLinear;
    else
      ++report_.dequantizeLinear;
    return added;
  }

  // One QuantizeLinear → DequantizeLinear pair per activation, shared by every quantized node
  // reading it; made before its first such reader, which comes after its producer.
  const Qdq& activationQdq(Node* reader, Value* x) {
    auto found = activations_.find(x);
    if (found != activations_.end()) return found->second;
    // x is already the dequantized side of a pair (the requantized output of a quantized node
    // read by the next one, as Conv → Conv chains have): its codes serve this reader too.
    if (auto coded = coded_.find(x); coded != coded_.end()) return coded->second;
    return makeQdq(reader, x, *reader);
  }

  // The pair for `x`, inserted before `anchor` (nullptr: at the end).
  const Qdq& makeQdq(Node* anchor, Value* x, const Node& owner) {
    const bool int8 = options_.int8Activations;
    const auto [lo, hi] = ranges_.at(x->name());
    const QuantParam param = activationQuantParam(lo, hi, int8);
    const DType codeType = int8 ? DType::Int8 : DType::UInt8;
    Value* scale =
        graph_.addInitializer(graph_.uniqueName(x->name() + "_scale"),
                              Tensor::fromValues<float>(DType::Float32, {}, {param.scale}));
    Value* zero = graph_.addInitializer(
        graph_.uniqueName(x->name() + "_zero_point"),
        int8 ? Tensor::fromValues<int8_t>(codeType, {}, {static_cast<int8_t>(param.zeroPoint)})
             : Tensor::fromValues<uint8_t>(codeType, {}, {static_cast<uint8_t>(param.zeroPoint)}));
    Node* q = addNode(anchor, "QuantizeLinear", {x, scale, zero}, x->name() + "_quantized", owner);
    q->output(0)->setType(ValueType::tensor(codeType, x->shape()));
    Node* dq = addNode(anchor, "DequantizeLinear", {q->output(0), scale, zero},
                       x->name() + "_dequantized", owner);
    dq->output(0)->setType(ValueType::tensor(DType::Float32, x->shape()));
    const Qdq& made = activations_.emplace(x, Qdq{dq->output(0), param.scale}).first->second;
    coded_.emplace(made.dequantized, made);
    return made;
  }

  const Weight& weightDq(Node* reader, Value* w, int64_t axis) {
    auto found = weights_.find({w, axis});
    if (found != weights_.end()) return found->second;
    WeightCodes codes = quantizeWeight(w->initializer(), axis);
    Value* values =
        graph_.addInitializer(graph_.uniqueName(w->name() + "_quantized"), std::move(codes.codes));
    Value* scales =
        graph_.addInitializer(graph_.uniqueName(w->name() + "_scale"), std::move(codes.scales));
    Value* zeros =
        graph_.addInitializer(graph_.uniqueName(w->name() + "_zero_point"), std::move(codes.zeros));
    Node* dq = addNode(reader, "DequantizeLinear", {values, scales, zeros},
                       w->name() + "_dequantized", *reader);
    if (axis >= 0) dq->setAttribute("axis", Attribute::ofInt(axis));
    dq->output(0)->setType(ValueType::tensor(DType::Float32, w->shape()));
    if (axis < 0)
      note(fmt::format("weight '{}' quantized per tensor ({})", w->name(),
                       !options_.perChannelWeights ? "per-channel weights are off"
                       : perChannel_               ? "not a 2-D MatMul/Gemm weight"
                                     : "per-channel DequantizeLinear needs opset 13"));
    return weights_.emplace(std::make_pair(w, axis), Weight{dq->output(0), codes.scaleValues, axis})
        .first->second;
  }

  // Conv / Gemm bias as int32 codes with scale x_scale · w_scale (per output channel), as
  // integer kernels add it to their int32 accumulators. Left float when it does not fit: another
  // shape than [channels], Gemm's alpha/beta, or codes past int32.
  void quantizeBias(Node* node, float inputScale, const Weight& weight) {
    if (node->opType() != "Conv" && node->opType() != "Gemm") return;
    Value* bias = node->input(2);
    const Tensor* tensor = constantOf(bias);
    if (!tensor || tensor->dtype() != DType::Float32 || tensor->dims().size() != 1 || !opset13_)
      return;
    for (const char* factor : {"alpha", "beta"})
      if (const Attribute* a = node->attribute(factor); a && a->asFloat() != 1.0f) return;
    const size_t channels = static_cast<size_t>(tensor->dims()[0]);
    if (weight.scales.size() != channels && weight.scales.size() != 1) return;
    const std::vector<float> values = tensor->copyValues<float>();
    std::vector<float> scales(channels);
    std::vector<int32_t> codes(channels);
    for (size_t c = 0; c < channels; ++c) {
      scales[c] = inputScale * weight.scales[weight.scales.size() == 1 ? 0 : c];
      const double q = std::nearbyint(double(values[c]) / double(scales[c]));
      if (!(scales[c] > 0) || !std::isfinite(q) ||
          std::fabs(q) > double(std::numeric_limits<int32_t>::max())) {
        note(fmt::format("bias '{}' of '{}' left float: its int32 codes would overflow",
                         bias->name(), keepDtypeNodeName(*node)));
        return;
      }
      codes[c] = static_cast<int32_t>(q);
    }
    Value* coded = graph_.addInitializer(
        graph_.uniqueName(bias->name() + "_quantized"),
        Tensor::fromValues<int32_t>(DType::Int32, {int64_t(channels)}, codes));
    Value* scale = graph_.addInitializer(
        graph_.uniqueName(bias->name() + "_scale"),
        Tensor::fromValues<float>(DType::Float32, {int64_t(channels)}, scales));
    Node* dq =
        addNode(node, "DequantizeLinear", {coded, scale}, bias->name() + "_dequantized", *node);
    dq->setAttribute("axis", Attribute::ofInt(0));
    dq->output(0)->setType(ValueType::tensor(DType::Float32, bias->shape()));
    node->setInput(2, dq->output(0));
  }

  Graph& graph_;
  const QdqOptions& options_;
  const CalibrationResult& calibration_;
  const std::map<std::string, std::pair<double, double>>& ranges_;
  QdqReport& report_;
  const bool opset13_; // per-axis DequantizeLinear
  const bool perChannel_;
  std::map<Value*, Qdq> activations_;
  std::map<Value*, Qdq> coded_; // the same pairs by their dequantized value
  std::map<std::pair<Value*, int64_t>, Weight> weights_;
};

// Each calibrated tensor's range, found in parallel (Entropy's search takes tens of milliseconds a
// tensor); every tensor's range is computed alone, so the result does not depend on `threads`.
std::map<std::string, std::pair<double, double>>
activationRanges(const CalibrationResult& calibration, const QdqOptions& options) {
  std::vector<std::pair<const std::string*, const ActivationStats*>> tensors;
  for (const auto& [name, stats] : calibration.tensors)
    tensors.push_back({&name, &stats});
  std::vector<std::pair<double, double>> found(tensors.size());
  rt::pool::parallelFor(std::max(1, options.calibration.threads),
                        static_cast<int64_t>(tensors.size()), 1, [&](int64_t first, int64_t end) {
                          for (int64_t i = first; i < end; ++i) {
                            const ActivationStats& stats = *tensors[size_t(i)].second;
                            // Entropy's quantized bins: 256 codes for uint8 data that never goes
                            // negative, else the 128 of one sign.
                            const size_t levels =
                                !options.int8Activations && stats.min >= 0 ? 256 : 128;
                            found[size_t(i)] = activationRange(stats, options.calibration, levels,
                                                               options.int8Activations);
                          }
                        });
  std::map<std::string, std::pair<double, double>> ranges;
  for (size_t i = 0; i < tensors.size(); ++i)
    ranges[*tensors[i].first] = found[i];
  return ranges;
}

// Originals left without readers (a float weight replaced by its codes) are dropped.
void dropUnusedInitializers(Graph& graph) {
  std::vector<Value*> unused;
  for (Value* v : graph.initializers())
    if (!v->hasUses() && !v->isGraphOutput() && !v->isGraphInput()) unused.push_back(v);
  for (Value* v : unused)
    graph.eraseValue(v);
}

} // namespace

namespace {

// Every Conv / MatMul / Gemm not named by the user's --exclude or by `keepFloat` gets its QDQ
// inputs and int8 weights; counts and notes go to `report`.
void applyQdq(Model& model, const QdqOptions& options, const CalibrationResult& calibration,
              const std::map<std::string, std::pair<double, double>>& ranges,
              const std::vector<std::string>& keepFloat, QdqReport& report) {
  std::vector<Node*> targets;
  for (const auto& node : model.graph->nodes()) {
    if (!quantizable(*node, options)) continue;
    if (keepDtypeNames(*node, options.exclude))
      ++report.excludedNodes;
    else if (!keepDtypeNames(*node, keepFloat))
      targets.push_back(node.get());
  }
  QdqRewriter rewriter(model, options, calibration, ranges, report);
  for (Node* node : targets) {
    const bool rewritten = rewriter.rewrite(node);
    report.quantizedNodes += rewritten ? 1 : 0;
    if (rewritten && options.quantizeOutputs) rewriter.quantizeOutput(node);
  }
  dropUnusedInitializers(*model.graph);
}

// The model's outputs on the first `count` samples (the reference a trial is scored against).
Expected<std::vector<std::vector<Tensor>>>
outputsOn(const Model& model, const CalibrationData& data, size_t count, int threads) {
  rt::ExecutorOptions options;
  options.threads = std::max(1, threads);
  rt::Executor executor(model, options);
  KILN_TRY(executor.checkSupported());
  std::vector<std::vector<Tensor>> outputs;
  for (size_t i = 0; i < count; ++i) {
    KILN_ASSIGN_OR_RETURN(auto feeds, data.load(i));
    KILN_ASSIGN_OR_RETURN(rt::RunResult run, executor.run(feeds));
    std::vector<Tensor> tensors;
    for (const rt::RtValue& v : run.outputs)
      tensors.push_back(v.isTensor() ? v.tensor : Tensor());
    outputs.push_back(std::move(tensors));
  }
  return outputs;
}

// The worst cosine over floating-point outputs and samples.
double worstCosine(const std::vector<std::vector<Tensor>>& reference,
                   const std::vector<std::vector<Tensor>>& candidate) {
  double worst = 1;
  for (size_t s = 0; s < reference.size(); ++s)
    for (size_t o = 0; o < reference[s].size() && o < candidate[s].size(); ++o) {
      const Tensor& r = reference[s][o];
      const Tensor& c = candidate[s][o];
      if (!isFloatingPoint(r.dtype()) || r.dims() != c.dims()) continue;
      worst = std::min(worst, computeMetrics(r, c).cosine);
    }
  return worst;
}

// Accuracy-aware mode: ranks the nodes by the output cosine with only that node quantized, then
// finds (by bisection over the worst-first order) the fewest worst nodes to keep float so that the
// worst output cosine on the evaluation samples meets the target. Each trial quantizes a fresh
// copy of the prepared float model.
Expected<std::vector<std::string>>
keepListForTarget(const Model& model, const CalibrationData& data, const QdqOptions& options,
                  const CalibrationResult& calibration,
                  const std::map<std::string, std::pair<double, double>>& ranges,
                  QdqReport& report) {
  const double target = *options.targetCosine;
  const size_t samples = std::min(std::max<size_t>(1, options.evaluationSamples), data.size());
  onnx::ModelProto proto;
  KILN_TRY(exportOnnx(model, proto));
  KILN_ASSIGN_OR_RETURN(auto reference,
                        outputsOn(model, data, samples, options.calibration.threads));
  std::vector<std::string> candidates;
  for (const auto& node : model.graph->nodes())
    if (quantizable(*node, options) && !keepDtypeNames(*node, options.exclude))
      candidates.push_back(keepDtypeNodeName(*node));
  auto score = [&](const std::vector<std::string>& keep) -> Expected<double> {
    KILN_ASSIGN_OR_RETURN(Model copy, importOnnxProto(proto, model.sourcePath, "."));
    QdqReport scratch;
    applyQdq(copy, options, calibration, ranges, keep, scratch);
    KILN_ASSIGN_OR_RETURN(auto outputs,
                          outputsOn(copy, data, samples, options.calibration.threads));
    ++report.trials;
    return worstCosine(reference, outputs);
  };
  KILN_ASSIGN_OR_RETURN(double all, score({}));
  if (all >= target) {
    report.cosine = all;
    return std::vector<std::string>{};
  }
  // Loss of each node quantized alone (every other candidate kept float).
  std::vector<std::pair<double, size_t>> losses;
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::vector<std::string> others;
    for (size_t j = 0; j < candidates.size(); ++j)
      if (j != i) others.push_back(candidates[j]);
    KILN_ASSIGN_OR_RETURN(double alone, score(others));
    losses.push_back({1 - alone, i});
  }
  // Worst first; equal losses in model order.
  std::stable_sort(losses.begin(), losses.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  auto prefix = [&](size_t k) {
    std::vector<std::string> keep;
    for (size_t i = 0; i < k; ++i)
      keep.push_back(candidates[losses[i].second]);
    return keep;
  };
  // Every node float is the float model: it meets any target up to 1.
  size_t low = 0, high = candidates.size();
  double highScore = 1;
  while (high - low > 1) {
    const size_t mid = (low + high) / 2;
    KILN_ASSIGN_OR_RETURN(double got, score(prefix(mid)));
    if (got >= target)
      high = mid, highScore = got;
    else
      low = mid;
  }
  report.cosine = highScore;
  return prefix(high);
}

} // namespace

Expected<QdqReport> quantizeToQdq(Model& model, const CalibrationData& data,
                                  const QdqOptions& options) {
  if (options.calibration.method == CalibrationMethod::Percentile &&
      !(options.calibration.percentile > 0 && options.calibration.percentile <= 100))
    return Status(
        ErrorCode::BadFlag,
        fmt::format("--percentile {} is outside (0, 100]", options.calibration.percentile),
        "give a percentage such as 99.99");
  if (options.targetCosine && !(*options.targetCosine > 0 && *options.targetCosine <= 1))
    return Status(ErrorCode::BadFlag,
                  fmt::format("--target-cosine {} is outside (0, 1]", *options.targetCosine),
                  "give a cosine such as 0.999");
  QdqReport report;
  if (model.opsetVersion("") < 13) {
    auto raised = raiseOpsetTo13(model);
    if (raised)
      report.notes = raised.take();
    else if (model.opsetVersion("") < 10)
      return raised.status();
    else
      report.notes.push_back(
          fmt::format("weights quantized per tensor: {}", raised.status().message()));
  }
  // Weights and biases given by Constant nodes (as PaddlePaddle's exporter writes them) become
  // initializers, so they can be quantized like any other.
  std::vector<Node*> constantNodes;
  for (const auto& node : model.graph->nodes()) {
    if (!weightSlotOf(*node)) continue;
    for (size_t i : {size_t(1), size_t(2)}) {
      Value* v = node->input(i);
      Node* producer = v ? v->producer() : nullptr;
      if (producer && producer->opType() == "Constant" && producer->domain().empty() &&
          std::find(constantNodes.begin(), constantNodes.end(), producer) == constantNodes.end())
        constantNodes.push_back(producer);
    }
  }
  for (Node* constant : constantNodes)
    if (std::optional<Tensor> value = constantNodeValue(*constant))
      model.graph->replaceNodeWithConstants(constant, {std::move(*value)});
  if (options.equalizeChannels) {
    std::vector<const Node*> targets;
    for (const auto& node : model.graph->nodes())
      if (quantizable(*node, options) && !keepDtypeNames(*node, options.exclude))
        targets.push_back(node.get());
    KILN_ASSIGN_OR_RETURN(report.equalizedTensors,
                          equalizeChannels(model, data, targets, options.calibration));
  }
  std::vector<std::string> tensors;
  for (const auto& node : model.graph->nodes()) {
    if (!quantizable(*node, options) || keepDtypeNames(*node, options.exclude)) continue;
    for (size_t i : activationInputs(*node))
      tensors.push_back(node->input(i)->name());
    if (options.quantizeOutputs)
      if (const Value* y = quantizedOutputOf(*node)) tensors.push_back(y->name());
  }
  std::sort(tensors.begin(), tensors.end());
  tensors.erase(std::unique(tensors.begin(), tensors.end()), tensors.end());
  if (tensors.empty()) {
    for (const auto& node : model.graph->nodes())
      report.excludedNodes += weightSlotOf(*node) ? 1 : 0;
    report.notes.push_back("no Conv / MatMul / Gemm to quantize: the model is written unchanged");
    return report;
  }
  KILN_ASSIGN_OR_RETURN(report.calibration, calibrate(model, data, tensors, options.calibration));
  const auto ranges = activationRanges(report.calibration, options);
  if (options.targetCosine) {
    KILN_ASSIGN_OR_RETURN(report.keptFloat, keepListForTarget(model, data, options,
                                                              report.calibration, ranges, report));
  }
  // Bias correction compares against the float model as calibrated (after equalization).
  std::optional<Model> reference;
  if (options.biasCorrection && options.quantizeBias) {
    onnx::ModelProto proto;
    KILN_TRY(exportOnnx(model, proto));
    KILN_ASSIGN_OR_RETURN(reference, importOnnxProto(proto, model.sourcePath, "."));
  }
  applyQdq(model, options, report.calibration, ranges, report.keptFloat, report);
  if (reference) {
    KILN_ASSIGN_OR_RETURN(report.correctedBiases,
                          correctBiases(model, *reference, data, options.calibration.maxSamples,
                                        options.calibration.threads));
  }
  return report;
}

} // namespace kiln
