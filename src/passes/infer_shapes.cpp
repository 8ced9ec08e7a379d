// infer-shapes: fills value types and shapes with ONNX shape inference (with data propagation).
//
//   %y = Conv(%x: f32[1,3,640,640], %w)       →  %y: f32[1,16,320,320] = Conv(...)
// Only makes types more specific: a static dim is never replaced by an unknown one.
#include <set>

#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <spdlog/spdlog.h>

#include "kiln/frontend/onnx.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "kiln/support/display.h"
#include "ops/validate.h"

namespace kiln {
namespace {

// Large float weights go to inference as typed graph inputs: it needs their shapes, not their
// bytes, and this keeps the pass from copying the model's weights.
constexpr size_t kInlineInitializerBytes = 4096;

bool moreSpecific(const ValueType& inferred, const ValueType& current) {
  if (inferred.kind != TypeKind::Tensor)
    return current.kind == TypeKind::Unknown && inferred.kind != TypeKind::Unknown;
  if (current.kind == TypeKind::Unknown) return true;
  if (current.kind != TypeKind::Tensor) return false;
  if (current.dtype == DType::Undefined && inferred.dtype != DType::Undefined) return true;
  if (!inferred.shape.hasRank()) return false;
  if (!current.shape.hasRank()) return true;
  if (inferred.shape.rank() != current.shape.rank()) return false;
  for (size_t i = 0; i < current.shape.rank(); ++i) {
    const Dim &c = current.shape[i], &n = inferred.shape[i];
    if (!c.isStatic() && n.isStatic()) return true;
    if (!c.isStatic() && !c.isSymbolic() && n.isSymbolic()) return true;
  }
  return false;
}

// Merges inferred dims into the current type dim by dim, keeping every static dim already known.
ValueType merged(const ValueType& inferred, const ValueType& current) {
  if (current.kind != TypeKind::Tensor || !current.shape.hasRank() ||
      inferred.kind != TypeKind::Tensor || !inferred.shape.hasRank() ||
      inferred.shape.rank() != current.shape.rank()) {
    ValueType out = inferred;
    if (out.dtype == DType::Undefined) out.dtype = current.dtype;
    return out;
  }
  std::vector<Dim> dims;
  for (size_t i = 0; i < current.shape.rank(); ++i) {
    const Dim &c = current.shape[i], &n = inferred.shape[i];
    dims.push_back(c.isStatic() ? c
                                : (n.isStatic() || (!c.isSymbolic() && n.isSymbolic()) ? n : c));
  }
  ValueType out = current;
  if (out.dtype == DType::Undefined) out.dtype = inferred.dtype;
  out.shape = Shape(std::move(dims));
  return out;
}

bool apply(Graph& graph, const onnx::GraphProto& proto, bool subgraph = false) {
  std::unordered_map<std::string, const onnx::TypeProto*> types;
  for (const auto& v : proto.value_info())
    types[v.name()] = &v.type();
  for (const auto& v : proto.output())
    types[v.name()] = &v.type();
  // A body's inputs get their types from the node that holds it (If has none; a Loop's iteration
  // count and condition, a Scan's slices), merged into the body's declared inputs.
  if (subgraph)
    for (const auto& v : proto.input())
      types[v.name()] = &v.type();
  bool changed = false;
  auto update = [&](Value* value) {
    auto it = types.find(value->name());
    if (it == types.end()) return;
    // valueTypeFromOnnx refuses dims whose element count overflows (K2007), so such an
    // inferred shape is never applied: the node keeps its less specific type, and the executor
    // refuses the shape where a kernel would make it.
    auto inferred = valueTypeFromOnnx(*it->second, value->name());
    if (!inferred || !moreSpecific(*inferred, value->type())) return;
    bool wasAnnotated = value->type().kind != TypeKind::Unknown;
    value->setType(merged(*inferred, value->type()));
    if (!wasAnnotated && !value->isGraphInput() && !value->isGraphOutput() &&
        !value->isInitializer())
      graph.addAnnotatedValue(value);
    changed = true;
  };
  if (subgraph)
    for (Value* in : graph.inputs())
      if (!in->isInitializer()) update(in);
  // Node order is the export order, so proto nodes and IR nodes line up one to one.
  auto protoNode = proto.node().begin();
  for (const auto& node : graph.nodes()) {
    if (protoNode == proto.node().end()) break;
    for (Value* out : node->outputs())
      if (out) update(out);
    size_t attrIndex = 0;
    for (const auto& [name, attr] : node->attributes()) {
      if (attrIndex < static_cast<size_t>(protoNode->attribute_size())) {
        const auto& protoAttr = protoNode->attribute(static_cast<int>(attrIndex));
        if (attr.kind() == AttrKind::Graph && protoAttr.has_g())
          changed |= apply(*attr.asGraph(), protoAttr.g(), true);
        if (attr.kind() == AttrKind::Graphs)
          for (size_t g = 0;
               g < attr.asGraphs().size() && g < static_cast<size_t>(protoAttr.graphs_size()); ++g)
            changed |= apply(*attr.asGraphs()[g], protoAttr.graphs(static_cast<int>(g)), true);
      }
      ++attrIndex;
    }
    ++protoNode;
  }
  return changed;
}

// Ranks an op fixes for its data input: a Conv's or ConvTranspose's X has its weight's rank. ONNX
// inference cannot see it when X comes out of an If whose branches differ in rank (a batch-1
// Squeeze in one of them), yet every run that reaches the node gives X that rank; with it the
// node's output and everything after it get ranks, which the lowerings need (a 1-D Conv on a
// 2-D target, an axis counted from the end). Returns whether a value got a rank.
bool rankDataInputsFromWeights(Graph& graph) {
  bool changed = false;
  for (const auto& node : graph.nodes()) {
    for (Graph* body : node->subgraphs())
      changed |= rankDataInputsFromWeights(*body);
    if (!node->domain().empty() && node->domain() != "ai.onnx") continue;
    if (node->opType() != "Conv" && node->opType() != "ConvTranspose") continue;
    if (node->inputs().size() < 2) continue;
    Value* x = node->input(0);
    const Value* w = node->input(1);
    if (!x || !w || !w->shape().hasRank() || w->shape().rank() < 3) continue;
    if (x->type().kind == TypeKind::Tensor && x->shape().hasRank()) continue;
    if (x->type().kind != TypeKind::Tensor && x->type().kind != TypeKind::Unknown) continue;
    const bool wasAnnotated = x->type().kind != TypeKind::Unknown;
    const DType dtype = x->dtype() != DType::Undefined ? x->dtype() : w->dtype();
    x->setType(ValueType::tensor(dtype, Shape(std::vector<Dim>(w->shape().rank()))));
    if (!wasAnnotated && !x->isGraphInput() && !x->isGraphOutput() && !x->isInitializer())
      graph.addAnnotatedValue(x);
    changed = true;
  }
  return changed;
}

class InferShapes : public Pass {
 public:
  std::string_view name() const override { return "infer-shapes"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    onnx::ModelProto proto;
    OnnxExportOptions exportOptions;
    exportOptions.weightsAsInputsAbove = kInlineInitializerBytes;
    KILN_TRY(exportOnnx(*context.model, proto, exportOptions));
    try {
      ops::guardShapeInference();
      onnx::ShapeInferenceOptions options(/*check_type=*/false, /*error_mode=*/0,
                                          /*data_propagation=*/true);
      onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception& e) {
      // Inference failing on one node is not fatal: the graph keeps the types it had.
      spdlog::debug("infer-shapes: ONNX shape inference stopped: {}", e.what());
      context.notes.push_back(fmt::format("shape inference stopped early: {}", e.what()));
    }
    bool changed = apply(graph, proto.graph());
    changed |= rankDataInputsFromWeights(graph);
    // Ranks that inference just filled in decide checks import could not (an axis of a value no
    // value_info declared): every later pass and the lowerings may rely on them.
    if (changed) KILN_TRY(ops::validateGraph(graph, *context.model));
    return changed;
  }
};

} // namespace

std::unique_ptr<Pass> makeInferShapesPass() { return std::make_unique<InferShapes>(); }

std::string staticShapeConflict(const Node& node, const Model& model) {
  if (!(node.domain().empty() || node.domain() == "ai.onnx") || !node.subgraphs().empty())
    return "";
  const int64_t opset = model.opsetVersion("");
  if (!onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), "")) return "";
  onnx::ModelProto proto;
  proto.set_ir_version(8);
  auto* import = proto.add_opset_import();
  import->set_domain("");
  import->set_version(opset);
  onnx::GraphProto* graph = proto.mutable_graph();
  graph->set_name("node");
  std::set<const Value*> added;
  for (const Value* in : node.inputs()) {
    if (!in) continue;
    if (in->type().kind != TypeKind::Tensor || in->dtype() == DType::Undefined ||
        !in->shape().isStatic())
      return "";
    if (!added.insert(in).second) continue;
    if (in->isInitializer() && !in->isGraphInput() &&
        in->initializer().byteSize() <= kInlineInitializerBytes) {
      tensorToOnnx(in->initializer(), in->name(), *graph->add_initializer());
      continue;
    }
    auto* input = graph->add_input();
    input->set_name(in->name());
    valueTypeToOnnx(in->type(), *input->mutable_type());
  }
  nodeToOnnx(node, *graph->add_node());
  try {
    ops::guardShapeInference();
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1,
                                        /*data_propagation=*/true);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception& e) {
    std::string text = e.what();
    // "... (op_type:T, node name: N): [ShapeInferenceError] text": keep the text.
    if (size_t kind = text.rfind("Error] "); kind != std::string::npos)
      text = text.substr(kind + 7);
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    return text;
  }
  return "";
}

std::vector<ShapeConflict> shapeConflicts(const Model& model) {
  const char* hint = "fix the input shapes (--input-shape) or the model: this node cannot run on "
                     "the shapes it gets";
  std::vector<ShapeConflict> out;
  // ONNX's Conv inference does not compare X's channels with W's; a wrong channel count in the
  // input shape (1 for an RGB model) is the commonest mistake, so it is checked here.
  for (const auto& node : model.graph->nodes()) {
    if (node->opType() != "Conv" || node->inputs().size() < 2) continue;
    const Value* x = node->input(0);
    const Value* w = node->input(1);
    if (!x || !w || !x->shape().hasRank() || !w->shape().hasRank() || x->shape().rank() < 2 ||
        w->shape().rank() < 2 || !x->shape().dims()[1].isStatic() ||
        !w->shape().dims()[1].isStatic())
      continue;
    const Attribute* g = node->attribute("group");
    const int64_t group = g ? g->asInt() : 1;
    const int64_t channels = x->shape().dims()[1].value();
    const int64_t perGroup = w->shape().dims()[1].value();
    if (perGroup * group != channels)
      out.push_back(
          {keepDtypeNodeName(*node), "Conv",
           Status(ErrorCode::ShapeConflict,
                  fmt::format("node '{}' (Conv): input '{}' {} has {} channels, the "
                              "weight '{}' {} expects {} ({} per group x {} groups)",
                              keepDtypeNodeName(*node), x->name(), x->shape().toString(), channels,
                              w->name(), w->shape().toString(), perGroup * group, perGroup, group),
                  hint)});
  }
  onnx::ModelProto proto;
  OnnxExportOptions exportOptions;
  exportOptions.weightsAsInputsAbove = kInlineInitializerBytes;
  if (!exportOnnx(model, proto, exportOptions)) return out;
  // Before IR 4 an initializer is typed only through a graph input of its name; passes add
  // initializers (scan-to-loop's accumulators) without one, so an old model reads as IR 4.
  if (proto.ir_version() < 4) proto.set_ir_version(4);
  std::string message;
  try {
    ops::guardShapeInference();
    onnx::ShapeInferenceOptions options(/*check_type=*/true, /*error_mode=*/1,
                                        /*data_propagation=*/true);
    onnx::shape_inference::InferShapes(proto, onnx::OpSchemaRegistry::Instance(), options);
    return out;
  } catch (const std::exception& e) {
    message = e.what();
  }
  // ONNX joins the per-node errors into one message: "(op_type:T, node name: N): [Kind] text"
  // (no node name for unnamed nodes).
  const std::string marker = "(op_type:";
  size_t found = 0;
  for (size_t at = message.find(marker); at != std::string::npos; ++found) {
    size_t next = message.find(marker, at + marker.size());
    std::string part =
        message.substr(at, next == std::string::npos ? std::string::npos : next - at);
    size_t close = part.find("): ");
    std::string head =
        part.substr(marker.size(), close == std::string::npos ? 0 : close - marker.size());
    std::string text = close == std::string::npos ? part : part.substr(close + 3);
    if (text.rfind('[', 0) == 0 && text.find("] ") != std::string::npos)
      text = text.substr(text.find("] ") + 2); // drop "[ShapeInferenceError] "
    while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
      text.pop_back();
    std::string opType = head.substr(0, head.find(','));
    size_t named = head.find("node name: ");
    std::string node = named == std::string::npos ? "" : head.substr(named + 11);
    std::string who = node.empty()
                          ? fmt::format("a {} node", displayName(opType))
                          : fmt::format("node '{}' ({})", displayName(node), displayName(opType));
    out.push_back(
        {node, opType, Status(ErrorCode::ShapeConflict, fmt::format("{}: {}", who, text), hint)});
    at = next;
  }
  if (!found) out.push_back({"", "", Status(ErrorCode::ShapeConflict, message, hint)});
  return out;
}

} // namespace kiln
