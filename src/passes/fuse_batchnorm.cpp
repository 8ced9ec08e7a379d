// fuse-batchnorm: folds an inference BatchNormalization into the Conv, ConvTranspose or Gemm that
// feeds it, by rescaling the weights per output channel and rewriting the bias.
//
//   %c = Conv(%x, %w, %b) {...}                        %y = Conv(%x, %w_bn, %b_bn) {...}
//   %y = BatchNormalization(%c, %s, %beta, %m, %v)  →    with  k = s / sqrt(v + epsilon)
//                                                              w_bn[o] = w[o] * k[o]
//                                                              b_bn = (b - m) * k + beta
// ConvTranspose weights are [C_in, C_out/group, ...]: element [i, j, ...] belongs to output channel
// (i / (C_in/group)) * (C_out/group) + j. Gemm scales the columns of B (rows when transB = 1) and
// its bias becomes (beta_gemm * C - m) * k + beta with beta_gemm = 1. The fused node keeps %y's
// name and the locations of both originals; the old weights stay for eliminate-dead-nodes. Declines
// when the BatchNormalization is in training mode or its statistics outputs are read, when the
// producer's output has another reader, or when any weight is not a constant f32 initializer. A
// per-channel bias Add between the two (how some exporters write a ConvTranspose bias) folds in as
// well: Conv → Add(%c, const [1,C,1,1]) → BatchNormalization becomes one Conv.
#include <cmath>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::constantTensor;

const Tensor* constantF32(const Value* v) {
  const Tensor* t = constantTensor(v);
  return t && t->dtype() == DType::Float32 ? t : nullptr;
}

// Per-channel scale k and shift t such that BatchNormalization(x) = x * k + t.
struct Affine {
  std::vector<double> scale;
  std::vector<double> shift;
  std::vector<double> mean; // applied to the producer's bias before scaling
};

std::optional<Affine> batchNormAffine(const Node& bn, std::string& why) {
  const Tensor* s = constantF32(bn.input(1));
  const Tensor* beta = constantF32(bn.input(2));
  const Tensor* mean = constantF32(bn.input(3));
  const Tensor* var = constantF32(bn.input(4));
  if (!s || !beta || !mean || !var) {
    why = "scale, bias, mean and var must be constant f32 initializers";
    return std::nullopt;
  }
  const uint64_t c = s->elementCount();
  if (s->dims().size() != 1 || beta->elementCount() != c || mean->elementCount() != c ||
      var->elementCount() != c) {
    why = "scale, bias, mean and var must be 1-D of one length";
    return std::nullopt;
  }
  const Attribute* epsAttr = bn.attribute("epsilon");
  const double eps = epsAttr && epsAttr->kind() == AttrKind::Float ? epsAttr->asFloat() : 1e-5;
  auto sv = s->copyValues<float>(), bv = beta->copyValues<float>();
  auto mv = mean->copyValues<float>(), vv = var->copyValues<float>();
  Affine a;
  for (uint64_t i = 0; i < c; ++i) {
    // Double precision: the fused weights are rounded to f32 once, not after every step.
    double k = sv[i] / std::sqrt(static_cast<double>(vv[i]) + eps);
    a.scale.push_back(k);
    a.mean.push_back(mv[i]);
    a.shift.push_back(bv[i]);
  }
  return a;
}

// Why this BatchNormalization cannot be fused regardless of its producer, or "".
std::string batchNormDeclineReason(const Node& bn, int64_t opset) {
  if (bn.inputs().size() < 5 || !bn.output(0)) return "needs X, scale, B, mean and var";
  for (size_t i = 1; i < bn.outputs().size(); ++i)
    if (!rewrite::outputUnused(bn, i)) return "its running statistics outputs are read";
  if (const Attribute* t = bn.attribute("training_mode");
      t && t->kind() == AttrKind::Int && t->asInt() != 0)
    return "training_mode = 1";
  if (const Attribute* sp = bn.attribute("spatial");
      opset < 9 && sp && sp->kind() == AttrKind::Int && sp->asInt() == 0)
    return "spatial = 0 keeps per-activation statistics";
  if (bn.output(0)->dtype() != DType::Float32) return "only f32 is folded";
  return "";
}

int64_t intAttr(const Node& node, const std::string& name, int64_t fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

float floatAttr(const Node& node, const std::string& name, float fallback) {
  const Attribute* a = node.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : fallback;
}

// Output channel of each weight element, for the producer's weight layout.
std::optional<std::vector<int64_t>> channelOfWeight(const Node& producer, const Tensor& w,
                                                    uint64_t channels, std::string& why) {
  const auto& dims = w.dims();
  const std::string& op = producer.opType();
  std::vector<int64_t> channel(w.elementCount());
  if (op == "Conv") {
    if (dims.size() < 3 || static_cast<uint64_t>(dims[0]) != channels) {
      why = fmt::format("Conv weight {} does not have {} output channels",
                        Shape::fromStatic(dims).toString(), channels);
      return std::nullopt;
    }
    const uint64_t inner = w.elementCount() / channels;
    for (uint64_t i = 0; i < channel.size(); ++i)
      channel[i] = static_cast<int64_t>(i / inner);
    return channel;
  }
  if (op == "ConvTranspose") {
    const int64_t group = intAttr(producer, "group", 1);
    if (dims.size() < 3 || group <= 0 || dims[0] % group != 0 ||
        static_cast<uint64_t>(dims[1] * group) != channels) {
      why = fmt::format("ConvTranspose weight {} with group {} does not give {} output channels",
                        Shape::fromStatic(dims).toString(), group, channels);
      return std::nullopt;
    }
    const int64_t inPerGroup = dims[0] / group, outPerGroup = dims[1];
    const uint64_t inner = w.elementCount() / static_cast<uint64_t>(dims[0] * dims[1]);
    for (uint64_t i = 0; i < channel.size(); ++i) {
      const int64_t ci = static_cast<int64_t>(i / (inner * static_cast<uint64_t>(outPerGroup)));
      const int64_t j = static_cast<int64_t>((i / inner) % static_cast<uint64_t>(outPerGroup));
      channel[i] = (ci / inPerGroup) * outPerGroup + j;
    }
    return channel;
  }
  // Gemm: B is [K, N], or [N, K] with transB; N is BatchNormalization's channel axis.
  const bool transB = intAttr(producer, "transB", 0) != 0;
  if (dims.size() != 2 || static_cast<uint64_t>(dims[transB ? 0 : 1]) != channels) {
    why = fmt::format("Gemm B {} (transB = {}) does not have {} columns",
                      Shape::fromStatic(dims).toString(), transB, channels);
    return std::nullopt;
  }
  for (uint64_t i = 0; i < channel.size(); ++i)
    channel[i] = transB ? static_cast<int64_t>(i / static_cast<uint64_t>(dims[1]))
                        : static_cast<int64_t>(i % static_cast<uint64_t>(dims[1]));
  return channel;
}

// The producer's per-channel bias before the BatchNormalization (zeros when it has none).
std::optional<std::vector<double>> producerBias(const Node& producer, uint64_t channels,
                                                std::string& why) {
  std::vector<double> bias(channels, 0.0);
  const Value* b = producer.input(2);
  if (!b) return bias;
  double factor = 1.0;
  if (producer.opType() == "Gemm") {
    factor = floatAttr(producer, "beta", 1.0f);
    if (factor == 0.0) return bias; // C is ignored
  }
  const Tensor* t = constantF32(b);
  if (!t) {
    why = "the producer's bias is not a constant f32 initializer";
    return std::nullopt;
  }
  const auto values = t->copyValues<float>();
  if (values.size() == 1) {
    for (double& x : bias)
      x = factor * values[0];
    return bias;
  }
  // Gemm's C may also be [1, N]; a C that varies per row cannot become a per-channel bias.
  const bool perChannel = values.size() == channels &&
                          (t->dims().size() == 1 || (t->dims().size() == 2 && t->dims()[0] == 1));
  if (!perChannel) {
    why = fmt::format("bias {} is not per output channel", Shape::fromStatic(t->dims()).toString());
    return std::nullopt;
  }
  for (uint64_t i = 0; i < channels; ++i)
    bias[i] = factor * values[i];
  return bias;
}

bool isFusableProducer(const Node& node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  return node.opType() == "Conv" || node.opType() == "ConvTranspose" || node.opType() == "Gemm";
}

// A bias some exporters keep as a separate Add: Add(%c, const) where const broadcasts along the
// channel axis (axis 1) only, e.g. [1,C,1,1] or [C,1,1] after a 2-D Conv, [N] after Gemm.
struct BiasAdd {
  Node* add = nullptr;
  Node* producer = nullptr;
  const Tensor* bias = nullptr;
};

std::optional<BiasAdd> biasAdd(Node* node) {
  if (node->opType() != "Add" || (!node->domain().empty() && node->domain() != "ai.onnx") ||
      node->inputs().size() != 2)
    return std::nullopt;
  for (size_t side = 0; side < 2; ++side) {
    Value* v = node->input(side);
    const Tensor* bias = constantF32(node->input(1 - side));
    Node* p = v ? v->producer() : nullptr;
    if (bias && p && isFusableProducer(*p) && p->output(0) == v && rewrite::onlyFeeds(v, node))
      return BiasAdd{node, p, bias};
  }
  return std::nullopt;
}

// The bias Add's constant as one value per channel, or nullopt when it varies along another axis.
std::optional<std::vector<double>> perChannel(const BiasAdd& b, uint64_t channels) {
  const Tensor* w = constantF32(b.producer->input(1));
  const size_t rank = b.producer->opType() == "Gemm" ? 2 : (w ? w->dims().size() : 0);
  const auto& dims = b.bias->dims();
  if (rank < 2 || dims.size() > rank) return std::nullopt;
  for (size_t i = 0; i < dims.size(); ++i) {
    const bool channelAxis = rank - dims.size() + i == 1;
    if (dims[i] != 1 && !(channelAxis && static_cast<uint64_t>(dims[i]) == channels))
      return std::nullopt;
  }
  const auto values = b.bias->copyValues<float>();
  if (values.size() != 1 && values.size() != channels) return std::nullopt;
  std::vector<double> out(channels);
  for (uint64_t c = 0; c < channels; ++c)
    out[c] = values[values.size() == 1 ? 0 : c];
  return out;
}

// Fuses `bn` into its producer; returns why it declined, or "" after fusing.
std::string tryFuse(Graph& graph, Node* bn, const PassContext& context) {
  if (std::string why = batchNormDeclineReason(*bn, context.opset()); !why.empty()) return why;
  Value* x = bn->input(0);
  Node* producer = x ? x->producer() : nullptr;
  if (producer && producer->output(0) == x && !rewrite::onlyFeeds(x, bn))
    return fmt::format("'{}' has other readers or is a graph output", x->name());
  std::optional<BiasAdd> between = producer ? biasAdd(producer) : std::nullopt;
  if (between) producer = between->producer;
  if (!producer || !isFusableProducer(*producer))
    return "its input is not produced by Conv, ConvTranspose or Gemm (or their bias Add)";
  if (!between && producer->output(0) != x) return "its input is not the producer's main output";
  std::string why;
  auto affine = batchNormAffine(*bn, why);
  if (!affine) return why;
  const uint64_t channels = affine->scale.size();
  const Tensor* w = constantF32(producer->input(1));
  if (!w) return "the producer's weight is not a constant f32 initializer";
  auto channel = channelOfWeight(*producer, *w, channels, why);
  if (!channel) return why;
  auto bias = producerBias(*producer, channels, why);
  if (!bias) return why;
  if (between) {
    auto extra = perChannel(*between, channels);
    if (!extra) return "the Add between producer and BatchNormalization is not a per-channel bias";
    for (uint64_t c = 0; c < channels; ++c)
      (*bias)[c] += (*extra)[c];
  }

  std::vector<float> wv = w->copyValues<float>();
  for (size_t i = 0; i < wv.size(); ++i)
    wv[i] = static_cast<float>(wv[i] * affine->scale[static_cast<size_t>((*channel)[i])]);
  std::vector<float> bv(channels);
  for (uint64_t c = 0; c < channels; ++c)
    bv[c] =
        static_cast<float>(((*bias)[c] - affine->mean[c]) * affine->scale[c] + affine->shift[c]);

  Value* newW = graph.addInitializer(graph.uniqueName(producer->input(1)->name() + "_bn"),
                                     Tensor::fromValues(DType::Float32, w->dims(), wv));
  const std::string biasBase = producer->input(2) ? producer->input(2)->name() + "_bn"
                                                  : producer->input(1)->name() + "_bias";
  Value* newB = graph.addInitializer(
      graph.uniqueName(biasBase),
      Tensor::fromValues(DType::Float32, {static_cast<int64_t>(channels)}, bv));
  Node::AttributeList attributes = producer->attributes();
  if (producer->opType() == "Gemm") {
    // The bias already carries the old beta; the new C is used as is.
    auto it = std::find_if(attributes.begin(), attributes.end(),
                           [](const auto& a) { return a.first == "beta"; });
    if (it != attributes.end()) attributes.erase(it);
  }
  std::vector<Value*> inputs = {producer->input(0), newW, newB};
  std::vector<Node*> chain = {producer, bn};
  if (between) chain.insert(chain.begin() + 1, between->add);
  rewrite::replaceChain(graph, chain, producer->opType(), producer->domain(), inputs, attributes);
  return "";
}

bool fuseBatchNorms(Graph& graph, const PassContext& context) {
  // Only the visited node and nodes before it are ever erased, so later entries stay valid.
  return rewrite::rewriteEachNode(graph, [&](Node* node) {
    if (node->opType() != "BatchNormalization" ||
        (!node->domain().empty() && node->domain() != "ai.onnx"))
      return false;
    std::string label = node->name();
    std::string why = tryFuse(*node->owner(), node, context);
    if (why.empty()) {
      if (context.explain) spdlog::debug("fuse-batchnorm: folded '{}' into its producer", label);
      return true;
    }
    if (context.explain) spdlog::debug("fuse-batchnorm: '{}' not folded: {}", label, why);
    return false;
  });
}

class FuseBatchNorm : public Pass {
 public:
  std::string_view name() const override { return "fuse-batchnorm"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return fuseBatchNorms(graph, context);
  }
};

} // namespace

std::unique_ptr<Pass> makeFuseBatchNormPass() { return std::make_unique<FuseBatchNorm>(); }

} // namespace kiln
