// widen-integers: int16 and uint16 become int32, uint32 and uint64 become int64 everywhere in
// the graph, for the .ms conversion: the MindSpore Lite CPU runtime has no kernel for these types
// and its Cast converts none of them (cast_fp32.cc), so a graph holding them cannot run at all.
// The wider type holds every value of the narrow one (uint64 below 2^63), so the rewrite is exact
// where the graph only compares, selects and moves these values — and it is applied only then:
// every node reading or making such a value must be one whose result does not depend on the
// width (Max, Min, Mod, Clip, comparisons, data movement, Cast, a Pow exponent). Arithmetic that
// may wrap (Add, Sub, Mul, Div, Pow bases, ...) keeps the graph as it is.
//
//   %y: u16 = Max(%a: u16, %b: u16)   →   %y: i32 = Max(%a: i32, %b: i32)
//
// One note names the graph inputs and outputs whose type changed, since a caller feeds and reads
// them in the wider type (`kiln conformance` converts the test data likewise).
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/ir/dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln {
namespace {

// The type a narrow integer type is carried in, or nullopt for the types the runtime takes.
std::optional<DType> widened(DType t) {
  switch (t) {
  case DType::Int16:
  case DType::UInt16:
    return DType::Int32;
  case DType::UInt32:
  case DType::UInt64:
    return DType::Int64;
  default:
    return std::nullopt;
  }
}

bool isNarrow(const Value* v) {
  return v && v->type().kind == TypeKind::Tensor && widened(v->dtype()).has_value();
}

// Ops whose results do not depend on the integer width their operands are held in (for the
// values the narrow type holds): comparisons, selection, data movement, Mod, Cast.
bool widthIndependent(const Node& node, const Value* narrow) {
  static const std::set<std::string> ops = {
      "Max",     "Min",       "Mod",         "Clip",           "Equal",
      "Less",    "Greater",   "LessOrEqual", "GreaterOrEqual", "Identity",
      "Reshape", "Transpose", "Concat",      "Gather",         "Slice",
      "Squeeze", "Unsqueeze", "Flatten",     "Expand",         "Tile",
      "Cast",    "Where",     "ArgMax",      "ArgMin",         "Constant",
      "Shape",   "Size"};
  if (!node.domain().empty() && node.domain() != "ai.onnx") return false;
  if (node.opType() == "Pow") // an integer exponent of a float base; an integer base may wrap
    return node.input(0) != narrow && !isNarrow(node.output(0));
  return ops.count(node.opType()) > 0;
}

// Whether every narrow value of `graph` is read and made only by width-independent nodes, and
// whether it holds any (in `found`). Subgraphs are not rewritten: a graph with one keeps its types.
bool widenable(const Graph& graph, bool& found) {
  for (const auto& node : graph.nodes()) {
    if (!node->subgraphs().empty()) return false;
    for (const Value* v : node->inputs())
      if (isNarrow(v)) {
        found = true;
        if (!widthIndependent(*node, v)) return false;
      }
    for (const Value* v : node->outputs())
      if (isNarrow(v)) {
        found = true;
        if (!widthIndependent(*node, nullptr)) return false;
      }
    const Attribute* to = node->attribute("to");
    if (node->opType() == "Cast" && to && to->kind() == AttrKind::Int &&
        widened(static_cast<DType>(to->asInt())))
      found = true;
  }
  for (const Value* v : graph.inputs())
    found = found || isNarrow(v);
  return true;
}

class WidenIntegers : public Pass {
 public:
  std::string_view name() const override { return "widen-integers"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    bool found = false;
    if (!widenable(graph, found) || !found) return false;
    std::vector<std::string> io;
    std::set<const Value*> seen;
    for (const auto* list : {&graph.inputs(), &graph.outputs()})
      for (const Value* v : *list)
        if (!v->isInitializer() && isNarrow(v) && seen.insert(v).second)
          io.push_back(fmt::format("'{}' ({} as {})", v->name(), dtypeName(v->dtype()),
                                   dtypeName(*widened(v->dtype()))));
    for (const auto& value : graph.values()) {
      Value* v = value.get();
      if (v->isInitializer())
        if (auto to = widened(v->initializer().dtype()))
          if (auto cast = rt::castTensor(v->initializer(), *to)) v->setInitializer(*cast);
      if (isNarrow(v)) v->setDType(*widened(v->dtype()));
    }
    for (const auto& node : graph.nodes()) {
      const Attribute* to = node->attribute("to");
      if (node->opType() == "Cast" && to && to->kind() == AttrKind::Int)
        if (auto wide = widened(static_cast<DType>(to->asInt())))
          node->setAttribute("to", Attribute::ofInt(dtypeToOnnx(*wide)));
      const Attribute* value = node->attribute("value");
      if (node->opType() == "Constant" && value && value->kind() == AttrKind::Tensor)
        if (auto wide = widened(value->asTensor().dtype()))
          if (auto cast = rt::castTensor(value->asTensor(), *wide))
            node->setAttribute("value", Attribute::ofTensor(*cast));
    }
    if (!io.empty())
      context.notes.push_back(fmt::format(
          "the MindSpore Lite runtime neither computes nor casts int16/uint16/uint32/uint64, so "
          "the {} model carries them as int32/int64: graph inputs/outputs {}; feed and read them "
          "in the wider type (uint64 values below 2^63)",
          context.targetName.empty() ? "converted" : context.targetName, fmt::join(io, ", ")));
    return true;
  }
};

} // namespace

std::unique_ptr<Pass> makeWidenIntegersPass() { return std::make_unique<WidenIntegers>(); }

} // namespace kiln
