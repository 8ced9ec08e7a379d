// Pre-conversion check: shape-spec validation, shape fixing, per-node support for a target.
#include "kiln/check.h"

#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/target.h"
#include "kiln/ir/printer.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/shape_conflicts.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/kernel.h"
#include "kiln/shape_spec.h"
#include "kiln/support/display.h"
#include "kiln/support/json_text.h"

namespace kiln {
namespace {

std::string typeText(const Value* v) {
  if (!v) return "_";
  std::string t = typeToText(v->type());
  return t.empty() ? "?" : t;
}

// expand-functions' notes on nodes whose ONNX function body does not lower either, by node label
// ("<label> was not expanded into its ONNX function body for <target>: <why>").
std::map<std::string, std::string> expansionBlockers(const std::vector<std::string>& notes) {
  std::map<std::string, std::string> out;
  const std::string marker = " was not expanded into its ONNX function body for ";
  for (const std::string& note : notes) {
    size_t at = note.find(marker);
    if (at == std::string::npos) continue;
    size_t colon = note.find(": ", at + marker.size());
    if (colon == std::string::npos) continue;
    out[note.substr(0, at)] = note.substr(colon + 2);
  }
  return out;
}

void checkNodes(const Graph& graph, const Model& model, const TargetHooks* target,
                const std::string& variant, CheckReport& report,
                std::unordered_map<const Node*, size_t>& index,
                const std::map<std::string, std::string>& blockers) {
  for (const auto& node : graph.nodes()) {
    index[node.get()] = report.nodes.size();
    NodeCheck check;
    check.name = node->name();
    if (!node->outputs().empty() && node->output(0)) check.firstOutput = node->output(0)->name();
    check.opType = node->domain().empty() ? node->opType() : node->domain() + "::" + node->opType();
    check.opset = model.opsetVersion(node->domain());
    for (const Value* in : node->inputs())
      check.inputTypes.push_back(typeText(in));
    for (const Value* out : node->outputs())
      check.outputTypes.push_back(typeText(out));
    if (target) {
      check.reason = target->unsupportedReason(*node, variant, check.opset);
      check.supported = check.reason.empty();
      auto blocker = blockers.find(lowering::nodeLabel(*node));
      if (!check.supported && blocker != blockers.end())
        check.reason += "; nor does its ONNX function body: " + blocker->second;
    } else if (!rt::findKernel(node->domain(), node->opType())) {
      check.supported = false;
      check.reason = fmt::format("target {} has no kernel for {}", report.target, check.opType);
    }
    if (!check.supported) ++report.unsupportedNodes;
    report.nodes.push_back(std::move(check));
    for (const Graph* sub : node->subgraphs())
      checkNodes(*sub, model, target, variant, report, index, blockers);
  }
}

// What only lowering finds (a value the op's rule cannot judge alone, a constant the target cannot
// hold): the target lowers the prepared model without writing, and each refusal marks its node.
void addLoweringRefusals(const Model& model, const TargetHooks& target, const std::string& variant,
                         const std::unordered_map<const Node*, size_t>& index,
                         CheckReport& report) {
  if (!target.lowerRefusals) return;
  for (const lowering::Refusal& refusal : target.lowerRefusals(model, variant)) {
    auto it = refusal.node ? index.find(refusal.node) : index.end();
    if (it == index.end()) {
      ErrorCode code =
          target.unsupportedCodes.empty() ? ErrorCode::Internal : target.unsupportedCodes.back();
      report.problems.push_back(Status(code, fmt::format("{}: {}", refusal.label, refusal.reason),
                                       "change the model or keep it on another target"));
      continue;
    }
    NodeCheck& check = report.nodes[it->second];
    if (!check.supported) continue; // the rule check already named it
    check.supported = false;
    check.reason = refusal.reason;
    ++report.unsupportedNodes;
  }
}

} // namespace

Expected<CheckReport> checkModel(Model& model, const CheckOptions& options) {
  CheckReport report;
  report.model = model.sourcePath;
  report.target = options.target;
  const TargetHooks* target = nullptr;
  std::string variant;
  if (options.target != "cpu") {
    target = findTarget(options.target);
    if (!target || !target->unsupportedReason) {
      std::string known = "cpu";
      for (const std::string& name : targetNames())
        known += ", " + name;
      return Status(ErrorCode::BadFlag, fmt::format("unknown target '{}'", options.target),
                    fmt::format("use --target with one of: {}", known));
    }
    if (auto colon = options.target.find(':'); colon != std::string::npos)
      variant = options.target.substr(colon + 1);
  }
  std::optional<ShapeSpec> spec;
  if (!options.inputShape.empty()) {
    auto parsed = parseShapeSpec(options.inputShape, options.converterLiteDialect
                                                         ? ShapeDialect::ConverterLite
                                                         : ShapeDialect::Atc);
    if (!parsed)
      report.problems.push_back(parsed.status());
    else
      spec = parsed.take();
  }
  bool shapesValid = report.problems.empty();
  std::vector<std::string> notes; // the conversion pipeline's
  if (spec) {
    auto problems = validateShapeSpec(*spec, *model.graph);
    shapesValid = problems.empty();
    for (auto& p : problems)
      report.problems.push_back(std::move(p));
  }
  if (shapesValid) {
    ConversionOptions conversion;
    conversion.inputShapes = spec ? &*spec : nullptr;
    if (target) conversion.target = options.target;
    auto result = runConversionPipeline(model, conversion);
    if (!result)
      report.problems.push_back(result.status());
    else
      notes = result->notes;
    const bool conflictsRefused = !target || target->refusesShapeConflicts;
    for (ShapeConflict& conflict : shapeConflicts(model))
      (conflictsRefused ? report.problems : report.warnings).push_back(std::move(conflict.status));
  }
  std::unordered_map<const Node*, size_t> index;
  checkNodes(*model.graph, model, target, variant, report, index, expansionBlockers(notes));
  // Lowering needs the prepared model: only when the shapes and the pipeline were fine.
  if (target && report.problems.empty())
    addLoweringRefusals(model, *target, variant, index, report);
  return report;
}

std::string NodeCheck::label() const {
  return name.empty() ? fmt::format("node producing '{}'", displayName(firstOutput))
                      : fmt::format("node '{}'", displayName(name));
}

std::string CheckReport::toText() const {
  std::string out = fmt::format("check: {} (target {})\n", model, target);
  for (const Status& p : problems)
    out += "problem: " + p.toString() + "\n";
  for (const Status& w : warnings)
    out += "warning: " + w.toString() + "\n";
  // One line per node, except a reason many nodes share (an unknown chip, a missing kernel for
  // a common op): that is one line with the count, the op types and the first node.
  constexpr size_t kGroupFrom = 4;
  std::map<std::string, std::vector<const NodeCheck*>> byReason;
  for (const NodeCheck& n : nodes)
    if (!n.supported) byReason[n.reason].push_back(&n);
  std::set<std::string> grouped;
  for (const NodeCheck& n : nodes) {
    if (n.supported) continue;
    const auto& same = byReason[n.reason];
    if (same.size() < kGroupFrom) {
      out += fmt::format("unsupported: {} ({}, opset {}): {}\n", n.label(), displayName(n.opType),
                         n.opset, displayLine(n.reason));
      continue;
    }
    if (!grouped.insert(n.reason).second) continue;
    std::set<std::string> types;
    for (const NodeCheck* m : same)
      types.insert(displayName(m->opType));
    out += fmt::format("unsupported: {} nodes ({}; first {}): {}\n", same.size(),
                       fmt::join(types, ", "), n.label(), displayLine(n.reason));
  }
  out += fmt::format("{} nodes checked, {} unsupported, {} other problem(s): {}\n", nodes.size(),
                     unsupportedNodes, problems.size(), ok() ? "PASS" : "FAIL");
  return out;
}

std::string CheckReport::toJson() const {
  nlohmann::json out;
  out["model"] = model;
  out["target"] = target;
  out["result"] = ok() ? "success" : "failed";
  out["problems"] = nlohmann::json::array();
  for (const Status& p : problems)
    out["problems"].push_back({{"code", codeString(p.code())},
                               {"peer_code", p.peerCode()},
                               {"message", p.message()},
                               {"fix", p.hint()}});
  out["warnings"] = nlohmann::json::array();
  for (const Status& w : warnings)
    out["warnings"].push_back(
        {{"code", codeString(w.code())}, {"message", w.message()}, {"fix", w.hint()}});
  out["nodes"] = nlohmann::json::array();
  for (const NodeCheck& n : nodes)
    out["nodes"].push_back({{"name", n.name},
                            {"op", n.opType},
                            {"opset", n.opset},
                            {"inputs", n.inputTypes},
                            {"outputs", n.outputTypes},
                            {"result", n.supported ? "success" : "failed"},
                            {"reason", n.reason}});
  return jsonText(out, 2) + "\n";
}

} // namespace kiln
