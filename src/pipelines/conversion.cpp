// The conversion pipeline every front-end runs before lowering (kiln/pipelines/conversion.h).
#include "kiln/pipelines/conversion.h"

#include "kiln/backends/target.h"

namespace kiln {
namespace {

void append(PipelineResult& into, PipelineResult from) {
  into.stats.insert(into.stats.end(), from.stats.begin(), from.stats.end());
  into.notes.insert(into.notes.end(), from.notes.begin(), from.notes.end());
}

} // namespace

bool needsFp16Conversion(const PrecisionOptions& precision) {
  return (precision.mode != PrecisionMode::KeepOrigin &&
          precision.mode != PrecisionMode::ForceFp32) ||
         !precision.inputFp16Nodes.empty() || precision.outputsFp16;
}

Expected<PipelineResult> runConversionPipeline(Model& model, const ConversionOptions& options) {
  std::vector<std::string> simplify = options.simplifyPasses;
  if (simplify.empty()) {
    KILN_ASSIGN_OR_RETURN(simplify, pipelineByName(options.simplify));
  }
  PipelineResult result;
  PipelineOptions shapes;
  shapes.inputShapes = options.inputShapes;
  KILN_ASSIGN_OR_RETURN(PipelineResult simplified, runPipeline(model, simplify, shapes));
  append(result, std::move(simplified));
  if (options.afterSimplify) {
    KILN_ASSIGN_OR_RETURN(bool changed, options.afterSimplify(model));
    // The new ops get their shapes settled like the rest of the graph.
    if (changed) {
      KILN_ASSIGN_OR_RETURN(PipelineResult again, runPipeline(model, simplify));
      append(result, std::move(again));
    }
  }
  if (!options.target.empty()) {
    // Ops the target refuses but standard ops can express (RNNs unrolled), before fp16 so the
    // new ops are converted with the rest.
    const TargetHooks* target = findTarget(options.target);
    if (target && target->prepare) {
      const auto colon = options.target.find(':');
      const std::string variant =
          colon == std::string::npos ? std::string() : options.target.substr(colon + 1);
      KILN_ASSIGN_OR_RETURN(bool changed, target->prepare(model, variant));
      (void)changed;
    }
  }
  if (options.precision && needsFp16Conversion(*options.precision)) {
    PipelineOptions fp16;
    fp16.precision = options.precision;
    fp16.precisionReport = options.precisionReport;
    KILN_ASSIGN_OR_RETURN(PipelineResult converted, runPipeline(model, {"convert-fp16"}, fp16));
    append(result, std::move(converted));
  }
  if (options.weightQuant) {
    PipelineOptions quant;
    quant.weightQuant = options.weightQuant;
    quant.precisionReport = options.precisionReport;
    KILN_ASSIGN_OR_RETURN(PipelineResult quantized,
                          runPipeline(model, {"quantize-weights"}, quant));
    append(result, std::move(quantized));
  }
  return result;
}

} // namespace kiln
