// fold-constant-if: an If whose condition is a constant becomes the branch it always takes.
//
//   %c = Constant() {value = bool[] {1}}
//   %y = If(%c) {then_branch = graph () -> (%t) { %t = Relu(%x) }, else_branch = ...}
//     →
//   %t = Relu(%x)            (uses of %y read %t; a graph output %y keeps its name)
//
// The taken branch's nodes and initializers move into the If's graph before the If, with fresh
// names where a branch name is already taken there. Subgraphs of moved nodes (a nested If or
// Loop) are kept and rewired to the moved values. Both targets then see plain ops, and neither
// lowers a branch that can never run.
//
// A branch that cannot run on the settled shapes counts as never taken: when a node at its top
// level has static input shapes that its op refuses (ONNX's inference, strict: an LSTM whose X is
// 5-D, say), every run that takes the branch fails, in ONNX Runtime as in kiln's executor, so the
// If becomes its other branch. This decides on shapes only (the fixed input shapes make them
// static), never on input values, and it leaves a note naming the If, the branch and the node:
//
//   %y = If(%sr_is_16k) {then_branch = <runs on these shapes>,
//                        else_branch = <LSTM(X: f32[1,1,1,128,2]) ...>}
//     →  the then branch, and "note: If 'i': its else branch cannot run on these input shapes ..."
#include <algorithm>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kiln/ir/constant.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

// The condition's value when it is a constant the user cannot override: an initializer that is
// not a graph input, or a Constant node's output.
std::optional<bool> constantCondition(const Value* cond) {
  if (!cond) return std::nullopt;
  std::optional<Tensor> t;
  if (const Tensor* init = rewrite::constantTensor(cond))
    t = *init;
  else if (const Node* p = cond->producer(); p && p->opType() == "Constant" && p->domain().empty())
    t = constantNodeValue(*p);
  if (!t || t->elementCount() != 1) return std::nullopt;
  switch (t->dtype()) {
  case DType::Bool:
  case DType::UInt8:
  case DType::Int8:
    return t->copyValues<uint8_t>()[0] != 0;
  case DType::Int32:
    return t->copyValues<int32_t>()[0] != 0;
  case DType::Int64:
    return t->copyValues<int64_t>()[0] != 0;
  case DType::Float32:
    return t->copyValues<float>()[0] != 0;
  default:
    return std::nullopt;
  }
}

bool inlineBranch(Node* ifNode, bool taken, bool explain) {
  Graph& outer = *ifNode->owner();
  const Attribute* branchAttr = ifNode->attribute(taken ? "then_branch" : "else_branch");
  if (!branchAttr || branchAttr->kind() != AttrKind::Graph || !branchAttr->asGraph()) return false;
  // Keep the branch alive while the If (which owns it) is erased.
  GraphPtr branch = branchAttr->asGraph();
  if (!branch->inputs().empty() || branch->outputs().size() != ifNode->outputs().size())
    return false;

  rewrite::ValueMap moved;
  rewrite::copyGraphInto(
      *branch, outer, moved,
      [&](const std::string& op, const std::vector<Value*>& inputs,
          const std::vector<std::string>& names) {
        return outer.insertNodeBefore(ifNode, op, inputs, names);
      },
      "if_value");

  // The If's outputs become the branch's outputs; graph outputs keep their names.
  std::vector<std::pair<std::string, Value*>> renamed;
  for (size_t i = 0; i < ifNode->outputs().size(); ++i) {
    Value* out = ifNode->output(i);
    if (!out) continue;
    Value* result = rewrite::movedOr(moved, branch->outputs()[i]);
    if (out->isGraphOutput()) renamed.emplace_back(out->name(), result);
    outer.replaceAllUsesWith(out, result);
  }
  if (explain)
    spdlog::debug("fold-constant-if: {} takes its {} branch", ifNode->name(),
                  taken ? "then" : "else");
  outer.eraseNode(ifNode);
  for (auto& [name, value] : renamed) {
    const bool movedHere = value->owner() == &outer && value->producer() &&
                           !value->isGraphInput() &&
                           std::count(outer.outputs().begin(), outer.outputs().end(), value) == 1;
    if (movedHere) {
      outer.renameValue(value, name);
      continue;
    }
    // An outer value, an input or an output listed twice: an Identity carries the name.
    Node* copy = outer.appendNode("Identity", {value}, {name});
    copy->output(0)->setType(value->type());
    for (size_t i = 0; i < outer.outputs().size(); ++i)
      if (outer.outputs()[i] == value) {
        outer.setOutput(i, copy->output(0));
        break;
      }
  }
  return true;
}

// The first top-level node of `branch` that cannot run on its static input shapes, with why.
std::optional<std::pair<const Node*, std::string>> failingNode(const Graph& branch,
                                                                const Model& model) {
  for (const auto& node : branch.nodes())
    if (std::string why = staticShapeConflict(*node, model); !why.empty())
      return std::make_pair(node.get(), why);
  return std::nullopt;
}

// The branch an If on a computed condition always takes because the other cannot run, with a
// note for the user; nullopt when both can (or neither can: then the model always fails there,
// and the conversion's shape check reports it).
std::optional<bool> onlyRunnableBranch(const Node& ifNode, PassContext& context,
                                       std::string& note) {
  if (!context.model) return std::nullopt;
  std::optional<std::pair<const Node*, std::string>> failing[2];
  for (int taken = 0; taken < 2; ++taken) {
    const Attribute* a = ifNode.attribute(taken ? "then_branch" : "else_branch");
    if (!a || a->kind() != AttrKind::Graph || !a->asGraph()) return std::nullopt;
    failing[taken] = failingNode(*a->asGraph(), *context.model);
  }
  if (failing[0].has_value() == failing[1].has_value()) return std::nullopt;
  const bool taken = !failing[1].has_value();
  const auto& [node, why] = *failing[taken ? 0 : 1];
  note = fmt::format(
      "If '{}': its {} branch cannot run on these input shapes (node '{}' ({}): {}), so every "
      "run that takes it fails; the converted model always runs the {} branch",
      ifNode.name(), taken ? "else" : "then", node->name(), node->opType(), why,
      taken ? "then" : "else");
  return taken;
}

class FoldConstantIf : public Pass {
 public:
  std::string_view name() const override { return "fold-constant-if"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return rewrite::rewriteEachNode(graph, [&](Node* node) {
      if (node->opType() != "If" || !node->domain().empty()) return false;
      auto cond = constantCondition(node->input(0));
      std::string note;
      if (!cond) cond = onlyRunnableBranch(*node, context, note);
      if (!cond || !inlineBranch(node, *cond, context.explain)) return false;
      if (!note.empty()) context.notes.push_back(note);
      return true;
    });
  }
};

} // namespace

std::unique_ptr<Pass> makeFoldConstantIfPass() { return std::make_unique<FoldConstantIf>(); }

} // namespace kiln
