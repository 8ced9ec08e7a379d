// Channel equalization before full-integer quantization: per-channel rescaling of Conv outputs and
// depthwise Conv inputs, absorbed by per-channel weight codes, so that per-tensor activation codes
// serve small channels as well as large ones (BatchNorm-folded MobileNet-style backbones without
// Relu have channels whose ranges differ a hundredfold).
//
//   %y = Conv(%x, %w, %b)                  %y' = Conv(%x, %w / t, %b / t)     (t per channel)
//   %z = HardSigmoid(%y)          →        %y  = Mul(%y', t)  → HardSigmoid, ...
//   %u = Conv(%y, %w2)                     %u  = Conv(%y', %w2 · t)  (t on w2's input channels)
//
//   %d = Conv(%x, %w) {group = C}   →      %x' = Mul(%x, 1 / s);  %d = Conv(%x', %w · s)
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "kiln/quantize.h"

namespace kiln {
namespace {

// A channel is scaled at most this much up: a dead channel (peak 0) stays as it is.
constexpr double kSmallestScale = 1.0 / 1024;
// Tensors whose channels all reach this share of the largest peak gain nothing.
constexpr double kWorthScaling = 0.5;

int64_t groupOf(const Node& conv) {
  const Attribute* group = conv.attribute("group");
  return group ? group->asInt() : 1;
}

// A float32 constant weight of rank 4 ([M, C/group, kh, kw]), or null.
const Tensor* convWeight(const Node& conv) {
  const Value* w = conv.input(1);
  if (!w || !w->isInitializer() || w->isGraphInput()) return nullptr;
  const Tensor& t = w->initializer();
  return t.dtype() == DType::Float32 && t.dims().size() == 4 ? &t : nullptr;
}

// Tensors with fewer values than this per channel and sample (the pooled vectors of
// squeeze-excitation blocks) are left alone: a peak seen over a few dozen values is no bound for
// the next input, and an equalized channel is clipped at its calibrated peak.
constexpr int64_t kFewestValuesPerChannel = 16;

bool spatialEnough(const Value& v) {
  const Shape& shape = v.shape();
  int64_t values = 1;
  for (size_t d = 2; d < shape.rank(); ++d) {
    if (!shape[d].isStatic()) return true;
    values *= shape[d].value();
  }
  return values >= kFewestValuesPerChannel;
}

// Per-channel factors (peak_c / max peak)^strength, clamped; empty when no channel is worth
// scaling.
std::vector<double> equalizingScales(const std::vector<double>& peaks, double strength = 1.0) {
  const double largest = peaks.empty() ? 0 : *std::max_element(peaks.begin(), peaks.end());
  if (!(largest > 0) || !std::isfinite(largest)) return {};
  std::vector<double> scales(peaks.size());
  bool worth = false;
  for (size_t c = 0; c < peaks.size(); ++c) {
    scales[c] = peaks[c] > 0
                    ? std::clamp(std::pow(peaks[c] / largest, strength), kSmallestScale, 1.0)
                    : 1.0;
    worth = worth || scales[c] < kWorthScaling;
  }
  return worth ? scales : std::vector<double>{};
}

class Equalizer {
 public:
  explicit Equalizer(Graph& graph) : graph_(graph) {}

  // Replaces input `i` of `node` by a fresh initializer holding `tensor` (the original may be
  // shared with other nodes).
  void setConstant(Node* node, size_t i, Tensor tensor) {
    const std::string base = node->input(i)->name() + "_equalized";
    node->setInput(i, graph_.addInitializer(graph_.uniqueName(base), std::move(tensor)));
  }

  // w[o, ...] · factor[o] (output channels) for a [M, ...] tensor.
  static Tensor scaleRows(const Tensor& w, const std::vector<double>& factor) {
    std::vector<float> values = w.copyValues<float>();
    const size_t rows = size_t(w.dims()[0]), inner = values.size() / rows;
    for (size_t o = 0; o < rows; ++o)
      for (size_t k = 0; k < inner; ++k)
        values[o * inner + k] = float(double(values[o * inner + k]) * factor[o]);
    return Tensor::fromValues<float>(DType::Float32, w.dims(), values);
  }

  // Conv weight [M, C/group, kh, kw] with its input channel c (of C) multiplied by factor[c].
  static Tensor scaleInputChannels(const Tensor& w, int64_t group,
                                   const std::vector<double>& factor) {
    std::vector<float> values = w.copyValues<float>();
    const auto& d = w.dims();
    const size_t outputs = size_t(d[0]), perGroupIn = size_t(d[1]), taps = size_t(d[2] * d[3]);
    const size_t perGroupOut = outputs / size_t(group);
    for (size_t o = 0; o < outputs; ++o)
      for (size_t ci = 0; ci < perGroupIn; ++ci) {
        const double f = factor[(o / perGroupOut) * perGroupIn + ci];
        for (size_t k = 0; k < taps; ++k) {
          float& v = values[(o * perGroupIn + ci) * taps + k];
          v = float(double(v) * f);
        }
      }
    return Tensor::fromValues<float>(DType::Float32, d, values);
  }

  // The [C, 1, ..., 1] constant that broadcasts over axis 1 of a tensor of rank `rank`.
  Value* channelConstant(const std::string& base, const std::vector<double>& factor, size_t rank) {
    std::vector<int64_t> dims{int64_t(factor.size())};
    dims.resize(rank - 1, 1);
    std::vector<float> values(factor.begin(), factor.end());
    return graph_.addInitializer(graph_.uniqueName(base),
                                 Tensor::fromValues<float>(DType::Float32, dims, values));
  }

  // Inserts %out = Mul(%x, factor) before `anchor`.
  Value* multiply(Node* anchor, Value* x, const std::vector<double>& factor,
                  const std::string& tag) {
    Value* constant = channelConstant(x->name() + "_" + tag, factor, x->shape().rank());
    Node* mul = graph_.insertNodeBefore(anchor, "Mul", {x, constant},
                                        {graph_.uniqueName(x->name() + "_" + tag + "ed")});
    mul->setName(mul->output(0)->name());
    mul->output(0)->setType(x->type());
    return mul->output(0);
  }

  // The node after `node` in graph order (nullptr: the end).
  Node* nodeAfter(const Node* node) {
    for (auto it = graph_.nodes().begin(); it != graph_.nodes().end(); ++it)
      if (it->get() == node) {
        auto next = std::next(it);
        return next == graph_.nodes().end() ? nullptr : next->get();
      }
    return nullptr;
  }

 private:
  Graph& graph_;
};

// The tensor a quantized Conv's codes are written as: its output, or that of a Relu alone reading
// it (a Relu commutes with a positive per-channel scale). Mirrors the QDQ rewrite's choice.
Value* codedOutputOf(Node& conv) {
  Value* y = conv.output(0);
  if (!y || y->isGraphOutput() || y->uses().size() != 1) return y;
  Node* reader = y->uses().front().user;
  if (reader->opType() == "Relu" && reader->domain().empty()) return reader->output(0);
  return y;
}

} // namespace

Expected<size_t> equalizeChannels(Model& model, const CalibrationData& data,
                                  const std::vector<const Node*>& targets,
                                  const CalibrationOptions& options) {
  Graph& graph = *model.graph;
  const std::set<const Node*> quantized(targets.begin(), targets.end());
  // The Conv nodes equalization can rewrite and the tensors it needs peaks of.
  std::vector<Node*> convs;
  std::vector<std::string> tensors;
  for (const auto& node : graph.nodes()) {
    if (!quantized.count(node.get()) || node->opType() != "Conv" || !convWeight(*node)) continue;
    if (node->inputs().size() > 2 && node->input(2) && !node->input(2)->isInitializer()) continue;
    convs.push_back(node.get());
    if (Value* y = codedOutputOf(*node); y && !y->isGraphOutput()) tensors.push_back(y->name());
    if (node->input(0)) tensors.push_back(node->input(0)->name());
  }
  if (convs.empty()) return size_t(0);
  std::sort(tensors.begin(), tensors.end());
  tensors.erase(std::unique(tensors.begin(), tensors.end()), tensors.end());
  CalibrationOptions peaksOnly = options;
  peaksOnly.method = CalibrationMethod::MinMax; // one run per sample gives the peaks
  KILN_ASSIGN_OR_RETURN(CalibrationResult peaks, calibrate(model, data, tensors, peaksOnly));
  auto peaksOf = [&](const Value* v) -> const std::vector<double>* {
    auto found = peaks.tensors.find(v->name());
    return found == peaks.tensors.end() || found->second.channelPeak.empty()
               ? nullptr
               : &found->second.channelPeak;
  };

  Equalizer eq(graph);
  size_t rescaled = 0;
  std::set<const Node*> producersOfEqualized; // Conv outputs already divided
  // Conv outputs: divide by t inside the Conv, multiply back for the readers.
  for (Node* conv : convs) {
    Value* y = codedOutputOf(*conv);
    if (!y || y->isGraphOutput() || y->shape().rank() < 3 || !spatialEnough(*y)) continue;
    const std::vector<double>* p = peaksOf(y);
    const Tensor& w = *convWeight(*conv);
    if (!p || p->size() != size_t(w.dims()[0])) continue;
    const std::vector<double> t = equalizingScales(*p);
    if (t.empty()) continue;
    std::vector<double> inverse(t.size());
    for (size_t c = 0; c < t.size(); ++c)
      inverse[c] = 1.0 / t[c];
    eq.setConstant(conv, 1, Equalizer::scaleRows(w, inverse));
    if (conv->inputs().size() > 2 && conv->input(2))
      eq.setConstant(conv, 2, Equalizer::scaleRows(conv->input(2)->initializer(), inverse));
    // Quantized Conv readers take t into their weights; every other reader reads y · t.
    const std::vector<Use> readers = y->uses();
    Value* restored = nullptr;
    for (const Use& use : readers) {
      Node* reader = use.user;
      const Tensor* w2 = use.inputIndex == 0 && reader->opType() == "Conv" &&
                                 std::find(convs.begin(), convs.end(), reader) != convs.end()
                             ? convWeight(*reader)
                             : nullptr;
      if (w2 && size_t(w2->dims()[1] * groupOf(*reader)) == t.size()) {
        eq.setConstant(reader, 1, Equalizer::scaleInputChannels(*w2, groupOf(*reader), t));
        continue;
      }
      if (!restored) restored = eq.multiply(eq.nodeAfter(y->producer()), y, t, "restore");
      reader->setInput(use.inputIndex, restored);
    }
    producersOfEqualized.insert(conv);
    ++rescaled;
  }
  // Conv inputs made by other (float) ops: divide by s before, multiply the weights' input
  // channels. A depthwise Conv's weight codes are per input channel too, so its input is
  // equalized fully; other Convs mix channels into each output channel's one weight scale, so
  // they take the square root (half of the range disparity moves into the weights).
  for (Node* conv : convs) {
    const Tensor& w = *convWeight(*conv);
    const int64_t group = groupOf(*conv);
    Value* x = conv->input(0);
    if (!x || x->shape().rank() < 3 || !spatialEnough(*x)) continue;
    if (x->producer() && quantized.count(x->producer())) continue; // its output was handled
    const std::vector<double>* p = peaksOf(x);
    const size_t channels = size_t(w.dims()[1] * group);
    if (!p || p->size() != channels) continue;
    const bool depthwise = w.dims()[1] == 1 && w.dims()[0] == group;
    const std::vector<double> s = equalizingScales(*p, depthwise ? 1.0 : 0.5);
    if (s.empty()) continue;
    std::vector<double> inverse(s.size());
    for (size_t c = 0; c < s.size(); ++c)
      inverse[c] = 1.0 / s[c];
    conv->setInput(0, eq.multiply(conv, x, inverse, "equalize"));
    eq.setConstant(conv, 1, Equalizer::scaleInputChannels(w, group, s));
    ++rescaled;
  }
  return rescaled;
}

} // namespace kiln
