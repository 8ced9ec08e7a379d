// .om rules for MatMul → MatMulV2 (2-D) / BatchMatMulV2 and Gemm → MatMulV2 (+ Muls, Add).
#include <numeric>

#include "../om_context.h"

namespace kiln::om {
namespace {

KILN_OM_LOWERING(
    "MatMul",
    [](const Node& n, const OpContext&) -> std::string {
      int64_t a = rankOf(n.input(0)), b = rankOf(n.input(1));
      if (a < 2 || b < 2)
        return fmt::format("MatMul with a rank-{} operand (ranks 2 and up lower)", std::min(a, b));
      return "";
    },
    [](Lowerer& l, const Node& n) {
      bool two = rankOf(n.input(0)) == 2 && rankOf(n.input(1)) == 2;
      OpDef* o = l.op(two ? "MatMulV2" : "BatchMatMulV2");
      l.input(o, l.in(0));
      l.input(o, l.in(1));
      auto& a = *o->mutable_attr();
      if (two) {
        a["transpose_x1"] = attrB(false);
        a["transpose_x2"] = attrB(false);
        a["offset_x"] = attrI(0);
      } else {
        a["adj_x1"] = attrB(false);
        a["adj_x2"] = attrB(false);
      }
      l.outputs(o);
    });
KILN_OM_LOWERING(
    "Gemm",
    [](const Node& n, const OpContext& context) -> std::string {
      if (rankOf(n.input(0)) != 2 || rankOf(n.input(1)) != 2)
        return "Gemm with operands that are not 2-D";
      if (!isFloatType(n.input(0)->dtype())) return "Gemm on integer data";
      // Before opset 7 `broadcast` only said whether C may broadcast (the lowering always lets it).
      if (context.opset < 7 && nodeInt(n, "broadcast", 0) == 0 && n.input(2) &&
          (!staticShape(n.input(2)) || !staticShape(n.output(0)) ||
           n.input(2)->shape().staticDims() != n.output(0)->shape().staticDims()))
        return "Gemm of opset 6 or earlier whose C is not of Y's shape without broadcast";
      return "";
    },
    [](Lowerer& l, const Node& n) {
      float alpha = nodeFloat(n, "alpha", 1.0f), beta = nodeFloat(n, "beta", 1.0f);
      const Value* y = n.output(0);
      const Value* c = n.input(2);
      // A constant 1-D C (scaled by beta offline) is MatMulV2's bias when alpha
      // is 1.
      bool biasInput = false;
      Port bias;
      if (c && alpha == 1.0f && c->isInitializer() && rankOf(c) == 1 &&
          c->dtype() == DType::Float32 && staticShape(y) &&
          c->shape().staticDims()[0] == y->shape().staticDims()[1]) {
        biasInput = true;
        if (beta == 1.0f) {
          bias = l.in(2);
        } else {
          auto v = c->initializer().copyValues<float>();
          for (float& x : v)
            x *= beta;
          bias = l.constant("bias",
                            Tensor::fromValues<float>(DType::Float32, c->initializer().dims(), v));
        }
      }
      OpDef* mm = l.op("MatMulV2", biasInput || !c ? "" : "matmul");
      l.input(mm, l.in(0));
      l.input(mm, l.in(1));
      if (biasInput) l.input(mm, bias);
      auto& a = *mm->mutable_attr();
      a["transpose_x1"] = attrB(nodeInt(n, "transA", 0) != 0);
      a["transpose_x2"] = attrB(nodeInt(n, "transB", 0) != 0);
      a["offset_x"] = attrI(0);
      bool last = (biasInput || !c) && alpha == 1.0f;
      Port p = l.output(mm, y->dtype(), y->shape(), last ? y->name() : "");
      if (alpha != 1.0f) {
        bool lastMul = biasInput || !c;
        OpDef* mul = l.op("Muls", lastMul ? "" : "alpha");
        l.input(mul, p);
        (*mul->mutable_attr())["value"] = attrF(alpha);
        p = l.output(mul, y->dtype(), y->shape(), lastMul ? y->name() : "");
      }
      if (c && !biasInput) {
        Port cp = l.in(2);
        if (beta != 1.0f) {
          OpDef* mul = l.op("Muls", "beta");
          l.input(mul, cp);
          (*mul->mutable_attr())["value"] = attrF(beta);
          cp = l.output(mul, c->dtype(), c->shape(), "");
        }
        OpDef* add = l.op("Add");
        l.input(add, p);
        l.input(add, cp);
        p = l.output(add, y->dtype(), y->shape(), y->name());
      }
      l.bind(y, p);
    });
KILN_OM_RAISING("MatMulV2", [](Raiser& r, const OpDef& op) -> Status {
  if (Value* x = r.in(op, 0); x && x->dtype() == DType::Int8) return raiseInt8MatMul(r, op);
  bool ta = getB(op, "transpose_x1", false), tb = getB(op, "transpose_x2", false);
  Value* bias = r.in(op, 2);
  if (!ta && !tb && !bias) {
    r.emit(op, "MatMul", {r.in(op, 0), r.in(op, 1)}, 1);
    return Status::ok();
  }
  std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
  if (bias) inputs.push_back(bias);
  Node* node = r.emit(op, "Gemm", inputs, 1);
  node->setAttribute("transA", Attribute::ofInt(ta));
  node->setAttribute("transB", Attribute::ofInt(tb));
  return Status::ok();
});
void batchMatMulRaisingRules() {
  for (const char* type : {"BatchMatMulV2", "BatchMatMul"})
    addRaising(
        type,
        [](Raiser& r, const OpDef& op) -> Status {
          if (Value* x = r.in(op, 0); x && x->dtype() == DType::Int8) return raiseInt8MatMul(r, op);
          std::vector<Value*> inputs{r.in(op, 0), r.in(op, 1)};
          const char* flags[2][2] = {{"adj_x1", "adj_x2"}, {"transpose_x1", "transpose_x2"}};
          for (int i = 0; i < 2; ++i) {
            bool t = getB(op, flags[0][i], false) || getB(op, flags[1][i], false);
            if (!t) continue;
            Value* x = inputs[i];
            int64_t rank = rankOf(x);
            if (rank < 2) return r.unsupported(op, "adjoint of an operand of unknown rank");
            std::vector<int64_t> perm(static_cast<size_t>(rank));
            std::iota(perm.begin(), perm.end(), 0);
            std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
            Value* tr = r.helper(op.name() + "_adj", "Transpose", {x});
            tr->producer()->setAttribute("perm", Attribute::ofInts(perm));
            inputs[i] = tr;
          }
          if (Value* bias = r.in(op, 2)) {
            Node* mm = r.emit(op, "MatMul", inputs, 1);
            Value* sum = r.helper(op.name() + "_bias", "Add", {mm->output(0), bias});
            r.rebind(op, 0, sum);
          } else {
            r.emit(op, "MatMul", inputs, 1);
          }
          return Status::ok();
        },
        __FILE__);
}
const bool kBatchMatMulRaisingRulesRegistered = (batchMatMulRaisingRules(), true);

KILN_OM_RAISING("Muls", [](Raiser& r, const OpDef& op) -> Status {
  Value* x = r.in(op, 0);
  float value = getF(op, "value", 1.0f);
  Tensor scalar;
  if (x->dtype() == DType::Float32)
    scalar = Tensor::fromValues<float>(DType::Float32, {}, {value});
  else if (x->dtype() == DType::Float64)
    scalar = Tensor::fromValues<double>(DType::Float64, {}, {double(value)});
  else
    return r.unsupported(op, fmt::format("Muls on {}", dtypeName(x->dtype())));
  r.emit(op, "Mul", {x, r.constTensor(op.name() + "_value", scalar)}, 1);
  return Status::ok();
});
} // namespace
} // namespace kiln::om
