// quantize-weights: stores Conv/ConvTranspose/MatMul/Gemm weights and Gather embeddings as
// per-channel integers; the IR keeps the integers and their scale/zero point, and a
// DequantizeLinear in front of the consumer restores float values at run time.
//
//   %y = Conv(%x, %w: f32[64,3,3,3])
//     →  init %w_q = i8[64,3,3,3], %w_scale = f32[64], %w_zero = i8[64]
//        %w_dq = DequantizeLinear(%w_q, %w_scale, %w_zero) {axis = 0}
//        %y = Conv(%x, %w_dq)
// Channels are the output-channel axis (Conv: 0; ConvTranspose: 1; MatMul B [K,N]: 1; Gemm B: 1, or
// 0 with transB) and rows for Gather data. Symmetric: q = round(w / s), s = max|w| / (2^(b-1) - 1).
// Asymmetric: s = (max - min) / (2^b - 1), zero point chosen so min maps to the lowest code.
// Bias correction (on by default, as converter_lite's): per channel, a factor v and an offset m
// make the dequantized weights (q - z)·s·v + m keep the channel's original mean and standard
// deviation; v is folded into the scale and m becomes a per-channel Add after the dequantize:
//        %w_dq = DequantizeLinear(%w_q, %w_scale, %w_zero) {axis = 0}
//        %w_corr = Add(%w_dq, %w_mean_corr: f32[64,1,1,1])
// Channels with at most 256 / (32 - b) elements are left float, as converter_lite leaves them
// (per-channel parameters would outweigh the codes).
#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/precision_report.h"
#include "kiln/support/page_release.h"
#include "kiln/support/progress.h"
#include "../runtime/kernels/thread_pool.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

struct Target {
  size_t input; // which input holds the weight
  int64_t axis; // its channel axis
};

std::optional<Target> targetOf(const Node& node) {
  const std::string& op = node.opType();
  if (op == "Conv") return Target{1, 0};
  if (op == "ConvTranspose") return Target{1, 1};
  if (op == "MatMul") return Target{1, 1};
  if (op == "Gemm") {
    const Attribute* transB = node.attribute("transB");
    return Target{1, transB && transB->asInt() != 0 ? 0 : 1};
  }
  if (op == "Gather") {
    const Attribute* axis = node.attribute("axis");
    if (axis && axis->asInt() != 0) return std::nullopt; // embeddings gather rows
    return Target{0, 0};
  }
  return std::nullopt;
}

struct Quantized {
  Tensor values;
  Tensor scales;
  Tensor zeroPoints;
  std::optional<Tensor> meanCorrection; // shaped to broadcast along the channel axis
};

// Runs fn(first, last) over channel ranges on the project's worker pool. Every channel's work is
// done by one thread in the same element order, so the result does not depend on the thread count.
template <typename F>
void forChannelRanges(int threads, int64_t channels, uint64_t elements, F&& fn) {
  if (threads <= 0) threads = static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  // ≥ 256 Ki values per range: smaller tensors are not worth a hand-off.
  const int64_t parts = std::min<int64_t>({threads, channels, static_cast<int64_t>(elements >> 18) + 1});
  if (parts <= 1) {
    fn(int64_t{0}, channels);
    return;
  }
  rt::pool::parallelFor(static_cast<int>(parts), channels, 1,
                        [&](int64_t c0, int64_t c1) { fn(c0, c1); });
}

// A tensor laid out outer × channels × inner in memory order. Two loop shapes, both in memory
// order: inner > 1 (Conv: a channel is a contiguous run) reduces along each run; inner == 1
// (MatMul B, Gemm B: channels are the fastest axis) works across channels, one lane per channel.
// Either way each channel sees its elements in the same order as a loop over that channel alone,
// so per-channel sums come out the same.
struct Layout {
  int64_t outer, channels, inner;
  size_t at(int64_t o, int64_t c) const { return static_cast<size_t>((o * channels + c) * inner); }
};

// Per channel of `w`: the factor and offset that give the dequantized values the original mean
// and standard deviation. Sums in double: channels can hold many thousands of values.
template <typename Code>
void correctBias(int threads, const std::vector<float>& w, const Code* q,
                 const std::vector<int32_t>& zeros, const Layout& l, std::vector<float>& scales,
                 std::vector<float>& offsets) {
  offsets.assign(static_cast<size_t>(l.channels), 0.0f);
  forChannelRanges(threads, l.channels, w.size(), [&](int64_t c0, int64_t c1) {
    const size_t n = static_cast<size_t>(c1 - c0);
    std::vector<double> sumW(n), sumD(n), sumWW(n), sumDD(n);
    const float* wp = w.data();
    for (int64_t o = 0; o < l.outer; ++o) {
      if (l.inner == 1) {
        const size_t base = l.at(o, c0);
        for (size_t j = 0; j < n; ++j) {
          const double x = wp[base + j];
          const double d = static_cast<double>(q[base + j] - zeros[c0 + j]) *
                           static_cast<double>(scales[c0 + j]);
          sumW[j] += x;
          sumD[j] += d;
          sumWW[j] += x * x;
          sumDD[j] += d * d;
        }
        continue;
      }
      for (int64_t c = c0; c < c1; ++c) {
        const size_t j = static_cast<size_t>(c - c0), base = l.at(o, c);
        const double scale = scales[static_cast<size_t>(c)];
        const int32_t zero = zeros[static_cast<size_t>(c)];
        double sw = sumW[j], sd = sumD[j], sww = sumWW[j], sdd = sumDD[j];
        for (int64_t k = 0; k < l.inner; ++k) {
          const double x = wp[base + static_cast<size_t>(k)];
          const double d = static_cast<double>(q[base + static_cast<size_t>(k)] - zero) * scale;
          sw += x;
          sd += d;
          sww += x * x;
          sdd += d * d;
        }
        sumW[j] = sw, sumD[j] = sd, sumWW[j] = sww, sumDD[j] = sdd;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      const size_t j = static_cast<size_t>(c - c0);
      const double scale = scales[static_cast<size_t>(c)];
      const double count = static_cast<double>(l.outer * l.inner);
      const double meanW = sumW[j] / count, meanD = sumD[j] / count;
      const double varW = std::max(0.0, sumWW[j] / count - meanW * meanW);
      const double varD = std::max(0.0, sumDD[j] / count - meanD * meanD);
      const double factor = varD > 0 && varW > 0 ? std::sqrt(varW / varD) : 1.0;
      scales[static_cast<size_t>(c)] = static_cast<float>(scale * factor);
      offsets[static_cast<size_t>(c)] = static_cast<float>(meanW - meanD * factor);
    }
  });
}

// round-half-even(x / scale) + zero, clamped to [qmin, qmax]; the same value as
// clamp(nearbyint(x / scale) + zero) for every finite quotient, written so the compiler vectorises
// it: the quotient is first limited to ±2^20 (the clamp decides beyond that anyway), then rounded
// by adding and taking away 1.5·2^23 (exact round to nearest even below 2^22).
inline int32_t quantCode(float x, float scale, int32_t zero, int32_t qmin, int32_t qmax) {
  constexpr float kLimit = 1048576.0f, kMagic = 12582912.0f;
  float v = x / scale;
  v = v < -kLimit ? -kLimit : v;
  v = v > kLimit ? kLimit : v;
  v = (v + kMagic) - kMagic;
  int32_t code = static_cast<int32_t>(v) + zero;
  code = code < qmin ? qmin : code;
  return code > qmax ? qmax : code;
}

// The codes go straight into the bytes of the result tensor (int8 for ≤ 8 bits, else int16).
template <typename Code>
Quantized quantizeAs(const Tensor& weight, int64_t axis, const WeightQuantOptions& options,
                     DType codeType) {
  const auto& dims = weight.dims();
  Layout l{1, dims[static_cast<size_t>(axis)], 1};
  for (size_t i = static_cast<size_t>(axis) + 1; i < dims.size(); ++i)
    l.inner *= dims[i];
  for (size_t i = 0; i < static_cast<size_t>(axis); ++i)
    l.outer *= dims[i];
  if (!options.perChannel) // per layer: the whole tensor is one channel
    l = Layout{1, 1, static_cast<int64_t>(weight.elementCount())};
  const int64_t channels = l.channels;
  std::vector<float> w = weight.copyValues<float>();
  // The float copy is what is read from here on: the source's mapped pages can go.
  releasePages(weight.buffer().get());
  const int bits = options.bitNum;
  const int32_t qmin =
      options.symmetric ? -((int32_t{1} << (bits - 1)) - 1) : -(int32_t{1} << (bits - 1));
  const int32_t qmax = (int32_t{1} << (bits - 1)) - 1;
  std::vector<float> scales(static_cast<size_t>(channels));
  std::vector<int32_t> zeros(static_cast<size_t>(channels), 0);
  std::vector<uint8_t> bytes(w.size() * sizeof(Code));
  Code* q = reinterpret_cast<Code*>(bytes.data());
  const float* wp = w.data();
  forChannelRanges(options.threads, channels, w.size(), [&](int64_t c0, int64_t c1) {
    const size_t n = static_cast<size_t>(c1 - c0);
    std::vector<float> lo(n, 0.0f), hi(n, 0.0f); // the range always includes 0 so zero stays exact
    for (int64_t o = 0; o < l.outer; ++o) {
      if (l.inner == 1) {
        const float* row = wp + l.at(o, c0);
        for (size_t j = 0; j < n; ++j) {
          lo[j] = row[j] < lo[j] ? row[j] : lo[j];
          hi[j] = hi[j] < row[j] ? row[j] : hi[j];
        }
        continue;
      }
      for (int64_t c = c0; c < c1; ++c) {
        const size_t j = static_cast<size_t>(c - c0);
        const float* run = wp + l.at(o, c);
        float mn = lo[j], mx = hi[j];
        for (int64_t k = 0; k < l.inner; ++k) {
          mn = run[k] < mn ? run[k] : mn;
          mx = mx < run[k] ? run[k] : mx;
        }
        lo[j] = mn, hi[j] = mx;
      }
    }
    for (int64_t c = c0; c < c1; ++c) {
      const size_t j = static_cast<size_t>(c - c0);
      float scale;
      int64_t zero = 0;
      if (options.symmetric) {
        scale = std::max(std::fabs(lo[j]), std::fabs(hi[j])) / static_cast<float>(qmax);
      } else {
        scale = (hi[j] - lo[j]) / static_cast<float>(qmax - qmin);
        zero = scale > 0 ? qmin - static_cast<int64_t>(std::nearbyint(lo[j] / scale)) : 0;
        zero = std::clamp<int64_t>(zero, qmin, qmax);
      }
      if (scale == 0) scale = 1; // an all-zero channel: any scale represents it exactly
      scales[static_cast<size_t>(c)] = scale;
      zeros[static_cast<size_t>(c)] = static_cast<int32_t>(zero);
    }
    for (int64_t o = 0; o < l.outer; ++o) {
      if (l.inner == 1) {
        const size_t base = l.at(o, c0);
        const float* sc = scales.data() + c0;
        const int32_t* zp = zeros.data() + c0;
        for (size_t j = 0; j < n; ++j)
          q[base + j] = static_cast<Code>(quantCode(wp[base + j], sc[j], zp[j], qmin, qmax));
        continue;
      }
      for (int64_t c = c0; c < c1; ++c) {
        const size_t base = l.at(o, c);
        const float scale = scales[static_cast<size_t>(c)];
        const int32_t zero = zeros[static_cast<size_t>(c)];
        for (int64_t k = 0; k < l.inner; ++k)
          q[base + static_cast<size_t>(k)] =
              static_cast<Code>(quantCode(wp[base + static_cast<size_t>(k)], scale, zero, qmin, qmax));
      }
    }
  });
  Quantized out;
  if (options.biasCorrection) {
    std::vector<float> offsets;
    correctBias(options.threads, w, q, zeros, l, scales, offsets);
    if (std::any_of(offsets.begin(), offsets.end(), [](float m) { return m != 0; })) {
      std::vector<int64_t> broadcastDims(dims.size(), 1);
      if (options.perChannel) broadcastDims[static_cast<size_t>(axis)] = channels;
      out.meanCorrection = Tensor::fromValues<float>(DType::Float32, broadcastDims, offsets);
    }
  }
  // Per layer: scalar parameters (DequantizeLinear's per-tensor form).
  std::vector<int64_t> channelDims =
      options.perChannel ? std::vector<int64_t>{channels} : std::vector<int64_t>{};
  out.scales = Tensor::fromValues<float>(DType::Float32, channelDims, scales);
  std::vector<Code> zp(zeros.begin(), zeros.end());
  out.values = Tensor(codeType, dims, Buffer::owned(std::move(bytes)));
  out.zeroPoints = Tensor::fromValues<Code>(codeType, channelDims, zp);
  return out;
}

Quantized quantize(const Tensor& weight, int64_t axis, const WeightQuantOptions& options) {
  if (options.bitNum <= 8) return quantizeAs<int8_t>(weight, axis, options, DType::Int8);
  return quantizeAs<int16_t>(weight, axis, options, DType::Int16);
}

class QuantizeWeights : public Pass {
 public:
  std::string_view name() const override { return "quantize-weights"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!context.weightQuant) return false;
    const WeightQuantOptions& options = *context.weightQuant;
    if (options.bitNum < 1 || options.bitNum > 16)
      return Status(ErrorCode::BadFlag, fmt::format("bit_num {} is outside 1..16", options.bitNum),
                    "set bit_num between 1 and 16");
    std::map<Value*, Value*> dequantized; // one DequantizeLinear per weight, shared by its users
    std::map<std::string, std::pair<size_t, std::string>> skipped; // kind → count, first node
    std::map<std::string, size_t> otherFloat; // weights of another float type, by type
    size_t count = 0, coded = 0;
    uint64_t floatBytes = 0, quantBytes = 0;
    std::vector<Node*> order;
    uint64_t candidateBytes = 0;
    for (const auto& node : graph.nodes()) {
      order.push_back(node.get());
      if (auto target = targetOf(*node))
        if (const Tensor* t = rewrite::constantTensor(node->input(target->input)))
          if (t->dtype() == DType::Float32) candidateBytes += t->byteSize();
    }
    WriteProgress progress("quantizing weights", candidateBytes);
    for (Node* node : order) {
      auto target = targetOf(*node);
      if (!target) continue;
      if (!options.ops.empty() &&
          std::find(options.ops.begin(), options.ops.end(), node->opType()) == options.ops.end())
        continue;
      Value* weight = node->input(target->input);
      const Tensor* tensor = rewrite::constantTensor(weight);
      if (!tensor && weight && weight->producer() &&
          weight->producer()->opType() == "DequantizeLinear" &&
          rewrite::constantTensor(weight->producer()->input(0))) {
        ++coded; // integer codes already (a quantized op's weights, or a DequantizeLinear's)
        continue;
      }
      if (tensor && tensor->dtype() != DType::Float32 && isFloatingPoint(tensor->dtype())) {
        ++otherFloat[tensor->dtype() == DType::Float16    ? "float16"
                     : tensor->dtype() == DType::BFloat16 ? "bfloat16"
                                                          : std::string(dtypeName(tensor->dtype()))];
        continue;
      }
      if (!tensor || tensor->dtype() != DType::Float32) continue;
      progress.advance(tensor->byteSize());
      const auto& dims = tensor->dims();
      if (static_cast<size_t>(target->axis) >= dims.size() ||
          (node->opType() == "MatMul" && dims.size() != 2) ||
          (node->opType() == "Gemm" && dims.size() != 2))
        continue;
      // skip_quant_node and the report use the node's name, or for an unnamed node its first
      // output's name (as keep_dtype files do).
      const std::string nodeName = keepDtypeNodeName(*node);
      auto skip = [&](const char* reason, const std::string& why) {
        // One note per kind of skip (with a count and the first node), not one per node.
        auto& kind = skipped[reason];
        if (kind.first++ == 0)
          kind.second = fmt::format("'{}' ({}): {}", nodeName, node->opType(), why);
        if (context.precisionReport)
          context.precisionReport->skipped.push_back(
              {weight->name(), nodeName, node->opType(), reason});
      };
      if (std::find(options.skipNodes.begin(), options.skipNodes.end(), nodeName) !=
          options.skipNodes.end()) {
        skip("skip_quant_node", "named in skip_quant_node");
        continue;
      }
      if (tensor->elementCount() <= options.minQuantWeightSize) {
        skip("min_quant_weight_size",
             fmt::format("{} elements <= min_quant_weight_size {}", tensor->elementCount(),
                         options.minQuantWeightSize));
        continue;
      }
      bool isConv = node->opType() == "Conv" || node->opType() == "ConvTranspose";
      const int64_t channels = dims[static_cast<size_t>(target->axis)];
      // converter_lite skips Conv/Deconv weights with at most min_quant_weight_channel channels.
      if (isConv && channels <= options.minQuantWeightChannel) {
        skip("min_quant_weight_channel", fmt::format("{} channels <= min_quant_weight_channel {}",
                                                     channels, options.minQuantWeightChannel));
        continue;
      }
      // converter_lite leaves a tensor float when its channels are too small for per-channel
      // parameters to pay off: each must hold more than 256 / (32 - bit_num) values.
      const int64_t perChannel =
          static_cast<int64_t>(tensor->elementCount()) / (options.perChannel ? channels : 1);
      if (perChannel * (32 - options.bitNum) <= 256) {
        skip("per_channel_elements",
             fmt::format("{} values per channel <= 256 / (32 - {})", perChannel, options.bitNum));
        continue;
      }
      auto it = dequantized.find(weight);
      if (it == dequantized.end()) {
        Quantized q = quantize(*tensor, target->axis, options);
        floatBytes += tensor->byteSize();
        uint64_t after = q.values.byteSize() + q.scales.byteSize() + q.zeroPoints.byteSize() +
                         (q.meanCorrection ? q.meanCorrection->byteSize() : 0);
        quantBytes += after;
        if (context.precisionReport)
          context.precisionReport->quantized.push_back(
              {weight->name(), nodeName, node->opType(), options.bitNum, target->axis,
               options.symmetric, tensor->byteSize(), after});
        Value* values =
            graph.addInitializer(graph.uniqueName(weight->name() + "_q"), std::move(q.values));
        Value* scales =
            graph.addInitializer(graph.uniqueName(weight->name() + "_scale"), std::move(q.scales));
        Value* zeros = graph.addInitializer(graph.uniqueName(weight->name() + "_zero"),
                                            std::move(q.zeroPoints));
        Node* dq = graph.insertNodeBefore(node, "DequantizeLinear", {values, scales, zeros},
                                          {graph.uniqueName(weight->name() + "_dq")});
        if (options.perChannel) dq->setAttribute("axis", Attribute::ofInt(target->axis));
        dq->addLocation({node->name(), "DequantizeLinear"});
        dq->output(0)->setType(weight->type());
        Value* restored = dq->output(0);
        if (q.meanCorrection) {
          Value* offsets = graph.addInitializer(graph.uniqueName(weight->name() + "_mean_corr"),
                                                std::move(*q.meanCorrection));
          Node* add = graph.insertNodeBefore(node, "Add", {restored, offsets},
                                             {graph.uniqueName(weight->name() + "_corr")});
          add->addLocation({node->name(), "DequantizeLinear"});
          add->output(0)->setType(weight->type());
          restored = add->output(0);
        }
        it = dequantized.emplace(weight, restored).first;
        ++count;
      }
      node->setInput(target->input, it->second);
    }
    for (const auto& [kind, seen] : skipped)
      context.notes.push_back(fmt::format("weight quant: {} weight(s) left float by {} (first: {})",
                                          seen.first, kind, seen.second));
    for (const auto& [type, n] : otherFloat)
      context.notes.push_back(fmt::format(
          "weight quant: {} weight(s) are {} already, not float32: weight quant leaves them as "
          "they are",
          n, type));
    if (coded)
      context.notes.push_back(fmt::format(
          "weight quant: {} weight(s) are integer codes already (the model's quantized weights) "
          "and are kept as they are",
          coded));
    if (!count && !coded)
      context.notes.push_back(
          "weight quant: no weight was quantized, so the model keeps its float weights and size");
    if (count)
      context.notes.push_back(fmt::format(
          "weight quant: {} weight(s) to {}-bit {} {}{}, {} -> {} bytes", count, options.bitNum,
          options.symmetric ? "symmetric" : "asymmetric",
          options.perChannel ? "per-channel" : "per-layer",
          options.biasCorrection ? " with bias correction" : "", floatBytes, quantBytes));
    return count > 0;
  }
};

} // namespace

std::unique_ptr<Pass> makeQuantizeWeightsPass() { return std::make_unique<QuantizeWeights>(); }

} // namespace kiln
