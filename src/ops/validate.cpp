// The node-validation layer (ops/validate.h): arity and required attributes from the op schemas,
// attribute kinds (ops/attributes.h), and the op families' registered attribute checks.
#include "ops/validate.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <set>

#include <fmt/format.h>
#include <onnx/defs/schema.h>
#include <onnx/defs/shape_inference.h>

#include "kiln/backends/lowering.h"
#include "ops/attributes.h"
#include "ops/matmul_nbits.h"

namespace kiln::ops {
namespace {

std::map<std::string, AttributeCheck>& checks() {
  static std::map<std::string, AttributeCheck> table;
  return table;
}

bool isDefaultDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// The newest ai.onnx opset the onnx library knows: a model of a later opset may use op versions
// whose schemas it lacks, so there its (older) schema only bounds what later versions kept.
int libraryOpset() {
  static const int last = [] {
    const auto& map = onnx::OpSchemaRegistry::DomainToVersionRange::Instance().Map();
    auto it = map.find("");
    return it == map.end() ? 0 : it->second.second;
  }();
  return last;
}

std::string countText(int n, const char* what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

std::string rangeText(int lo, int hi, const char* what) {
  if (lo == hi) return countText(lo, what);
  if (hi == std::numeric_limits<int>::max()) return fmt::format("at least {}", countText(lo, what));
  return fmt::format("{} to {} {}s", lo, hi, what);
}

// Too few/many or a required slot left empty, for one side (inputs or outputs) of a node.
template <typename Slots>
std::string sideReason(const Node& node, int64_t opset, const Slots& slots, const char* what,
                       int lo, int hi, bool checkMax, const std::function<bool(size_t)>& required) {
  const int have = static_cast<int>(slots.size());
  if (have < lo || (checkMax && have > hi))
    return fmt::format("has {}, but {} (opset {}) takes {}", countText(have, what), node.opType(),
                       opset, rangeText(lo, checkMax ? hi : std::numeric_limits<int>::max(), what));
  for (size_t i = 0; i < slots.size(); ++i)
    if (!slots[i] && required(i))
      return fmt::format("{} #{} is empty, but {} (opset {}) requires it", what, i, node.opType(),
                         opset);
  return "";
}

// Every op type a node check is registered for runs it through this view of an IR node.
class IrNodeFacts : public NodeFacts {
 public:
  IrNodeFacts(const Node& node, int64_t opset) : node_(node), opset_(opset) {}
  const std::string& opType() const override { return node_.opType(); }
  int64_t opset() const override { return opset_; }
  std::optional<int64_t> intAttr(const char* name) const override {
    const Attribute* a = bound(name);
    if (!a || a->kind() != AttrKind::Int) return std::nullopt;
    return a->asInt();
  }
  std::optional<std::vector<int64_t>> intsAttr(const char* name) const override {
    const Attribute* a = bound(name);
    if (!a || a->kind() != AttrKind::Ints) return std::nullopt;
    return a->asInts();
  }
  std::optional<std::string> stringAttr(const char* name) const override {
    const Attribute* a = bound(name);
    if (!a || a->kind() != AttrKind::String) return std::nullopt;
    return a->asString();
  }
  size_t inputCount() const override { return node_.inputs().size(); }
  std::optional<int64_t> inputRank(size_t input) const override {
    const Value* v = node_.input(input);
    if (!v || v->type().kind != TypeKind::Tensor || !v->shape().hasRank()) return std::nullopt;
    return static_cast<int64_t>(v->shape().rank());
  }
  std::optional<int64_t> inputDim(size_t input, size_t axis) const override {
    const Value* v = node_.input(input);
    if (!v || v->type().kind != TypeKind::Tensor || !v->shape().hasRank() ||
        axis >= v->shape().rank() || !v->shape()[axis].isStatic())
      return std::nullopt;
    return v->shape()[axis].value();
  }

 private:
  // Attributes a function body binds from its caller ("ref_attr_name") have no value yet.
  const Attribute* bound(const char* name) const {
    const Attribute* a = node_.attribute(name);
    return a && a->refAttrName().empty() ? a : nullptr;
  }
  const Node& node_;
  int64_t opset_;
};

// The same view of a node inside ONNX's shape inference.
class InferenceNodeFacts : public NodeFacts {
 public:
  InferenceNodeFacts(const std::string& opType, int64_t opset, onnx::InferenceContext& ctx)
      : opType_(opType), opset_(opset), ctx_(ctx) {}
  const std::string& opType() const override { return opType_; }
  int64_t opset() const override { return opset_; }
  std::optional<int64_t> intAttr(const char* name) const override {
    const onnx::AttributeProto* a = ctx_.getAttribute(name);
    if (!a || a->type() != onnx::AttributeProto::INT) return std::nullopt;
    return a->i();
  }
  std::optional<std::vector<int64_t>> intsAttr(const char* name) const override {
    const onnx::AttributeProto* a = ctx_.getAttribute(name);
    if (!a || a->type() != onnx::AttributeProto::INTS) return std::nullopt;
    return std::vector<int64_t>(a->ints().begin(), a->ints().end());
  }
  std::optional<std::string> stringAttr(const char* name) const override {
    const onnx::AttributeProto* a = ctx_.getAttribute(name);
    if (!a || a->type() != onnx::AttributeProto::STRING) return std::nullopt;
    return a->s();
  }
  size_t inputCount() const override { return ctx_.getNumInputs(); }
  std::optional<int64_t> inputRank(size_t input) const override {
    const onnx::TypeProto* t = tensorType(input);
    if (!t) return std::nullopt;
    return t->tensor_type().shape().dim_size();
  }
  std::optional<int64_t> inputDim(size_t input, size_t axis) const override {
    const onnx::TypeProto* t = tensorType(input);
    if (!t || axis >= static_cast<size_t>(t->tensor_type().shape().dim_size())) return std::nullopt;
    const auto& dim = t->tensor_type().shape().dim(static_cast<int>(axis));
    if (!dim.has_dim_value()) return std::nullopt;
    return dim.dim_value();
  }

 private:
  const onnx::TypeProto* tensorType(size_t input) const {
    if (input >= ctx_.getNumInputs()) return nullptr;
    const onnx::TypeProto* t = ctx_.getInputType(input);
    if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return nullptr;
    return t;
  }
  const std::string& opType_;
  int64_t opset_;
  onnx::InferenceContext& ctx_;
};

Status nodeError(ErrorCode code, const Node& node, const std::string& where,
                 const std::string& reason, const char* hint) {
  return Status(code, fmt::format("{}: {}: {}", where, lowering::nodeLabel(node), reason), hint);
}

const char* kArityHint = "give the node the inputs and outputs its ONNX operator schema names; an "
                         "optional one may be left out, a required one may not be empty";
const char* kAttributeHint = "set the attribute as the ONNX operator specification defines it, "
                             "in the exporter";

Status validateGraphAt(const Graph& graph, const Model& model) {
  const std::string where = fmt::format("graph '{}'", graph.name());
  for (const auto& node : graph.nodes()) {
    KILN_TRY(validateNode(*node, model.opsetVersion(node->domain()), where));
    for (const Graph* sub : node->subgraphs())
      KILN_TRY(validateGraphAt(*sub, model));
  }
  return Status::ok();
}

} // namespace

bool registerAttributeCheck(const char* op, AttributeCheck check) {
  if (!checks().emplace(op, check).second) {
    std::fprintf(stderr, "kiln: internal error: attribute check of %s registered twice\n", op);
    std::abort();
  }
  return true;
}

std::string axisReason(const char* attribute, int64_t value, int64_t rank, bool inclusiveEnd) {
  const int64_t end = inclusiveEnd ? rank : rank - 1;
  if (value >= -rank && value <= end) return "";
  return fmt::format("attribute '{}' is {}, outside [{}, {}] for the rank-{} input", attribute,
                     value, -rank, end, rank);
}

std::string axisAttrReason(const NodeFacts& node, const char* name, size_t input, bool inclusiveEnd,
                           int64_t extraRank) {
  std::optional<int64_t> axis = node.intAttr(name);
  std::optional<int64_t> rank = node.inputRank(input);
  if (!axis || !rank) return "";
  return axisReason(name, *axis, *rank + extraRank, inclusiveEnd);
}

std::string axesAttrReason(const NodeFacts& node, const char* name, size_t input,
                           int64_t extraRank) {
  std::optional<std::vector<int64_t>> axes = node.intsAttr(name);
  if (!axes) return "";
  std::optional<int64_t> rank = node.inputRank(input);
  if (rank) {
    const int64_t r = *rank + (extraRank < 0 ? static_cast<int64_t>(axes->size()) : extraRank);
    std::set<int64_t> seen;
    for (int64_t axis : *axes) {
      if (std::string reason = axisReason(name, axis, r); !reason.empty()) return reason;
      if (!seen.insert(axis < 0 ? axis + r : axis).second)
        return fmt::format("attribute '{}' names axis {} twice", name, axis);
    }
  }
  return "";
}

std::string atLeastReason(const NodeFacts& node, const char* name, int64_t least) {
  std::optional<int64_t> value = node.intAttr(name);
  if (!value || *value >= least) return "";
  return fmt::format("attribute '{}' is {}; it must be >= {}", name, *value, least);
}

std::string arityReason(const Node& node, int64_t opset) {
  if (!isDefaultDomain(node.domain())) return "";
  // A model that imports ai.onnx at version 0 (or not at all) still gets the earliest schema's
  // arity: lowering rules read the inputs every version requires (a fuzzed one-input Conv at
  // opset 0 reached the .ms Conv rule with no weight).
  if (opset <= 0) opset = 1;
  auto requiredUpTo = [](int count) {
    return [count](size_t i) { return static_cast<int>(i) < count; };
  };
  if (std::optional<OpArity> own = kilnArity(node.opType(), opset)) {
    if (std::string r = sideReason(node, opset, node.inputs(), "input", own->minInputs,
                                   own->maxInputs, true, requiredUpTo(own->minInputs));
        !r.empty())
      return r;
    return sideReason(node, opset, node.outputs(), "output", own->minOutputs, own->maxOutputs, true,
                      requiredUpTo(own->minOutputs));
  }
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), "");
  if (!schema) return "";
  // Past the library's last opset a newer op version may take more inputs than this schema (the
  // opset-18 reductions take axes as an input): only the minimum and required slots still hold.
  const bool current = opset <= libraryOpset();
  auto required = [](const std::vector<onnx::OpSchema::FormalParameter>& formal) {
    return [params = &formal](size_t i) {
      if (params->empty()) return false;
      const auto& param = (*params)[std::min(i, params->size() - 1)];
      if (i >= params->size() && param.GetOption() != onnx::OpSchema::Variadic) return false;
      // Variadic slots (Concat's inputs, Loop's carried values) hold real values: no kernel or
      // lowering reads an empty one as "absent".
      return param.GetOption() != onnx::OpSchema::Optional;
    };
  };
  if (std::string r = sideReason(node, opset, node.inputs(), "input", schema->min_input(),
                                 schema->max_input(), current, required(schema->inputs()));
      !r.empty())
    return r;
  return sideReason(node, opset, node.outputs(), "output", schema->min_output(),
                    schema->max_output(), current, required(schema->outputs()));
}

std::string requiredAttributeReason(const Node& node, int64_t opset) {
  if (opset <= 0 || !isDefaultDomain(node.domain())) return "";
  const onnx::OpSchema* schema =
      onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), "");
  if (!schema || kilnDeclaresOp(node.opType(), opset)) return "";
  for (const auto& [name, attr] : schema->attributes())
    if (attr.required && !node.attribute(name))
      return fmt::format("has no attribute '{}', which {} (opset {}) requires", name, node.opType(),
                         opset);
  return "";
}

std::string attributeReason(const Node& node, int64_t opset) {
  if (!isDefaultDomain(node.domain())) return "";
  auto it = checks().find(node.opType());
  if (it == checks().end()) return "";
  return it->second(IrNodeFacts(node, opset));
}

Status validateNode(const Node& node, int64_t opset, const std::string& where) {
  if (std::string r = arityReason(node, opset); !r.empty())
    return nodeError(ErrorCode::BadArity, node, where, r, kArityHint);
  if (std::string r = attributeKindReason(node, opset); !r.empty())
    return nodeError(ErrorCode::BadAttribute, node, where, r,
                     "give the attribute the kind the ONNX operator schema names, in the "
                     "exporter");
  if (std::string r = requiredAttributeReason(node, opset); !r.empty())
    return nodeError(ErrorCode::BadAttribute, node, where, r, kAttributeHint);
  if (std::string r = attributeReason(node, opset); !r.empty())
    return nodeError(ErrorCode::BadAttribute, node, where, r, kAttributeHint);
  return Status::ok();
}

Status validateGraph(const Graph& graph, const Model& model) {
  return validateGraphAt(graph, model);
}

void guardShapeInference() {
  registerMicrosoftSchemas(); // inference needs the contrib ops' output shapes too
  static std::once_flag once;
  std::call_once(once, [] {
    // Every registered schema version of each checked op: the registry owns the schemas (they are
    // not const objects), so their inference functions can be wrapped in place.
    std::set<const onnx::OpSchema*> wrapped;
    for (const auto& [op, check] : checks()) {
      for (int version = 1; version <= libraryOpset(); ++version) {
        const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(op, version, "");
        if (!schema || !wrapped.insert(schema).second) continue;
        auto* writable = const_cast<onnx::OpSchema*>(schema);
        onnx::InferenceFunction original = writable->GetTypeAndShapeInferenceFunction();
        const int since = schema->SinceVersion();
        writable->TypeAndShapeInferenceFunction([opType = std::string(op), since, check = check,
                                                 original](onnx::InferenceContext& ctx) {
          std::string reason = check(InferenceNodeFacts(opType, since, ctx));
          if (!reason.empty()) fail_shape_inference(reason);
          if (original) original(ctx);
        });
      }
    }
  });
}

} // namespace kiln::ops
