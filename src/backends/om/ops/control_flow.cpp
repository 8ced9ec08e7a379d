// .om rules of the control_flow family: ONNX If → GraphEngine's functional If, ONNX Loop → While,
// each branch or body a GraphDef of the model's flat graph list named by the op's subgraph_name.
//
// GraphEngine subgraphs see only their Data ops, so every outer value a branch or body reads
// becomes an explicit input of the If/While (Data `index` k carries `_parent_node_index`, the
// parent input it stands for; NetOutput inputs carry the parent output they feed).
//
//   If(cond) {then, else}          →  If(cond, captured...) subgraph_name [then, else]
//   Loop(M, c, v...) {body}        →  While(0, M, c, v..., captured...) subgraph_name [cond, body]
//      cond: Less(iter, M) && c;   body: ONNX body, then iter + 1; every other value passes on.
#include <functional>
#include <limits>

#include <nlohmann/json.hpp>

#include "../om_context.h"
#include "ops/control_flow.h"

namespace kiln::om {
namespace {

std::string checkControlFlow(const Node& n, const OpContext& context) {
  return ops::controlFlowReason(n, [&](const Node& inner) {
    return omUnsupportedReason(inner, context.variant, context.opset);
  });
}

const Graph& graphAttr(const Node& n, const char* name) { return *n.attribute(name)->asGraph(); }

// Data ops for `values` (k → parent input k + offset), each bound to its value inside the graph.
void bindData(Lowerer& l, const std::vector<const Value*>& values, int64_t first, int64_t offset) {
  for (size_t k = 0; k < values.size(); ++k) {
    const Value* v = values[k];
    const int64_t index = first + static_cast<int64_t>(k);
    l.bind(v, l.subgraphData(v->name(), v->dtype(), v->shape(), index, index + offset));
  }
}

Status lowerIf(Lowerer& l, const Node& n) {
  const Graph& thenGraph = graphAttr(n, "then_branch");
  const Graph& elseGraph = graphAttr(n, "else_branch");
  const std::vector<const Value*> captured = ops::capturedValues({&thenGraph, &elseGraph});
  OpDef* o = l.op("If");
  l.input(o, l.in(0));
  for (const Value* v : captured)
    l.input(o, l.source(v));
  for (const auto& [attr, g] :
       {std::pair<const char*, const Graph*>{"then_branch", &thenGraph}, {"else_branch", &elseGraph}}) {
    auto scope = l.beginSubgraph(l.nodeName() + "_" + attr);
    const std::string name = l.graphName();
    bindData(l, captured, 0, 1); // parent input 0 is the condition
    if (Status s = l.lowerNodes(*g); !s) return s;
    std::vector<Port> outs;
    for (const Value* v : g->outputs())
      outs.push_back(l.source(v));
    l.subgraphOutput(outs, true);
    l.endSubgraph(std::move(scope));
    o->add_subgraph_name(name);
  }
  l.outputs(o);
  return Status::ok();
}

Status lowerLoop(Lowerer& l, const Node& n) {
  std::string reason;
  const ops::LoopParts parts = ops::loopParts(n, &reason);
  const Graph& body = *parts.body;
  const std::vector<const Value*> captured = ops::capturedValues(body);
  const Shape scalar = Shape::fromStatic({});

  // The While's values: iteration, trip limit, condition, carried..., captured....
  std::vector<Port> vars;
  vars.push_back(l.constant("iter0", Tensor::fromValues<int64_t>(DType::Int64, {}, {0})));
  vars.push_back(parts.maxTrip ? l.in(0)
                               : l.constant("max_trip", Tensor::fromValues<int64_t>(
                                                            DType::Int64, {},
                                                            {std::numeric_limits<int64_t>::max()})));
  vars.push_back(parts.cond ? l.in(1)
                            : l.constant("cond", Tensor::fromValues<uint8_t>(DType::Bool, {}, {1})));
  for (size_t j = 0; j < parts.carried.size(); ++j)
    vars.push_back(l.in(2 + j));
  for (const Value* v : captured)
    vars.push_back(l.source(v));
  vars[0].shape = vars[1].shape = vars[2].shape = scalar;
  vars[0].dtype = vars[1].dtype = DType::Int64;
  vars[2].dtype = DType::Bool;
  for (size_t j = 0; j < parts.carried.size(); ++j) { // the body's view of the carried values
    const Value* in = body.inputs()[2 + j];
    if (in->dtype() != DType::Undefined) vars[3 + j].dtype = in->dtype();
  }

  OpDef* w = l.op("While");
  for (const Port& p : vars)
    l.input(w, p);
  (*w->mutable_attr())["parallel_iterations"] = attrI(10);
  const std::vector<std::string> fixedNames = {"iter", "max_trip", "cond"};
  auto dataFor = [&](size_t k) {
    std::string name = k < 3                         ? fixedNames[k]
                       : k < 3 + parts.carried.size() ? body.inputs()[k - 1]->name()
                                                      : captured[k - 3 - parts.carried.size()]->name();
    return l.subgraphData(l.nodeName() + "_" + name, vars[k].dtype, vars[k].shape,
                          static_cast<int64_t>(k), static_cast<int64_t>(k));
  };

  // cond: Less(iter, M) && c.
  {
    auto scope = l.beginSubgraph(l.nodeName() + "_cond");
    const std::string name = l.graphName();
    std::vector<Port> data;
    for (size_t k = 0; k < vars.size(); ++k)
      data.push_back(dataFor(k));
    OpDef* less = l.op("Less", "below_max");
    l.input(less, data[0]);
    l.input(less, data[1]);
    Port below = l.output(less, DType::Bool, scalar, less->name());
    OpDef* both = l.op("LogicalAnd", "go_on");
    l.input(both, below);
    l.input(both, data[2]);
    Port go = l.output(both, DType::Bool, scalar, both->name());
    l.subgraphOutput({go}, false);
    l.endSubgraph(std::move(scope));
    w->add_subgraph_name(name);
  }
  // body: the ONNX body on (iter, cond, carried...), captured values read from their Data ops.
  {
    auto scope = l.beginSubgraph(l.nodeName() + "_body");
    const std::string name = l.graphName();
    std::vector<Port> data;
    for (size_t k = 0; k < vars.size(); ++k)
      data.push_back(dataFor(k));
    OpDef* next = l.op("Add", "next_iter");
    l.input(next, data[0]);
    l.input(next, l.constant("one", Tensor::fromValues<int64_t>(DType::Int64, {}, {1})));
    Port iterNext = l.output(next, DType::Int64, scalar, next->name());
    l.bind(body.inputs()[0], data[0]);
    l.bind(body.inputs()[1], data[2]);
    for (size_t j = 0; j < parts.carried.size(); ++j)
      l.bind(body.inputs()[2 + j], data[3 + j]);
    for (size_t k = 0; k < captured.size(); ++k)
      l.bind(captured[k], data[3 + parts.carried.size() + k]);
    if (Status s = l.lowerNodes(body); !s) return s;
    std::vector<Port> outs = {iterNext, data[1], l.source(body.outputs()[0])};
    for (size_t j = 0; j < parts.carried.size(); ++j)
      outs.push_back(l.source(body.outputs()[1 + j]));
    for (size_t k = 0; k < captured.size(); ++k)
      outs.push_back(data[3 + parts.carried.size() + k]);
    l.subgraphOutput(outs, true);
    l.endSubgraph(std::move(scope));
    w->add_subgraph_name(name);
  }
  // Outputs: the carried values are the Loop's; the rest are the While's own.
  for (size_t k = 0; k < vars.size(); ++k) {
    const bool isCarried = k >= 3 && k < 3 + parts.carried.size();
    const Value* v = isCarried ? n.output(k - 3) : nullptr;
    if (v) {
      l.bind(v, l.output(w, v->dtype(), v->shape(), v->name()));
      continue;
    }
    l.output(w, vars[k].dtype, vars[k].shape, fmt::format("{}_out{}", w->name(), k));
  }
  return Status::ok();
}

KILN_OM_LOWERING("If", checkControlFlow, lowerIf);
KILN_OM_LOWERING("Loop", checkControlFlow, lowerLoop);

// --- raising --------------------------------------------------------------------------------

// The IR graph of subgraph `index` of `op`: Data k reads `bound[k]` (an outer value) when set,
// else becomes a graph input (in index order); outputs are the NetOutput inputs `keep` lists
// (all when empty).
Expected<std::shared_ptr<Graph>> raiseBody(Raiser& r, const OpDef& op, int index,
                                           std::vector<Value*> bound, std::vector<int> keep) {
  if (index >= op.subgraph_name_size())
    return r.unsupported(op, fmt::format("names {} subgraphs; {} needs {}",
                                         op.subgraph_name_size(), op.type(), index + 1));
  const ge::proto::GraphDef* def = r.findGraph(op.subgraph_name(index));
  if (!def)
    return r.unsupported(op, fmt::format("subgraph '{}' is not in the model",
                                         op.subgraph_name(index)));
  auto g = std::make_shared<Graph>(def->name(), &r.graph());
  Raiser sub = r.child(*g);
  sub.bindData(std::move(bound), std::move(keep));
  if (Status s = sub.raise(*def); !s) return s;
  return g;
}

KILN_OM_RAISING("If", [](Raiser& r, const OpDef& op) -> Status {
  std::vector<Value*> captured;
  for (int i = 1; i < op.input_size(); ++i)
    captured.push_back(r.in(op, i));
  Node* node = r.emit(op, "If", {r.in(op, 0)});
  for (int b = 0; b < 2; ++b) {
    auto g = raiseBody(r, op, b, captured, {});
    if (!g) return g.status();
    node->setAttribute(b == 0 ? "then_branch" : "else_branch", Attribute::ofGraph(*g));
  }
  return Status::ok();
});

// Only the While kiln writes: inputs (0, M, c, carried..., captured...), cond Less && LogicalAnd.
KILN_OM_RAISING("While", [](Raiser& r, const OpDef& op) -> Status {
  const int vars = op.input_size();
  const int carried = [&] {
    // Captured values are the body's pass-through outputs at the end.
    const ge::proto::GraphDef* body =
        op.subgraph_name_size() == 2 ? r.findGraph(op.subgraph_name(1)) : nullptr;
    if (!body) return -1;
    const ge::proto::OpDef* out = nullptr;
    std::map<std::string, int64_t> dataIndex;
    for (const auto& o : body->op()) {
      if (o.type() == "NetOutput") out = &o;
      if (o.type() == "Data") dataIndex[o.name() + ":0"] = getI(o, "index", -1);
    }
    if (!out || out->input_size() != vars) return -1;
    int k = vars;
    while (k > 3) {
      auto it = dataIndex.find(out->input(k - 1));
      if (it == dataIndex.end() || it->second != k - 1) break;
      --k;
    }
    return k - 3;
  }();
  const Tensor* iter0 = r.constIn(op, 0);
  if (carried < 0 || vars < 3 || !iter0 || iter0->elementCount() != 1 ||
      iter0->dtype() != DType::Int64 || iter0->copyValues<int64_t>()[0] != 0)
    return r.unsupported(op, "a While kiln did not write (it reads the form Loop lowers to)");
  const ge::proto::GraphDef* cond = r.findGraph(op.subgraph_name(0));
  if (!cond) return r.unsupported(op, "its cond subgraph is not in the model");
  for (const auto& o : cond->op())
    if (o.type() != "Data" && o.type() != "Less" && o.type() != "LogicalAnd" &&
        o.type() != "NetOutput")
      return r.unsupported(op, fmt::format("its cond subgraph holds a {} (kiln writes "
                                           "Less(iter, M) && cond only)",
                                           o.type()));
  std::vector<Value*> bound(static_cast<size_t>(vars), nullptr);
  bound[1] = r.in(op, 1); // the trip limit: an outer value in the ONNX body
  for (int k = 3 + carried; k < vars; ++k)
    bound[static_cast<size_t>(k)] = r.in(op, k);
  std::vector<int> keep = {2};
  for (int j = 0; j < carried; ++j)
    keep.push_back(3 + j);
  auto body = raiseBody(r, op, 1, bound, keep);
  if (!body) return body.status();
  std::vector<Value*> inputs = {r.in(op, 1), r.in(op, 2)};
  for (int j = 0; j < carried; ++j)
    inputs.push_back(r.in(op, 3 + j));
  // Loop outputs are the While's carried outputs 3...; its other outputs are read by nothing.
  Node* node = r.emitOutputs(op, "Loop", inputs, 3, carried);
  node->setAttribute("body", Attribute::ofGraph(*body));
  return Status::ok();
});

// Gear models (om_gears.cpp): the root's MapIndex turns ascend_mbatch_shape_data into the branch
// index. kiln runs a gear model on the shapes it is given, as ACL's set-gear call picks the branch
// on a device: the raised graph has no selector input (the raiser skips that Data), MapIndex
// raises to nothing and the Case picks the branch whose Data shapes equal the inputs' shapes.
KILN_OM_RAISING("MapIndex", [](Raiser& r, const OpDef& op) -> Status {
  if (r.in(op, 0))
    return r.unsupported(op, "a MapIndex that does not read a gear model's ascend_mbatch_shape_data");
  r.rebind(op, 0, nullptr); // the Case reads it: it picks its branch from the shapes instead
  return Status::ok();
});

KILN_OM_RAISING("Case", [](Raiser& r, const OpDef& op) -> Status {
  if (!getB(op, "_insert_by_mbatch", false) || r.in(op, 0))
    return r.unsupported(op, "a Case that is not a gear model's (kiln reads those only)");
  const int branches = op.subgraph_name_size();
  if (branches < 2) return r.unsupported(op, "fewer than 2 branches");
  std::vector<Value*> args;
  for (int i = 1; i < op.input_size(); ++i)
    args.push_back(r.in(op, i));
  // Each branch's Data shapes (per Case input) and output shapes.
  std::vector<std::vector<std::vector<int64_t>>> inShapes(branches), outShapes(branches);
  std::vector<std::shared_ptr<Graph>> graphs;
  for (int b = 0; b < branches; ++b) {
    const ge::proto::GraphDef* def = r.findGraph(op.subgraph_name(b));
    if (!def) return r.unsupported(op, fmt::format("branch '{}' is not in the model", op.subgraph_name(b)));
    inShapes[b].resize(args.size());
    for (const auto& o : def->op()) {
      const int64_t index = getI(o, "index", -1);
      if (o.type() == "Data" && index >= 0 && static_cast<size_t>(index) < args.size() &&
          o.output_desc_size())
        inShapes[b][index] = Raiser::plainDims(o.output_desc(0));
      if (o.type() == "NetOutput")
        for (const auto& d : o.input_desc())
          outShapes[b].push_back(Raiser::plainDims(d));
    }
    auto g = raiseBody(r, op, b, args, {});
    if (!g) return g.status();
    graphs.push_back(*g);
  }
  // The dims that change with the gear become symbolic in the raised graph.
  auto varying = [&](const std::vector<std::vector<std::vector<int64_t>>>& shapes, size_t k,
                     const Shape& declared) {
    std::vector<Dim> dims;
    const auto& base = shapes[0][k];
    for (size_t a = 0; a < base.size(); ++a) {
      bool same = true;
      for (int b = 1; b < branches; ++b)
        same = same && k < shapes[b].size() && a < shapes[b][k].size() && shapes[b][k][a] == base[a];
      dims.push_back(same ? Dim::known(base[a]) : Dim::symbol(fmt::format("gear_dim{}", a)));
    }
    return base.empty() && declared.hasRank() ? declared : Shape(dims);
  };
  // The selector: the inputs whose shapes differ between gears, compared with each gear's.
  std::vector<Value*> shapeParts;
  std::vector<std::vector<int64_t>> table(branches);
  for (size_t k = 0; k < args.size(); ++k) {
    Value* v = args[k];
    if (!v || v->isInitializer()) continue;
    bool differs = false;
    for (int b = 1; b < branches; ++b)
      differs = differs || inShapes[b][k] != inShapes[0][k];
    if (!differs) continue;
    if (v->isGraphInput()) v->setShape(varying(inShapes, k, v->shape()));
    shapeParts.push_back(r.helper(v->name() + "_shape", "Shape", {v}));
    for (int b = 0; b < branches; ++b)
      table[b].insert(table[b].end(), inShapes[b][k].begin(), inShapes[b][k].end());
  }
  if (shapeParts.empty()) return r.unsupported(op, "its branches take the same input shapes");
  // The gears' input shapes, for the executor's check (a shape matching no gear is refused there,
  // not computed on the first branch).
  nlohmann::json gearShapes = nlohmann::json::array();
  for (int b = 0; b < branches; ++b) {
    nlohmann::json gear = nlohmann::json::object();
    for (size_t k = 0; k < args.size(); ++k) {
      Value* v = args[k];
      if (!v || v->isInitializer() || !v->isGraphInput()) continue;
      bool differs = false;
      for (int c = 1; c < branches; ++c)
        differs = differs || inShapes[c][k] != inShapes[0][k];
      if (differs) gear[v->name()] = inShapes[b][k];
    }
    gearShapes.push_back(std::move(gear));
  }
  r.addMetadata(kInputGearsKey, gearShapes.dump());
  Value* shapes = shapeParts.size() == 1 ? shapeParts[0] : [&] {
    Node* concat = r.graph().appendNode("Concat", shapeParts, {r.graph().uniqueName("gear_shapes")});
    concat->setAttribute("axis", Attribute::ofInt(0));
    return concat->output(0);
  }();
  std::vector<int64_t> flat;
  for (const auto& row : table)
    flat.insert(flat.end(), row.begin(), row.end());
  Value* gearTable = r.constTensor(
      "gear_table", Tensor::fromValues<int64_t>(DType::Int64,
                                                {branches, static_cast<int64_t>(table[0].size())}, flat));
  Value* equal = r.helper("gear_matches", "Equal", {gearTable, shapes});
  Node* cast = equal->owner()->appendNode("Cast", {equal}, {r.graph().uniqueName("gear_matches_i32")});
  cast->setAttribute("to", Attribute::ofInt(6)); // INT32
  Node* all = r.graph().appendNode("ReduceMin", {cast->output(0), r.constInts("gear_axis", {1})},
                                   {r.graph().uniqueName("gear_all_match")});
  all->setAttribute("keepdims", Attribute::ofInt(0));
  Node* pick = r.graph().appendNode("ArgMax", {all->output(0)}, {r.graph().uniqueName("gear_index")});
  pick->setAttribute("axis", Attribute::ofInt(0));
  pick->setAttribute("keepdims", Attribute::ofInt(0));
  std::vector<Value*> isGear;
  for (int b = 0; b + 1 < branches; ++b)
    isGear.push_back(r.helper(fmt::format("is_gear{}", b), "Equal",
                              {pick->output(0), r.constTensor(fmt::format("gear{}", b),
                                                              Tensor::fromValues<int64_t>(
                                                                  DType::Int64, {}, {b}))}));
  // Branch b, else the rest: If(is_gear0) {gear 0} else {If(is_gear1) {gear 1} else {...}}.
  std::vector<Shape> outTypes;
  for (size_t j = 0; j < outShapes[0].size(); ++j)
    outTypes.push_back(varying(outShapes, j, Shape()));
  Node* top = r.emit(op, "If", {isGear[0]});
  for (size_t j = 0; j < top->outputs().size() && j < outTypes.size(); ++j)
    top->output(j)->setShape(outTypes[j]);
  std::function<std::shared_ptr<Graph>(int, Graph*)> rest = [&](int b, Graph* parent) {
    if (b == branches - 1) {
      graphs[b]->setParent(parent);
      return graphs[b];
    }
    auto g = std::make_shared<Graph>(fmt::format("{}_gears_from_{}", op.name(), b), parent);
    std::vector<std::string> names;
    for (size_t j = 0; j < top->outputs().size(); ++j)
      names.push_back(g->uniqueName(fmt::format("{}_gear{}_out{}", op.name(), b, j)));
    Node* n = g->appendNode("If", {isGear[b]}, names);
    n->setName(fmt::format("{}_gear{}", op.name(), b));
    for (size_t j = 0; j < names.size(); ++j) {
      n->output(j)->setType(top->output(j)->type());
      g->addOutput(n->output(j));
    }
    graphs[b]->setParent(g.get());
    n->setAttribute("then_branch", Attribute::ofGraph(graphs[b]));
    n->setAttribute("else_branch", Attribute::ofGraph(rest(b + 1, g.get())));
    return g;
  };
  top->setAttribute("then_branch", Attribute::ofGraph(graphs[0]));
  top->setAttribute("else_branch", Attribute::ofGraph(rest(1, &r.graph())));
  return Status::ok();
});

} // namespace
} // namespace kiln::om
