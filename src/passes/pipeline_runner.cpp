// Runs passes in order with timing, change counts, optional verification and IR dumps.
#include <chrono>

#include <fmt/format.h>

#include "kiln/ir/printer.h"
#include "kiln/ir/verifier.h"
#include "kiln/passes/pass.h"

namespace kiln {
namespace {

size_t countNodes(const Graph& graph) {
  size_t n = 0;
  for (const auto& node : graph.nodes()) {
    ++n;
    for (const Graph* sub : node->subgraphs())
      n += countNodes(*sub);
  }
  return n;
}

} // namespace

Expected<PipelineResult> runPipeline(Model& model, const std::vector<std::string>& passes,
                                     const PipelineOptions& options) {
#ifndef NDEBUG
  const bool verify = true;
#else
  const bool verify = options.verifyEach;
#endif
  PassContext context;
  context.model = &model;
  context.explain = options.explain;
  context.foldSizeLimit = options.foldSizeLimit;
  context.inputShapes = options.inputShapes;
  context.precision = options.precision;
  context.weightQuant = options.weightQuant;
  context.precisionReport = options.precisionReport;
  context.targetRefusal = options.targetRefusal;
  context.targetName = options.targetName;
  context.targetTakes = options.targetTakes;
  PipelineResult result;
  for (const std::string& name : passes) {
    std::unique_ptr<Pass> pass = createPass(name);
    if (!pass)
      return Status(ErrorCode::BadFlag, fmt::format("unknown pass '{}'", name),
                    fmt::format("known passes: {}", fmt::join(passNames(), ", ")));
    PassStats stats;
    stats.name = name;
    stats.nodesBefore = countNodes(*model.graph);
    auto start = std::chrono::steady_clock::now();
    auto changed = pass->run(*model.graph, context);
    stats.millis =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!changed) return changed.status().withContext(fmt::format("pass {}", name));
    stats.changed = *changed;
    stats.nodesAfter = countNodes(*model.graph);
    result.stats.push_back(stats);
    if (verify) {
      if (auto status = verifyModel(model); !status)
        return status.withContext(fmt::format("after pass {}", name));
    }
    if (options.irStream && (options.printIrAfter == "all" || options.printIrAfter == name)) {
      *options.irStream << "// IR after " << name << "\n";
      printModel(*options.irStream, model);
    }
  }
  result.notes = std::move(context.notes);
  return result;
}

std::string formatPassStats(const PipelineResult& result) {
  std::string out = fmt::format("{:<36} {:>10} {:>8} {:>8} {:>8}\n", "pass", "time (ms)", "changed",
                                "nodes", "->");
  double total = 0;
  for (const PassStats& s : result.stats) {
    out += fmt::format("{:<36} {:>10.3f} {:>8} {:>8} {:>8}\n", s.name, s.millis,
                       s.changed ? "yes" : "no", s.nodesBefore, s.nodesAfter);
    total += s.millis;
  }
  out += fmt::format("{:<36} {:>10.3f}\n", "total", total);
  return out;
}

} // namespace kiln
