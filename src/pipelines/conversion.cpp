// The conversion pipeline every front-end runs before lowering (kiln/pipelines/conversion.h).
#include "kiln/pipelines/conversion.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/target.h"

namespace kiln {
namespace {

void append(PipelineResult& into, PipelineResult from) {
  into.stats.insert(into.stats.end(), from.stats.begin(), from.stats.end());
  into.notes.insert(into.notes.end(), from.notes.begin(), from.notes.end());
}

// The part of a target name after ':' ("Ascend310P3" of "om:Ascend310P3"), "" when none.
std::string targetVariant(const std::string& target) {
  const size_t colon = target.find(':');
  return colon == std::string::npos ? std::string() : target.substr(colon + 1);
}

// PassContext::targetTakes for `target`: whether it takes a node of `model` as it is.
std::function<bool(const Node&)> takesFor(const TargetHooks* target, const std::string& variant,
                                          const Model* model) {
  return [target, variant, model](const Node& node) {
    return target->unsupportedReason(node, variant, model->opsetVersion(node.domain())).empty();
  };
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
  // First, before simplification folds the DequantizeLinear of constant weights into float
  // weights: QDQ Conv/MatMul become QLinearConv/QLinearMatMul where the target takes them (int8
  // kernels), so decompose-quant below only makes float what the target refuses.
  if (const TargetHooks* target = options.target.empty() ? nullptr : findTarget(options.target);
      target && target->unsupportedReason) {
    PipelineOptions fuse;
    fuse.targetName = options.target;
    fuse.inputShapes = options.inputShapes;
    fuse.targetTakes = takesFor(target, targetVariant(options.target), &model);
    // A target's rule may need the activations' ranks (.om's int8 Conv2D is 2-D only), so a
    // model with quantize ops gets the user's shapes and inference first.
    bool quantized = false;
    for (const auto& node : model.graph->nodes())
      quantized |= node->opType() == "DequantizeLinear" && node->domain().empty();
    std::vector<std::string> passes = {"fuse-qdq"};
    if (quantized) passes = {"fix-input-shapes", "infer-shapes", "fuse-qdq"};
    KILN_ASSIGN_OR_RETURN(PipelineResult fused, runPipeline(model, passes, fuse));
    append(result, std::move(fused));
  }
  PipelineOptions shapes;
  shapes.inputShapes = options.inputShapes;
  // Passes that read an input's default as a constant (as both targets write it) only do so when
  // converting for a target.
  shapes.targetName = options.target;
  KILN_ASSIGN_OR_RETURN(PipelineResult simplified, runPipeline(model, simplify, shapes));
  PipelineOptions resimplify; // after a later stage changed the graph: shapes are fixed already
  resimplify.targetName = options.target;
  append(result, std::move(simplified));
  if (!options.target.empty()) {
    const TargetHooks* target = findTarget(options.target);
    if (!target)
      return Status(ErrorCode::BadFlag, fmt::format("no target '{}' in this build", options.target),
                    fmt::format("use one of: {}", fmt::join(targetNames(), ", ")));
    const size_t colon = options.target.find(':');
    const std::string variant =
        colon == std::string::npos ? std::string() : options.target.substr(colon + 1);
    PipelineOptions expand;
    expand.targetName = options.target;
    if (target->unsupportedReason)
      expand.targetRefusal = [target, variant](const Node& node, int64_t opset) {
        return target->unsupportedReason(node, variant, opset);
      };
    KILN_ASSIGN_OR_RETURN(PipelineResult expanded,
                          runPipeline(model, {"expand-functions"}, expand));
    const bool changed = !expanded.stats.empty() && expanded.stats.back().changed;
    append(result, std::move(expanded));
    // The bodies' ops get settled, fused and cleaned like the rest of the graph.
    if (changed) {
      KILN_ASSIGN_OR_RETURN(PipelineResult again, runPipeline(model, simplify, resimplify));
      append(result, std::move(again));
    }
  }
  if (options.afterSimplify) {
    KILN_ASSIGN_OR_RETURN(bool changed, options.afterSimplify(model));
    // The new ops get their shapes settled like the rest of the graph. QDQ pairs made here
    // (FULL_QUANT's calibrated rewrite) are fused first, for the reason given at the top.
    if (changed) {
      if (const TargetHooks* target = options.target.empty() ? nullptr : findTarget(options.target);
          target && target->unsupportedReason) {
        PipelineOptions fuse;
        fuse.targetName = options.target;
        fuse.targetTakes = takesFor(target, targetVariant(options.target), &model);
        KILN_ASSIGN_OR_RETURN(PipelineResult fused, runPipeline(model, {"fuse-qdq"}, fuse));
        append(result, std::move(fused));
      }
      KILN_ASSIGN_OR_RETURN(PipelineResult again, runPipeline(model, simplify, resimplify));
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
    if (target && !target->preparePasses.empty()) {
      PipelineOptions prepared;
      prepared.targetName = options.target;
      KILN_ASSIGN_OR_RETURN(PipelineResult ran,
                            runPipeline(model, target->preparePasses, prepared));
      append(result, std::move(ran));
    }
  }
  if (options.precision && needsFp16Conversion(*options.precision)) {
    PipelineOptions fp16;
    fp16.precision = options.precision;
    PrecisionOptions guarded;
    if (options.chooseFp16Keeps) {
      guarded = *options.precision;
      std::vector<std::string> keep = options.chooseFp16Keeps(model, guarded, result.notes);
      guarded.keepNodeNames.insert(guarded.keepNodeNames.end(), keep.begin(), keep.end());
      fp16.precision = &guarded;
    }
    fp16.precisionReport = options.precisionReport;
    KILN_ASSIGN_OR_RETURN(PipelineResult converted, runPipeline(model, {"convert-fp16"}, fp16));
    append(result, std::move(converted));
  }
  // After convert-fp16: the integer arithmetic of quantized ops stays float32 whatever the
  // precision mode (a target computes it in integers); before quantize-weights, which then treats
  // the weights it made like any float weight.
  if (const TargetHooks* target = options.target.empty() ? nullptr : findTarget(options.target);
      target && target->unsupportedReason) {
    PipelineOptions decompose;
    // Weight quant to another width than 8 bits re-quantizes the float weights instead of keeping
    // the model's 8-bit codes.
    decompose.weightQuant = options.weightQuant;
    decompose.targetTakes = takesFor(target, targetVariant(options.target), &model);
    KILN_ASSIGN_OR_RETURN(PipelineResult decomposed,
                          runPipeline(model, {"decompose-quant"}, decompose));
    const bool rewrote = !decomposed.stats.empty() && decomposed.stats.back().changed;
    append(result, std::move(decomposed));
    if (rewrote && options.precision && needsFp16Conversion(*options.precision))
      result.notes.push_back(
          "quantized ops were rewritten into float32 ops that keep their integer arithmetic, but "
          "the float ops between them follow the precision mode: an integer accumulator cast to "
          "float16 overflows above 65504 (inf, then NaN); convert quantized models with "
          "--precision_mode=force_fp32 or must_keep_origin_dtype to get the ONNX model's numbers");
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
