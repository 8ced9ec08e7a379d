// fuse-qdq: QDQ-quantized Conv / MatMul become the integer ops they stand for, so a target with
// int8 kernels keeps the model int8 instead of computing it in float.
//
//   %x = DequantizeLinear(%x_q, %xs, %xz)                    (codes computed by the graph)
//   %w = DequantizeLinear(%w_q: i8/u8 const, %ws, %wz) {axis = 0}   (per tensor or channel)
//   %b = DequantizeLinear(%b_q: i32 const, %bs = xs·ws)              (optional; or a float bias)
//   %c = Conv(%x, %w, %b)
//   %r = Relu(%c)                                             (optional)
//   %y_q = QuantizeLinear(%r, %ys, %yz)
//     →  %y_q = QLinearConv(%x_q, %xs, %xz, %w_q, %ws, %wz, %ys, %yz, %b_q)
//
//   MatMul(DequantizeLinear(%a_q), DequantizeLinear(%b_q: const 2-D, per tensor or column))
//   → [Relu] → QuantizeLinear    →  QLinearMatMul(%a_q, ..., %b_q, ..., %ys, %yz)
//
//   %y_q = QuantizeLinear(DequantizeLinear(%x_q, %s, %z), %s, %z)  →  %x_q   (same scale, zero
//                                                                             point and type)
//
// A Relu is absorbed only when the output zero point is the lowest code (the requantization
// then already clamps at real 0); otherwise the pattern stays. A bias whose scale is not
// x_scale · w_scale (or a float bias) is re-coded to int32 with that scale, as ONNX Runtime's
// quantizer codes biases. A MatMul followed by a bias Add stays float (QLinearMatMul has no bias
// and the sum before the Add has no calibrated scale); Gemm too. A Conv or MatMul whose output is
// not requantized stays for decompose-quant, which makes it float; the pass leaves a note.
//
// With PassContext::targetTakes set (the conversion's target) a fusion is made only when the
// target takes the fused node; without it, every match is fused.
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/ir/dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/quant.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::constantTensor;

bool isCodeType(DType d) { return d == DType::Int8 || d == DType::UInt8; }

bool isStandard(const Node& n) { return n.domain().empty() || n.domain() == "ai.onnx"; }

const Node* producerOf(const Value* v, const char* op) {
  const Node* p = v ? v->producer() : nullptr;
  return p && p->opType() == op && isStandard(*p) ? p : nullptr;
}

int64_t intAttr(const Node& n, const char* name, int64_t fallback) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

// A constant float32 scale with `count` values (1: per tensor).
bool floatScale(const Value* v, size_t& count) {
  const Tensor* t = constantTensor(v);
  if (!t || t->dtype() != DType::Float32 || t->dims().size() > 1) return false;
  count = t->elementCount();
  return count >= 1;
}

// Per-tensor (scale, zero point) of an activation Q or DQ node over codes of `codes` dtype: a
// constant float32 scale of one value and an absent or constant one-value zero point.
bool perTensorParams(const Node& n, DType codes) {
  size_t count = 0;
  if (!floatScale(n.input(1), count) || count != 1) return false;
  if (intAttr(n, "block_size", 0) != 0) return false;
  const Value* zp = n.inputs().size() > 2 ? n.input(2) : nullptr;
  if (!zp) return codes == DType::UInt8 || codes == DType::Int8;
  const Tensor* z = constantTensor(zp);
  return z && z->elementCount() == 1 && z->dtype() == codes && isCodeType(codes);
}

// The code type a QuantizeLinear writes.
DType quantizeType(const Node& q) {
  if (q.inputs().size() > 2 && q.input(2)) return q.input(2)->dtype();
  const int64_t to = intAttr(q, "output_dtype", 0);
  return to ? dtypeFromOnnx(static_cast<int32_t>(to)).value_or(DType::Undefined) : DType::UInt8;
}

// The code type a DequantizeLinear reads: its zero point's, else its input's (the pass runs
// before shape inference, so an input may not be typed yet: then its QuantizeLinear's).
DType dequantizeType(const Node& dq) {
  if (dq.inputs().size() > 2 && dq.input(2)) return dq.input(2)->dtype();
  const Value* x = dq.input(0);
  if (x->dtype() != DType::Undefined) return x->dtype();
  if (const Node* q = producerOf(x, "QuantizeLinear")) return quantizeType(*q);
  return DType::Undefined;
}

// A DequantizeLinear of activation codes (computed by the graph), per tensor.
const Node* activationDq(const Value* v) {
  const Node* dq = producerOf(v, "DequantizeLinear");
  if (!dq || !dq->input(0) || constantTensor(dq->input(0))) return nullptr;
  return perTensorParams(*dq, dequantizeType(*dq)) ? dq : nullptr;
}

// A DequantizeLinear of constant 8-bit weight codes with one scale per tensor or per `channels`
// along `axis` (of a rank-`rank` weight); the zero point, when given, matches the scale.
const Node* weightDq(const Value* v, size_t rank, int64_t axis, int64_t channels) {
  const Node* dq = producerOf(v, "DequantizeLinear");
  if (!dq) return nullptr;
  const Tensor* w = constantTensor(dq->input(0));
  if (!w || !isCodeType(w->dtype()) || w->dims().size() != rank) return nullptr;
  if (intAttr(*dq, "block_size", 0) != 0) return nullptr;
  size_t count = 0;
  if (!floatScale(dq->input(1), count)) return nullptr;
  if (count != 1) {
    int64_t a = intAttr(*dq, "axis", 1);
    if (a < 0) a += static_cast<int64_t>(rank);
    if (a != axis || static_cast<int64_t>(count) != channels) return nullptr;
  }
  if (dq->inputs().size() > 2 && dq->input(2)) {
    const Tensor* z = constantTensor(dq->input(2));
    if (!z || z->dtype() != w->dtype() || z->elementCount() != count) return nullptr;
  }
  return dq;
}

std::vector<float> floats(const Value* v) { return rt::toFloatVector(*constantTensor(v)); }

// The zero point input of a Q/DQ node, or new zeros of `codes` type shaped like its scale when it
// has none.
Value* zeroPointOf(Graph& g, const Node& n, DType codes, const std::string& base,
                   std::vector<Value*>& made) {
  if (n.inputs().size() > 2 && n.input(2)) return n.input(2);
  const Tensor* scale = constantTensor(n.input(1));
  const std::vector<int64_t> dims = scale ? scale->dims() : std::vector<int64_t>{};
  const size_t count = scale ? scale->elementCount() : 1;
  Value* z = g.addInitializer(
      g.uniqueName(base + "_zero_point"),
      codes == DType::Int8
          ? Tensor::fromValues<int8_t>(codes, dims, std::vector<int8_t>(count, 0))
          : Tensor::fromValues<uint8_t>(codes, dims, std::vector<uint8_t>(count, 0)));
  made.push_back(z);
  return z;
}

// The int32 bias codes with scale x_scale · w_scale[c]: the model's own when its DequantizeLinear
// has that scale and no zero point, else its real values re-coded. nullptr when the bias is not a
// constant of `channels` values (or a code overflows int32).
Value* biasCodes(Graph& g, const Value* bias, float xScale, const std::vector<float>& wScales,
                 int64_t channels, const std::string& base, std::vector<Value*>& made) {
  std::vector<float> scale(static_cast<size_t>(channels));
  for (size_t c = 0; c < scale.size(); ++c)
    scale[c] = xScale * wScales[wScales.size() == 1 ? 0 : c];
  std::vector<double> real;
  if (const Node* dq = producerOf(bias, "DequantizeLinear")) {
    const Tensor* codes = constantTensor(dq->input(0));
    size_t count = 0;
    if (!codes || codes->dtype() != DType::Int32 || codes->elementCount() != scale.size() ||
        !floatScale(dq->input(1), count) || intAttr(*dq, "block_size", 0) != 0)
      return nullptr;
    const std::vector<float> bs = floats(dq->input(1));
    std::vector<float> zp(count, 0.0f);
    if (dq->inputs().size() > 2 && dq->input(2)) {
      if (!constantTensor(dq->input(2))) return nullptr;
      zp = floats(dq->input(2));
    }
    if (zp.size() != count || (count != 1 && count != scale.size())) return nullptr;
    const std::vector<int32_t> q = codes->copyValues<int32_t>();
    bool same = true;
    for (size_t c = 0; c < scale.size(); ++c) {
      const size_t k = count == 1 ? 0 : c;
      same = same && bs[k] == scale[c] && zp[k] == 0.0f;
      real.push_back((static_cast<double>(q[c]) - zp[k]) * bs[k]);
    }
    if (same) return dq->input(0);
  } else if (const Tensor* t = constantTensor(bias)) {
    if (t->dtype() != DType::Float32 || t->elementCount() != scale.size()) return nullptr;
    for (float b : rt::toFloatVector(*t))
      real.push_back(b);
  } else {
    return nullptr;
  }
  std::vector<int32_t> q(scale.size());
  for (size_t c = 0; c < q.size(); ++c) {
    const double code = std::nearbyint(real[c] / scale[c]);
    if (!std::isfinite(code) || std::fabs(code) > std::numeric_limits<int32_t>::max())
      return nullptr;
    q[c] = static_cast<int32_t>(code);
  }
  Value* v = g.addInitializer(g.uniqueName(base + "_bias_quantized"),
                              Tensor::fromValues<int32_t>(DType::Int32, {channels}, q));
  made.push_back(v);
  return v;
}

// The QuantizeLinear requantizing `out` (through an optional Relu it may absorb); nullptr when
// the output is read otherwise.
struct OutputChain {
  Node* relu = nullptr;
  Node* quantize = nullptr;
};

std::optional<OutputChain> outputChain(Node* op, std::string* why) {
  Value* out = op->output(0);
  if (out->isGraphOutput() || out->uses().size() != 1) {
    *why = "its output is read in float";
    return std::nullopt;
  }
  OutputChain chain;
  Node* next = out->uses()[0].user;
  if (next->opType() == "Relu" && isStandard(*next)) {
    chain.relu = next;
    Value* r = next->output(0);
    if (r->isGraphOutput() || r->uses().size() != 1) {
      *why = "its Relu's output is read in float";
      return std::nullopt;
    }
    next = r->uses()[0].user;
  }
  if (next->opType() != "QuantizeLinear" || !isStandard(*next) || next->input(0) == nullptr ||
      next->input(0)->producer() != (chain.relu ? chain.relu : op)) {
    *why = "its output is not requantized by a QuantizeLinear";
    return std::nullopt;
  }
  const DType codes = quantizeType(*next);
  if (!isCodeType(codes) || !perTensorParams(*next, codes) || intAttr(*next, "saturate", 1) != 1) {
    *why = "its QuantizeLinear is not per tensor with 8-bit codes";
    return std::nullopt;
  }
  if (chain.relu) {
    int64_t lo = 0, hi = 0;
    ops::quantCodeRange(codes, lo, hi);
    const Value* zp = next->inputs().size() > 2 ? next->input(2) : nullptr;
    const int64_t z = zp ? static_cast<int64_t>(floats(zp)[0]) : 0;
    if (z != lo) {
      *why = "its Relu is followed by an output zero point above the lowest code (the Relu is not "
             "a clamp of the requantization)";
      return std::nullopt;
    }
  }
  chain.quantize = next;
  return chain;
}

class FuseQdq : public Pass {
 public:
  std::string_view name() const override { return "fuse-qdq"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    context_ = &context;
    floatNodes_.clear();
    floatCount_ = 0;
    bool changed = rewrite::rewriteEachNode(graph, [&](Node* node) {
      if (!isStandard(*node)) return false;
      Graph& g = *node->owner();
      if (node->opType() == "Conv") return fuse(g, node, true);
      if (node->opType() == "MatMul") return fuse(g, node, false);
      if (node->opType() == "QuantizeLinear") return dropPair(g, node);
      return false;
    });
    if (!floatNodes_.empty())
      context.notes.push_back(fmt::format(
          "fuse-qdq: {} quantized Conv/MatMul node(s) stay float (decompose-quant computes their "
          "integer arithmetic in float): {}",
          floatCount_, fmt::join(floatNodes_, "; ")));
    return changed;
  }

 private:
  void keptFloat(const Node& n, const std::string& why) {
    ++floatCount_;
    const std::string label =
        n.name().empty() ? "'" + n.output(0)->name() + "'" : "'" + n.name() + "'";
    if (floatNodes_.size() < 8)
      floatNodes_.push_back(fmt::format("{} {}: {}", n.opType(), label, why));
    else if (floatNodes_.size() == 8)
      floatNodes_.push_back("...");
    if (context_->explain) spdlog::debug("fuse-qdq: {} {} kept: {}", n.opType(), label, why);
  }

  bool targetTakes(const Node& n) const {
    return !context_->targetTakes || context_->targetTakes(n);
  }

  bool fuse(Graph& g, Node* op, bool conv) {
    const Node* dqx = activationDq(op->input(0));
    if (!dqx) return false; // not a quantized node
    const Value* wv = op->input(1);
    const Tensor* codes = nullptr;
    const Node* dqw = nullptr;
    int64_t channels = 0;
    if (conv) {
      const Node* p = producerOf(wv, "DequantizeLinear");
      codes = p ? constantTensor(p->input(0)) : nullptr;
      if (codes && codes->dims().size() == 4) channels = codes->dims()[0];
      dqw = codes ? weightDq(wv, 4, 0, channels) : nullptr;
    } else {
      const Node* p = producerOf(wv, "DequantizeLinear");
      codes = p ? constantTensor(p->input(0)) : nullptr;
      if (codes && codes->dims().size() == 2) channels = codes->dims()[1];
      dqw = codes ? weightDq(wv, 2, 1, channels) : nullptr;
    }
    if (!dqw) {
      keptFloat(*op, "its weight is not a DequantizeLinear of constant 8-bit codes per tensor or "
                     "output channel");
      return false;
    }
    std::string why;
    auto chain = outputChain(op, &why);
    if (!chain) {
      keptFloat(*op, why);
      return false;
    }
    const std::string base = op->name().empty() ? op->output(0)->name() : op->name();
    std::vector<Value*> made;
    Value* xq = dqx->input(0);
    Value* xz = zeroPointOf(g, *dqx, dequantizeType(*dqx), base + "_x", made);
    Value* wz = zeroPointOf(g, *dqw, codes->dtype(), base + "_w", made);
    Node* q = chain->quantize;
    Value* yz = zeroPointOf(g, *q, quantizeType(*q), base + "_y", made);
    std::vector<Value*> inputs = {xq, dqx->input(1), xz, dqw->input(0), dqw->input(1),
                                  wz, q->input(1),   yz};
    const Value* bias = conv && op->inputs().size() > 2 ? op->input(2) : nullptr;
    const Node* dqb = bias ? producerOf(bias, "DequantizeLinear") : nullptr;
    if (bias) {
      Value* b =
          biasCodes(g, bias, floats(dqx->input(1))[0], floats(dqw->input(1)), channels, base, made);
      if (!b) {
        dropMade(g, made);
        keptFloat(*op, "its bias is not a constant the int32 codes can hold");
        return false;
      }
      inputs.push_back(b);
    }
    const std::string opType = conv ? "QLinearConv" : "QLinearMatMul";
    Node::AttributeList attrs;
    if (conv)
      for (const auto& [key, value] : op->attributes())
        attrs.emplace_back(key, value);
    // Ask the target about the node it would get (a probe, gone before the rewrite).
    Node* probe = g.insertNodeBefore(op, opType, inputs, {g.uniqueName(base + "_probe")});
    for (const auto& [key, value] : attrs)
      probe->setAttribute(key, value);
    probe->output(0)->setType(q->output(0)->type());
    const bool taken = targetTakes(*probe);
    g.eraseNode(probe);
    if (!taken) {
      dropMade(g, made);
      keptFloat(*op, fmt::format("the target does not take the {}", opType));
      return false;
    }
    std::vector<Node*> nodes = {op};
    if (chain->relu) nodes.push_back(chain->relu);
    nodes.push_back(q);
    std::vector<Location> extra;
    for (const Node* n : {dqx, dqw, dqb})
      if (n)
        for (const Location& loc : n->locations())
          extra.push_back(loc);
    Node* fused = rewrite::replaceChain(g, nodes, opType, "", inputs, attrs);
    for (Location& loc : extra)
      if (std::find(fused->locations().begin(), fused->locations().end(), loc) ==
          fused->locations().end())
        fused->addLocation(std::move(loc));
    for (const Node* n : {dqb, dqw, dqx})
      eraseIfUnread(g, n);
    return true;
  }

  // Q(DQ(x_q, s, z), s, z) reads x_q itself.
  bool dropPair(Graph& g, Node* q) {
    const Node* dq = activationDq(q->input(0));
    Value* out = q->output(0);
    if (!dq || out->isGraphOutput() || quantizeType(*q) != dequantizeType(*dq) ||
        !perTensorParams(*q, quantizeType(*q)) || intAttr(*q, "saturate", 1) != 1)
      return false;
    if (floats(q->input(1)) != floats(dq->input(1))) return false;
    auto zeroOf = [](const Node& n) {
      return n.inputs().size() > 2 && n.input(2) ? floats(n.input(2))[0] : 0.0f;
    };
    if (zeroOf(*q) != zeroOf(*dq)) return false;
    g.replaceAllUsesWith(out, dq->input(0));
    g.eraseNode(q);
    eraseIfUnread(g, dq);
    return true;
  }

  static void eraseIfUnread(Graph& g, const Node* n) {
    if (!n) return;
    Node* node = const_cast<Node*>(n);
    if (rewrite::outputUnused(*node, 0)) g.eraseNode(node);
  }

  static void dropMade(Graph& g, std::vector<Value*>& made) {
    for (Value* v : made)
      g.eraseValue(v);
    made.clear();
  }

  PassContext* context_ = nullptr;
  std::vector<std::string> floatNodes_; // the first few, for the note
  size_t floatCount_ = 0;
};

} // namespace

std::unique_ptr<Pass> makeFuseQdqPass() { return std::make_unique<FuseQdq>(); }

} // namespace kiln
