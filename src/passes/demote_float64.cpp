// demote-float64: float64 becomes float32 everywhere in the graph, as the .ms conversion does
// (converter_lite makes float64 graph inputs float32; the MindSpore Lite CPU runtime has no
// float64 kernel for the ops a graph computes with, and its Cast neither takes nor makes float64)
// — whenever the graph holds a float64 value, constant or type attribute. A graph without one is
// left alone.
// Demoted: graph inputs and outputs, intermediate values, initializers, Constant and
// ConstantOfShape values, and every attribute that names float64 as a type (Cast `to`, EyeLike
// and the random ops' `dtype`), subgraph bodies included.
//
//   %y: f32 = Cast<to = FLOAT>(%x: f64)   →   %y: f32 = Cast<to = FLOAT>(%x: f32)
//   %y: f64 = Cast<to = DOUBLE>(%x: f16)  →   %y: f32 = Cast<to = FLOAT>(%x: f16)
//   %y: f64 = Max(%a: f64, %b: f64)       →   %y: f32 = Max(%a: f32, %b: f32)
//
// One note names the graph inputs and outputs whose type changed, since a caller feeds and reads
// them as float32 (`kiln conformance` narrows float64 test data and widens the outputs back).
// Values outside the float32 range become ±inf, and all lose precision beyond float32's.
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

const int64_t kOnnxDouble = dtypeToOnnx(DType::Float64);
const int64_t kOnnxFloat = dtypeToOnnx(DType::Float32);

Tensor demoted(const Tensor& t) {
  if (t.dtype() != DType::Float64) return t;
  auto cast = rt::castTensor(t, DType::Float32);
  return cast ? *cast : t;
}

// Whether `graph` or a subgraph of its nodes holds float64: a value, an initializer, a tensor
// attribute (Constant), or a type attribute (Cast `to`, `dtype`) naming it.
bool holdsFloat64(const Graph& graph) {
  for (const auto& value : graph.values())
    if (value->type().kind == TypeKind::Tensor && value->dtype() == DType::Float64) return true;
  for (const auto& node : graph.nodes()) {
    for (const char* name : {"to", "dtype"}) {
      const Attribute* a = node->attribute(name);
      if (a && a->kind() == AttrKind::Int && a->asInt() == kOnnxDouble) return true;
    }
    for (const auto& [key, attr] : node->attributes())
      if (attr.kind() == AttrKind::Tensor && attr.asTensor().dtype() == DType::Float64) return true;
    for (const Graph* body : node->subgraphs())
      if (holdsFloat64(*body)) return true;
  }
  return false;
}

class Demoter {
 public:
  // Whether anything changed in `graph` and the subgraphs of its nodes.
  bool run(Graph& graph) {
    bool changed = false;
    for (const auto& value : graph.values()) {
      Value* v = value.get();
      if (v->isInitializer() && v->initializer().dtype() == DType::Float64) {
        v->setInitializer(demoted(v->initializer()));
        changed = true;
      }
      if (v->type().kind == TypeKind::Tensor && v->dtype() == DType::Float64) {
        v->setDType(DType::Float32);
        changed = true;
      }
    }
    for (const auto& node : graph.nodes()) {
      changed = rewriteAttributes(*node) || changed;
      for (Graph* body : node->subgraphs())
        changed = run(*body) || changed;
    }
    return changed;
  }

 private:
  static bool rewriteAttributes(Node& node) {
    bool changed = false;
    for (const char* name : {"to", "dtype"}) {
      const Attribute* a = node.attribute(name);
      if (a && a->kind() == AttrKind::Int && a->asInt() == kOnnxDouble) {
        node.setAttribute(name, Attribute::ofInt(kOnnxFloat));
        changed = true;
      }
    }
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (const auto& [key, attr] : node.attributes())
      if (attr.kind() == AttrKind::Tensor && attr.asTensor().dtype() == DType::Float64)
        tensors.emplace_back(key, demoted(attr.asTensor()));
    for (auto& [key, t] : tensors)
      node.setAttribute(key, Attribute::ofTensor(std::move(t)));
    return changed || !tensors.empty();
  }
};

class DemoteFloat64 : public Pass {
 public:
  std::string_view name() const override { return "demote-float64"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!holdsFloat64(graph)) return false;
    std::vector<std::string> io;
    std::set<const Value*> seen;
    for (const auto* list : {&graph.inputs(), &graph.outputs()})
      for (const Value* v : *list)
        if (!v->isInitializer() && v->type().kind == TypeKind::Tensor &&
            v->dtype() == DType::Float64 && seen.insert(v).second)
          io.push_back(fmt::format("'{}'", v->name()));
    const bool changed = Demoter().run(graph);
    if (!io.empty())
      context.notes.push_back(fmt::format(
          "the model holds float64, which the MindSpore Lite runtime neither computes nor casts, "
          "so float64 is float32 throughout the {} model: graph inputs/outputs {} are float32; "
          "feed and read them as float32",
          context.targetName.empty() ? "converted" : context.targetName, fmt::join(io, ", ")));
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> makeDemoteFloat64Pass() { return std::make_unique<DemoteFloat64>(); }

} // namespace kiln
