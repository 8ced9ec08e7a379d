// decompose-quant: quantized ONNX ops a target refuses become float ops that compute the same
// numbers (the integer codes are carried as integer-valued floats).
//
//   %y, %s, %z = DynamicQuantizeLinear(%x)  →  %lo = Min(ReduceMin(%x), 0)  %hi = Max(ReduceMax(%x), 0)
//                                               %s = Div(Sub(%hi, %lo), 255)
//                                               %zf = Round(Clip(Sub(0, Div(%lo, %s)), 0, 255))
//                                               %yf = Clip(Add(Round(Div(%x, %s)), %zf), 0, 255)
//   %q = QuantizeLinear(%x, %s, %z)          →  %qf = Clip(Add(Round(Div(%x, %s)), %z), lo, hi)
//   %y = DequantizeLinear(%q, %s, %z)        →  %y = Mul(Sub(%qf, %z), %s)   (a constant %q folds)
//   %y = ConvInteger(%x, %w, %xz, %wz)       →  %yf = Conv(Sub(%xf, %xz), <%w - %wz>)
//   %y = MatMulInteger(%a, %b, %az, %bz)     →  %yf = MatMul(Sub(%af, %az), <%b - %bz>)
//   %y = QLinearConv / QLinearMatMul         →  Conv / MatMul as above (+ bias), Mul by
//                                               x_scale * w_scale / y_scale, Round, Add y_zero_point,
//                                               Clip to the output type's range
// Each quantized output is the integer-valued float (`%yf`) cast to its integer type; a later
// rewritten op reads the float directly, and a Cast of it back to float is dropped, so chains such
// as DynamicQuantizeLinear → ConvInteger → Cast → Mul become ReduceMin/Max ... → Conv → Mul with
// no integer tensors left between them. The float arithmetic follows the executor's kernels step
// by step (x / scale in float, Round half to even, the scale product xs * ws / ys), so a rewritten
// model gives the executor's numbers as long as the integer sums stay below 2^24.
//
// The float ops are the ONNX ops of the model's opset except Round, which opset 10 models (where
// QuantizeLinear, ConvInteger and the QLinear ops first appear) get as well: the rewritten graph
// only feeds a backend, and every backend and the executor take Round whatever the opset.
//
// With PassContext::targetTakes set (the conversion pipeline's target) only nodes the target
// refuses are rewritten; without it, every node the rule knows. A node the rule cannot rewrite
// exactly (float8 or 4-bit codes, blocked scales, unknown ranks) is left for the target
// to refuse with its own message.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

#include <spdlog/spdlog.h>

#include "kiln/ir/dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/quant.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::constantTensor;
using rt::elementAsDouble;
using rt::toFloatVector;

const std::set<std::string> kQuantOps = {"DynamicQuantizeLinear", "QuantizeLinear",
                                         "DequantizeLinear",      "ConvInteger",
                                         "MatMulInteger",         "QLinearConv",
                                         "QLinearMatMul"};

// The integer range of the codes the rewrite handles: 8- and 16-bit (ops::quantCodeRange less the
// 4-bit codes, which stay with the target's own refusal).
bool codeRange(DType d, float& lo, float& hi) {
  int64_t low = 0, high = 0;
  if (d == DType::UInt4 || d == DType::Int4 || !ops::quantCodeRange(d, low, high)) return false;
  lo = static_cast<float>(low), hi = static_cast<float>(high);
  return true;
}

bool isInt8Like(DType d) { return d == DType::UInt8 || d == DType::Int8; }

ValueType tensorType(DType dtype, Shape shape) { return ValueType::tensor(dtype, std::move(shape)); }

// One rewrite in progress: new nodes go before `node_` and carry its name and locations.
class Rewriter {
 public:
  Rewriter(Graph& graph, Node* node, std::map<const Value*, Value*>& floats,
           std::vector<Node*>& casts, int64_t opset,
           const std::function<bool(const Node&)>* targetTakes = nullptr,
           int weightQuantBits = 0)
      : g_(graph), node_(node), floats_(floats), casts_(casts), opset_(opset),
        targetTakes_(targetTakes), weightQuantBits_(weightQuantBits) {}

  Value* op(const std::string& opType, const std::vector<Value*>& inputs, ValueType type,
            const std::string& what, Node::AttributeList attributes = {}) {
    const std::string base = node_->name().empty() ? node_->output(0)->name() : node_->name();
    Node* n = g_.insertNodeBefore(node_, opType, inputs, {g_.uniqueName(base + "_" + what)});
    n->setName(base + "/" + what);
    n->mergeLocations(*node_);
    for (auto& [key, value] : attributes)
      n->setAttribute(key, std::move(value));
    n->output(0)->setType(std::move(type));
    return n->output(0);
  }

  Value* constant(const std::string& what, Tensor t) {
    const std::string base = node_->name().empty() ? node_->output(0)->name() : node_->name();
    return g_.addInitializer(g_.uniqueName(base + "_" + what), std::move(t));
  }
  Value* scalar(const std::string& what, float v) {
    return constant(what, Tensor::fromValues<float>(DType::Float32, {}, {v}));
  }

  // `v` (integer codes, or a float) as float32: the float a rewritten producer computed, a
  // converted constant, or a Cast.
  Value* floatOf(Value* v) {
    if (auto it = floats_.find(v); it != floats_.end()) return it->second;
    if (v->dtype() == DType::Float32) return v;
    Value* f = nullptr;
    if (const Tensor* t = constantTensor(v)) {
      std::vector<float> values(t->elementCount());
      for (size_t i = 0; i < values.size(); ++i)
        values[i] = static_cast<float>(elementAsDouble(*t, i));
      f = g_.addInitializer(g_.uniqueName(v->name() + "_f32"),
                            Tensor::fromValues(DType::Float32, t->dims(), values));
    } else {
      f = op("Cast", {v}, tensorType(DType::Float32, v->shape()), "to_float",
             {{"to", Attribute::ofInt(dtypeToOnnx(DType::Float32))}});
    }
    floats_[v] = f;
    return f;
  }

  // A per-axis 1-D `v` shaped to broadcast along `axis` of a rank-`rank` tensor ([C, 1, ..., 1]);
  // scalars and 1-element tensors unchanged.
  Value* alongAxis(Value* v, int64_t axis, size_t rank) {
    if (!v->shape().hasRank() || v->shape().rank() == 0) return v;
    const auto count = v->shape().elementCount();
    if (count && *count == 1) return v;
    std::vector<int64_t> dims = v->shape().isStatic() ? v->shape().staticDims() : std::vector<int64_t>{-1};
    for (size_t i = static_cast<size_t>(axis) + 1; i < rank; ++i)
      dims.push_back(1);
    if (const Tensor* t = constantTensor(v))
      return constant("axis", Tensor(t->dtype(), dims, t->buffer()));
    Value* shape = constant("shape", Tensor::fromValues<int64_t>(DType::Int64, {static_cast<int64_t>(dims.size())}, dims));
    return op("Reshape", {v, shape}, tensorType(v->dtype(), Shape::fromStatic(dims)), "reshape");
  }

  // Clip to [lo, hi]: bounds as inputs from opset 11, as attributes before.
  Value* clip(Value* x, float lo, float hi, const std::string& what) {
    if (opset_ < 11)
      return op("Clip", {x}, x->type(), what,
                {{"min", Attribute::ofFloat(lo)}, {"max", Attribute::ofFloat(hi)}});
    return op("Clip", {x, scalar(what + "_lo", lo), scalar(what + "_hi", hi)}, x->type(), what);
  }

  // round(v) + zero point, saturated to the codes' range: QuantizeLinear's arithmetic.
  Value* requantize(Value* v, Value* zeroPoint, float lo, float hi) {
    Value* r = op("Round", {v}, v->type(), "round");
    if (zeroPoint) r = op("Add", {r, zeroPoint}, v->type(), "add_zero_point");
    return clip(r, lo, hi, "saturate");
  }

  // Output `index` of the node is now the float `f`: `dtype` values (the integer type, or float
  // for a scale) are made by a Cast when anything still reads them, and rewritten readers take `f`.
  void setOutput(size_t index, Value* f, DType dtype) {
    Value* out = node_->output(index);
    if (!out) return;
    if (dtype == DType::Float32) {
      finals_.push_back({out, f, out->name()});
      return;
    }
    Value* cast = op("Cast", {f}, tensorType(dtype, f->shape()), "to_" + std::string(dtypeName(dtype)),
                     {{"to", Attribute::ofInt(dtypeToOnnx(dtype))}});
    casts_.push_back(cast->producer());
    floats_[cast] = f;
    finals_.push_back({out, cast, out->name()});
  }

  // Replaces the node: every output's readers move to its new value, which takes the old name.
  void finish() {
    for (auto& f : finals_)
      g_.replaceAllUsesWith(f.old, f.now);
    for (auto& f : finals_)
      floats_.erase(f.old);
    g_.eraseNode(node_);
    for (auto& f : finals_)
      if (!f.now->isInitializer() && !f.now->isGraphInput() && !g_.findLocalValue(f.name) &&
          f.now->owner() == &g_)
        g_.renameValue(f.now, f.name);
  }

  int64_t opset() const { return opset_; }
  Graph& graph() { return g_; }
  // The conversion's weight-quant bit width, 0 without weight quant.
  int weightQuantBits() const { return weightQuantBits_; }
  // Whether the conversion's target takes `n` as it is (false without a target).
  bool targetTakes(const Node& n) const {
    return targetTakes_ && *targetTakes_ && (*targetTakes_)(n);
  }
  // The rule replaced the node itself (folded it to constants): nothing left for finish().
  void markReplaced() { replaced_ = true; }
  bool replaced() const { return replaced_; }

 private:
  struct Final {
    Value* old;
    Value* now;
    std::string name;
  };
  Graph& g_;
  Node* node_;
  std::map<const Value*, Value*>& floats_;
  std::vector<Node*>& casts_;
  int64_t opset_;
  const std::function<bool(const Node&)>* targetTakes_;
  int weightQuantBits_;
  std::vector<Final> finals_;
  bool replaced_ = false;
};

int64_t attrInt(const Node& n, const char* name, int64_t fallback) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : fallback;
}

// The axis a per-axis (1-D, more than one value) scale runs along; false when it is out of range.
bool quantAxis(const Node& n, const Value* scale, size_t rank, int64_t& axis) {
  axis = attrInt(n, "axis", 1);
  const auto count = scale->shape().elementCount();
  if (scale->shape().hasRank() && scale->shape().rank() == 0) return true;
  if (count && *count == 1) return true;
  if (axis < 0) axis += static_cast<int64_t>(rank);
  return axis >= 0 && axis < static_cast<int64_t>(rank);
}

bool isFloat32Or16(DType d) { return d == DType::Float32 || d == DType::Float16; }

// ---- the rules: each returns false (graph untouched) when it cannot rewrite the node exactly.

bool dynamicQuantizeLinear(Graph& g, Node* n, Rewriter& r) {
  Value* x = n->input(0);
  if (!x || x->dtype() != DType::Float32) return false;
  const ValueType scalarF = tensorType(DType::Float32, Shape::scalar());
  Value* zero = r.scalar("zero", 0.0f);
  Value* mn = r.op("ReduceMin", {x}, scalarF, "min", {{"keepdims", Attribute::ofInt(0)}});
  Value* mx = r.op("ReduceMax", {x}, scalarF, "max", {{"keepdims", Attribute::ofInt(0)}});
  Value* lo = r.op("Min", {mn, zero}, scalarF, "min_adjusted");
  Value* hi = r.op("Max", {mx, zero}, scalarF, "max_adjusted");
  Value* range = r.op("Sub", {hi, lo}, scalarF, "range");
  Value* scale = r.op("Div", {range, r.scalar("qmax", 255.0f)}, scalarF, "scale");
  Value* minScaled = r.op("Div", {lo, scale}, scalarF, "min_scaled");
  Value* zp = r.op("Sub", {zero, minScaled}, scalarF, "zero_point_initial");
  zp = r.clip(zp, 0.0f, 255.0f, "zero_point_clipped");
  zp = r.op("Round", {zp}, scalarF, "zero_point");
  Value* q = r.op("Div", {x, scale}, x->type(), "scaled");
  q = r.requantize(q, zp, 0.0f, 255.0f);
  r.setOutput(0, q, DType::UInt8);
  r.setOutput(1, scale, DType::Float32);
  r.setOutput(2, zp, DType::UInt8);
  (void)g;
  return true;
}

bool quantizeLinear(Graph&, Node* n, Rewriter& r) {
  Value* x = n->input(0);
  Value* scale = n->input(1);
  Value* zeroPoint = n->input(2);
  if (!x || !scale || !isFloat32Or16(x->dtype()) || !isFloat32Or16(scale->dtype())) return false;
  if (attrInt(*n, "block_size", 0) > 0 || !x->shape().hasRank()) return false;
  DType yType = zeroPoint ? zeroPoint->dtype() : DType::UInt8;
  if (!zeroPoint && attrInt(*n, "output_dtype", 0) != 0)
    yType = dtypeFromOnnx(static_cast<int32_t>(attrInt(*n, "output_dtype", 0)))
                .value_or(DType::Undefined);
  float lo = 0, hi = 0;
  if (!codeRange(yType, lo, hi)) return false;
  const size_t rank = x->shape().rank();
  int64_t axis = 0;
  if (!quantAxis(*n, scale, rank, axis)) return false;
  Value* xf = r.floatOf(x);
  Value* sf = r.alongAxis(r.floatOf(scale), axis, rank);
  Value* zf = zeroPoint ? r.alongAxis(r.floatOf(zeroPoint), axis, rank) : nullptr;
  Value* q = r.op("Div", {xf, sf}, xf->type(), "scaled");
  r.setOutput(0, r.requantize(q, zf, lo, hi), yType);
  return true;
}

bool dequantizeLinear(Graph& g, Node* n, Rewriter& r) {
  Value* x = n->input(0);
  Value* scale = n->input(1);
  Value* zeroPoint = n->input(2);
  if (!x || !scale || !isFloat32Or16(scale->dtype())) return false;
  if (attrInt(*n, "block_size", 0) > 0 || !x->shape().hasRank()) return false;
  // Constant codes fold to the float constant they stand for.
  if (std::all_of(n->inputs().begin(), n->inputs().end(),
                  [](const Value* v) { return !v || constantTensor(v); })) {
    std::vector<rt::RtValue> storage;
    std::vector<const rt::RtValue*> inputs;
    storage.reserve(n->inputs().size());
    for (const Value* v : n->inputs()) {
      if (!v) {
        inputs.push_back(nullptr);
        continue;
      }
      storage.push_back(rt::RtValue::ofTensor(v->initializer()));
      inputs.push_back(&storage.back());
    }
    auto outputs = rt::Executor::evaluateNode(*n, inputs, r.opset());
    if (!outputs || outputs->size() != 1 || !(*outputs)[0].isTensor()) return false;
    g.replaceNodeWithConstants(n, {std::move((*outputs)[0].tensor)});
    r.markReplaced();
    return true;
  }
  float lo = 0, hi = 0;
  if (!codeRange(x->dtype(), lo, hi) && x->dtype() != DType::Int32) return false;
  const size_t rank = x->shape().rank();
  int64_t axis = 0;
  if (!quantAxis(*n, scale, rank, axis)) return false;
  Value* v = r.floatOf(x);
  if (zeroPoint)
    v = r.op("Sub", {v, r.alongAxis(r.floatOf(zeroPoint), axis, rank)}, v->type(), "sub_zero_point");
  Value* s = r.alongAxis(scale, axis, rank);
  if (scale->dtype() == DType::Float16)
    v = r.op("Cast", {v}, tensorType(DType::Float16, v->shape()), "to_float16",
             {{"to", Attribute::ofInt(dtypeToOnnx(DType::Float16))}});
  v = r.op("Mul", {v, s}, tensorType(scale->dtype(), x->shape()), "scale");
  r.setOutput(0, v, DType::Float32);
  return true;
}

// (codes - zero point) as float: a constant is computed here, per output channel along `axis`
// for a 1-D zero point; otherwise Sub nodes.
Value* shifted(Rewriter& r, Value* codes, Value* zeroPoint, int64_t axis) {
  const size_t rank = codes->shape().hasRank() ? codes->shape().rank() : 0;
  const Tensor* c = constantTensor(codes);
  const Tensor* z = zeroPoint ? constantTensor(zeroPoint) : nullptr;
  if (c && (!zeroPoint || z)) {
    const uint64_t count = c->elementCount();
    std::vector<uint8_t> bytes(count * sizeof(float));
    float* values = reinterpret_cast<float*>(bytes.data());
    const uint64_t zn = z ? z->elementCount() : 0;
    uint64_t inner = 1;
    for (size_t d = static_cast<size_t>(axis) + 1; d < c->dims().size(); ++d)
      inner *= static_cast<uint64_t>(c->dims()[d]);
    std::vector<double> zeros(zn);
    for (uint64_t k = 0; k < zn; ++k)
      zeros[k] = elementAsDouble(*z, k);
    // code - zero point for run [i, i + n) of one zero point; 8-bit codes (the common case) read
    // directly, other types element by element.
    auto run = [&](uint64_t i, uint64_t n, double zv) {
      if (c->dtype() == DType::Int8 || c->dtype() == DType::UInt8) {
        const bool isSigned = c->dtype() == DType::Int8;
        const uint8_t* p = c->data() + i;
        for (uint64_t k = 0; k < n; ++k) {
          const double code = isSigned ? static_cast<double>(static_cast<int8_t>(p[k]))
                                       : static_cast<double>(p[k]);
          values[i + k] = static_cast<float>(code - zv);
        }
        return;
      }
      for (uint64_t k = 0; k < n; ++k)
        values[i + k] = static_cast<float>(elementAsDouble(*c, i + k) - zv);
    };
    if (zn <= 1) {
      run(0, count, zn == 1 ? zeros[0] : 0.0);
    } else {
      for (uint64_t i = 0; i < count; i += inner)
        run(i, std::min(inner, count - i), zeros[(i / inner) % zn]);
    }
    return r.constant("shifted", Tensor(DType::Float32, c->dims(), Buffer::owned(std::move(bytes))));
  }
  Value* f = r.floatOf(codes);
  if (!zeroPoint) return f;
  return r.op("Sub", {f, r.alongAxis(r.floatOf(zeroPoint), axis, rank)}, f->type(),
              "sub_zero_point");
}

// A zero point the rewrite can apply: absent, or one value (per tensor), or one per `count`.
bool zeroPointFits(const Value* zp, int64_t count) {
  if (!zp) return true;
  if (!zp->shape().hasRank() || zp->shape().rank() > 1) return false;
  const auto n = zp->shape().elementCount();
  return n && (*n == 1 || static_cast<int64_t>(*n) == count);
}

Node::AttributeList convAttributes(const Node& n) {
  Node::AttributeList out;
  for (const auto& [key, value] : n.attributes())
    out.emplace_back(key, value);
  return out;
}

int64_t dimOf(const Value* v, size_t i) {
  if (!v || !v->shape().hasRank() || v->shape().rank() <= i || !v->shape()[i].isStatic()) return -1;
  return v->shape()[i].value();
}

// ---- coded weights. For a target that stores quantized weights (the .ms writer's weight-quant
// tensors: 8-bit codes, a scale and a zero point, dequantized by the runtime at load time), the
// constant 8-bit codes of ConvInteger / MatMulInteger / QLinearConv / QLinearMatMul stay codes: a
// DequantizeLinear over them stands for the float weight instead of a float32 constant made here
// (four times the bytes, and work to widen them):
//
//   %y = ConvInteger(%x, %w: u8 const, %xz, %wz: u8 const)
//     →  %w_dq = DequantizeLinear(%w, 1.0, %wz) {axis = 0}
//        %yf = Conv(Sub(%xf, %xz), %w_dq)
//
// The scale is 1: the dequantized codes are exactly the integer-valued (code - zero point) floats
// the float rewrite makes, so the numbers stay the executor's. (Moving the weight scale of the
// quantizer's Cast → Mul(x_scale * w_scale) chain into the weight instead rounds each product
// differently; the dynamic quantization of the next layer then flips codes, and over a deep model
// the outputs drift far beyond the executor's tolerance.) Without such a target (the .om
// backend, the executor's passes) the weights become float32 constants as before.

// DequantizeLinear(%w, 1, %wz) {axis} when `w` holds constant 8-bit codes, `zeroPoint` is
// constant (or absent) and the target takes the node; nullptr otherwise (nothing left behind).
Value* codedWeight(Rewriter& r, Value* w, Value* zeroPoint, int64_t axis) {
  const Tensor* codes = constantTensor(w);
  if (!codes || !isInt8Like(codes->dtype()) || codes->dims().empty()) return nullptr;
  // Weight quant to another width: the weights are to be re-quantized from floats.
  if (r.weightQuantBits() != 0 && r.weightQuantBits() != 8) return nullptr;
  const Tensor* zp = zeroPoint ? constantTensor(zeroPoint) : nullptr;
  if (zeroPoint && (!zp || zp->dtype() != codes->dtype() || zp->dims().size() > 1)) return nullptr;
  // The scale has the zero point's shape (one value, or one per channel), as the op requires.
  const std::vector<int64_t> dims = zp ? zp->dims() : std::vector<int64_t>{};
  const size_t count = zp ? zp->elementCount() : 1;
  Value* s = r.constant("weight_scale",
                        Tensor::fromValues(DType::Float32, dims, std::vector<float>(count, 1.0f)));
  std::vector<Value*> inputs = {w, s};
  if (zeroPoint) inputs.push_back(zeroPoint);
  Value* dq = r.op("DequantizeLinear", inputs, tensorType(DType::Float32, w->shape()),
                   "weight_dq", {{"axis", Attribute::ofInt(axis)}});
  dq->producer()->setDocString(std::string(kModelWeightCodesDoc));
  if (r.targetTakes(*dq->producer())) return dq;
  r.graph().eraseNode(dq->producer());
  r.graph().eraseValue(s);
  return nullptr;
}

// The weight of an integer op: coded when the target takes that, else the float
// (codes - zero point) constant.
Value* integerWeight(Rewriter& r, Value* w, Value* zeroPoint, int64_t axis) {
  if (Value* dq = codedWeight(r, w, zeroPoint, axis)) return dq;
  return shifted(r, w, zeroPoint, axis);
}

bool convInteger(Graph&, Node* n, Rewriter& r) {
  Value* x = n->input(0);
  Value* w = n->input(1);
  if (!x || !w || !isInt8Like(x->dtype()) || !isInt8Like(w->dtype())) return false;
  if (!zeroPointFits(n->input(2), 1) || !zeroPointFits(n->input(3), dimOf(w, 0))) return false;
  Value* xf = shifted(r, x, n->input(2), 0);
  Value* wf = integerWeight(r, w, n->input(3), 0);
  const Value* y = n->output(0);
  Value* acc = r.op("Conv", {xf, wf}, tensorType(DType::Float32, y->shape()), "conv",
                    convAttributes(*n));
  r.setOutput(0, acc, DType::Int32);
  return true;
}

bool matMulInteger(Graph&, Node* n, Rewriter& r) {
  Value* a = n->input(0);
  Value* b = n->input(1);
  if (!a || !b || !isInt8Like(a->dtype()) || !isInt8Like(b->dtype())) return false;
  if (!a->shape().hasRank() || a->shape().rank() < 2 || !b->shape().hasRank() ||
      b->shape().rank() < 2)
    return false;
  const size_t ra = a->shape().rank(), rb = b->shape().rank();
  if (!zeroPointFits(n->input(2), dimOf(a, ra - 2)) || !zeroPointFits(n->input(3), dimOf(b, rb - 1)))
    return false;
  // a's zero point is per row (axis rank-2), b's per column (the last axis).
  Value* af = shifted(r, a, n->input(2), static_cast<int64_t>(ra) - 2);
  Value* bf = integerWeight(r, b, n->input(3), static_cast<int64_t>(rb) - 1);
  const Value* y = n->output(0);
  r.setOutput(0, r.op("MatMul", {af, bf}, tensorType(DType::Float32, y->shape()), "matmul"),
              DType::Int32);
  return true;
}

// QLinearConv / QLinearMatMul: the integer product (+ bias) times x_scale * w_scale / y_scale,
// requantized. Inputs as ONNX numbers them: x 0, x_scale 1, x_zp 2, w 3, w_scale 4, w_zp 5,
// y_scale 6, y_zp 7 (and B 8 for QLinearConv).
bool qlinear(Graph&, Node* n, Rewriter& r, bool conv) {
  Value* x = n->input(0);
  Value* w = n->input(3);
  if (!x || !w || !isInt8Like(x->dtype()) || !isInt8Like(w->dtype())) return false;
  for (size_t i : {1, 4, 6})
    if (!n->input(i) || !isFloat32Or16(n->input(i)->dtype())) return false;
  Value* yz = n->input(7);
  const DType yType = yz ? yz->dtype() : (conv ? x->dtype() : DType::UInt8);
  if (!isInt8Like(yType)) return false;
  const Value* y = n->output(0);
  if (!y->shape().hasRank()) return false;
  const size_t yRank = y->shape().rank();
  Value* acc = nullptr;
  Value* scaleW = nullptr; // w_scale shaped to broadcast over the product
  Value* scaleX = nullptr;
  if (conv) {
    if (!zeroPointFits(n->input(2), 1) || !zeroPointFits(n->input(5), dimOf(w, 0))) return false;
    scaleX = r.floatOf(n->input(1));
    Value* xf = shifted(r, x, n->input(2), 0);
    Value* wf = integerWeight(r, w, n->input(5), 0);
    std::vector<Value*> inputs = {xf, wf};
    if (Value* bias = n->input(8)) inputs.push_back(r.floatOf(bias));
    acc = r.op("Conv", inputs, tensorType(DType::Float32, y->shape()), "conv", convAttributes(*n));
    scaleW = r.alongAxis(r.floatOf(n->input(4)), 1, yRank);
  } else {
    if (!x->shape().hasRank() || x->shape().rank() < 2 || !w->shape().hasRank() ||
        w->shape().rank() < 2)
      return false;
    const size_t ra = x->shape().rank(), rb = w->shape().rank();
    if (!zeroPointFits(n->input(2), dimOf(x, ra - 2)) ||
        !zeroPointFits(n->input(5), dimOf(w, rb - 1)))
      return false;
    scaleX = r.floatOf(n->input(1));
    Value* af = shifted(r, x, n->input(2), static_cast<int64_t>(ra) - 2);
    Value* bf = integerWeight(r, w, n->input(5), static_cast<int64_t>(rb) - 1);
    acc = r.op("MatMul", {af, bf}, tensorType(DType::Float32, y->shape()), "matmul");
    // a_scale per row of A ([M] → [M, 1]); b_scale per column broadcasts as is.
    scaleX = r.alongAxis(scaleX, 0, 2);
    scaleW = r.floatOf(n->input(4));
  }
  // The scale product in the kernels' order: x_scale * w_scale, then / y_scale.
  auto broadcastType = [](const Value* a, const Value* b) {
    const Value* wider = a->shape().hasRank() && b->shape().hasRank() &&
                                 a->shape().rank() >= b->shape().rank()
                             ? a
                             : b;
    return tensorType(DType::Float32, wider->shape());
  };
  const Tensor* sx = constantTensor(scaleX);
  const Tensor* sw = constantTensor(scaleW);
  const Tensor* sy = constantTensor(r.floatOf(n->input(6)));
  Value* scale = nullptr;
  if (sx && sw && sy && sy->elementCount() == 1 && (sx->elementCount() == 1 || sw->elementCount() == 1)) {
    // Constant scales: one multiplier per channel (or per row / column), computed as the kernel.
    const Tensor& wide = sx->elementCount() == 1 ? *sw : *sx;
    const float ys = toFloatVector(*sy)[0];
    std::vector<float> xs = toFloatVector(*sx), ws = toFloatVector(*sw);
    std::vector<float> m(wide.elementCount());
    for (size_t i = 0; i < m.size(); ++i)
      m[i] = xs[xs.size() == 1 ? 0 : i] * ws[ws.size() == 1 ? 0 : i] / ys;
    scale = r.constant("multiplier", Tensor::fromValues(DType::Float32, wide.dims(), m));
  } else {
    Value* prod = r.op("Mul", {scaleX, scaleW}, broadcastType(scaleX, scaleW), "scale_product");
    scale = r.op("Div", {prod, r.floatOf(n->input(6))}, prod->type(), "multiplier");
  }
  Value* v = r.op("Mul", {acc, scale}, acc->type(), "rescale");
  float lo = 0, hi = 0;
  codeRange(yType, lo, hi);
  r.setOutput(0, r.requantize(v, yz ? r.floatOf(yz) : nullptr, lo, hi), yType);
  return true;
}

bool rewriteNode(Graph& g, Node* n, Rewriter& r) {
  const std::string& op = n->opType();
  if (op == "DynamicQuantizeLinear") return dynamicQuantizeLinear(g, n, r);
  if (op == "QuantizeLinear") return quantizeLinear(g, n, r);
  if (op == "DequantizeLinear") return dequantizeLinear(g, n, r);
  if (op == "ConvInteger") return convInteger(g, n, r);
  if (op == "MatMulInteger") return matMulInteger(g, n, r);
  if (op == "QLinearConv") return qlinear(g, n, r, true);
  if (op == "QLinearMatMul") return qlinear(g, n, r, false);
  return false;
}

class DecomposeQuant : public Pass {
 public:
  std::string_view name() const override { return "decompose-quant"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    std::map<const Value*, Value*> floats; // integer value → the float that holds its numbers
    std::vector<Node*> casts;              // Casts this pass made back to integer types
    const int64_t opset = context.opset();
    bool changed = rewrite::rewriteEachNode(graph, [&](Node* node) {
      Graph& g = *node->owner();
      // A Cast to float of a value this pass computed as float reads that float instead.
      if (node->opType() == "Cast" && attrInt(*node, "to", 0) == dtypeToOnnx(DType::Float32)) {
        auto it = floats.find(node->input(0));
        Value* out = node->output(0);
        if (it == floats.end() || it->second->dtype() != DType::Float32 || out->isGraphOutput())
          return false;
        g.replaceAllUsesWith(out, it->second);
        g.eraseNode(node);
        return true;
      }
      if (!kQuantOps.count(node->opType()) ||
          !(node->domain().empty() || node->domain() == "ai.onnx"))
        return false;
      if (context.targetTakes && context.targetTakes(*node)) return false;
      // Every rule decides before it builds anything, so a declined node leaves the graph as is.
      Rewriter r(g, node, floats, casts, opset, &context.targetTakes,
                 context.weightQuant ? context.weightQuant->bitNum : 0);
      if (rewriteNode(g, node, r)) {
        if (!r.replaced()) r.finish();
        return true;
      }
      if (context.explain)
        spdlog::debug("decompose-quant: '{}' ({}) kept: no exact float form", node->name(),
                      node->opType());
      return false;
    });
    // Casts back to integer codes that no reader needs any more.
    for (auto it = casts.rbegin(); it != casts.rend(); ++it) {
      Value* out = (*it)->output(0);
      if (!out->hasUses() && !out->isGraphOutput()) (*it)->owner()->eraseNode(*it);
    }
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> makeDecomposeQuantPass() { return std::make_unique<DecomposeQuant>(); }

} // namespace kiln
