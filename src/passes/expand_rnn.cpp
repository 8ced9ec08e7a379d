// expand-rnn: unrolls ONNX RNN, GRU and LSTM nodes into standard ops over their static sequence
// length, for targets that have no recurrent op able to take the node (kiln/passes/expand_rnn.h).
//
//   Y, Y_h, Y_c = LSTM(X, W, R, B, sequence_lens, initial_h, initial_c, P)
// becomes, per direction d and gate g (weights sliced and transposed, biases summed once):
//   XW_g = MatMul(X, W_g^T) + (Wb_g + Rb_g)                   [T, B, H], every step at once
//   step t (reversed for the backward direction):
//     pre_g = Gather(XW_g, t) + MatMul(H, R_g^T)               [B, H]
//     i, f, o = f(pre_i), f(pre_f), f(pre_o); c~ = g(pre_c)    (+ peepholes, clip, input_forget)
//     C = f*C + i*c~; H = o*h(C)                               (masked by sequence_lens)
//   Y = Concat of the steps, Y_h / Y_c = the last states, in the node's layout.
// GRU (linear_before_reset either way) and RNN follow the same scheme. Only standard ops with the
// same form in every opset are emitted (Gather, MatMul, Add, Sub, Mul, Min, Max, Reshape,
// Transpose, Concat, Cast, Less and the activation ops), so the result lowers wherever they do.
#include "kiln/passes/expand_rnn.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/rnn.h"

namespace kiln {
namespace {

constexpr int64_t kMaxSteps = 1024;

bool isFloatDType(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 ||
         t == DType::BFloat16;
}

const Tensor* constantOf(const Value* v) {
  if (!v || !v->isInitializer() || v->isGraphInput()) return nullptr;
  return &v->initializer();
}

std::vector<double> doubles(const Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.elementCount()));
  for (uint64_t i = 0; i < t.elementCount(); ++i)
    out[static_cast<size_t>(i)] = rt::elementAsDouble(t, i);
  return out;
}

// What the unrolling needs to know of a node, or why it cannot be unrolled.
struct Plan {
  ops::RnnAttrs attrs;
  int64_t steps = 0;
  int64_t hidden = 0;
  DType dtype = DType::Undefined;
};

Expected<Plan> planOf(const Node& n) {
  auto fail = [&](const std::string& why) -> Expected<Plan> {
    return Status(ErrorCode::BadAttribute, why, "");
  };
  Plan p;
  auto attrs = ops::rnnAttrs(n);
  if (!attrs) return fail(attrs.status().message());
  p.attrs = *attrs;
  const Value* x = n.input(0);
  if (!x || !n.input(1) || !n.input(2)) return fail("X, W and R are required");
  p.dtype = x->dtype();
  if (!isFloatDType(p.dtype))
    return fail(fmt::format("X has dtype {}, not a float type", dtypeName(p.dtype)));
  if (!x->shape().hasRank() || x->shape().rank() != 3) return fail("X is not known to be 3-D");
  const Dim& seq = x->shape()[p.attrs.layout == 0 ? 0 : 1];
  if (!seq.isStatic())
    return fail("the sequence length of X is not static (fix the input shape to unroll it)");
  p.steps = seq.value();
  if (p.steps < 1) return fail("the sequence is empty");
  if (p.steps > kMaxSteps)
    return fail(fmt::format("{} steps are more than the {} kiln unrolls", p.steps, kMaxSteps));
  p.hidden = p.attrs.hidden;
  const Value* r = n.input(2);
  if (p.hidden <= 0 && r->shape().hasRank() && r->shape().rank() == 3 && r->shape()[2].isStatic())
    p.hidden = r->shape()[2].value();
  if (p.hidden <= 0) return fail("the hidden size is unknown");
  for (size_t i : {size_t{1}, size_t{2}}) {
    const Value* w = n.input(i);
    if (!w->shape().hasRank() || w->shape().rank() != 3)
      return fail(fmt::format("{} is not known to be 3-D", i == 1 ? "W" : "R"));
  }
  if (p.attrs.layout != 0 && p.attrs.layout != 1)
    return fail(fmt::format("layout {} (0 or 1)", p.attrs.layout));
  return p;
}

class Unroller {
 public:
  Unroller(Graph& graph, Node& node, Plan plan)
      : g_(graph), n_(node), a_(plan.attrs), T_(plan.steps), H_(plan.hidden), dt_(plan.dtype) {
    base_ = !n_.name().empty() ? n_.name()
            : n_.output(0)     ? n_.output(0)->name()
                               : std::string("rnn");
    const Shape& xs = n_.input(0)->shape();
    batch_ = xs[a_.layout == 0 ? 1 : 0];
    inputDim_ = xs[2];
  }

  Status run();

 private:
  // --- building blocks (every node goes right before the RNN node, with its locations) ---
  Value* op(const std::string& type, const std::vector<Value*>& inputs, Shape shape,
            const std::string& tag, Node::AttributeList attrs = {}, DType dtype = DType::Undefined) {
    const std::string name = g_.uniqueName(base_ + "_" + tag);
    Node* node = g_.insertNodeBefore(&n_, type, inputs, {name});
    node->setName(name);
    for (auto& [key, value] : attrs)
      node->setAttribute(key, std::move(value));
    node->mergeLocations(n_);
    node->output(0)->setType(
        ValueType::tensor(dtype == DType::Undefined ? dt_ : dtype, std::move(shape)));
    return node->output(0);
  }
  Value* constant(Tensor t, const std::string& tag) {
    return g_.addInitializer(g_.uniqueName(base_ + "_" + tag), std::move(t));
  }
  Value* floats(const std::vector<double>& v, std::vector<int64_t> dims, const std::string& tag) {
    Tensor t = Tensor::fromValues<double>(DType::Float64, std::move(dims), v);
    if (dt_ != DType::Float64) t = *rt::castTensor(t, dt_);
    return constant(std::move(t), tag);
  }
  Value* scalar(double v) {
    auto it = scalars_.find(v);
    if (it != scalars_.end()) return it->second;
    return scalars_[v] = floats({v}, {}, "k");
  }
  Value* ints(const std::vector<int64_t>& v, bool asScalar = false) {
    if (asScalar) {
      // Step and direction indices repeat: one constant each.
      auto it = indices_.find(v[0]);
      if (it != indices_.end()) return it->second;
      return indices_[v[0]] = constant(
                 Tensor::fromValues<int64_t>(DType::Int64, {}, v), fmt::format("i{}", v[0]));
    }
    return constant(Tensor::fromValues<int64_t>(
                        DType::Int64,
                        asScalar ? std::vector<int64_t>{} : std::vector<int64_t>{int64_t(v.size())},
                        v),
                    "idx");
  }
  Shape bh() const { return Shape({batch_, Dim::known(H_)}); }
  Value* gather(Value* x, Value* index, int64_t axis, Shape shape, const std::string& tag) {
    return op("Gather", {x, index}, std::move(shape), tag, {{"axis", Attribute::ofInt(axis)}});
  }
  Value* add(Value* a, Value* b, Shape s, const std::string& tag) {
    if (!a) return b;
    if (!b) return a;
    return op("Add", {a, b}, std::move(s), tag);
  }
  Value* mul(Value* a, Value* b, Shape s, const std::string& tag) {
    return op("Mul", {a, b}, std::move(s), tag);
  }

  // Rows [offset, offset + count) of direction d of a [D, N, cols] matrix, transposed: [cols,
  // count]. Computed once for constants; Gather + Transpose otherwise.
  Value* weightT(Value* m, int64_t d, int64_t offset, int64_t count, const std::string& tag) {
    if (const Tensor* t = constantOf(m)) {
      const auto& dims = t->dims();
      const int64_t rows = dims[1], cols = dims[2];
      std::vector<double> all = doubles(*t), out(static_cast<size_t>(cols * count));
      for (int64_t r = 0; r < count; ++r)
        for (int64_t c = 0; c < cols; ++c)
          out[static_cast<size_t>(c * count + r)] =
              all[static_cast<size_t>((d * rows + offset + r) * cols + c)];
      return floats(out, {cols, count}, tag);
    }
    const Dim cols = m->shape()[2];
    Value* md = gather(m, ints({d}, true), 0, Shape({m->shape()[1], cols}), tag + "_d");
    std::vector<int64_t> range;
    for (int64_t i = 0; i < count; ++i)
      range.push_back(offset + i);
    Value* rows = gather(md, ints(range), 0, Shape({Dim::known(count), cols}), tag + "_rows");
    return op("Transpose", {rows}, Shape({cols, Dim::known(count)}), tag,
              {{"perm", Attribute::ofInts({1, 0})}});
  }
  // The sum of the [H] slices at `offsets` of direction d of a [D, N] vector input (B, P).
  Value* rowSum(Value* v, int64_t d, const std::vector<int64_t>& offsets, const std::string& tag) {
    if (const Tensor* t = constantOf(v)) {
      const int64_t n = t->dims().size() == 2 ? t->dims()[1] : 0;
      std::vector<double> all = doubles(*t), out(static_cast<size_t>(H_), 0.0);
      for (int64_t off : offsets)
        for (int64_t k = 0; k < H_; ++k)
          out[static_cast<size_t>(k)] += all[static_cast<size_t>(d * n + off + k)];
      return floats(out, {H_}, tag);
    }
    Value* vd = gather(v, ints({d}, true), 0, Shape({v->shape().hasRank() && v->shape().rank() == 2
                                                         ? v->shape()[1]
                                                         : Dim()}),
                       tag + "_d");
    Value* sum = nullptr;
    for (int64_t off : offsets) {
      std::vector<int64_t> range;
      for (int64_t k = 0; k < H_; ++k)
        range.push_back(off + k);
      Value* part = gather(vd, ints(range), 0, Shape({Dim::known(H_)}), tag + "_part");
      sum = add(sum, part, Shape({Dim::known(H_)}), tag);
    }
    return sum;
  }
  Value* clip(Value* x, const std::string& tag) {
    if (!a_.clip) return x;
    Value* lo = op("Min", {x, scalar(*a_.clip)}, bh(), tag + "_clipmax");
    return op("Max", {lo, scalar(-*a_.clip)}, bh(), tag + "_clip");
  }
  Value* activation(const ops::RnnActivation& f, Value* x, const std::string& tag) {
    const std::string& k = f.name;
    if (k == "Sigmoid" || k == "Tanh" || k == "Relu" || k == "Softsign" || k == "Softplus")
      return op(k, {x}, bh(), tag);
    if (k == "LeakyRelu" || k == "Elu" || k == "ThresholdedRelu")
      return op(k, {x}, bh(), tag, {{"alpha", Attribute::ofFloat(f.alpha)}});
    if (k == "HardSigmoid")
      return op(k, {x}, bh(), tag,
                {{"alpha", Attribute::ofFloat(f.alpha)}, {"beta", Attribute::ofFloat(f.beta)}});
    if (k == "Affine")
      return op("Add", {mul(x, scalar(f.alpha), bh(), tag + "_scale"), scalar(f.beta)}, bh(), tag);
    // ScaledTanh: alpha * tanh(beta * x)
    Value* in = mul(x, scalar(f.beta), bh(), tag + "_in");
    return mul(op("Tanh", {in}, bh(), tag + "_tanh"), scalar(f.alpha), bh(), tag);
  }

  // The [B, 1] float mask of step t (1 inside the sequence), nullptr when every step counts.
  Value* mask(int64_t t);
  // Unrolls direction d; fills y_[t][d], and the final states.
  void direction(int64_t d, Value* x);
  // Gives `value` the name and uses of output `i` of the node.
  void replaceOutput(size_t i, Value* value);

  Graph& g_;
  Node& n_;
  const ops::RnnAttrs a_;
  const int64_t T_, H_;
  const DType dt_;
  std::string base_;
  Dim batch_, inputDim_;
  std::map<double, Value*> scalars_;
  std::map<int64_t, Value*> indices_;
  std::optional<std::vector<int64_t>> lens_; // constant sequence_lens
  Value* lensColumn_ = nullptr;                // runtime sequence_lens as [B, 1]
  std::map<int64_t, std::pair<Value*, Value*>> masks_;
  std::vector<std::vector<Value*>> y_;         // [t][d] → [B, H]
  std::vector<Value*> yh_, yc_;                // [d] → [B, H]
};

Value* Unroller::mask(int64_t t) {
  if (!lens_ && !lensColumn_) return nullptr;
  auto it = masks_.find(t);
  if (it != masks_.end()) return it->second.first;
  Value* m = nullptr;
  if (lens_) {
    bool all = true;
    std::vector<double> v;
    for (int64_t len : *lens_) {
      v.push_back(t < len ? 1.0 : 0.0);
      all = all && t < len;
    }
    if (all) {
      masks_[t] = {nullptr, nullptr};
      return nullptr;
    }
    m = floats(v, {int64_t(v.size()), 1}, fmt::format("mask{}", t));
  } else {
    const DType lensType = lensColumn_->dtype();
    Value* tv = lensType == DType::Int64
                    ? ints({t}, true)
                    : constant(Tensor::fromValues<int32_t>(DType::Int32, {},
                                                           std::vector<int32_t>{int32_t(t)}),
                               "t");
    Value* less = op("Less", {tv, lensColumn_}, Shape({batch_, Dim::known(1)}),
                     fmt::format("inside{}", t), {}, DType::Bool);
    m = op("Cast", {less}, Shape({batch_, Dim::known(1)}), fmt::format("mask{}", t),
           {{"to", Attribute::ofInt(dtypeToOnnx(dt_))}});
  }
  Value* inv = op("Sub", {scalar(1.0), m}, Shape({batch_, Dim::known(1)}),
                  fmt::format("unmask{}", t));
  masks_[t] = {m, inv};
  return m;
}

void Unroller::direction(int64_t d, Value* x) {
  const bool backward = a_.reverse || d == 1;
  const int64_t G = a_.gates;
  const auto acts = std::vector<ops::RnnActivation>(
      a_.activations.begin() + d * a_.perDirection(),
      a_.activations.begin() + (d + 1) * a_.perDirection());
  Value* w = n_.input(1);
  Value* r = n_.input(2);
  Value* b = n_.input(3);
  const std::string dn = fmt::format("d{}", d);
  const bool gruLbr = a_.cell == ops::RnnCell::Gru && a_.linearBeforeReset;

  // Per gate: XW_g over all steps with the biases that are plain additions, and R_g^T.
  std::vector<Value*> xw(static_cast<size_t>(G)), rT(static_cast<size_t>(G));
  const Shape tbh({Dim::known(T_), batch_, Dim::known(H_)});
  for (int64_t gate = 0; gate < G; ++gate) {
    const std::string tag = fmt::format("{}g{}", dn, gate);
    Value* wT = weightT(w, d, gate * H_, H_, tag + "_W");
    rT[size_t(gate)] = weightT(r, d, gate * H_, H_, tag + "_R");
    Value* proj = op("MatMul", {x, wT}, tbh, tag + "_xw");
    if (b) {
      // GRU with linear_before_reset keeps Rb_h inside the reset gate's product.
      std::vector<int64_t> offsets = {gate * H_};
      if (!(gruLbr && gate == 2)) offsets.push_back(G * H_ + gate * H_);
      proj = op("Add", {proj, rowSum(b, d, offsets, tag + "_b")}, tbh, tag + "_xwb");
    }
    xw[size_t(gate)] = proj;
  }
  Value* rbh = gruLbr && b ? rowSum(b, d, {G * H_ + 2 * H_}, dn + "_rbh") : nullptr;
  std::vector<Value*> peep;
  if (a_.cell == ops::RnnCell::Lstm && n_.input(7))
    for (int64_t k = 0; k < 3; ++k)
      peep.push_back(rowSum(n_.input(7), d, {k * H_}, fmt::format("{}p{}", dn, k)));

  // Initial states ([D, B, H], or [B, D, H] with layout 1); nullptr stands for zeros.
  auto initial = [&](size_t input, const std::string& tag) -> Value* {
    Value* s = n_.input(input);
    if (!s) return nullptr;
    return gather(s, ints({d}, true), a_.layout == 0 ? 0 : 1, bh(), dn + tag);
  };
  Value* h = initial(5, "_h0");
  Value* c = a_.cell == ops::RnnCell::Lstm ? initial(6, "_c0") : nullptr;

  for (int64_t s = 0; s < T_; ++s) {
    const int64_t t = backward ? T_ - 1 - s : s;
    const std::string st = fmt::format("{}t{}", dn, t);
    std::vector<Value*> pre(static_cast<size_t>(G));
    for (int64_t gate = 0; gate < G; ++gate) {
      Value* xt = gather(xw[size_t(gate)], ints({t}, true), 0, bh(),
                         fmt::format("{}_x{}", st, gate));
      // GRU without linear_before_reset multiplies the reset gate in before R_h.
      if (a_.cell == ops::RnnCell::Gru && gate == 2) {
        pre[size_t(gate)] = xt;
        continue;
      }
      Value* rec = h ? op("MatMul", {h, rT[size_t(gate)]}, bh(), fmt::format("{}_r{}", st, gate))
                     : nullptr;
      pre[size_t(gate)] = add(xt, rec, bh(), fmt::format("{}_pre{}", st, gate));
    }
    Value* hNew = nullptr;
    Value* cNew = nullptr;
    if (a_.cell == ops::RnnCell::Rnn) {
      hNew = activation(acts[0], clip(pre[0], st + "_a"), st + "_h");
    } else if (a_.cell == ops::RnnCell::Gru) {
      Value* z = activation(acts[0], clip(pre[0], st + "_z"), st + "_z");
      Value* rg = activation(acts[0], clip(pre[1], st + "_r"), st + "_r");
      Value* hRec = nullptr;
      if (gruLbr) {
        Value* hr = h ? op("MatMul", {h, rT[2]}, bh(), st + "_hr") : nullptr;
        hr = add(hr, rbh, bh(), st + "_hrb");
        if (hr) hRec = mul(rg, hr, bh(), st + "_rhr");
      } else if (h) {
        Value* rh = mul(rg, h, bh(), st + "_rh");
        hRec = op("MatMul", {rh, rT[2]}, bh(), st + "_rhR");
      }
      Value* cand = activation(acts[1], clip(add(pre[2], hRec, bh(), st + "_hpre"), st + "_hh"),
                               st + "_hh");
      // H = (1 - z) * h~ + z * H_prev
      Value* keep = op("Sub", {scalar(1.0), z}, bh(), st + "_1mz");
      hNew = mul(keep, cand, bh(), st + "_new");
      if (h) hNew = add(hNew, mul(z, h, bh(), st + "_zh"), bh(), st + "_h");
    } else {
      // Gates in ONNX order: i, o, f, c; peepholes P = [Pi, Po, Pf].
      Value* ip = pre[0];
      Value* fp = pre[2];
      if (!peep.empty() && c) {
        ip = add(ip, mul(peep[0], c, bh(), st + "_pic"), bh(), st + "_ipre");
        fp = add(fp, mul(peep[2], c, bh(), st + "_pfc"), bh(), st + "_fpre");
      }
      Value* i = activation(acts[0], clip(ip, st + "_i"), st + "_i");
      Value* f = a_.inputForget ? op("Sub", {scalar(1.0), i}, bh(), st + "_f")
                                : activation(acts[0], clip(fp, st + "_f"), st + "_f");
      Value* cand = activation(acts[1], clip(pre[3], st + "_g"), st + "_g");
      cNew = mul(i, cand, bh(), st + "_ig");
      if (c) cNew = add(mul(f, c, bh(), st + "_fc"), cNew, bh(), st + "_c");
      Value* oPre = pre[1];
      if (!peep.empty())
        oPre = add(oPre, mul(peep[1], cNew, bh(), st + "_poc"), bh(), st + "_opre");
      Value* o = activation(acts[0], clip(oPre, st + "_o"), st + "_o");
      hNew = mul(o, activation(acts[2], cNew, st + "_hc"), bh(), st + "_h");
    }
    // sequence_lens: outside a sequence the step outputs zeros and the state is kept.
    if (Value* m = mask(t)) {
      Value* inv = masks_[t].second;
      Value* y = mul(m, hNew, bh(), st + "_y");
      y_[size_t(t)][size_t(d)] = y;
      h = h ? add(y, mul(inv, h, bh(), st + "_hold"), bh(), st + "_hm") : y;
      if (cNew) {
        Value* cm = mul(m, cNew, bh(), st + "_cm");
        c = c ? add(cm, mul(inv, c, bh(), st + "_chold"), bh(), st + "_cmask") : cm;
      }
    } else {
      y_[size_t(t)][size_t(d)] = hNew;
      h = hNew;
      if (cNew) c = cNew;
    }
  }
  yh_[size_t(d)] = h;
  yc_[size_t(d)] = c;
}

void Unroller::replaceOutput(size_t i, Value* value) {
  Value* old = n_.output(i);
  const std::string name = old->name();
  if (old->shape().hasRank()) value->setType(old->type());
  g_.renameValue(old, g_.uniqueName(name + "_rnn"));
  g_.renameValue(value, name);
  g_.replaceAllUsesWith(old, value);
}

Status Unroller::run() {
  const int64_t D = a_.dirs;
  Value* x = n_.input(0);
  if (a_.layout == 1)
    x = op("Transpose", {x}, Shape({Dim::known(T_), batch_, inputDim_}), "x",
           {{"perm", Attribute::ofInts({1, 0, 2})}});
  if (Value* lens = n_.input(4)) {
    if (const Tensor* t = constantOf(lens)) {
      lens_ = rt::toInt64Vector(*t);
    } else {
      lensColumn_ = op("Reshape", {lens, ints({-1, 1})}, Shape({batch_, Dim::known(1)}), "lens",
                       {}, lens->dtype());
    }
  }
  y_.assign(static_cast<size_t>(T_), std::vector<Value*>(static_cast<size_t>(D)));
  yh_.assign(static_cast<size_t>(D), nullptr);
  yc_.assign(static_cast<size_t>(D), nullptr);
  for (int64_t d = 0; d < D; ++d)
    direction(d, x);

  auto used = [&](size_t i) {
    const Value* v = n_.output(i);
    return v && (v->hasUses() || v->isGraphOutput());
  };
  const Dim dd = Dim::known(D), one = Dim::known(1), hd = Dim::known(H_);
  if (used(0)) {
    // Y: [T, D, B, H] (layout 0) or [B, T, D, H] (layout 1).
    std::vector<Value*> steps;
    for (int64_t t = 0; t < T_; ++t) {
      std::vector<Value*> dirs;
      for (int64_t d = 0; d < D; ++d) {
        Value* y = y_[size_t(t)][size_t(d)];
        dirs.push_back(a_.layout == 0
                           ? op("Reshape", {y, ints({1, 1, -1, H_})}, Shape({one, one, batch_, hd}),
                                fmt::format("y{}_{}", t, d))
                           : op("Reshape", {y, ints({-1, 1, 1, H_})}, Shape({batch_, one, one, hd}),
                                fmt::format("y{}_{}", t, d)));
      }
      Value* step = dirs[0];
      if (D > 1)
        step = op("Concat", dirs,
                  a_.layout == 0 ? Shape({one, dd, batch_, hd}) : Shape({batch_, one, dd, hd}),
                  fmt::format("y{}", t), {{"axis", Attribute::ofInt(a_.layout == 0 ? 1 : 2)}});
      steps.push_back(step);
    }
    Value* y = steps[0];
    if (T_ > 1)
      y = op("Concat", steps,
             a_.layout == 0 ? Shape({Dim::known(T_), dd, batch_, hd})
                            : Shape({batch_, Dim::known(T_), dd, hd}),
             "y", {{"axis", Attribute::ofInt(a_.layout == 0 ? 0 : 1)}});
    replaceOutput(0, y);
  }
  auto state = [&](const std::vector<Value*>& last, const std::string& tag) {
    std::vector<Value*> dirs;
    for (int64_t d = 0; d < D; ++d)
      dirs.push_back(a_.layout == 0 ? op("Reshape", {last[size_t(d)], ints({1, -1, H_})},
                                         Shape({one, batch_, hd}), fmt::format("{}{}", tag, d))
                                    : op("Reshape", {last[size_t(d)], ints({-1, 1, H_})},
                                         Shape({batch_, one, hd}), fmt::format("{}{}", tag, d)));
    if (D == 1) return dirs[0];
    return op("Concat", dirs, a_.layout == 0 ? Shape({dd, batch_, hd}) : Shape({batch_, dd, hd}),
              tag, {{"axis", Attribute::ofInt(a_.layout == 0 ? 0 : 1)}});
  };
  if (used(1)) replaceOutput(1, state(yh_, "yh"));
  if (a_.cell == ops::RnnCell::Lstm && used(2)) replaceOutput(2, state(yc_, "yc"));
  g_.eraseNode(&n_);
  return Status::ok();
}

size_t unrollIn(Graph& graph, const std::function<bool(const Node&)>& select) {
  size_t count = 0;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  for (Node* node : order) {
    for (Graph* sub : node->subgraphs())
      count += unrollIn(*sub, select);
    if (!ops::rnnCellOf(*node) || !select(*node)) continue;
    auto plan = planOf(*node);
    if (!plan) continue;
    // An LSTM's C state exists only when a step ran, which planOf guarantees (T >= 1).
    Unroller unroller(graph, *node, plan.take());
    if (unroller.run()) ++count;
  }
  return count;
}

class ExpandRnnPass : public Pass {
 public:
  std::string_view name() const override { return "expand-rnn"; }
  Expected<bool> run(Graph& graph, PassContext&) override {
    return unrollIn(graph, [](const Node&) { return true; }) > 0;
  }
};

} // namespace

std::string rnnUnrollBlocker(const Node& node) {
  auto plan = planOf(node);
  return plan ? std::string() : plan.status().message();
}

Expected<size_t> unrollRnnNodes(Graph& graph, const std::function<bool(const Node&)>& select) {
  return unrollIn(graph, select);
}

std::unique_ptr<Pass> makeExpandRnnPass() { return std::make_unique<ExpandRnnPass>(); }

} // namespace kiln
