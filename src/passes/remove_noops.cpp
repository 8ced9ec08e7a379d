// remove-noops: bypasses nodes that return their input unchanged.
//
//   %y = Identity(%x)                       →  uses of %y read %x
//   %y = Dropout(%x)  (mask unused)         →  uses of %y read %x
//   %y = Cast(%x) {to = <x's own type>}     →  uses of %y read %x
//   %y = Cast(Cast(%x: f16) {to = f32}) {to = f16}  →  uses of %y read %x (the widening is exact)
//   %y = Transpose(%x) {perm = [0,1,..]}    →  uses of %y read %x
//   %y = Reshape(%x, %s) (s == x's static shape) → uses of %y read %x
// A node whose output is a graph output stays: graph outputs keep their names.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

// Bits of precision a float type keeps; a cast to a type with at least as many mantissa and
// exponent bits is exact.
bool widensLosslessly(DType from, DType to) {
  if (from == to) return true;
  switch (from) {
  case DType::Float16:
    return to == DType::Float32 || to == DType::Float64;
  case DType::BFloat16:
    return to == DType::Float32 || to == DType::Float64;
  case DType::Float32:
    return to == DType::Float64;
  default:
    return false;
  }
}

// For Cast(to=A)(Cast(to=B)(x: A)) where A→B is exact: x, the value the pair round-trips.
Value* castBackSource(const Node& node) {
  const Value* mid = node.input(0);
  const Node* inner = mid ? mid->producer() : nullptr;
  if (!inner || inner->opType() != "Cast" || !inner->domain().empty()) return nullptr;
  Value* source = inner->input(0);
  const Attribute* to = node.attribute("to");
  if (!source || !to || source->dtype() == DType::Undefined || mid->dtype() == DType::Undefined)
    return nullptr;
  if (static_cast<int64_t>(source->dtype()) != to->asInt()) return nullptr;
  return widensLosslessly(source->dtype(), mid->dtype()) ? source : nullptr;
}

// Why `node` is a no-op, or "" when it is not.
std::string noopReason(const Node& node) {
  const std::string& op = node.opType();
  if (!node.domain().empty() && node.domain() != "ai.onnx") return "";
  const Value* in = node.input(0);
  if (!in || node.outputs().empty() || !node.output(0)) return "";
  if (in->type().kind != TypeKind::Tensor && op != "Identity") return "";
  if (op == "Identity") return "identity";
  if (op == "Dropout") {
    if (node.outputs().size() > 1 && node.output(1) &&
        (node.output(1)->hasUses() || node.output(1)->isGraphOutput()))
      return "";
    if (const Value* training = node.input(2)) {
      // Only a constant false training_mode makes it a no-op; a fed or overridable one might be
      // true.
      const Tensor* flag = rewrite::constantTensor(training);
      if (!flag || flag->byteSize() == 0 || flag->data()[0]) return "";
    }
    return "dropout at inference";
  }
  if (op == "Cast") {
    const Attribute* to = node.attribute("to");
    if (to && to->kind() == AttrKind::Int && in->dtype() != DType::Undefined &&
        static_cast<int64_t>(in->dtype()) == to->asInt())
      return "cast to the same type";
    if (castBackSource(node)) return "cast back through a lossless widening cast";
    return "";
  }
  if (op == "Transpose") {
    const Attribute* perm = node.attribute("perm");
    if (!perm || perm->kind() != AttrKind::Ints) return ""; // default perm reverses axes
    for (size_t i = 0; i < perm->asInts().size(); ++i)
      if (perm->asInts()[i] != static_cast<int64_t>(i)) return "";
    return "identity permutation";
  }
  if (op == "Reshape") {
    auto target =
        rewrite::constantInts(node.input(1)); // not a graph input: users can't override it
    if (!target || !in->shape().isStatic()) return "";
    std::vector<int64_t> dims = in->shape().staticDims();
    if (target->size() != dims.size()) return "";
    bool allowZero = node.attribute("allowzero") && node.attribute("allowzero")->asInt() != 0;
    for (size_t i = 0; i < dims.size(); ++i) {
      int64_t t = (*target)[i];
      if (t == 0 && !allowZero) t = dims[i];
      if (t != dims[i]) return "";
    }
    return "reshape to the same shape";
  }
  return "";
}

bool removeNoops(Graph& graph, bool explain) {
  return rewrite::rewriteEachNode(graph, [&](Node* node) {
    std::string reason = noopReason(*node);
    if (reason.empty()) return false;
    Value* out = node->output(0);
    if (out->isGraphOutput()) {
      if (explain)
        spdlog::debug("remove-noops: keeping '{}': its output '{}' is a graph output", node->name(),
                      out->name());
      return false;
    }
    if (explain) spdlog::debug("remove-noops: '{}' ({}): {}", node->name(), node->opType(), reason);
    Value* replacement =
        node->opType() == "Cast" && castBackSource(*node) ? castBackSource(*node) : node->input(0);
    Graph& owner = *node->owner();
    owner.replaceAllUsesWith(out, replacement);
    bool stillRead =
        std::any_of(node->outputs().begin(), node->outputs().end(),
                    [](const Value* o) { return o && (o->hasUses() || o->isGraphOutput()); });
    if (!stillRead) owner.eraseNode(node);
    return true;
  });
}

class RemoveNoops : public Pass {
 public:
  std::string_view name() const override { return "remove-noops"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return removeNoops(graph, context.explain);
  }
};

} // namespace

std::unique_ptr<Pass> makeRemoveNoopsPass() { return std::make_unique<RemoveNoops>(); }

} // namespace kiln
