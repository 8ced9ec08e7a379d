// expand-new-ops: the transformer ops of ai.onnx opsets 18 to 24 that neither target lowers
// (Attention, RMSNormalization, RotaryEmbedding, GroupNormalization, Swish), and Gelu and Mish
// while the onnx library kiln builds with (opset 17) cannot infer their shapes, become the standard
// ops of their operator-spec function bodies, so shape inference sees through them and both
// backends lower them. The executor runs the ops themselves (src/runtime/kernels/), so
// `kiln compare MODEL.onnx MODEL.om` checks each expansion against its op.
//
//   %y = RMSNormalization<axis = -1>(%x, %w)
//     →  %y = Mul(Div(%x, Sqrt(Add(ReduceMean(Mul(%x, %x), [-1]), eps))), %w)
//
// Expanded: Attention (23/24), RMSNormalization (23), RotaryEmbedding (23), GroupNormalization
// (18/21), Gelu (20), Mish (18), Swish (24). The dtypes and static dims an expansion needs come
// from settle-shapes (inference and folding), run before each round; a node whose needs are
// unknown (a head size that is not static, Attention's nonpad_kv_seqlen) is left as it is, and
// the backend refuses it by name.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/backends/lowering.h"
#include "kiln/ir/dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/attributes.h"

namespace kiln {
namespace {

// The ops expanded, with the opset each appears in. No target lowers the first five, so they are
// always expanded; Gelu and Mish have a rule on one target each, and are expanded because onnx's
// shape inference stops at them while the library kiln builds with does not know them.
bool wantsExpansion(const Node& node, int64_t opset) {
  static const std::map<std::string, int64_t, std::less<>> always = {{"Attention", 23},
                                                                     {"RMSNormalization", 23},
                                                                     {"RotaryEmbedding", 23},
                                                                     {"GroupNormalization", 18},
                                                                     {"Swish", 24}};
  if (!(node.domain().empty() || node.domain() == "ai.onnx")) return false;
  if (auto it = always.find(node.opType()); it != always.end()) return opset >= it->second;
  return (node.opType() == "Gelu" || node.opType() == "Mish") &&
         ops::kilnDeclaresOp(node.opType(), opset);
}

// A static dim of `v` (negative index from the end), or -1.
int64_t staticDim(const Value* v, int64_t index) {
  if (!v || !v->shape().hasRank()) return -1;
  const int64_t rank = static_cast<int64_t>(v->shape().rank());
  if (index < 0) index += rank;
  if (index < 0 || index >= rank) return -1;
  const Dim& d = v->shape()[static_cast<size_t>(index)];
  return d.isStatic() ? d.value() : -1;
}

int64_t rankOf(const Value* v) {
  return v && v->shape().hasRank() ? static_cast<int64_t>(v->shape().rank()) : -1;
}

bool isFloat(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}

// Emits the standard ops of one expansion before the node it replaces.
class Builder {
 public:
  Builder(Graph& graph, Node* node, DType dtype)
      : graph_(graph), node_(node), dtype_(dtype),
        prefix_(node->name().empty() ? node->output(0)->name() : node->name()) {}

  DType dtype() const { return dtype_; }

  std::vector<Value*> ops(const std::string& type, const std::vector<Value*>& inputs,
                          size_t outputs, Node::AttributeList attrs = {}) {
    std::vector<std::string> names;
    for (size_t i = 0; i < outputs; ++i)
      names.push_back(graph_.uniqueName(fmt::format("{}/{}", prefix_, type)));
    Node* n = graph_.insertNodeBefore(node_, type, inputs, names);
    created_.insert(n);
    n->setName(graph_.uniqueName(fmt::format("{}/{}", prefix_, type)));
    n->mergeLocations(*node_);
    for (auto& [key, value] : attrs)
      n->setAttribute(key, std::move(value));
    return n->outputs();
  }
  Value* op(const std::string& type, const std::vector<Value*>& inputs,
            Node::AttributeList attrs = {}) {
    return ops(type, inputs, 1, std::move(attrs))[0];
  }

  // A scalar (rank 0) of the expansion's dtype, or of `type` when given.
  Value* scalar(double v, DType type = DType::Undefined) {
    if (type == DType::Undefined) type = dtype_;
    Tensor t;
    switch (type) {
    case DType::Float64:
      t = Tensor::fromValues<double>(type, {}, {v});
      break;
    case DType::Float16:
      t = Tensor::fromValues<uint16_t>(type, {}, {rt::floatToHalf(static_cast<float>(v))});
      break;
    case DType::BFloat16:
      t = Tensor::fromValues<uint16_t>(type, {}, {rt::floatToBfloat16(static_cast<float>(v))});
      break;
    case DType::Int64:
      t = Tensor::fromValues<int64_t>(type, {}, {static_cast<int64_t>(v)});
      break;
    default:
      t = Tensor::fromValues<float>(DType::Float32, {}, {static_cast<float>(v)});
    }
    return graph_.addInitializer(graph_.uniqueName(prefix_ + "/const"), std::move(t));
  }
  Value* ints(const std::vector<int64_t>& v) {
    return graph_.addInitializer(
        graph_.uniqueName(prefix_ + "/ints"),
        Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(v.size())}, v));
  }
  Value* reshape(Value* x, const std::vector<int64_t>& shape) {
    return op("Reshape", {x, ints(shape)});
  }
  Value* transpose(Value* x, const std::vector<int64_t>& perm) {
    return op("Transpose", {x}, {{"perm", Attribute::ofInts(perm)}});
  }
  Value* unsqueeze(Value* x, const std::vector<int64_t>& axes) {
    return op("Unsqueeze", {x, ints(axes)});
  }
  Value* slice(Value* x, int64_t start, int64_t end, int64_t axis, int64_t step = 1) {
    return op("Slice", {x, ints({start}), ints({end}), ints({axis}), ints({step})});
  }
  Value* mean(Value* x, const std::vector<int64_t>& axes) {
    return op("ReduceMean", {x, ints(axes)}, {{"keepdims", Attribute::ofInt(1)}});
  }
  Value* cast(Value* x, DType to) {
    return op("Cast", {x}, {{"to", Attribute::ofInt(dtypeToOnnx(to))}});
  }
  // dim `index` of x's shape as a rank-0 int64.
  Value* dimOf(Value* x, int64_t index) {
    Value* s = op("Shape", {x},
                  {{"start", Attribute::ofInt(index)}, {"end", Attribute::ofInt(index + 1)}});
    return op("Squeeze", {s, ints({0})});
  }

  // Output `index` of the replaced node is now `value`: it takes the name, type and uses.
  void bind(size_t index, Value* value) {
    Value* out = node_->output(index);
    if (!out || (!out->hasUses() && !out->isGraphOutput())) return;
    // A value the expansion did not make (present_key = K without a cache) keeps its own name.
    if (!value->producer() || !created_.count(value->producer())) value = op("Identity", {value});
    const std::string name = out->name();
    const ValueType type = out->type();
    graph_.renameValue(out, graph_.uniqueName(name + "_expanded"));
    graph_.renameValue(value, name);
    if (type.kind != TypeKind::Unknown) value->setType(type);
    graph_.replaceAllUsesWith(out, value);
  }

 private:
  Graph& graph_;
  Node* node_;
  DType dtype_;
  std::string prefix_;
  std::set<const Node*> created_;
};

bool used(const Node& n, size_t i) {
  const Value* v = n.output(i);
  return v && (v->hasUses() || v->isGraphOutput());
}

int64_t intAttrOr(const Node& n, const char* name, int64_t def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : def;
}
float floatAttrOr(const Node& n, const char* name, float def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : def;
}

// Computes in `stash` (stash_type) when X is of another float type; returns X as that type.
Value* stashed(Builder& b, Value* x, const Node& n, DType& compute) {
  auto stash = dtypeFromOnnx(static_cast<int32_t>(intAttrOr(n, "stash_type", 1)));
  compute = b.dtype();
  if (stash && isFloat(*stash) && *stash != b.dtype()) {
    compute = *stash;
    return b.cast(x, *stash);
  }
  return x;
}

// Why the node is left as it is ("" when it was expanded).
std::string expandGelu(Builder& b, const Node& n) {
  Value* x = n.input(0);
  const Attribute* a = n.attribute("approximate");
  const std::string approximate = a && a->kind() == AttrKind::String ? a->asString() : "none";
  Value* half = b.op("Mul", {x, b.scalar(0.5)});
  Value* inner;
  if (approximate == "tanh") {
    Value* cube = b.op("Mul", {x, b.op("Mul", {x, x})});
    Value* sum = b.op("Add", {x, b.op("Mul", {cube, b.scalar(0.044715)})});
    inner = b.op("Tanh", {b.op("Mul", {sum, b.scalar(std::sqrt(2.0 / M_PI))})});
  } else if (approximate == "none") {
    inner = b.op("Erf", {b.op("Mul", {x, b.scalar(M_SQRT1_2)})});
  } else {
    return fmt::format("approximate '{}'", approximate);
  }
  b.bind(0, b.op("Mul", {half, b.op("Add", {inner, b.scalar(1.0)})}));
  return "";
}

std::string expandMish(Builder& b, const Node& n) {
  Value* x = n.input(0);
  b.bind(0, b.op("Mul", {x, b.op("Tanh", {b.op("Softplus", {x})})}));
  return "";
}

std::string expandSwish(Builder& b, const Node& n) {
  Value* x = n.input(0);
  const float alpha = floatAttrOr(n, "alpha", 1.0f);
  Value* arg = alpha == 1.0f ? x : b.op("Mul", {x, b.scalar(alpha)});
  b.bind(0, b.op("Mul", {x, b.op("Sigmoid", {arg})}));
  return "";
}

std::string expandRmsNorm(Builder& b, const Node& n) {
  Value* x = n.input(0);
  const int64_t rank = rankOf(x);
  int64_t axis = intAttrOr(n, "axis", -1);
  std::vector<int64_t> axes;
  if (axis < 0) {
    for (int64_t a = axis; a < 0; ++a)
      axes.push_back(a);
  } else {
    if (rank < 0) return "a non-negative axis over an input of unknown rank";
    for (int64_t a = axis; a < rank; ++a)
      axes.push_back(a);
  }
  DType compute;
  Value* xs = stashed(b, x, n, compute);
  Value* ms = b.mean(b.op("Mul", {xs, xs}), axes);
  Value* rms =
      b.op("Sqrt", {b.op("Add", {ms, b.scalar(floatAttrOr(n, "epsilon", 1e-5f), compute)})});
  Value* normalized = b.op("Div", {xs, rms});
  if (compute != b.dtype()) normalized = b.cast(normalized, b.dtype());
  b.bind(0, b.op("Mul", {normalized, n.input(1)}));
  return "";
}

std::string expandGroupNorm(Builder& b, const Node& n, int64_t opset) {
  Value* x = n.input(0);
  const int64_t rank = rankOf(x);
  const int64_t groups = intAttrOr(n, "num_groups", 0);
  if (groups <= 0) return "num_groups missing";
  if (rank < 2) return "an input of unknown rank";
  DType compute;
  Value* xs = stashed(b, x, n, compute);
  Value* grouped = b.reshape(xs, {0, groups, -1});
  Value* centred = b.op("Sub", {grouped, b.mean(grouped, {2})});
  Value* var = b.mean(b.op("Mul", {centred, centred}), {2});
  Value* norm = b.op(
      "Div",
      {centred,
       b.op("Sqrt", {b.op("Add", {var, b.scalar(floatAttrOr(n, "epsilon", 1e-5f), compute)})})});
  if (compute != b.dtype()) norm = b.cast(norm, b.dtype());
  Value* y;
  if (opset >= 21) { // scale and bias per channel
    y = b.op("Reshape", {norm, b.op("Shape", {x})});
    std::vector<int64_t> paramShape(static_cast<size_t>(rank - 1), 1);
    paramShape[0] = -1;
    y = b.op("Mul", {y, b.reshape(n.input(1), paramShape)});
    y = b.op("Add", {y, b.reshape(n.input(2), paramShape)});
  } else { // opsets 18 to 20: per group
    y = b.op("Mul", {norm, b.reshape(n.input(1), {-1, 1})});
    y = b.op("Add", {y, b.reshape(n.input(2), {-1, 1})});
    y = b.op("Reshape", {y, b.op("Shape", {x})});
  }
  b.bind(0, y);
  return "";
}

std::string expandRotary(Builder& b, const Node& n) {
  Value* x = n.input(0);
  const int64_t rank = rankOf(x);
  if (rank != 3 && rank != 4) return "an input that is not known to be 3-D or 4-D";
  const int64_t heads = intAttrOr(n, "num_heads", 0);
  int64_t head = -1;
  if (rank == 4) {
    head = staticDim(x, 3);
  } else {
    if (heads <= 0) return "a 3-D input without num_heads";
    if (int64_t hidden = staticDim(x, 2); hidden > 0) head = hidden / heads;
  }
  int64_t rot = intAttrOr(n, "rotary_embedding_dim", 0);
  if (rot == 0) rot = head;
  if (rot <= 0 && staticDim(n.input(1), -1) > 0) rot = 2 * staticDim(n.input(1), -1);
  if (rot <= 0 || rot % 2 != 0) return "a rotary dimension that is not static";
  const int64_t half = rot / 2;
  const bool interleaved = intAttrOr(n, "interleaved", 0) != 0;
  Value* cos = n.input(1);
  Value* sin = n.input(2);
  if (n.input(3)) {
    cos = b.op("Gather", {cos, n.input(3)}, {{"axis", Attribute::ofInt(0)}});
    sin = b.op("Gather", {sin, n.input(3)}, {{"axis", Attribute::ofInt(0)}});
  }
  // [batch, heads, seq, head] (4-D) or [batch, seq, heads, head] (3-D, unpacked); the angles of
  // [batch, seq, half] broadcast over the heads axis.
  Value* x4 = rank == 4 ? x : b.reshape(x, {0, 0, heads, -1});
  const int64_t headsAxis = rank == 4 ? 1 : 2;
  cos = b.unsqueeze(cos, {headsAxis});
  sin = b.unsqueeze(sin, {headsAxis});
  const bool partial = head < 0 || rot < head;
  Value* xr = partial ? b.slice(x4, 0, rot, 3) : x4;
  Value *x1, *x2;
  if (interleaved) {
    x1 = b.slice(xr, 0, rot, 3, 2);
    x2 = b.slice(xr, 1, rot, 3, 2);
  } else {
    x1 = b.slice(xr, 0, half, 3);
    x2 = b.slice(xr, half, rot, 3);
  }
  Value* real = b.op("Sub", {b.op("Mul", {cos, x1}), b.op("Mul", {sin, x2})});
  Value* imag = b.op("Add", {b.op("Mul", {sin, x1}), b.op("Mul", {cos, x2})});
  Value* rotated;
  if (interleaved) {
    rotated = b.op("Concat", {b.unsqueeze(real, {4}), b.unsqueeze(imag, {4})},
                   {{"axis", Attribute::ofInt(4)}});
    rotated = b.reshape(rotated, {0, 0, 0, -1});
  } else {
    rotated = b.op("Concat", {real, imag}, {{"axis", Attribute::ofInt(3)}});
  }
  if (partial)
    rotated = b.op("Concat", {rotated, b.slice(x4, rot, std::numeric_limits<int64_t>::max(), 3)},
                   {{"axis", Attribute::ofInt(3)}});
  b.bind(0, rank == 4 ? rotated : b.reshape(rotated, {0, 0, -1}));
  return "";
}

std::string expandAttention(Builder& b, const Node& n) {
  if (n.input(6)) return "nonpad_kv_seqlen";
  Value* q = n.input(0);
  Value* k = n.input(1);
  Value* v = n.input(2);
  const int64_t rank = rankOf(q);
  if (rank != 3 && rank != 4) return "Q that is not known to be 3-D or 4-D";
  if (rankOf(k) != rank || rankOf(v) != rank) return "Q, K and V of different ranks";
  int64_t qHeads = intAttrOr(n, "q_num_heads", 0), kvHeads = intAttrOr(n, "kv_num_heads", 0);
  int64_t head = -1, kHead = -1, vHead = -1;
  if (rank == 3) {
    if (qHeads <= 0 || kvHeads <= 0) return "3-D inputs without q_num_heads and kv_num_heads";
    if (int64_t hidden = staticDim(q, 2); hidden > 0) head = hidden / qHeads;
    if (int64_t hidden = staticDim(k, 2); hidden > 0) kHead = hidden / kvHeads;
    if (int64_t hidden = staticDim(v, 2); hidden > 0) vHead = hidden / kvHeads;
  } else {
    qHeads = staticDim(q, 1);
    kvHeads = staticDim(k, 1);
    head = staticDim(q, 3);
    kHead = staticDim(k, 3);
    vHead = staticDim(v, 3);
  }
  const bool hasScale = n.attribute("scale") != nullptr;
  if (!hasScale && head <= 0) return "a head size that is not static (and no scale)";
  if (qHeads <= 0 || kvHeads <= 0) return "head counts that are not static";
  if (qHeads % kvHeads != 0) return "query heads that are not a multiple of the key/value heads";
  if (qHeads != kvHeads && (kHead <= 0 || vHead <= 0))
    return "grouped heads of a size that is not static";
  Value* pastKey = n.input(4);
  if ((pastKey == nullptr) != (n.input(5) == nullptr)) return "past_key without past_value";
  if (const Value* mask = n.input(3)) {
    const int64_t kvLen = staticDim(n.input(1), rank == 3 ? 1 : 2);
    const int64_t pastLen = pastKey ? staticDim(pastKey, 2) : 0;
    if (rankOf(mask) < 1 || staticDim(mask, -1) < 0 || kvLen < 0 || pastLen < 0)
      return "an attn_mask or key length that is not static";
  }
  if (rank == 3) {
    q = b.transpose(b.reshape(q, {0, 0, qHeads, -1}), {0, 2, 1, 3});
    k = b.transpose(b.reshape(k, {0, 0, kvHeads, -1}), {0, 2, 1, 3});
    v = b.transpose(b.reshape(v, {0, 0, kvHeads, -1}), {0, 2, 1, 3});
  }
  // The KV cache.
  if (pastKey) {
    k = b.op("Concat", {pastKey, k}, {{"axis", Attribute::ofInt(2)}});
    v = b.op("Concat", {n.input(5), v}, {{"axis", Attribute::ofInt(2)}});
  }
  Value* presentK = k;
  Value* presentV = v;
  // Grouped-query attention: each key/value head serves qHeads / kvHeads consecutive query heads.
  if (qHeads != kvHeads) {
    const int64_t rep = qHeads / kvHeads;
    const int64_t kd = kHead, vd = vHead;
    auto repeat = [&](Value* t, int64_t d) {
      Value* e = b.op("Expand", {b.unsqueeze(t, {2}), b.ints({1, 1, rep, 1, 1})});
      return b.reshape(e, {0, qHeads, -1, d});
    };
    k = repeat(k, kd);
    v = repeat(v, vd);
  }
  const double scale =
      hasScale ? floatAttrOr(n, "scale", 1.0f) : 1.0 / std::sqrt(static_cast<double>(head));
  Value* raw = b.op("Mul", {b.op("MatMul", {q, b.transpose(k, {0, 1, 3, 2})}), b.scalar(scale)});
  Value* scores = raw;
  const float softcap = floatAttrOr(n, "softcap", 0.0f);
  if (softcap > 0)
    scores =
        b.op("Mul", {b.op("Tanh", {b.op("Div", {scores, b.scalar(softcap)})}), b.scalar(softcap)});
  Value* capped = scores;
  // The additive bias: the mask (bool: where true 0, else -inf), then the causal frontier.
  const double inf = std::numeric_limits<double>::infinity();
  Value* maskBias = nullptr;
  if (Value* mask = n.input(3)) {
    const int64_t maskLen = staticDim(mask, -1);
    // The rank of the model's mask: a Where built below has no type yet.
    const int64_t mr = rankOf(mask);
    const int64_t total =
        staticDim(n.input(1), rank == 3 ? 1 : 2) + (pastKey ? staticDim(pastKey, 2) : 0);
    if (mask->dtype() == DType::Bool) mask = b.op("Where", {mask, b.scalar(0.0), b.scalar(-inf)});
    if (maskLen < total) {
      std::vector<int64_t> pads(static_cast<size_t>(2 * mr), 0);
      pads[static_cast<size_t>(2 * mr - 1)] = total - maskLen;
      mask = b.op("Pad", {mask, b.ints(pads), b.scalar(-inf)});
    }
    maskBias = mask;
  }
  if (intAttrOr(n, "is_causal", 0) != 0) {
    // Query i (after `past` cached keys) sees keys j <= i + past.
    Value* rows =
        b.op("Range", {b.scalar(0, DType::Int64), b.dimOf(q, 2), b.scalar(1, DType::Int64)});
    if (pastKey) rows = b.op("Add", {rows, b.dimOf(pastKey, 2)});
    Value* cols =
        b.op("Range", {b.scalar(0, DType::Int64), b.dimOf(presentK, 2), b.scalar(1, DType::Int64)});
    Value* hidden = b.op("Less", {b.unsqueeze(rows, {1}), cols});
    Value* frontier = b.op("Where", {hidden, b.scalar(-inf), b.scalar(0.0)});
    maskBias = maskBias ? b.op("Add", {maskBias, frontier}) : frontier;
  }
  if (maskBias) scores = b.op("Add", {scores, maskBias});
  Value* biased = scores;
  // Softmax in softmax_precision when that differs from the inputs' type.
  DType precision = b.dtype();
  if (const Attribute* p = n.attribute("softmax_precision"); p && p->kind() == AttrKind::Int)
    if (auto t = dtypeFromOnnx(static_cast<int32_t>(p->asInt())); t && isFloat(*t)) precision = *t;
  Value* probs = precision == b.dtype() ? scores : b.cast(scores, precision);
  probs = b.op("Softmax", {probs}, {{"axis", Attribute::ofInt(-1)}});
  if (precision != b.dtype()) probs = b.cast(probs, b.dtype());
  // A query row the mask hides entirely attends to nothing: its probabilities are 0, not the 0/0
  // of a plain softmax (the operator spec's errata to opsets 23 and 24). The causal frontier alone
  // always leaves the first key visible, so only a mask can hide a row.
  if (n.input(3)) {
    Value* rowTop =
        b.op("ReduceMax", {maskBias, b.ints({-1})}, {{"keepdims", Attribute::ofInt(1)}});
    Value* hiddenRow = b.op("Equal", {rowTop, b.scalar(-inf)});
    probs = b.op("Where", {hiddenRow, b.scalar(0.0), probs});
  }
  Value* y = b.op("MatMul", {probs, v});
  if (rank == 3) y = b.reshape(b.transpose(y, {0, 2, 1, 3}), {0, 0, -1});
  b.bind(0, y);
  b.bind(1, presentK);
  b.bind(2, presentV);
  if (used(n, 3)) {
    const int64_t mode = intAttrOr(n, "qk_matmul_output_mode", 0);
    Value* chosen[] = {raw, capped, biased, probs};
    b.bind(3, chosen[std::clamp<int64_t>(mode, 0, 3)]);
  }
  return "";
}

// Expands `node` (the caller checked wantsExpansion); why not, when it stays.
std::string expandNode(Graph& graph, Node* node, int64_t opset) {
  const Value* x = node->input(0);
  if (!x || !isFloat(x->dtype())) return "an input whose float type is not known";
  // A failed expansion would leave half-built ops: each precondition is checked before emitting.
  Builder b(graph, node, x->dtype());
  const std::string& op = node->opType();
  std::string why;
  if (op == "Gelu")
    why = expandGelu(b, *node);
  else if (op == "Mish")
    why = expandMish(b, *node);
  else if (op == "Swish")
    why = expandSwish(b, *node);
  else if (op == "RMSNormalization")
    why = expandRmsNorm(b, *node);
  else if (op == "GroupNormalization")
    why = expandGroupNorm(b, *node, opset);
  else if (op == "RotaryEmbedding")
    why = expandRotary(b, *node);
  else if (op == "Attention")
    why = expandAttention(b, *node);
  return why;
}

class ExpandNewOps : public Pass {
 public:
  std::string_view name() const override { return "expand-new-ops"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    const int64_t opset = context.opset();
    bool changed = false;
    std::set<const Node*> refused;
    // Rounds: shape inference types the inputs of the nodes it reaches, those nodes expand, and
    // the next round reaches the ones after them.
    for (int round = 0; round < 64; ++round) {
      std::vector<Node*> pending;
      for (const auto& node : graph.nodes())
        if (wantsExpansion(*node, opset) && !refused.count(node.get()))
          pending.push_back(node.get());
      if (pending.empty()) break;
      // Inference and constant folding: weights made by ops (Reshape of a Constant) get shapes.
      auto infer = createPass("settle-shapes");
      if (auto ran = infer->run(graph, context); !ran) return ran.status();
      bool progress = false;
      for (Node* node : pending) {
        const Value* x = node->input(0);
        if (!x || !isFloat(x->dtype())) continue; // typed in a later round, maybe
        std::string why = expandNode(graph, node, opset);
        if (!why.empty()) {
          refused.insert(node);
          const std::string label = lowering::nodeLabel(*node);
          spdlog::debug("expand-new-ops: {} stays: {}", label, why);
          context.notes.push_back(
              fmt::format("{} is not expanded into standard ops: {}", label, why));
          continue;
        }
        graph.eraseNode(node);
        progress = changed = true;
      }
      if (!progress) break;
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> makeExpandNewOpsPass() { return std::make_unique<ExpandNewOps>(); }

} // namespace kiln
