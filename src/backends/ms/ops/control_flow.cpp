// .ms rules of the control_flow family: ONNX If and Loop as MindSpore Lite's multi-subgraph
// control flow (ms.md §4.2; PartialFusion 108 {sub_graph_index}, Switch 154, Call 190
// {is_tail_call}). A subgraph sees only its parameters, so every outer value a branch or body
// reads is passed in; constants are made afresh inside it.
//
//   If(c) {then, else}   →  pt = PartialFusion(captured...) -> then;  pe = PartialFusion(...) ->
//   else
//                            s = Switch(c, pt, pe);  outs = Call(s) {is_tail_call = false}
//   Loop(M, c, v...)     →  outs = Call(PartialFusion(0, M, c, v..., captured...) -> cond)
//     cond(i, M, c, v..., k...):  go = LogicalAnd(Less(i, M), c)
//                                 tail Call(Switch(go, PartialFusion(all) -> body,
//                                                      PartialFusion(all) -> exit))
//     body(i, M, c, v..., k...):  i' = i + 1; (c', v'...) = ONNX body(i, c, v...)
//                                 tail Call(PartialFusion(i', M, c', v'..., k...) -> cond)
//     exit(params):               returns its parameters
// The loop is the converter's While shape: cond and body call each other by tail calls, and
// the Call in the calling graph returns the final state.
#include <limits>

#include "../ms_chain.h"
#include "../ms_context.h"
#include "../ms_raise_context.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/control_flow.h"

namespace kiln::ms {
namespace {

std::string checkControlFlow(const Node& n, const lowering::OpContext& context) {
  return ops::controlFlowReason(
      n, [&](const Node& inner) { return msUnsupportedReason(inner, context.opset); });
}

AttrBuilder partialTo(uint32_t subgraph) {
  return [subgraph](FBB& b) { return fb::CreatePartialFusion(b, subgraph).Union(); };
}
AttrBuilder call(bool tail) {
  return [tail](FBB& b) { return fb::CreateCall(b, tail).Union(); };
}

// The tensor a PartialFusion or Switch yields: a handle on a subgraph, not data.
uint32_t handle(LoweringContext& ctx, const std::string& name) {
  MsTensor t;
  t.name = name;
  t.nodeType = kNodeCNode;
  t.dataType = kTypeBool;
  return ctx.addTensor(std::move(t));
}

// The values a subgraph needs from outside: those that are not constants (which it makes itself).
struct Passed {
  std::vector<const Value*> values;
  std::vector<uint32_t> tensors; // in the calling graph
};
Expected<Passed> passIn(LoweringContext& ctx, const std::vector<const Value*>& captured) {
  Passed p;
  for (const Value* v : captured) {
    if (ctx.constOf(v)) continue;
    KILN_ASSIGN_OR_RETURN(uint32_t id, ctx.input(v, Layout::Onnx));
    p.values.push_back(v);
    p.tensors.push_back(id);
  }
  return p;
}

Status lowerBranch(LoweringContext& ctx, uint32_t index, const Graph& g, const Passed& passed) {
  auto scope = ctx.enterSubgraph(index);
  for (size_t k = 0; k < passed.values.size(); ++k)
    ctx.subgraphInput(passed.tensors[k], passed.values[k]->name() + "_param", passed.values[k]);
  Status s = ctx.lowerNodes(g);
  std::vector<uint32_t> results;
  for (const Value* v : g.outputs()) {
    if (!s) break;
    auto id = ctx.subgraphResult(v, results);
    if (!id)
      s = id.status();
    else
      results.push_back(*id);
  }
  ctx.setSubgraphOutputs(std::move(results));
  ctx.leaveSubgraph(std::move(scope));
  return s;
}

Status lowerIf(LoweringContext& ctx, const Node& n) {
  const Graph& thenGraph = *n.attribute("then_branch")->asGraph();
  const Graph& elseGraph = *n.attribute("else_branch")->asGraph();
  KILN_ASSIGN_OR_RETURN(uint32_t cond, ctx.input(n.input(0), Layout::Onnx));
  KILN_ASSIGN_OR_RETURN(Passed passed, passIn(ctx, ops::capturedValues({&thenGraph, &elseGraph})));
  // The runtime infers no shape for a PartialFusion without inputs ("No input!"): branches that
  // capture nothing take the condition as an unread parameter.
  if (passed.values.empty()) {
    passed.values.push_back(n.input(0));
    passed.tensors.push_back(cond);
  }
  const std::string base = n.name().empty() ? n.output(0)->name() : n.name();
  const uint32_t thenIndex = ctx.newSubgraph(base + "_then");
  const uint32_t elseIndex = ctx.newSubgraph(base + "_else");
  KILN_TRY(lowerBranch(ctx, thenIndex, thenGraph, passed));
  KILN_TRY(lowerBranch(ctx, elseIndex, elseGraph, passed));
  ctx.setNode(&n);
  uint32_t pt = handle(ctx, base + "_then_partial");
  uint32_t pe = handle(ctx, base + "_else_partial");
  uint32_t sw = handle(ctx, base + "_switch");
  ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(thenIndex), passed.tensors, {pt});
  ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(elseIndex), passed.tensors, {pe});
  ctx.emit(fb::PrimitiveType_Switch, emptyTable<fb::Switch>(), {cond, pt, pe}, {sw});
  std::vector<uint32_t> outs;
  for (const Value* v : n.outputs()) {
    if (!v) return bad("an omitted If output");
    KILN_ASSIGN_OR_RETURN(uint32_t id, ctx.output(v, Layout::Onnx));
    outs.push_back(id);
  }
  ctx.emit(fb::PrimitiveType_Call, call(false), {sw}, std::move(outs));
  return Status::ok();
}

// Copies tensor `from` into tensor `to` by Reshape(from, Shape(from)): a node-made copy whatever
// the shape (lowerLoop copies its results out of the Call with it).
void copyTensor(LoweringContext& ctx, uint32_t from, uint32_t to) {
  MsTensor shape;
  shape.name = ctx.tensor(from).name + "_shape";
  shape.nodeType = kNodeCNode;
  shape.dataType = kTypeInt32;
  shape.dims = {int32_t(ctx.tensor(from).dims.size())};
  uint32_t s = ctx.addTensor(std::move(shape));
  ctx.emit(fb::PrimitiveType_Shape, emptyTable<fb::Shape>(), {from}, {s});
  ctx.emit(fb::PrimitiveType_Reshape, emptyTable<fb::Reshape>(), {from, s}, {to});
}

Expected<uint32_t> scalarConst(LoweringContext& ctx, Tensor t, const std::string& name) {
  return ctx.constTensor(t, name);
}

Status lowerLoop(LoweringContext& ctx, const Node& n) {
  std::string reason;
  const ops::LoopParts parts = ops::loopParts(n, &reason);
  const Graph& body = *parts.body;
  const std::string base = n.name().empty() ? n.output(0)->name() : n.name();
  const size_t carried = parts.carried.size();

  // The state: iteration, trip limit, condition, carried..., captured.... The iteration and the
  // limit are int32: the runtime has no int64 Less or AddFusion kernel (ms_data_types.cpp). A
  // constant limit past int32 is clamped (2^31 - 1 iterations); one read at run time is cast.
  std::vector<uint32_t> state;
  state.push_back(ctx.intConst({0}, base + "_iter0", std::vector<int32_t>{}));
  if (parts.maxTrip) {
    if (auto c = ctx.constOf(parts.maxTrip); c && c->tensor.elementCount() == 1) {
      state.push_back(
          ctx.intConst(intValues(c->tensor), base + "_max_trip_i32", std::vector<int32_t>{}));
    } else {
      KILN_ASSIGN_OR_RETURN(uint32_t m, ctx.int32Input(parts.maxTrip));
      state.push_back(m);
    }
  } else {
    state.push_back(ctx.intConst({std::numeric_limits<int32_t>::max()}, base + "_no_limit",
                                 std::vector<int32_t>{}));
  }
  if (parts.cond) {
    KILN_ASSIGN_OR_RETURN(uint32_t c, ctx.input(parts.cond, Layout::Onnx));
    state.push_back(c);
  } else {
    KILN_ASSIGN_OR_RETURN(
        uint32_t c,
        scalarConst(ctx, Tensor::fromValues<uint8_t>(DType::Bool, {}, {1}), base + "_always"));
    state.push_back(c);
  }
  for (const Value* v : parts.carried) {
    if (!v) return bad("an omitted Loop-carried input");
    KILN_ASSIGN_OR_RETURN(uint32_t id, ctx.input(v, Layout::Onnx));
    state.push_back(id);
  }
  KILN_ASSIGN_OR_RETURN(Passed passed, passIn(ctx, ops::capturedValues(body)));
  state.insert(state.end(), passed.tensors.begin(), passed.tensors.end());
  const std::vector<std::string> fixed = {"iter", "max_trip", "cond"};
  auto paramName = [&](size_t k) {
    std::string what = k < 3             ? fixed[k]
                       : k < 3 + carried ? body.inputs()[k - 1]->name()
                                         : passed.values[k - 3 - carried]->name();
    return base + "_" + what;
  };

  const uint32_t condIndex = ctx.newSubgraph(base + "_cond");
  const uint32_t bodyIndex = ctx.newSubgraph(base + "_body");
  const uint32_t exitIndex = ctx.newSubgraph(base + "_exit");
  auto params = [&]() {
    std::vector<uint32_t> ids;
    for (size_t k = 0; k < state.size(); ++k)
      ids.push_back(ctx.subgraphInput(state[k], paramName(k)));
    return ids;
  };
  auto results = [&](const std::vector<uint32_t>& like) {
    std::vector<uint32_t> ids;
    for (size_t k = 0; k < like.size(); ++k)
      ids.push_back(ctx.intermediate(like[k], paramName(k) + "_out"));
    return ids;
  };

  // cond: go on while iter < M and the condition holds; the Switch tail-calls body or exit.
  {
    auto scope = ctx.enterSubgraph(condIndex);
    ctx.setNode(&n);
    std::vector<uint32_t> p = params();
    uint32_t below = handle(ctx, base + "_below_max");
    uint32_t go = handle(ctx, base + "_go_on");
    ctx.emit(fb::PrimitiveType_Less, emptyTable<fb::Less>(), {p[0], p[1]}, {below});
    ctx.emit(fb::PrimitiveType_LogicalAnd, emptyTable<fb::LogicalAnd>(), {below, p[2]}, {go});
    uint32_t pb = handle(ctx, base + "_body_partial");
    uint32_t px = handle(ctx, base + "_exit_partial");
    uint32_t sw = handle(ctx, base + "_loop_switch");
    ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(bodyIndex), p, {pb});
    ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(exitIndex), p, {px});
    ctx.emit(fb::PrimitiveType_Switch, emptyTable<fb::Switch>(), {go, pb, px}, {sw});
    std::vector<uint32_t> outs = results(state);
    ctx.emit(fb::PrimitiveType_Call, call(true), {sw}, outs);
    ctx.setSubgraphOutputs(outs);
    ctx.leaveSubgraph(std::move(scope));
  }
  // body: the ONNX body on (iter, cond, carried...), then a tail call back to cond.
  {
    auto scope = ctx.enterSubgraph(bodyIndex);
    ctx.setNode(&n);
    std::vector<uint32_t> p = params();
    const uint32_t one = ctx.intConst({1}, base + "_one", std::vector<int32_t>{});
    uint32_t next = ctx.intermediate(p[0], base + "_next_iter");
    ctx.emit(fb::PrimitiveType_AddFusion, emptyTable<fb::AddFusion>(), {p[0], one}, {next});
    // The ONNX body reads the iteration as int64.
    uint32_t iteration = p[0];
    if (body.inputs()[0]->hasUses()) iteration = Chain(ctx, n).cast(p[0], kTypeInt64);
    // The body's parameters stand for the ONNX body inputs and the captured values.
    auto bindParam = [&](const Value* v, uint32_t id) {
      ctx.clearAlias(v); // the value is the parameter here
      ctx.slots(v) = LoweringContext::Slots{id, std::nullopt};
    };
    bindParam(body.inputs()[0], iteration);
    bindParam(body.inputs()[1], p[2]);
    for (size_t j = 0; j < carried; ++j)
      bindParam(body.inputs()[2 + j], p[3 + j]);
    for (size_t k = 0; k < passed.values.size(); ++k)
      bindParam(passed.values[k], p[3 + carried + k]);
    Status s = ctx.lowerNodes(body);
    if (!s) {
      ctx.leaveSubgraph(std::move(scope));
      return s;
    }
    ctx.setNode(&n);
    std::vector<uint32_t> nextState = {next, p[1]};
    std::vector<uint32_t> taken;
    for (size_t j = 0; j < 1 + carried; ++j) {
      auto id = ctx.subgraphResult(body.outputs()[j], taken);
      if (!id) {
        ctx.leaveSubgraph(std::move(scope));
        return id.status();
      }
      taken.push_back(*id);
      nextState.push_back(*id);
    }
    for (size_t k = 0; k < passed.values.size(); ++k)
      nextState.push_back(p[3 + carried + k]);
    uint32_t pc = handle(ctx, base + "_again_partial");
    ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(condIndex), nextState, {pc});
    std::vector<uint32_t> outs = results(state);
    ctx.emit(fb::PrimitiveType_Call, call(true), {pc}, outs);
    ctx.setSubgraphOutputs(outs);
    ctx.leaveSubgraph(std::move(scope));
  }
  // exit: the final state, unchanged.
  {
    auto scope = ctx.enterSubgraph(exitIndex);
    std::vector<uint32_t> p = params();
    ctx.setSubgraphOutputs(p);
    ctx.leaveSubgraph(std::move(scope));
  }
  // The calling graph: run cond on the initial state; the Loop's outputs are the carried values.
  ctx.setNode(&n);
  uint32_t start = handle(ctx, base + "_cond_partial");
  ctx.emit(fb::PrimitiveType_PartialFusion, partialTo(condIndex), state, {start});
  // The runtime splits a graph after its last non-tail Call and reads the op that follows; a
  // Call ending the graph leaves nothing there (ControlFlowScheduler::
  // SplitSubGraphNodesIntoTwoParts reads back() of an empty list and crashes). The Loop's
  // results are copied out of the Call by Reshape(r, Shape(r)) for that.
  std::vector<uint32_t> outs;
  std::vector<std::pair<uint32_t, uint32_t>> copies; // Call result → Loop output
  for (size_t k = 0; k < state.size(); ++k) {
    const bool isCarried = k >= 3 && k < 3 + carried;
    const Value* v = isCarried ? n.output(k - 3) : nullptr;
    outs.push_back(ctx.intermediate(state[k], paramName(k) + "_final"));
    if (v) {
      KILN_ASSIGN_OR_RETURN(uint32_t id, ctx.output(v, Layout::Onnx));
      ctx.tensor(outs.back()).dims = ctx.tensor(id).dims;
      copies.push_back({outs.back(), id});
    }
  }
  ctx.emit(fb::PrimitiveType_Call, call(false), {start}, std::move(outs));
  for (auto [result, output] : copies)
    copyTensor(ctx, result, output);
  return Status::ok();
}

KILN_MS_LOWERING("If", checkControlFlow, lowerIf);
KILN_MS_LOWERING("Loop", checkControlFlow, lowerLoop);

// --- raising ------------------------------------------------------------------------------------

// The node of subgraph `sub` that produces tensor `t` (nullptr when none).
const msfb::CNode* producerIn(const RaisingContext& ctx, const msfb::SubGraph* sub, uint32_t t) {
  if (!sub || !sub->nodeIndices()) return nullptr;
  for (uint32_t n : *sub->nodeIndices()) {
    const msfb::CNode* node = ctx.nodeAt(n);
    if (node->outputIndex())
      for (uint32_t o : *node->outputIndex())
        if (o == t) return node;
  }
  return nullptr;
}

std::vector<uint32_t> indices(const flatbuffers::Vector<uint32_t>* v) {
  return v ? std::vector<uint32_t>(v->begin(), v->end()) : std::vector<uint32_t>{};
}

} // namespace

Status RaisingContext::raiseIf(const SwitchOf& s) {
  const Partial* onTrue = partialOf(s.onTrue);
  const Partial* onFalse = partialOf(s.onFalse);
  if (!onTrue || !onFalse) return nodeUnsupported("a Switch between tensors that are not partials");
  KILN_ASSIGN_OR_RETURN(Value * cond, valueOf(s.cond));
  Node::AttributeList attrs;
  for (const auto& [attr, partial] :
       {std::pair<const char*, const Partial*>{"then_branch", onTrue}, {"else_branch", onFalse}}) {
    const msfb::SubGraph* sub = subgraph(partial->subgraph);
    if (!sub) return invalid("a PartialFusion names subgraph {}", partial->subgraph);
    std::vector<uint32_t> outs = indices(sub->outputIndices());
    if (outs.size() != outputCount())
      return nodeUnsupported(fmt::format("subgraph {} gives {} results for {} outputs",
                                         partial->subgraph, outs.size(), outputCount()));
    std::vector<Value*> bound;
    for (uint32_t a : partial->args) {
      KILN_ASSIGN_OR_RETURN(Value * v, valueOf(a));
      bound.push_back(v);
    }
    KILN_ASSIGN_OR_RETURN(auto g, readSubgraph(partial->subgraph, bound, 0, outs));
    attrs.emplace_back(attr, Attribute::ofGraph(g));
  }
  Node* node = emitNode("If", {cond}, outputCount(), std::move(attrs));
  for (size_t k = 0; k < outputCount(); ++k)
    KILN_TRY(bind(k, node->output(k)));
  return Status::ok();
}

// Only the While shape kiln writes (see the top of this file) is read back as a Loop.
Status RaisingContext::raiseLoop(const Partial& start) {
  const auto notOurs = [&](const std::string& why) {
    return nodeUnsupported("a Call of a subgraph that is not the loop form kiln writes (" + why +
                           ")");
  };
  const msfb::SubGraph* cond = subgraph(start.subgraph);
  if (!cond || !cond->nodeIndices() || cond->nodeIndices()->size() == 0)
    return notOurs("no cond subgraph");
  for (uint32_t n : *cond->nodeIndices()) {
    auto type = nodeAt(n)->primitive()->value_type();
    if (type != msfb::PrimitiveType_Less && type != msfb::PrimitiveType_LogicalAnd &&
        type != msfb::PrimitiveType_PartialFusion && type != msfb::PrimitiveType_Switch &&
        type != msfb::PrimitiveType_Call)
      return notOurs(fmt::format("cond holds a {}", msfb::EnumNamePrimitiveType(type)));
  }
  const msfb::CNode* tail = nodeAt(cond->nodeIndices()->Get(cond->nodeIndices()->size() - 1));
  const msfb::CNode* sw = tail->inputIndex() && tail->inputIndex()->size() == 1
                              ? producerIn(*this, cond, tail->inputIndex()->Get(0))
                              : nullptr;
  if (!sw || sw->primitive()->value_type() != msfb::PrimitiveType_Switch || !sw->inputIndex() ||
      sw->inputIndex()->size() != 3)
    return notOurs("cond does not end in Call(Switch)");
  const msfb::CNode* toBody = producerIn(*this, cond, sw->inputIndex()->Get(1));
  if (!toBody || !toBody->primitive()->value_as_PartialFusion())
    return notOurs("the Switch's true side is not a PartialFusion");
  const int64_t bodyIndex = toBody->primitive()->value_as_PartialFusion()->sub_graph_index();
  const msfb::SubGraph* body = subgraph(bodyIndex);
  if (!body || !body->nodeIndices() || body->nodeIndices()->size() < 2)
    return notOurs("no body subgraph");
  const size_t bodyNodes = body->nodeIndices()->size();
  const msfb::CNode* again = nodeAt(body->nodeIndices()->Get(bodyNodes - 2));
  if (!again->primitive()->value_as_PartialFusion() ||
      again->primitive()->value_as_PartialFusion()->sub_graph_index() != start.subgraph)
    return notOurs("the body does not end by calling cond again");
  const std::vector<uint32_t> next = indices(again->inputIndex());
  const std::vector<uint32_t> params = indices(body->inputIndices());
  const size_t n = start.args.size();
  if (n < 3 || next.size() != n || params.size() != n || outputCount() != n)
    return notOurs("the state sizes differ");
  if (!isConstant(start.args[0])) return notOurs("the first iteration is not a constant");
  KILN_ASSIGN_OR_RETURN(Tensor iter0, decodeConstant(start.args[0], {}));
  if (iter0.elementCount() != 1 || rt::toInt64Vector(iter0)[0] != 0)
    return notOurs("the iteration does not start at 0");
  // Captured values pass through the body unchanged, at the end of the state.
  size_t captured = 0;
  while (n - captured > 3 && next[n - captured - 1] == params[n - captured - 1])
    ++captured;
  const size_t carried = n - 3 - captured;
  std::vector<Value*> bound(n, nullptr);
  KILN_ASSIGN_OR_RETURN(bound[1], valueOf(start.args[1])); // the trip limit, an outer value
  for (size_t k = 3 + carried; k < n; ++k) {
    KILN_ASSIGN_OR_RETURN(bound[k], valueOf(start.args[k]));
  }
  std::vector<uint32_t> outs = {next[2]};
  for (size_t j = 0; j < carried; ++j)
    outs.push_back(next[3 + j]);
  KILN_ASSIGN_OR_RETURN(auto g, readSubgraph(bodyIndex, bound, 2, outs));
  // kiln counts iterations in int32 (the runtime has no int64 Less): the ONNX body takes the
  // iteration as int64 and narrows it for the counter.
  if (Value* iteration = g->inputs().empty() ? nullptr : g->inputs()[0];
      iteration && iteration->dtype() == DType::Int32) {
    Node* first = g->nodes().empty() ? nullptr : g->nodes().front().get();
    Node* narrow = g->insertNodeBefore(first, "Cast", {iteration},
                                       {g->uniqueName(iteration->name() + "_i32")});
    narrow->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Int32)));
    narrow->output(0)->setType(iteration->type());
    const std::vector<Use> uses = iteration->uses();
    for (const Use& use : uses)
      if (use.user != narrow) use.user->setInput(use.inputIndex, narrow->output(0));
    iteration->setType(ValueType::tensor(DType::Int64, Shape(std::vector<Dim>{})));
  }
  std::vector<Value*> inputs;
  for (size_t k = 1; k < 3 + carried; ++k) {
    KILN_ASSIGN_OR_RETURN(Value * v, valueOf(start.args[k]));
    inputs.push_back(v);
  }
  Node* loop = emitNode("Loop", inputs, carried, {{"body", Attribute::ofGraph(g)}});
  for (size_t j = 0; j < carried; ++j)
    KILN_TRY(bind(3 + j, loop->output(j)));
  return Status::ok();
}

namespace {

Status raisePartial(RaisingContext& ctx, const msfb::Primitive& p) {
  std::vector<uint32_t> args;
  for (size_t k = 0; k < ctx.inputCount(); ++k)
    args.push_back(ctx.inIndex(k));
  ctx.notePartial(ctx.outIndex(0), p.value_as_PartialFusion()->sub_graph_index(), std::move(args));
  return Status::ok();
}

Status raiseSwitch(RaisingContext& ctx, const msfb::Primitive&) {
  if (ctx.inputCount() != 3) return ctx.nodeUnsupported("a Switch needs cond, then and else");
  ctx.noteSwitch(ctx.outIndex(0), {ctx.inIndex(0), ctx.inIndex(1), ctx.inIndex(2)});
  return Status::ok();
}

Status raiseCall(RaisingContext& ctx, const msfb::Primitive&) {
  if (ctx.inputCount() != 1) return ctx.nodeUnsupported("a Call reads one Switch or PartialFusion");
  const uint32_t target = ctx.inIndex(0);
  if (const auto* sw = ctx.switchOf(target)) return ctx.raiseIf(*sw);
  if (const auto* partial = ctx.partialOf(target)) return ctx.raiseLoop(*partial);
  return ctx.nodeUnsupported("a Call of something other than a Switch or PartialFusion");
}

KILN_MS_RAISING(PartialFusion, raisePartial);
KILN_MS_RAISING(Switch, raiseSwitch);
KILN_MS_RAISING(Call, raiseCall);

} // namespace
} // namespace kiln::ms
