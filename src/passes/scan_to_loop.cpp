// scan-to-loop: a Scan (opset 9+, forward, axis 0) becomes the Loop it is, so every target that
// lowers Loop takes it.
//
//   %s, %y = Scan(%s0, %x) {body = (%si, %xi) -> (%so, %yo), num_scan_inputs = 1}   (%x: [T, ...])
//     →
//   %s, %y = Loop(T, "", %s0) {body = (%i, %c, %si) -> (%c', %so, %yo)
//                                where %xi = Gather(%x, %i) {axis = 0}, %c' = Identity(%c)}
//
// The Loop's scan output stacks %yo along axis 0, as Scan's does. Opset 8's Scan (a batch axis
// 0 before the sequence axis, optional sequence lengths) is taken when its batch is a static 1
// and it has no sequence lengths: the batch axis is squeezed off the Loop's inputs and unsqueezed
// back onto its outputs. Scans with other axes or directions, a larger batch, or without a static
// sequence length, stay as they are (and the backends refuse them).
#include <algorithm>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

bool allZero(const Node& n, const char* name) {
  const Attribute* a = n.attribute(name);
  if (!a) return true;
  if (a->kind() != AttrKind::Ints) return false;
  for (int64_t v : a->asInts())
    if (v != 0) return false;
  return true;
}

// A static dim `index` of `v`, or -1.
int64_t staticDim(const Value* v, size_t index) {
  if (!v || v->type().kind != TypeKind::Tensor || !v->shape().hasRank() ||
      v->shape().rank() <= index || !v->shape()[index].isStatic())
    return -1;
  return v->shape()[index].value();
}

bool convert(Node* scan, int64_t opset, bool explain) {
  Graph& outer = *scan->owner();
  const Attribute* bodyAttr = scan->attribute("body");
  const Attribute* numAttr = scan->attribute("num_scan_inputs");
  if (!bodyAttr || bodyAttr->kind() != AttrKind::Graph || !bodyAttr->asGraph() || !numAttr ||
      numAttr->kind() != AttrKind::Int)
    return false;
  for (const char* a : {"scan_input_axes", "scan_input_directions", "scan_output_axes",
                        "scan_output_directions", "directions"})
    if (!allZero(*scan, a)) return false;
  // Opset 8: input 0 is the sequence lengths, and every input and output has a batch axis 0.
  const bool batched = opset < 9;
  if (batched && (scan->inputs().empty() || scan->input(0))) return false;
  const size_t first = batched ? 1 : 0;
  const Graph& body = *bodyAttr->asGraph();
  const size_t numScan = static_cast<size_t>(numAttr->asInt());
  const size_t numIn = scan->inputs().size() - first;
  if (numScan == 0 || numScan > numIn || body.inputs().size() != numIn) return false;
  const size_t numState = numIn - numScan;
  if (body.outputs().size() != scan->outputs().size() || body.outputs().size() < numState)
    return false;
  const size_t seqAxis = batched ? 1 : 0;
  for (size_t k = 0; k < numIn; ++k)
    if (batched && staticDim(scan->input(first + k), 0) != 1) return false;
  for (const Value* out : scan->outputs())
    if (batched && out && (!out->shape().hasRank() || out->shape().rank() == 0)) return false;
  // The sequence length: the static sequence dim every scan input shares.
  int64_t length = -1;
  for (size_t k = numState; k < numIn; ++k) {
    const int64_t d = staticDim(scan->input(first + k), seqAxis);
    if (d < 0 || (length >= 0 && d != length)) return false;
    length = d;
  }
  if (length < 1) return false;
  const std::string base = !scan->name().empty() ? scan->name()
                           : scan->output(0)     ? scan->output(0)->name()
                                                 : std::string("scan");
  // The Loop's inputs: the Scan's, without the batch axis for opset 8.
  std::vector<Value*> ins;
  for (size_t k = 0; k < numIn; ++k) {
    Value* x = scan->input(first + k);
    if (batched) {
      Node* squeeze = outer.insertNodeBefore(scan, "Squeeze", {x},
                                             {outer.uniqueName(x->name() + "_unbatched")});
      squeeze->setAttribute("axes", Attribute::ofInts({0}));
      std::vector<Dim> dims(x->shape().dims().begin() + 1, x->shape().dims().end());
      squeeze->output(0)->setType(ValueType::tensor(x->dtype(), Shape(std::move(dims))));
      x = squeeze->output(0);
    }
    ins.push_back(x);
  }

  // The Loop body: (iter, cond, states...) reading each scan input's row at iter.
  auto loopBody = std::make_shared<Graph>(body.name(), &outer);
  Graph& lb = *loopBody;
  Value* iter = lb.addValue(lb.uniqueName("scan_iter"));
  iter->setType(ValueType::tensor(DType::Int64, Shape::fromStatic({})));
  lb.addInput(iter);
  Value* condIn = lb.addValue(lb.uniqueName("scan_cond"));
  condIn->setType(ValueType::tensor(DType::Bool, Shape::fromStatic({})));
  lb.addInput(condIn);
  rewrite::ValueMap moved;
  for (size_t k = 0; k < numState; ++k) {
    const Value* in = body.inputs()[k];
    Value* v = lb.addValue(lb.uniqueName(in->name()));
    v->setType(in->type());
    lb.addInput(v);
    moved[in] = v;
  }
  for (size_t k = numState; k < numIn; ++k) {
    const Value* elem = body.inputs()[k];
    Node* row = lb.appendNode("Gather", {ins[k], iter}, {lb.uniqueName(elem->name())});
    row->setAttribute("axis", Attribute::ofInt(0));
    row->output(0)->setType(elem->type());
    moved[elem] = row->output(0);
  }
  rewrite::copyGraphInto(body, lb, moved,
                         [&](const std::string& op, const std::vector<Value*>& inputs,
                             const std::vector<std::string>& names) {
                           return lb.appendNode(op, inputs, names);
                         });
  Node* condOut = lb.appendNode("Identity", {condIn}, {lb.uniqueName("scan_cond_out")});
  condOut->output(0)->setType(condIn->type());
  lb.addOutput(condOut->output(0));
  for (Value* out : body.outputs()) {
    Value* v = rewrite::movedOr(moved, out);
    if (v->owner() != &lb || std::count(lb.outputs().begin(), lb.outputs().end(), v)) {
      Node* copy = lb.appendNode("Identity", {v}, {lb.uniqueName(out->name() + "_out")});
      copy->output(0)->setType(v->type());
      v = copy->output(0);
    }
    lb.addOutput(v);
  }

  Value* trips = outer.addInitializer(outer.uniqueName(base + "_length"),
                                      Tensor::fromValues<int64_t>(DType::Int64, {}, {length}));
  std::vector<Value*> inputs = {trips, nullptr};
  for (size_t k = 0; k < numState; ++k)
    inputs.push_back(ins[k]);
  std::vector<std::string> names;
  for (Value* out : scan->outputs())
    names.push_back(out ? outer.uniqueName(out->name() + "_loop") : std::string());
  Node* loop = outer.insertNodeBefore(scan, "Loop", inputs, names);
  loop->setName(scan->name());
  loop->setAttribute("body", Attribute::ofGraph(loopBody));
  for (const Location& loc : scan->locations())
    loop->addLocation(loc);
  std::vector<std::pair<Value*, std::string>> rename;
  for (size_t i = 0; i < scan->outputs().size(); ++i) {
    Value* out = scan->output(i);
    if (!out) continue;
    Value* result = loop->output(i);
    if (batched) { // the batch axis back on
      std::vector<Dim> dims(out->shape().dims().begin() + 1, out->shape().dims().end());
      result->setType(ValueType::tensor(out->dtype(), Shape(std::move(dims))));
      Node* unsqueeze = outer.insertNodeBefore(scan, "Unsqueeze", {result},
                                               {outer.uniqueName(out->name() + "_batched")});
      unsqueeze->setAttribute("axes", Attribute::ofInts({0}));
      result = unsqueeze->output(0);
    }
    result->setType(out->type());
    outer.replaceAllUsesWith(out, result);
    rename.emplace_back(result, out->name());
  }
  if (explain) spdlog::debug("scan-to-loop: {} runs {} iterations", scan->name(), length);
  outer.eraseNode(scan);
  for (auto& [value, name] : rename)
    outer.renameValue(value, name);
  return true;
}

class ScanToLoop : public Pass {
 public:
  std::string_view name() const override { return "scan-to-loop"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return rewrite::rewriteEachNode(graph, [&](Node* node) {
      if (node->opType() != "Scan" || !node->domain().empty()) return false;
      return convert(node, context.opset(), context.explain);
    });
  }
};

} // namespace

std::unique_ptr<Pass> makeScanToLoopPass() { return std::make_unique<ScanToLoop>(); }

} // namespace kiln
