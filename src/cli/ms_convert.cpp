// The converter_lite drop-in's library side: flag parsing with converter_lite's
// rules and messages, and the conversion ONNX → pass pipeline → weight quant →
// .ms writer.
#include "kiln/backends/ms_convert.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/lowering.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/compare.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/pass.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"
#include "kiln/sensitivity.h"
#include "kiln/shape_spec.h"
#include "kiln/support/input_file.h"
#include "lite_flags.h"

namespace kiln {
namespace {

// --name=value flags converter_lite knows, with their allowed values ({} = any
// string).
struct FlagSpec {
  const char* name;
  std::vector<const char*> values;
  const char* illegal = nullptr; // converter_lite's message for a value outside `values`
};

const std::vector<FlagSpec>& flagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"fmk",
       {"TF", "TFLITE", "CAFFE", "MINDIR", "ONNX", "PYTORCH", "OM", "MSLITE"},
       "INPUT ILLEGAL: fmk must be TF|TFLITE|CAFFE|MINDIR|ONNX"},
      {"modelFile", {}},
      {"outputFile", {}},
      {"weightFile", {}},
      {"configFile", {}},
      {"fp16", {"on", "off"}, "INPUT ILLEGAL: fp16 must be on|off"},
      {"inputShape", {}},
      {"inputDataFormat", {"NHWC", "NCHW"}, "INPUT ILLEGAL: inputDataFormat must be NHWC|NCHW"},
      {"outputDataFormat", {"NHWC", "NCHW"}, "INPUT ILLEGAL: outputDataFormat must be NHWC|NCHW"},
      {"inputDataType",
       {"FLOAT16", "FLOAT", "INT8", "UINT8", "INT32", "INT64", "DEFAULT"},
       "INPUT ILLEGAL: inputDataType must be "
       "FLOAT16|FLOAT|INT8|UINT8|INT32|INT64|DEFAULT"},
      {"outputDataType",
       {"FLOAT16", "FLOAT", "INT8", "UINT8", "DEFAULT"},
       "INPUT ILLEGAL: outputDataType must be "
       "FLOAT16|FLOAT|INT8|UINT8|DEFAULT"},
      {"saveType", {"MINDIR", "MINDIR_LITE"}, "INPUT ILLEGAL: saveType must be MINDIR|MINDIR_LITE"},
      {"optimize",
       {},
       "INPUT ILLEGAL: optimize must be "
       "none|general|gpu_oriented|ascend_oriented"},
      {"optimizeTransformer",
       {"true", "false"},
       "INPUT ILLEGAL: optimizeTransformer must be true|false"},
      {"device",
       {"Ascend", "Ascend310", "Ascend310P", "GPU"},
       "INPUT ILLEGAL: device must be Ascend|Ascend310|Ascend310P|GPU"},
      {"infer", {"true", "false"}, "INPUT ILLEGAL: infer must be true|false"},
      {"trainModel", {"true", "false"}, "INPUT ILLEGAL: trainModel must be true|false"},
      {"decryptKey", {}},
      {"decryptMode", {"AES-GCM", "AES-CBC"}, "INPUT ILLEGAL: decryptMode must be AES-GCM|AES-CBC"},
      {"encryptKey", {}},
      {"encryption", {"true", "false"}, "INPUT ILLEGAL: encryption must be true|false"},
  };
  return specs;
}

Status badFlag(const std::string& message, const std::string& hint) {
  return Status(ErrorCode::BadFlag, message, hint).withPeerCode("-600");
}

Status notSupported(const std::string& message, const std::string& hint) {
  return Status(ErrorCode::BadFlag, message, hint).withPeerCode("-7");
}

// optimize=none keeps only what the conversion needs: user shapes, shape
// inference and constant folding (converter_lite skips its fusions but still
// folds and infers shapes).
const std::vector<std::string> kRequiredPasses = {"remove-noops", "eliminate-dead-nodes",
                                                  "fix-input-shapes", "settle-shapes",
                                                  "eliminate-dead-nodes"};

// converter_lite fusion names ([registry] fusion_blacklists) that have a kiln
// counterpart.
const std::map<std::string, std::string> kFusionCounterparts = {
    {"ConvBatchNormFusion", "fuse-batchnorm"},
    {"ConvScaleFusion", "fuse-batchnorm"},
    {"MatMulAddFusion", "fuse-matmul-add"},
    {"FullconnectedAddFusion", "fuse-matmul-add"},
    {"TransposeFusion", "merge-transpose-reshape"},
    {"ReshapeTransposeFusion", "merge-transpose-reshape"},
    {"ReshapeReshapeFusion", "merge-transpose-reshape"},
};

Expected<std::vector<std::string>> passesFor(const MsConvertOptions& options,
                                             std::vector<std::string>& notes) {
  if (options.optimize == "none" || options.config.disableFusion) return kRequiredPasses;
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> passes, pipelineByName("default"));
  for (const std::string& fusion : options.config.fusionBlacklists) {
    auto it = kFusionCounterparts.find(fusion);
    if (it == kFusionCounterparts.end()) {
      notes.push_back(fmt::format("[registry] fusion_blacklists: kiln has no counterpart of {}; "
                                  "nothing to disable",
                                  fusion));
      continue;
    }
    passes.erase(std::remove(passes.begin(), passes.end(), it->second), passes.end());
  }
  return passes;
}

Expected<Model> importModel(const std::string& path) {
  auto opened = openInputFile(path); // a folder or FIFO is refused here, never waited on
  if (!opened && opened.status().code() == ErrorCode::FileNotFound)
    return Status(ErrorCode::FileNotFound,
                  fmt::format("--modelFile={}: the model file does not exist", path),
                  "check the path passed to --modelFile")
        .withPeerCode("-600");
  if (!opened) return opened.status().withContext("--modelFile").withPeerCode("-600");
  if (std::filesystem::path(path).extension() == ".onnxtxt") return importOnnxTextFile(path);
  return importOnnxFile(path);
}

// --inputDataFormat=NHWC: each 4-D graph input takes NHWC data, transposed back
// to the NCHW the ONNX graph computes in (the lowering then cancels the
// transposes it can).
void makeInputsNhwc(Graph& graph) {
  for (Value* input : std::vector<Value*>(graph.inputs())) {
    if (input->isInitializer() || input->type().kind != TypeKind::Tensor) continue;
    const Shape& shape = input->shape();
    if (!shape.hasRank() || shape.rank() != 4) continue;
    std::vector<Use> uses = input->uses();
    Node* first = graph.nodes().empty() ? nullptr : graph.nodes().front().get();
    Node* transpose = graph.insertNodeBefore(first, "Transpose", {input},
                                             {graph.uniqueName(input->name() + "_nchw")});
    transpose->setAttribute("perm", Attribute::ofInts({0, 3, 1, 2}));
    Value* nchw = transpose->output(0);
    nchw->setType(input->type());
    for (const Use& use : uses)
      use.user->setInput(use.inputIndex, nchw);
    for (size_t i = 0; i < graph.outputs().size(); ++i)
      if (graph.outputs()[i] == input) graph.setOutput(i, nchw);
    ValueType type = input->type();
    type.shape = Shape({shape[0], shape[2], shape[3], shape[1]});
    input->setType(type);
  }
}

// --outputDataFormat=NHWC: each 4-D graph output is transposed NCHW → NHWC and
// keeps its name.
void makeOutputsNhwc(Graph& graph) {
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    Value* output = graph.outputs()[i];
    if (output->type().kind != TypeKind::Tensor) continue;
    const Shape shape = output->shape();
    if (!shape.hasRank() || shape.rank() != 4) continue;
    std::string name = output->name();
    graph.renameValue(output, graph.uniqueName(name + "_nchw"));
    Node* transpose = graph.appendNode("Transpose", {output}, {name});
    transpose->setAttribute("perm", Attribute::ofInts({0, 2, 3, 1}));
    Value* nhwc = transpose->output(0);
    nhwc->setType(
        ValueType::tensor(output->dtype(), Shape({shape[0], shape[2], shape[3], shape[1]})));
    graph.setOutput(i, nhwc);
  }
}

std::vector<UnsupportedOp> unsupportedOps(const Graph& graph, int64_t opset) {
  std::vector<UnsupportedOp> out;
  size_t position = 0;
  for (const auto& node : graph.nodes()) {
    ++position;
    std::string reason = msUnsupportedReason(*node, opset);
    if (!reason.empty())
      out.push_back({node->opType(), node->name(), reason, lowering::nodeLabel(*node, position)});
  }
  return out;
}

Status unsupportedStatus(const std::vector<UnsupportedOp>& ops) {
  std::vector<std::string> parts;
  for (const UnsupportedOp& op : ops)
    parts.push_back(fmt::format("{}: {}", op.label, op.reason));
  return Status(ErrorCode::MsLowerUnsupported,
                fmt::format("{} node(s) cannot be lowered to MindSpore Lite ops: {}", ops.size(),
                            fmt::join(parts, "; ")),
                "replace these ops in the exporter (kiln check MODEL --target "
                "ms lists them)")
      .withPeerCode("-300");
}

} // namespace

std::string msOutputPath(const std::string& outputFile) {
  const std::string ext = ".ms";
  if (outputFile.size() > ext.size() &&
      outputFile.compare(outputFile.size() - ext.size(), ext.size(), ext) == 0)
    return outputFile;
  return outputFile + ext;
}

std::string converterLiteUsage() {
  return "usage: converter_lite --fmk=ONNX --modelFile=MODEL.onnx "
         "--outputFile=OUT [options]\n"
         "Converts an ONNX model to a MindSpore Lite .ms file (kiln's drop-in; "
         "only --fmk=ONNX).\n"
         "  --fmk=ONNX                       source framework "
         "(TF|TFLITE|CAFFE|MINDIR are not read)\n"
         "  --modelFile=PATH                 input model (.onnx)\n"
         "  --outputFile=PATH                output; \".ms\" is appended "
         "unless it ends in .ms\n"
         "  --configFile=PATH                INI config ([common_quant_param] "
         "quant_type=WEIGHT_QUANT ...)\n"
         "  --fp16=on|off                    store float32 weights as float16 "
         "(default off)\n"
         "  --inputShape=\"in:1,3,224,224;...\" fix input shapes (names as in "
         "the model)\n"
         "  --inputDataFormat=NHWC|NCHW      layout of 4-D graph inputs "
         "(default: as the model)\n"
         "  --outputDataFormat=NHWC|NCHW     layout of 4-D graph outputs "
         "(default: as the model)\n"
         "  --inputDataType=DEFAULT          --outputDataType=DEFAULT   (other "
         "types: not supported)\n"
         "  --saveType=MINDIR_LITE           .ms output (MINDIR: not "
         "supported)\n"
         "  --optimize=none|general          general (default) runs fusions, "
         "none only the required passes\n"
         "  --optimizeTransformer=true|false accepted; no transformer fusions "
         "are run\n"
         "  --infer=true|false               run once on deterministic inputs "
         "before writing\n"
         "  --weightFile, --device, --trainModel, --decryptKey, --decryptMode, "
         "--encryptKey,\n"
         "  --encryption                     accepted for compatibility; "
         "values kiln cannot honour fail\n"
         "  --help                           this text\n"
         "Prints CONVERT RESULT SUCCESS:0, or CONVERT RESULT FAILED:<code> "
         "<description> and exits\n"
         "with the status code (e.g. -300 for unsupported ops).\n";
}

Expected<MsConvertOptions> parseConverterLiteArgs(const std::vector<std::string>& args,
                                                  bool& wantsHelp) {
  wantsHelp = false;
  for (const std::string& arg : args)
    if (arg == "--help" || arg == "-h") {
      wantsHelp = true;
      return MsConvertOptions{};
    }
  // MindSpore Lite 1.x took quantization as flags; today's converter_lite reads it from the
  // [common_quant_param] section of --configFile. Say so with the lines to write.
  {
    static const std::vector<std::pair<std::string, std::string>> legacy = {
        {"quantType", "quant_type"},
        {"bitNum", "bit_num"},
        {"quantWeightSize", "min_quant_weight_size"},
        {"quantWeightChannel", "min_quant_weight_channel"}};
    std::vector<std::string> flags, lines;
    for (const std::string& arg : args)
      for (const auto& [flag, key] : legacy) {
        if (arg.rfind("--" + flag, 0) != 0) continue;
        size_t eq = arg.find('=');
        if (arg.size() != flag.size() + 2 && eq != flag.size() + 2) continue;
        std::string value = eq == std::string::npos ? "" : arg.substr(eq + 1);
        if (flag == "quantType")
          value = value == "WeightQuant"    ? "WEIGHT_QUANT"
                  : value == "PostTraining" ? "FULL_QUANT"
                                            : value;
        flags.push_back("--" + flag);
        lines.push_back(fmt::format("{}={}", key, value.empty() ? "<value>" : value));
      }
    if (!flags.empty())
      return badFlag(
          fmt::format("{} {} MindSpore Lite 1.x flag(s); converter_lite now reads quantization "
                      "settings from the [common_quant_param] section of --configFile",
                      fmt::join(flags, ", "), flags.size() == 1 ? "is a" : "are"),
          fmt::format("drop {} and pass --configFile=FILE, FILE holding the lines "
                      "'[common_quant_param]', '{}'",
                      fmt::join(flags, " "), fmt::join(lines, "', '")));
  }
  std::vector<std::string> known;
  for (const FlagSpec& f : flagSpecs())
    known.push_back(f.name);
  std::vector<std::string> dashed;
  for (const std::string& name : known)
    dashed.push_back("--" + name);
  auto split = splitLiteFlags(
      args, known, fmt::format("converter_lite flags: {} (see --help)", fmt::join(dashed, ", ")),
      "-600", [&](const std::string& name, const std::string& value) -> Status {
        const FlagSpec& spec = *std::find_if(flagSpecs().begin(), flagSpecs().end(),
                                             [&](const FlagSpec& f) { return name == f.name; });
        if (!spec.values.empty() &&
            std::find_if(spec.values.begin(), spec.values.end(),
                         [&](const char* v) { return value == v; }) == spec.values.end())
          return badFlag(spec.illegal, fmt::format("--{}={} is not one of {}", name, value,
                                                   fmt::join(spec.values, ", ")));
        return Status::ok();
      });
  if (!split) return split.status();
  std::map<std::string, std::string> given = split.take();
  auto get = [&](const char* name, const std::string& fallback = "") {
    auto it = given.find(name);
    return it == given.end() ? fallback : it->second;
  };
  if (given.size() == 1 && given.count("configFile"))
    return notSupported("multi-model conversion (only --configFile given) is not supported by "
                        "kiln's converter_lite",
                        "pass --fmk=ONNX --modelFile=MODEL --outputFile=OUT");
  if (!given.count("fmk") || !given.count("modelFile") || !given.count("outputFile") ||
      get("modelFile").empty() || get("outputFile").empty())
    return badFlag("Flag missing. When in single model scenario, "
                   "fmk/modelFile/outputFile flags "
                   "are necessary",
                   "pass --fmk=ONNX --modelFile=MODEL.onnx --outputFile=OUT");

  MsConvertOptions options;
  options.fmk = get("fmk");
  if (options.fmk != "ONNX")
    return Status(
               ErrorCode::UnsupportedFormat,
               fmt::format("--fmk={}: kiln's converter_lite reads ONNX models only", options.fmk),
               "export the model to ONNX and pass --fmk=ONNX")
        .withPeerCode("-7");
  options.modelFile = get("modelFile");
  options.outputFile = get("outputFile");
  options.fp16 = get("fp16", "off") == "on";
  options.inputShape = get("inputShape");
  if (given.count("inputShape")) {
    auto spec = parseShapeSpec(options.inputShape, ShapeDialect::ConverterLite);
    if (!spec) return spec.status();
  }
  options.inputDataFormat = get("inputDataFormat");
  options.outputDataFormat = get("outputDataFormat");
  for (const char* flag : {"inputDataType", "outputDataType"})
    if (get(flag, "DEFAULT") != "DEFAULT")
      return notSupported(
          fmt::format("--{}={} is not supported by kiln's converter_lite", flag, get(flag)),
          fmt::format("drop --{} (graph I/O keep the model's types)", flag));
  options.saveType = get("saveType", "MINDIR_LITE");
  if (options.saveType == "MINDIR")
    return notSupported("--saveType=MINDIR (MindIR protobuf output) is not supported by kiln's "
                        "converter_lite",
                        "use --saveType=MINDIR_LITE (the default) for a .ms file");
  options.optimize = get("optimize", "general");
  const std::string& opt = options.optimize;
  if (opt != "none" && opt != "general") {
    if (opt == "gpu_oriented" || opt == "ascend_oriented" || opt.rfind("ascend_oriented:", 0) == 0)
      return notSupported(fmt::format("--optimize={} is not supported by kiln's converter_lite "
                                      "(it targets the CPU runtime)",
                                      opt),
                          "use --optimize=general or --optimize=none");
    return badFlag("INPUT ILLEGAL: optimize must be "
                   "none|general|gpu_oriented|ascend_oriented",
                   fmt::format("--optimize={} is not one of those", opt));
  }
  if (given.count("device"))
    return notSupported(fmt::format("--device={} is not supported by kiln's converter_lite (it "
                                    "writes models for the CPU runtime)",
                                    get("device")),
                        "drop --device");
  if (get("trainModel", "false") == "true")
    return badFlag("--trainModel=true needs a MINDIR training model; "
                   "--fmk=ONNX models are "
                   "converted for inference",
                   "drop --trainModel");
  if (!get("decryptKey").empty())
    return badFlag("--decryptKey applies to encrypted MINDIR models; an ONNX model is not "
                   "encrypted",
                   "drop --decryptKey");
  if (!get("encryptKey").empty() || get("encryption", "false") == "true")
    return notSupported("model encryption (--encryptKey / --encryption=true) "
                        "is not supported by "
                        "kiln's converter_lite",
                        "drop --encryptKey and --encryption");
  if (!get("weightFile").empty())
    return badFlag("--weightFile is for CAFFE models (.caffemodel); an ONNX "
                   "model holds its weights",
                   "drop --weightFile");
  options.infer = get("infer", "false") == "true";
  options.optimizeTransformer = get("optimizeTransformer", "false") == "true";
  options.configFile = get("configFile");
  if (given.count("configFile")) {
    if (options.configFile.empty())
      return badFlag("--configFile= is empty", "pass the path of the INI config file");
    KILN_ASSIGN_OR_RETURN(options.config, parseConverterConfigFile(options.configFile));
  }
  return options;
}

namespace {

// FULL_QUANT: calibrates the simplified float model (batch norms folded, so the weights quantized
// are the ones the target runs) on the config's calibration folders and rewrites it into the
// full-integer QDQ form, every Conv / MatMul / Gemm between codes; the conversion pipeline's
// fuse-qdq then makes them integer ops. Returns whether the graph changed.
Expected<bool> fullQuantize(Model& model, const ConverterConfig& config,
                            std::vector<std::string>& notes) {
  KILN_ASSIGN_OR_RETURN(CalibrationData data,
                        CalibrationData::fromInputFolders(
                            *model.graph, config.calibratePath,
                            "[data_preprocess_param] calibrate_path",
                            config.calibrateInputType == "IMAGE" ? &config.image : nullptr));
  QdqOptions options;
  const std::string& method = config.activationQuantMethod;
  options.calibration.method = method == "KL"                ? CalibrationMethod::Entropy
                               : method == "REMOVAL_OUTLIER" ? CalibrationMethod::Percentile
                               : method == "MSE"             ? CalibrationMethod::Mse
                                                             : CalibrationMethod::MinMax;
  options.calibration.maxSamples = config.calibrateSize;
  // Calibration statistics do not depend on the thread count (tested), so use the machine.
  options.calibration.threads =
      static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  options.quantizeOutputs = true;
  options.constantWeightsOnly = true;
  options.exclude = config.skipQuantNode;
  options.perChannelWeights = config.fullQuantPerChannel;
  options.equalizeChannels = config.equalizeChannels;
  options.biasCorrection = config.fullQuantBiasCorrection;
  options.targetCosine = config.targetCosine;
  // What converter_lite would not read: say so, so a config that also goes to converter_lite is
  // not taken for one that behaves the same there.
  if (method == "MSE")
    notes.push_back("FULL_QUANT: activation_quant_method=MSE is kiln's extension (converter_lite "
                    "takes MAX_MIN, KL or REMOVAL_OUTLIER)");
  for (const char* key : {"kiln_equalize_channels", "kiln_target_cosine"})
    if (config.has("full_quant_param", key))
      notes.push_back(fmt::format("FULL_QUANT: [full_quant_param] {} is kiln's extension "
                                  "(converter_lite has no such key)",
                                  key));
  KILN_ASSIGN_OR_RETURN(QdqReport report, quantizeToQdq(model, data, options));
  for (std::string& note : report.notes)
    notes.push_back("FULL_QUANT: " + note);
  if (report.equalizedTensors)
    notes.push_back(fmt::format("FULL_QUANT: channel equalization rescaled {} tensor(s) "
                                "(kiln_equalize_channels=false turns it off)",
                                report.equalizedTensors));
  if (options.biasCorrection)
    notes.push_back(
        fmt::format("FULL_QUANT: bias correction shifted {} int32 bias(es) to cancel the mean "
                    "error of their int8 weights (bias_correction=false turns it off)",
                    report.correctedBiases));
  if (report.cosine)
    notes.push_back(fmt::format("FULL_QUANT: kiln_target_cosine={}: {} node(s) kept float, worst "
                                "output cosine {:.6f} on the first calibration samples{}{}",
                                *config.targetCosine, report.keptFloat.size(), *report.cosine,
                                report.keptFloat.empty() ? "" : ": ",
                                fmt::join(report.keptFloat, ",")));
  const CalibrationResult& c = report.calibration;
  notes.push_back(
      fmt::format("FULL_QUANT: calibrated {} on {} sample(s) in {:.2f} s ({:.3f} s per sample); {} "
                  "Conv/MatMul/Gemm quantized, {} skipped",
                  method, c.samples, c.seconds, c.samples ? c.seconds / double(c.samples) : 0.0,
                  report.quantizedNodes, report.excludedNodes));
  return report.quantizedNodes > 0;
}

// quant_type=DYNAMIC_QUANT: int8 MatMul / Gemm weights and Gather tables (quantize-weights) and the
// writer's DynamicQuant + int8 MatMulFusion; false for other quant types.
bool dynamicQuantFor(const ConverterConfig& config, WeightQuantOptions& weightQuant,
                     MsWriteOptions::DynamicQuant& mode) {
  bool perRow = false;
  if (!dynamicQuantOptionsFor(config, weightQuant, perRow)) return false;
  mode = perRow ? MsWriteOptions::DynamicQuant::ActivationChannelWeightLayer
                : MsWriteOptions::DynamicQuant::ActivationLayerWeightChannel;
  return true;
}

Status convertImpl(const MsConvertOptions& options, MsConvertReport* report) {
  MsConvertReport local;
  MsConvertReport& out = report ? *report : local;
  out = MsConvertReport{};
  out.outputPath = msOutputPath(options.outputFile);
  if (options.fmk != "ONNX")
    return Status(
               ErrorCode::UnsupportedFormat,
               fmt::format("--fmk={}: kiln's converter_lite reads ONNX models only", options.fmk),
               "export the model to ONNX and pass --fmk=ONNX")
        .withPeerCode("-7");
  KILN_ASSIGN_OR_RETURN(Model model, importModel(options.modelFile));

  std::optional<ShapeSpec> spec;
  if (!options.inputShape.empty()) {
    KILN_ASSIGN_OR_RETURN(spec, parseShapeSpec(options.inputShape, ShapeDialect::ConverterLite));
  }
  out.notes = ignoredConfigNotes(options.config);
  if (options.optimizeTransformer)
    out.notes.push_back("--optimizeTransformer=true: kiln has no transformer fusions; the "
                        "general pipeline runs");
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> passes, passesFor(options, out.notes));
  WeightQuantOptions weightQuant;
  MsWriteOptions::DynamicQuant dynamicQuant = MsWriteOptions::DynamicQuant::Off;
  const bool quantizeWeights = weightQuantOptionsFor(options.config, weightQuant) ||
                               dynamicQuantFor(options.config, weightQuant, dynamicQuant);
  ConversionOptions conversion;
  conversion.simplifyPasses = passes;
  conversion.target = "ms";
  conversion.inputShapes = spec ? &*spec : nullptr;
  conversion.afterSimplify = [&](Model& m) -> Expected<bool> {
    bool changed = false;
    if (options.config.quantType == "FULL_QUANT") {
      KILN_ASSIGN_OR_RETURN(changed, fullQuantize(m, options.config, out.notes));
    }
    if (options.inputDataFormat == "NHWC") makeInputsNhwc(*m.graph);
    if (options.outputDataFormat == "NHWC") makeOutputsNhwc(*m.graph);
    // A layout change at the borders needs no settling; new quantize ops do.
    return changed;
  };
  conversion.weightQuant = quantizeWeights ? &weightQuant : nullptr;
  KILN_ASSIGN_OR_RETURN(PipelineResult result, runConversionPipeline(model, conversion));
  out.notes.insert(out.notes.end(), result.notes.begin(), result.notes.end());

  out.unsupported = unsupportedOps(*model.graph, model.opsetVersion(""));
  if (!out.unsupported.empty()) return unsupportedStatus(out.unsupported);

  // The precision guard's check (docs/precision.md) of what --fp16=on does: the weights rounded
  // to fp16, arithmetic in fp32. Only a miss is said; the writer rounds every float weight, so
  // there is no per-node keep here.
  if (options.fp16 && precisionGuardMode() != PrecisionGuardMode::Off) {
    PrecisionOptions weightsOnly;
    weightsOnly.mode = PrecisionMode::WeightsOnlyFp16;
    PrecisionGuardOptions guardOptions;
    guardOptions.mode = PrecisionGuardMode::Check;
    PrecisionGuardResult guard = guardFp16Precision(model, weightsOnly, guardOptions);
    for (std::string& note : guard.notes)
      if (note.rfind("precision guard: not run", 0) != 0) out.notes.push_back(std::move(note));
  }

  if (options.infer) {
    // converter_lite's --infer runs the converted model once; dynamic inputs
    // skip it as there.
    bool dynamic = false;
    for (const Value* in : model.graph->inputs())
      dynamic |= !in->isInitializer() && !in->shape().isStatic();
    if (dynamic) {
      out.notes.push_back("--infer=true: skipped, the model has dynamic input shapes");
    } else {
      KILN_ASSIGN_OR_RETURN(auto feeds, makeDeterministicInputs(*model.graph, 1));
      rt::Executor executor(model);
      KILN_TRY(executor.checkSupported());
      auto run = executor.run(feeds);
      if (!run) return run.status();
    }
  }

  if (options.fp16) {
    // Say what --fp16=on changed: weights that are float16 already keep the file's size.
    size_t half = 0, single = 0;
    for (const Value* v : model.graph->initializers()) {
      if (v->dtype() == DType::Float16) ++half;
      if (v->dtype() == DType::Float32) ++single;
    }
    for (const Value* v : model.graph->initializers()) {
      if (v->dtype() != DType::Float32) continue;
      float most = 0;
      for (float x : v->initializer().copyValues<float>())
        if (std::isfinite(x)) most = std::max(most, std::fabs(x));
      if (most > 65504.0f)
        out.notes.push_back(fmt::format("--fp16=on: weight '{}' stays float32: max |w| = {} is "
                                        "beyond float16's 65504",
                                        v->name(), most));
    }
    if (half)
      out.notes.push_back(fmt::format(
          "--fp16=on: {} float weight(s) were float16 already and stay so; {} float32 "
          "weight(s) stored as float16{}",
          half, single, single ? "" : ", so the file keeps the size of the given weights"));
  }
  MsWriteOptions write;
  write.fp16Weights = options.fp16;
  write.weightQuantBits = quantizeWeights ? weightQuant.bitNum : 0;
  // enable_encode belongs to weight quant ([common_quant_param]): without it, weights the model
  // brought as 8-bit codes (quantized ops, DequantizeLinear) are stored plain, not searched for a
  // smaller INDEXING / SPARSE stream.
  write.encodeWeights = quantizeWeights && options.config.enableEncode;
  write.dynamicQuant = dynamicQuant;
  // The dynamic int8 kernel reads its weight codes plain.
  if (dynamicQuant != MsWriteOptions::DynamicQuant::Off) write.encodeWeights = false;
  KILN_TRY(writeMsFile(model, write, out.outputPath));
  std::error_code ec;
  out.bytes = std::filesystem::file_size(out.outputPath, ec);
  return Status::ok();
}

} // namespace

Status convertToMs(const MsConvertOptions& options, MsConvertReport* report) {
  Status status = convertImpl(options, report);
  // Every failure carries converter_lite's numeric status (not, say, ATC's code for a shape spec).
  if (!status) status = status.withPeerCode(std::to_string(msStatusCode(status)));
  return status;
}

int msStatusCode(const Status& status) {
  if (status.isOk()) return 0;
  const std::string& peer = status.peerCode();
  if (!peer.empty() && (peer[0] == '-' || std::isdigit(static_cast<unsigned char>(peer[0]))))
    return std::atoi(peer.c_str());
  int code = static_cast<int>(status.code());
  if (status.code() == ErrorCode::MsLowerUnsupported) return -300;
  if (status.code() == ErrorCode::MsLowerBadAttribute) return -302;
  if (status.code() == ErrorCode::MsLowerDynamicShape) return -500; // "Failed to infer shape."
  if (status.code() == ErrorCode::FileNotFound) return -600;
  if (code >= 2000 && code < 3000) return -200; // the ONNX model does not parse
  if (code >= 4000 && code < 4300) return -600; // flags, shape specs, precision config
  if (status.code() == ErrorCode::ConverterConfigInvalid) return -600;
  return -1;
}

std::string msStatusDescription(int code) {
  static const std::map<int, const char*> descriptions = {
      {0, "No error occurs."},
      {-1, "Common error code."},
      {-2, "NULL pointer returned."},
      {-3, "Invalid parameter."},
      {-4, "No change."},
      {-5, "No error but exit."},
      {-6, "Fail to create memory."},
      {-7, "Fail to support."},
      {-8, "Thread pool error."},
      {-100, "Failed to check range."},
      {-101, "Failed to check input tensor."},
      {-102, "Exist executor running."},
      {-200, "Failed to verify graph file."},
      {-300, "Failed to find operator."},
      {-301, "Invalid operator name."},
      {-302, "Invalid operator attr."},
      {-303, "Failed to execution operator."},
      {-400, "Failed to checking tensor format."},
      {-500, "Failed to infer shape."},
      {-501, "Invalid infer shape before runtime."},
      {-600, "Invalid input param by user."},
  };
  auto it = descriptions.find(code);
  return it == descriptions.end() ? "Unknown error code." : it->second;
}

} // namespace kiln
