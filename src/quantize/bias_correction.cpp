// Bias correction for QDQ models: shifts each quantized Conv / Gemm's int32 bias codes by the
// per-channel mean error its int8 weights cause on the calibration samples.
//
// Rounding the weights to int8 moves a layer's output mean per channel (a systematic error that
// no activation range can hide); measuring that shift on the calibration data and taking it out
// of the bias makes the int8 layer's output mean match the float one.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>

#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"
#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"

namespace kiln {
namespace {

// Per-channel sums of a node output (channel axis 1) over every sample, in double and in sample
// order, so the means do not depend on the executor's thread count.
struct ChannelSums {
  std::vector<double> sum;
  uint64_t perChannel = 0; // elements added per channel
};

void addChannels(ChannelSums& sums, const Tensor& tensor) {
  if (tensor.dtype() != DType::Float32) return;
  const auto& dims = tensor.dims();
  if (dims.size() < 2 || dims[1] <= 0) return;
  const size_t n = static_cast<size_t>(tensor.elementCount());
  const size_t channels = static_cast<size_t>(dims[1]);
  const size_t outer = static_cast<size_t>(dims[0]);
  if (!n || !outer) return;
  const size_t inner = n / outer / channels;
  if (sums.sum.size() != channels) {
    if (!sums.sum.empty()) return; // shape changed between samples: leave this tensor alone
    sums.sum.assign(channels, 0.0);
  }
  const float* values = reinterpret_cast<const float*>(tensor.data());
  for (size_t o = 0; o < outer; ++o)
    for (size_t c = 0; c < channels; ++c) {
      double s = 0;
      const float* row = values + (o * channels + c) * inner;
      for (size_t i = 0; i < inner; ++i)
        s += row[i];
      sums.sum[c] += s;
    }
  sums.perChannel += outer * inner;
}

// The per-channel sums of the `names` tensors of `model` over the first `samples` samples.
Expected<std::map<std::string, ChannelSums>> channelSums(const Model& model,
                                                         const CalibrationData& data,
                                                         const std::vector<std::string>& names,
                                                         size_t samples, int threads) {
  std::map<std::string, ChannelSums> sums;
  const std::set<std::string> wanted(names.begin(), names.end());
  rt::ExecutorOptions options;
  options.threads = std::max(1, threads);
  options.captureNames = names;
  options.observeCaptured = [&](const Value& value, const rt::RtValue& produced) {
    if (produced.isTensor() && wanted.count(value.name()))
      addChannels(sums[value.name()], produced.tensor);
  };
  rt::Executor executor(model, options);
  KILN_TRY(executor.checkSupported());
  for (size_t i = 0; i < samples; ++i) {
    KILN_ASSIGN_OR_RETURN(auto feeds, data.load(i));
    auto ran = executor.run(feeds);
    if (!ran)
      return ran.status().withContext(
          fmt::format("bias correction sample '{}'", data.sampleName(i)));
  }
  return sums;
}

// A Conv / Gemm whose bias is int32 codes behind a per-channel DequantizeLinear, with the name of
// its output in the float model (a graph output's float value was renamed by the rewrite).
struct CodedBias {
  Node* node = nullptr;
  Value* codes = nullptr; // int32 initializer
  std::vector<float> scales;
  std::string quantizedName, floatName;
};

std::vector<CodedBias> codedBiases(Graph& graph, const Graph& floatGraph) {
  std::set<std::string> floatNames;
  for (const auto& node : floatGraph.nodes())
    for (const Value* out : node->outputs())
      if (out) floatNames.insert(out->name());
  std::vector<CodedBias> found;
  for (const auto& node : graph.nodes()) {
    if ((node->opType() != "Conv" && node->opType() != "Gemm") || !node->domain().empty() ||
        node->inputs().size() < 3 || !node->input(2))
      continue;
    const Node* dq = node->input(2)->producer();
    if (!dq || dq->opType() != "DequantizeLinear" || dq->inputs().size() < 2) continue;
    Value* codes = dq->input(0);
    const Value* scale = dq->input(1);
    if (!codes || !codes->isInitializer() || codes->initializer().dtype() != DType::Int32 ||
        !scale || !scale->isInitializer() || scale->initializer().dtype() != DType::Float32)
      continue;
    if (dq->inputs().size() > 2 && dq->input(2)) continue; // a zero point: not the rewrite's form
    CodedBias bias{node.get(), codes, scale->initializer().copyValues<float>(), {}, {}};
    const size_t channels = static_cast<size_t>(codes->initializer().elementCount());
    if (bias.scales.size() == 1) bias.scales.assign(channels, bias.scales[0]);
    if (bias.scales.size() != channels) continue;
    Value* y = node->output(0);
    bias.quantizedName = y->name();
    bias.floatName = y->name();
    // A quantized graph output: y was renamed "<name>_float" and its DequantizeLinear took the
    // name.
    for (const Use& use : y->uses())
      if (use.user->opType() == "QuantizeLinear")
        for (const Use& back : use.user->output(0)->uses())
          if (back.user->opType() == "DequantizeLinear" && back.user->output(0)->isGraphOutput())
            bias.floatName = back.user->output(0)->name();
    if (!floatNames.count(bias.floatName)) continue;
    found.push_back(std::move(bias));
  }
  return found;
}

} // namespace

Expected<size_t> correctBiases(Model& quantized, const Model& reference,
                               const CalibrationData& data, size_t maxSamples, int threads) {
  std::vector<CodedBias> biases = codedBiases(*quantized.graph, *reference.graph);
  if (biases.empty()) return size_t(0);
  const size_t samples = maxSamples ? std::min(maxSamples, data.size()) : data.size();
  // Each layer's own error: a copy of the quantized model where every corrected node gets a twin
  // reading the same (quantized) input and bias with the float weights. Comparing with the float
  // model's output instead would also count the shift inherited from the layers before, which
  // their own correction already removes: correcting both over-corrects (PP-OCR cls lost 3% of
  // top-1 agreement that way).
  onnx::ModelProto proto;
  KILN_TRY(exportOnnx(quantized, proto));
  KILN_ASSIGN_OR_RETURN(Model probe, importOnnxProto(proto, quantized.sourcePath, "."));
  std::map<std::string, const Node*> floatNodes;
  for (const auto& node : reference.graph->nodes())
    if (node->output(0)) floatNodes[node->output(0)->name()] = node.get();
  std::map<std::string, Node*> probeNodes;
  for (const auto& node : probe.graph->nodes())
    if (node->output(0)) probeNodes[node->output(0)->name()] = node.get();
  std::vector<std::string> names;
  std::map<std::string, std::string> twinOf; // quantized output -> its float-weight twin
  for (const CodedBias& b : biases) {
    const Node* floatNode = floatNodes.count(b.floatName) ? floatNodes.at(b.floatName) : nullptr;
    Node* node = probeNodes.count(b.quantizedName) ? probeNodes.at(b.quantizedName) : nullptr;
    if (!floatNode || !node || floatNode->opType() != node->opType()) continue;
    // The float weights the int8 codes were made from (same shape as the codes).
    const Value* weight = floatNode->input(1);
    const Node* weightDq = node->input(1) ? node->input(1)->producer() : nullptr;
    const Value* weightCodes = weightDq ? weightDq->input(0) : nullptr;
    if (!weight || !weight->isInitializer() || weight->initializer().dtype() != DType::Float32 ||
        !weightCodes || !weightCodes->isInitializer() ||
        weight->initializer().dims() != weightCodes->initializer().dims())
      continue;
    Value* floatWeight = probe.graph->addInitializer(
        probe.graph->uniqueName(weight->name() + "_float"), weight->initializer());
    // Right behind its node, so the input is released as soon as both have read it (appended at
    // the end, every corrected layer's input stayed alive for the whole run: det's RSS doubled).
    Node* anchor = nullptr;
    for (auto it = probe.graph->nodes().begin(); it != probe.graph->nodes().end(); ++it)
      if (it->get() == node) {
        auto next = std::next(it);
        anchor = next == probe.graph->nodes().end() ? nullptr : next->get();
        break;
      }
    Node* twin = probe.graph->insertNodeBefore(
        anchor, node->opType(), {node->input(0), floatWeight, node->input(2)},
        {probe.graph->uniqueName(b.quantizedName + "_float_weights")});
    for (const auto& [name, attribute] : node->attributes())
      twin->setAttribute(name, attribute);
    twinOf[b.quantizedName] = twin->output(0)->name();
    names.push_back(b.quantizedName);
    names.push_back(twin->output(0)->name());
  }
  if (twinOf.empty()) return size_t(0);
  KILN_ASSIGN_OR_RETURN(auto sums, channelSums(probe, data, names, samples, threads));
  size_t corrected = 0;
  for (const CodedBias& b : biases) {
    if (!twinOf.count(b.quantizedName)) continue;
    const ChannelSums& f = sums[twinOf.at(b.quantizedName)];
    const ChannelSums& q = sums[b.quantizedName];
    const size_t channels = b.scales.size();
    if (f.sum.size() != channels || q.sum.size() != channels || !f.perChannel ||
        f.perChannel != q.perChannel)
      continue;
    std::vector<int32_t> codes = b.codes->initializer().copyValues<int32_t>();
    bool changed = false;
    for (size_t c = 0; c < channels; ++c) {
      const double shift = (f.sum[c] - q.sum[c]) / double(f.perChannel);
      if (!(b.scales[c] > 0) || !std::isfinite(shift)) continue;
      const double code = double(codes[c]) + std::nearbyint(shift / double(b.scales[c]));
      const double limit = double(std::numeric_limits<int32_t>::max());
      const int32_t next = static_cast<int32_t>(std::clamp(code, -limit, limit));
      changed |= next != codes[c];
      codes[c] = next;
    }
    if (!changed) continue;
    b.codes->setInitializer(
        Tensor::fromValues<int32_t>(DType::Int32, b.codes->initializer().dims(), codes));
    ++corrected;
  }
  return corrected;
}

} // namespace kiln
