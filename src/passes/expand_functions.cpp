// expand-functions: a node the target refuses is replaced by the body of its ONNX function, as
// the onnx library defines it (OpSchema::GetFunction, or BuildContextDependentFunction with the
// node's attributes and input types), so ops the target has no rule for lower as standard ops.
//
//   %y = LayerNormalization(%x, %s, %b) {axis = -1}     (the target refuses it)
//     →  %ln/XShape = Shape(%x); ...; %ln/Mean2D = ReduceMean(%ln/XU) {axes = [1]}; ...
//        %y = Reshape(%ln/Biased, %ln/XShape)
//
// Attribute references (ref_attr_name) take the node's attribute or the schema's default; every
// value the body defines gets a fresh name under the node's name; a body written for an older
// opset than the model's is used only when each of its ops means the same at the model's opset.
// A body op the target also refuses is expanded in turn (up to kMaxDepth levels).
//
// An expansion is tried before it is kept: the bodies go in beside the refused node, shapes are
// inferred and constants folded, and only when every body node lowers (itself or by its own
// expansion) does the body replace the node. Otherwise the node stays, so the refusal names the
// op the model has, and a note names the body op that blocked it.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <onnx/defs/data_type_utils.h>
#include <onnx/defs/function.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include "kiln/backends/lowering.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "ops/attributes.h"

namespace kiln {
namespace {

constexpr int kMaxDepth = 4;     // nested expansions (a body op expanded in turn)
constexpr int kSettleRounds = 8; // inference + folding rounds before a check

bool isOnnxDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// A refused node's function body, or why there is none to use.
struct Body {
  onnx::FunctionProto function;
  bool exists = false; // the schema defines a body (for these inputs)
  std::string problem; // a body exists but cannot be used
};

const onnx::OpSchema* schemaOf(const Node& node, const Model& model) {
  const std::string domain = isOnnxDomain(node.domain()) ? "" : node.domain();
  const int64_t opset = model.opsetVersion(domain);
  if (opset <= 0) return nullptr;
  return onnx::OpSchemaRegistry::Schema(node.opType(), static_cast<int>(opset), domain);
}

// The node's attributes as ONNX protos, with the schema's defaults for those it leaves out.
std::map<std::string, onnx::AttributeProto> attributesWithDefaults(const onnx::NodeProto& proto,
                                                                   const onnx::OpSchema& schema) {
  std::map<std::string, onnx::AttributeProto> out;
  for (const auto& attr : proto.attribute())
    out[attr.name()] = attr;
  for (const auto& [name, declared] : schema.attributes())
    if (!out.count(name) && declared.default_value.type() != onnx::AttributeProto::UNDEFINED) {
      onnx::AttributeProto value = declared.default_value;
      value.set_name(name);
      out[name] = value;
    }
  return out;
}

// Replaces every attribute reference (`axes : ints = @axes`) in `nodes` and their subgraphs by
// the caller's attribute; a reference to an attribute the caller lacks (and has no default) is
// dropped, so the body op's own default applies.
void resolveReferences(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                       const std::map<std::string, onnx::AttributeProto>& caller) {
  for (auto& node : nodes) {
    google::protobuf::RepeatedPtrField<onnx::AttributeProto> kept;
    for (auto& attr : *node.mutable_attribute()) {
      if (!attr.ref_attr_name().empty()) {
        auto it = caller.find(attr.ref_attr_name());
        if (it == caller.end()) continue;
        onnx::AttributeProto value = it->second;
        value.set_name(attr.name());
        value.clear_ref_attr_name();
        *kept.Add() = std::move(value);
        continue;
      }
      if (attr.has_g()) resolveReferences(*attr.mutable_g()->mutable_node(), caller);
      for (auto& g : *attr.mutable_graphs())
        resolveReferences(*g.mutable_node(), caller);
      *kept.Add() = std::move(attr);
    }
    node.mutable_attribute()->Swap(&kept);
  }
}

int64_t importedVersion(const onnx::FunctionProto& function, const std::string& domain) {
  for (const auto& opset : function.opset_import())
    if (opset.domain() == domain || (isOnnxDomain(domain) && isOnnxDomain(opset.domain())))
      return opset.version();
  return 0;
}

// Whether a body op written against schema `then` means the same read against `now` (the model's
// version): every input, output and attribute `then` has keeps its name and kind, and whatever
// `now` adds is optional. An attribute that became an input (ReduceSum-13, Squeeze-13, Clip-11)
// fails this.
bool compatible(const onnx::OpSchema& then, const onnx::OpSchema& now) {
  if (then.since_version() == now.since_version()) return true;
  auto sameParameters = [](const std::vector<onnx::OpSchema::FormalParameter>& a,
                           const std::vector<onnx::OpSchema::FormalParameter>& b) {
    if (b.size() < a.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i].GetName() != b[i].GetName() || a[i].GetOption() != b[i].GetOption()) return false;
    for (size_t i = a.size(); i < b.size(); ++i)
      if (b[i].GetOption() != onnx::OpSchema::Optional) return false;
    return true;
  };
  if (!sameParameters(then.inputs(), now.inputs()) ||
      !sameParameters(then.outputs(), now.outputs()))
    return false;
  for (const auto& [name, attr] : then.attributes()) {
    auto it = now.attributes().find(name);
    if (it == now.attributes().end() || it->second.type != attr.type) return false;
  }
  for (const auto& [name, attr] : now.attributes())
    if (!then.attributes().count(name) && attr.required) return false;
  return true;
}

// The first body op (here or in a subgraph) that does not mean the same at the model's opset as
// at the body's, "" when there is none.
std::string changedOp(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes,
                      int64_t bodyVersion, int64_t modelVersion) {
  for (const auto& node : nodes) {
    if (!isOnnxDomain(node.domain())) return node.domain() + "::" + node.op_type();
    const onnx::OpSchema* then =
        onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(bodyVersion), "");
    const onnx::OpSchema* now =
        onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(modelVersion), "");
    if (!then || !now || !compatible(*then, *now)) return node.op_type();
    for (const auto& attr : node.attribute()) {
      if (attr.has_g())
        if (std::string op = changedOp(attr.g().node(), bodyVersion, modelVersion); !op.empty())
          return op;
      for (const auto& g : attr.graphs())
        if (std::string op = changedOp(g.node(), bodyVersion, modelVersion); !op.empty()) return op;
    }
  }
  return {};
}

// A body is written for the opset its function imports; the model may import a newer one. The
// body's ops are read at the model's version, so each must mean the same there.
std::string versionProblem(const onnx::FunctionProto& function, int64_t bodyVersion,
                           int64_t modelVersion) {
  if (bodyVersion == modelVersion) return {};
  std::string op = changedOp(function.node(), bodyVersion, modelVersion);
  if (op.empty()) return {};
  return fmt::format("its function body is written for opset {} and its {} changed by the "
                     "model's opset {}",
                     bodyVersion, op, modelVersion);
}

// A body is typed by its schema's constraints: the onnx library's schema may predate the model's
// opset and allow fewer types (Celu-12 takes float only; Celu at opset 28 also float16, and its
// body's float constant would meet a float16 input). The first input of a type the schema does
// not allow, "" when every known input type is allowed.
std::string typeProblem(const onnx::OpSchema& schema, const std::vector<onnx::TypeProto>& types) {
  const auto& formal = schema.inputs();
  for (size_t i = 0; i < types.size() && !formal.empty(); ++i) {
    if (types[i].value_case() == onnx::TypeProto::VALUE_NOT_SET) continue;
    const auto& param = formal[std::min(i, formal.size() - 1)];
    if (i >= formal.size() && param.GetOption() != onnx::OpSchema::Variadic) break;
    try {
      const onnx::DataType type = onnx::Utils::DataTypeUtils::ToType(types[i]);
      if (!param.GetTypes().count(type))
        return fmt::format("its function body (opset {}) does not take input {} of type {}",
                           schema.since_version(), i, *type);
    } catch (const std::exception&) {
      continue; // a type the library cannot name is not judged here
    }
  }
  return {};
}

Body bodyOf(const Node& node, const Model& model) {
  Body body;
  const onnx::OpSchema* schema = schemaOf(node, model);
  if (!schema || (!schema->HasFunction() && !schema->HasContextDependentFunction())) return body;
  onnx::NodeProto proto;
  nodeToOnnx(node, proto);
  std::vector<onnx::TypeProto> types;
  for (const Value* in : node.inputs()) {
    types.emplace_back();
    if (in) valueTypeToOnnx(in->type(), types.back());
  }
  try {
    if (schema->HasFunction()) {
      body.function = *schema->GetFunction();
    } else {
      // The builders read the node's attributes (absent ones mean the default) and input types.
      onnx::FunctionBodyBuildContextImpl context(proto, types);
      if (!schema->BuildContextDependentFunction(context, body.function)) return body;
    }
  } catch (const std::exception& e) {
    body.exists = true;
    body.problem = fmt::format("onnx could not build its function body: {}", e.what());
    return body;
  }
  body.exists = true;
  resolveReferences(*body.function.mutable_node(), attributesWithDefaults(proto, *schema));
  const std::string domain = isOnnxDomain(node.domain()) ? "" : node.domain();
  int64_t bodyVersion = importedVersion(body.function, domain);
  if (bodyVersion == 0) bodyVersion = schema->since_version();
  body.problem = typeProblem(*schema, types);
  if (body.problem.empty())
    body.problem = versionProblem(body.function, bodyVersion, model.opsetVersion(domain));
  return body;
}

// Renames every value a body defines (here and in its subgraphs) to a fresh name under `prefix`,
// its formal inputs to the node's actual inputs ("" for omitted ones).
class Renamer {
 public:
  Renamer(Graph& graph, std::string prefix) : graph_(graph), prefix_(std::move(prefix)) {}

  void bindInput(const std::string& formal, const std::string& actual) { map_[formal] = actual; }

  const std::string& define(const std::string& local) {
    auto it = map_.find(local);
    if (it != map_.end()) return it->second;
    std::string base = fmt::format("{}/{}", prefix_, local);
    std::string name = base;
    for (int i = 1; graph_.lookupValue(name) || used_.count(name); ++i)
      name = fmt::format("{}_{}", base, i);
    used_.insert(name);
    return map_[local] = name;
  }

  void defineAll(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    for (const auto& node : nodes) {
      for (const auto& out : node.output())
        if (!out.empty()) define(out);
      for (const auto& attr : node.attribute()) {
        if (attr.has_g()) defineGraph(attr.g());
        for (const auto& g : attr.graphs())
          defineGraph(g);
      }
    }
  }

  void apply(google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
    for (auto& node : nodes) {
      for (auto& in : *node.mutable_input())
        in = mapped(in);
      for (auto& out : *node.mutable_output())
        out = mapped(out);
      for (auto& attr : *node.mutable_attribute()) {
        if (attr.has_g()) applyGraph(*attr.mutable_g());
        for (auto& g : *attr.mutable_graphs())
          applyGraph(g);
      }
    }
  }

  std::string mapped(const std::string& name) const {
    if (name.empty()) return name;
    auto it = map_.find(name);
    return it == map_.end() ? name : it->second;
  }

 private:
  void defineGraph(const onnx::GraphProto& graph) {
    for (const auto& in : graph.input())
      define(in.name());
    for (const auto& init : graph.initializer())
      define(init.name());
    defineAll(graph.node());
  }
  void applyGraph(onnx::GraphProto& graph) {
    for (auto& in : *graph.mutable_input())
      in.set_name(mapped(in.name()));
    for (auto& out : *graph.mutable_output())
      out.set_name(mapped(out.name()));
    for (auto& init : *graph.mutable_initializer())
      init.set_name(mapped(init.name()));
    for (auto& info : *graph.mutable_value_info())
      info.set_name(mapped(info.name()));
    apply(*graph.mutable_node());
  }

  Graph& graph_;
  std::string prefix_;
  std::map<std::string, std::string> map_;
  std::set<std::string> used_;
};

// One tried expansion.
struct Expansion {
  std::string label; // the expanded node, as messages name it
  std::string opType;
  std::vector<std::string> outputs;     // the node's output names ("" for omitted ones)
  std::vector<std::string> bodyOutputs; // the body values that stand for them
  int parent = -1;                      // the expansion whose body holds the node
  std::string blocker;                  // why the body does not lower ("" when it does)
};

std::string keyOf(const Node& node) {
  for (const Value* out : node.outputs())
    if (out) return out->name();
  return {};
}

std::string labelOf(const Node& node) { return lowering::nodeLabel(node); }

class ExpandFunctions : public Pass {
 public:
  std::string_view name() const override { return "expand-functions"; }

  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!context.targetRefusal || !context.model) return false;
    context_ = &context;
    graph_ = &graph;
    expansions_.clear();
    expandedBy_.clear();
    createdBy_.clear();
    // Round 0 looks at the model's nodes; each later round at the bodies the one before added.
    std::set<int> frontier = {-1};
    for (int depth = 0; depth <= kMaxDepth && !frontier.empty(); ++depth) {
      if (depth > 0) KILN_TRY(settle());
      std::set<int> added;
      std::vector<Node*> nodes;
      for (const auto& node : graph.nodes())
        nodes.push_back(node.get());
      for (Node* node : nodes) {
        const std::string key = keyOf(*node);
        if (key.empty() || expandedBy_.count(key)) continue;
        auto owner = createdBy_.find(key);
        const int parent = owner == createdBy_.end() ? -1 : owner->second;
        if (!frontier.count(parent)) continue;
        if (refusal(*node).empty()) continue;
        // A node whose attributes have the wrong kind stays refused as such (K2013): its body
        // would read the attribute under the declared kind and silently use the default.
        if (!ops::attributeKindReason(*node, context.model->opsetVersion(node->domain())).empty())
          continue;
        Body body = bodyOf(*node, *context.model);
        if (!body.exists) continue;
        if (depth == kMaxDepth)
          body.problem = fmt::format("expansions nest deeper than {}", kMaxDepth);
        KILN_ASSIGN_OR_RETURN(int index, tryExpansion(*node, std::move(body), parent));
        added.insert(index);
      }
      frontier = std::move(added);
    }
    if (expansions_.empty()) return false;
    KILN_TRY(settle());
    judge();
    bool changed = commit();
    eraseUnused();
    return changed;
  }

 private:
  std::string refusal(const Node& node) const {
    return context_->targetRefusal(node, context_->model->opsetVersion(node.domain()));
  }

  // Inference and folding, so the target's checks see the body's types and constants.
  Status settle() {
    auto infer = createPass("infer-shapes");
    auto fold = createPass("fold-constants");
    for (int i = 0; i < kSettleRounds; ++i) {
      KILN_ASSIGN_OR_RETURN(bool inferred, infer->run(*graph_, *context_));
      KILN_ASSIGN_OR_RETURN(bool folded, fold->run(*graph_, *context_));
      if (!inferred && !folded) break;
    }
    return Status::ok();
  }

  // Inserts the body before `node`, beside it: nothing reads the body's outputs yet.
  Expected<int> tryExpansion(Node& node, Body body, int parent) {
    const int index = static_cast<int>(expansions_.size());
    Expansion expansion;
    expansion.label = labelOf(node);
    expansion.opType = node.opType();
    expansion.parent = parent;
    for (const Value* out : node.outputs())
      expansion.outputs.push_back(out ? out->name() : "");
    expandedBy_[keyOf(node)] = index;
    if (!body.problem.empty()) {
      expansion.blocker = body.problem;
      expansions_.push_back(std::move(expansion));
      return index;
    }
    onnx::FunctionProto& function = body.function;
    const std::string prefix = node.name().empty() ? keyOf(node) : node.name();
    Renamer renamer(*graph_, prefix);
    for (int i = 0; i < function.input_size(); ++i) {
      const Value* actual = node.input(static_cast<size_t>(i));
      renamer.bindInput(function.input(i), actual ? actual->name() : "");
    }
    for (const auto& formal : function.output())
      expansion.bodyOutputs.push_back(renamer.define(formal));
    expansion.bodyOutputs.resize(expansion.outputs.size());
    // Node names: the prefix and the body's name for its first output.
    for (auto& bodyNode : *function.mutable_node())
      for (const auto& out : bodyNode.output())
        if (!out.empty()) {
          bodyNode.set_name(fmt::format("{}/{}", prefix, out));
          break;
        }
    renamer.defineAll(function.node());
    renamer.apply(*function.mutable_node());
    for (auto& bodyNode : *function.mutable_node())
      for (const auto& out : bodyNode.output())
        if (!out.empty()) createdBy_[out] = index;
    for (size_t k = 0; k < expansion.outputs.size(); ++k)
      if (!expansion.outputs[k].empty() && !createdBy_.count(expansion.bodyOutputs[k]))
        expansion.blocker =
            fmt::format("its function body does not define output '{}'", expansion.outputs[k]);
    std::vector<const onnx::NodeProto*> protos;
    for (const auto& bodyNode : function.node())
      protos.push_back(&bodyNode);
    if (expansion.blocker.empty()) {
      auto added = importOnnxNodes(*graph_, &node, protos, *context_->model, node.locations());
      if (!added)
        expansion.blocker = "its function body does not import: " + added.status().toString();
    }
    expansions_.push_back(std::move(expansion));
    return index;
  }

  // Which expansions lower: every body node the target takes, or lowers by its own expansion.
  void judge() {
    std::map<int, std::vector<const Node*>> bodies;
    for (const auto& node : graph_->nodes()) {
      auto it = createdBy_.find(keyOf(*node));
      if (it != createdBy_.end()) bodies[it->second].push_back(node.get());
    }
    // Nested expansions have larger indices than the ones holding them: judge them first.
    for (int i = static_cast<int>(expansions_.size()) - 1; i >= 0; --i) {
      Expansion& expansion = expansions_[static_cast<size_t>(i)];
      if (!expansion.blocker.empty()) continue;
      for (const Node* node : bodies[i]) {
        std::string reason = refusal(*node);
        if (reason.empty()) continue;
        auto nested = expandedBy_.find(keyOf(*node));
        if (nested != expandedBy_.end()) {
          const Expansion& inner = expansions_[static_cast<size_t>(nested->second)];
          if (inner.blocker.empty()) continue;
          reason = inner.blocker;
        }
        expansion.blocker = fmt::format("{}: {}", labelOf(*node), reason);
        break;
      }
    }
  }

  bool usable(int index) const {
    for (int i = index; i >= 0; i = expansions_[static_cast<size_t>(i)].parent)
      if (!expansions_[static_cast<size_t>(i)].blocker.empty()) return false;
    return true;
  }

  // The body replaces the node; its outputs take the node's output names.
  bool commit() {
    bool changed = false;
    for (int i = static_cast<int>(expansions_.size()) - 1; i >= 0; --i) {
      const Expansion& expansion = expansions_[static_cast<size_t>(i)];
      if (!usable(i)) {
        if (expansion.parent < 0)
          context_->notes.push_back(
              fmt::format("{} was not expanded into its ONNX function body for {}: {}",
                          expansion.label, context_->targetName, expansion.blocker));
        continue;
      }
      Value* first = graph_->findLocalValue(firstOutput(expansion));
      Node* node = first ? first->producer() : nullptr;
      if (!node) continue;
      std::vector<Value*> bodyValues;
      for (size_t k = 0; k < expansion.outputs.size(); ++k) {
        Value* out = node->output(k);
        Value* body = expansion.bodyOutputs[k].empty()
                          ? nullptr
                          : graph_->findLocalValue(expansion.bodyOutputs[k]);
        bodyValues.push_back(out ? body : nullptr);
        if (out && body) graph_->replaceAllUsesWith(out, body);
      }
      graph_->eraseNode(node);
      for (size_t k = 0; k < bodyValues.size(); ++k)
        if (bodyValues[k] && !expansion.outputs[k].empty())
          graph_->renameValue(bodyValues[k], expansion.outputs[k]);
      spdlog::debug("expand-functions: {} expanded into its ONNX function body", expansion.label);
      changed = true;
    }
    return changed;
  }

  static std::string firstOutput(const Expansion& expansion) {
    for (const std::string& out : expansion.outputs)
      if (!out.empty()) return out;
    return {};
  }

  // The bodies that were not kept (and body values nothing reads), last node first.
  void eraseUnused() {
    std::vector<Node*> nodes;
    for (const auto& node : graph_->nodes())
      nodes.push_back(node.get());
    for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
      Node* node = *it;
      if (!createdBy_.count(keyOf(*node))) continue;
      bool live = false;
      for (const Value* out : node->outputs())
        if (out && (out->hasUses() || out->isGraphOutput())) live = true;
      if (!live) graph_->eraseNode(node);
    }
    // Body values folded into initializers.
    std::vector<Value*> dead;
    for (const auto& value : graph_->values())
      if (createdBy_.count(value->name()) && !value->producer() && !value->hasUses() &&
          !value->isGraphInput() && !value->isGraphOutput())
        dead.push_back(value.get());
    for (Value* value : dead)
      graph_->eraseValue(value);
  }

  PassContext* context_ = nullptr;
  Graph* graph_ = nullptr;
  std::vector<Expansion> expansions_;
  std::map<std::string, int> expandedBy_; // key of an expanded node → its expansion
  std::map<std::string, int> createdBy_;  // a body value → the expansion that defined it
};

} // namespace

std::unique_ptr<Pass> makeExpandFunctionsPass() { return std::make_unique<ExpandFunctions>(); }

} // namespace kiln
