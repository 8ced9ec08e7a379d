// carry-loop-scan-outputs: a Loop's scan outputs become loop-carried values, so targets whose
// loops only carry state (GraphEngine's While, MindSpore Lite's While subgraphs) can take it.
//
//   %v, %s = Loop(%M, %c, %v0) {body = (%i, %ci, %vi) -> (%co, %vo, %so)}      (%s: f32[N, k])
//     →
//   %v, %s = Loop(%M, %c, %v0, %zeros) {body = (%i, %ci, %vi, %acc) -> (%co, %vo, %acc')}
//   where %acc' = Concat(Slice(%acc, [1], [N]), Unsqueeze(%so, [0]))      (Unsqueeze when N == 1)
//
// The accumulator is a shift register of the last N rows: after N iterations it holds exactly the
// scan output. N comes from the scan output's static leading dimension, the number of iterations
// the model declares; a Loop whose scan outputs lack a static shape is left as it is (and the
// backends refuse it with that reason).
#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

// The full static shape of every scan output of `loop`, or nullopt when one lacks it.
std::optional<std::vector<std::vector<int64_t>>> scanShapes(const Node& loop, size_t carried) {
  std::vector<std::vector<int64_t>> shapes;
  for (size_t i = carried; i < loop.outputs().size(); ++i) {
    const Value* out = loop.output(i);
    if (!out || !out->shape().hasRank() || !out->shape().isStatic() || out->shape().rank() == 0)
      return std::nullopt;
    if (out->type().kind != TypeKind::Tensor || out->dtype() == DType::Undefined ||
        out->dtype() == DType::String)
      return std::nullopt;
    auto dims = out->shape().staticDims();
    if (dims[0] < 1) return std::nullopt;
    shapes.push_back(dims);
  }
  return shapes;
}

Tensor zeros(DType dtype, const std::vector<int64_t>& dims) {
  uint64_t count = 1;
  for (int64_t d : dims)
    count *= static_cast<uint64_t>(d);
  std::vector<uint8_t> bytes(count * static_cast<uint64_t>(dtypeBits(dtype) / 8), 0);
  return Tensor(dtype, dims, Buffer::owned(std::move(bytes)));
}

Value* ints(Graph& g, const std::string& base, const std::vector<int64_t>& v) {
  return g.addInitializer(g.uniqueName(base), Tensor::fromValues<int64_t>(
                                                   DType::Int64, {int64_t(v.size())}, v));
}

bool carry(Node* loop, int64_t opset, bool explain) {
  Graph& outer = *loop->owner();
  const Attribute* bodyAttr = loop->attribute("body");
  if (!bodyAttr || bodyAttr->kind() != AttrKind::Graph || !bodyAttr->asGraph()) return false;
  Graph& body = *bodyAttr->asGraph();
  if (loop->inputs().size() < 2) return false;
  const size_t carried = loop->inputs().size() - 2;
  if (loop->outputs().size() <= carried) return false; // no scan outputs
  if (body.inputs().size() != carried + 2 || body.outputs().size() != loop->outputs().size() + 1)
    return false;
  auto shapes = scanShapes(*loop, carried);
  if (!shapes) return false;

  std::vector<Value*> inputs(loop->inputs().begin(), loop->inputs().end());
  for (size_t k = 0; k < shapes->size(); ++k) {
    const Value* scan = loop->output(carried + k);
    const std::vector<int64_t>& dims = (*shapes)[k];
    Value* init = outer.addInitializer(outer.uniqueName(scan->name() + "_scan_init"),
                                       zeros(scan->dtype(), dims));
    inputs.push_back(init);

    // In the body: the accumulator comes in as a new input and replaces the scan output.
    const size_t slot = 1 + carried + k;
    Value* row = body.outputs()[slot];
    Value* acc = body.addValue(body.uniqueName(scan->name() + "_acc"));
    acc->setType(ValueType::tensor(scan->dtype(), Shape::fromStatic(dims)));
    body.addInput(acc);
    std::vector<int64_t> rowDims(dims.begin(), dims.end());
    rowDims[0] = 1;
    // Unsqueeze takes its axes as an input from opset 13, as an attribute before.
    Node* unsq =
        opset >= 13
            ? body.appendNode("Unsqueeze", {row, ints(body, scan->name() + "_axis0", {0})},
                              {body.uniqueName(scan->name() + "_row")})
            : body.appendNode("Unsqueeze", {row}, {body.uniqueName(scan->name() + "_row")});
    if (opset < 13) unsq->setAttribute("axes", Attribute::ofInts({0}));
    unsq->output(0)->setType(ValueType::tensor(scan->dtype(), Shape::fromStatic(rowDims)));
    Value* next = unsq->output(0);
    if (dims[0] > 1) {
      // Slice takes starts/ends/axes as inputs from opset 10, as attributes before.
      Node* keep =
          opset >= 10
              ? body.appendNode("Slice",
                                {acc, ints(body, scan->name() + "_from", {1}),
                                 ints(body, scan->name() + "_to", {dims[0]}),
                                 ints(body, scan->name() + "_axes", {0})},
                                {body.uniqueName(scan->name() + "_kept")})
              : body.appendNode("Slice", {acc}, {body.uniqueName(scan->name() + "_kept")});
      if (opset < 10) {
        keep->setAttribute("starts", Attribute::ofInts({1}));
        keep->setAttribute("ends", Attribute::ofInts({dims[0]}));
        keep->setAttribute("axes", Attribute::ofInts({0}));
      }
      std::vector<int64_t> keptDims = dims;
      keptDims[0] = dims[0] - 1;
      keep->output(0)->setType(ValueType::tensor(scan->dtype(), Shape::fromStatic(keptDims)));
      Node* cat = body.appendNode("Concat", {keep->output(0), next},
                                  {body.uniqueName(scan->name() + "_acc_next")});
      cat->setAttribute("axis", Attribute::ofInt(0));
      cat->output(0)->setType(ValueType::tensor(scan->dtype(), Shape::fromStatic(dims)));
      next = cat->output(0);
    }
    body.setOutput(slot, next);
  }

  // A new Loop with every output carried; its outputs take over the old ones' uses and names.
  std::vector<std::string> names;
  for (Value* out : loop->outputs())
    names.push_back(out ? outer.uniqueName(out->name() + "_carried") : std::string());
  for (size_t k = 0; k < shapes->size(); ++k)
    if (names[carried + k].empty())
      names[carried + k] = outer.uniqueName(fmt::format("{}_scan{}", loop->name(), k));
  Node* replacement = outer.insertNodeBefore(loop, "Loop", inputs, names);
  replacement->setName(loop->name());
  replacement->setDocString(loop->docString());
  for (const auto& [key, attr] : loop->attributes())
    replacement->setAttribute(key, attr);
  for (const Location& loc : loop->locations())
    replacement->addLocation(loc);
  std::vector<std::pair<Value*, std::string>> rename;
  for (size_t i = 0; i < loop->outputs().size(); ++i) {
    Value* out = loop->output(i);
    if (!out) continue;
    replacement->output(i)->setType(out->type());
    outer.replaceAllUsesWith(out, replacement->output(i));
    rename.emplace_back(replacement->output(i), out->name());
  }
  if (explain)
    spdlog::debug("carry-loop-scan-outputs: {} carries {} scan output(s)", loop->name(),
                  shapes->size());
  outer.eraseNode(loop);
  for (auto& [value, name] : rename)
    outer.renameValue(value, name);
  return true;
}

class CarryLoopScanOutputs : public Pass {
 public:
  std::string_view name() const override { return "carry-loop-scan-outputs"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return rewrite::rewriteEachNode(graph, [&](Node* node) {
      if (node->opType() != "Loop" || !node->domain().empty()) return false;
      return carry(node, context.opset(), context.explain);
    });
  }
};

} // namespace

std::unique_ptr<Pass> makeCarryLoopScanOutputsPass() {
  return std::make_unique<CarryLoopScanOutputs>();
}

} // namespace kiln
