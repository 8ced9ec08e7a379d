// `kiln` command line: thin front-end over the kiln library (flags → one library call).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <malloc.h>

#include <CLI/CLI.hpp>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "kiln/backends/aipp.h"
#include "kiln/backends/converter_config.h"
#include "kiln/backends/ms.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/backends/om.h"
#include "kiln/backends/target.h"
#include "kiln/check.h"
#include "kiln/compare.h"
#include "kiln/conformance.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/value_io.h"
#include "kiln/inspect.h"
#include "kiln/ir/printer.h"
#include "kiln/lower.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/precision_report.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"
#include "kiln/sensitivity.h"
#include "kiln/shape_spec.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/display.h"
#include "kiln/support/exception_status.h"
#include "kiln/support/input_file.h"
#include "kiln/support/json_text.h"
#include "kiln/support/progress.h"
#include "kiln/support/suggest.h"
#include "kiln/support/version.h"
#include "kiln/tensor_files.h"

namespace {

int report(const kiln::Status& status) {
  std::fprintf(stderr, "kiln: error %s\n", status.toString().c_str());
  return 1;
}

struct RunFlags {
  std::string model;
  std::vector<std::string> inputs;
  std::string outputDir;
  bool captureAll = false;
  std::vector<std::string> capture;
  int threads = 1;
  int repeat = 1;
  bool profile = false;
  bool noFuse = false;
  std::string inputList;
};

std::string fileNameFor(const std::string& valueName) {
  std::string out;
  for (char c : valueName)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out + ".pb";
}

kiln::Status writeValues(const std::filesystem::path& dir,
                         const std::map<std::string, kiln::rt::RtValue>& values) {
  KILN_TRY(kiln::makeOutputFolder(dir.string()));
  for (const auto& [name, value] : values)
    KILN_TRY(kiln::writeValueFile((dir / fileNameFor(name)).string(), name, value));
  return kiln::Status::ok();
}

// Reads NAME=FILE.pb specs into feeds; a relative FILE is taken from `base` when it is given
// (an --input-list's folder). `flag` names where the specs came from in errors.
kiln::Expected<std::map<std::string, kiln::rt::RtValue>>
readFeeds(const kiln::Model& model, const std::vector<std::string>& specs, const std::string& flag,
          const std::filesystem::path& base) {
  std::map<std::string, kiln::rt::RtValue> feeds;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return kiln::Status(kiln::ErrorCode::BadFlag,
                          fmt::format("{}: '{}' is not NAME=FILE.pb", flag, spec),
                          "write x=input_0.pb, once per graph input");
    std::string name = spec.substr(0, eq);
    const kiln::Value* target = nullptr;
    for (const kiln::Value* in : model.graph->inputs())
      if (in->name() == name) target = in;
    if (!target)
      return kiln::Status(kiln::ErrorCode::BadFlag,
                          fmt::format("{}: '{}' is not a graph input", flag, name),
                          "see `kiln inspect` for the input names");
    std::filesystem::path file = spec.substr(eq + 1);
    if (!base.empty() && file.is_relative()) file = base / file;
    auto value = kiln::readValueFile(file.string(), target->type());
    if (!value) return value.status();
    feeds[name] = value.take();
  }
  return feeds;
}

int runModel(const RunFlags& flags) {
  // A run allocates and frees tensors of several MB per op. With glibc's defaults these are
  // mmapped or trimmed back to the kernel on free and page-faulted in, zero-filled, on the next
  // op; keeping them in the heap cuts PP-OCR det's run time by about a quarter (bench/results.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, -1); // never trim
  if (!flags.inputList.empty() && (!flags.inputs.empty() || flags.repeat > 1))
    return report(kiln::Status(
        kiln::ErrorCode::BadFlag, "--input-list cannot be combined with --input or --repeat",
        "put every input set in the list, one line each; time one set with --input and --repeat"));
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  // The input sets: the --input flags, or one per line of --input-list.
  std::vector<std::map<std::string, kiln::rt::RtValue>> feedSets;
  if (flags.inputList.empty()) {
    auto feeds = readFeeds(*model, flags.inputs, "--input", {});
    if (!feeds) return report(feeds.status());
    feedSets.push_back(feeds.take());
  } else {
    std::ifstream list(flags.inputList);
    if (!list)
      return report(kiln::Status(kiln::ErrorCode::BadFlag,
                                 fmt::format("--input-list: cannot read '{}'", flags.inputList),
                                 "give a text file with one line of NAME=FILE.pb per input set"));
    const std::filesystem::path base = std::filesystem::path(flags.inputList).parent_path();
    std::string line;
    for (int number = 1; std::getline(list, line); ++number) {
      std::istringstream words(line);
      std::vector<std::string> specs;
      for (std::string word; words >> word;)
        specs.push_back(word);
      if (specs.empty() || specs.front().front() == '#') continue;
      auto feeds = readFeeds(*model, specs,
                             fmt::format("--input-list {}:{}", flags.inputList, number), base);
      if (!feeds) return report(feeds.status());
      feedSets.push_back(feeds.take());
    }
    if (feedSets.empty())
      return report(
          kiln::Status(kiln::ErrorCode::BadFlag,
                       fmt::format("--input-list: '{}' holds no input set", flags.inputList),
                       "write one line of NAME=FILE.pb per input set"));
  }
  // A misspelt --capture name would otherwise write nothing and exit 0.
  std::function<bool(const kiln::Graph&, const std::string&)> holds = [&](const kiln::Graph& g,
                                                                          const std::string& name) {
    if (g.findLocalValue(name)) return true;
    for (const auto& node : g.nodes())
      for (const kiln::Graph* sub : node->subgraphs())
        if (holds(*sub, name)) return true;
    return false;
  };
  for (const std::string& name : flags.capture)
    if (!holds(*model->graph, name))
      return report(kiln::Status(kiln::ErrorCode::BadFlag,
                                 fmt::format("--capture: no value named '{}'", name),
                                 "see `kiln inspect --ir` for value names"));
  kiln::rt::ExecutorOptions options;
  options.threads = flags.threads;
  options.captureIntermediates = flags.captureAll;
  options.captureNames = flags.capture;
  options.profile = flags.profile;
  options.fuse = !flags.noFuse;
  // One run keeps nothing for a next one: constant results are then released after their last
  // use instead of staying resident (a .ms LLM's weights, dequantized at load, would all stay).
  options.cacheConstants = flags.repeat > 1 || feedSets.size() > 1;
  kiln::rt::Executor executor(*model, options);
  if (auto status = executor.checkSupported(); !status) return report(status);
  // One executor serves every set of an --input-list: the model is loaded and planned once, so
  // hundreds of small inputs cost their runs, not hundreds of tool starts.
  std::vector<double> millis;
  std::optional<kiln::rt::RunResult> result;
  for (size_t set = 0; set < feedSets.size(); ++set) {
    for (int i = 0; i < flags.repeat; ++i) {
      result.reset(); // the previous run's outputs are not kept while the next one runs
      auto start = std::chrono::steady_clock::now();
      auto run = executor.run(feedSets[set]);
      millis.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
      if (!run) return report(run.status());
      result = run.take();
    }
    std::filesystem::path dir = flags.outputDir;
    if (!flags.inputList.empty()) dir /= std::to_string(set);
    std::map<std::string, kiln::rt::RtValue> outputs;
    for (size_t i = 0; i < result->outputs.size(); ++i)
      outputs[model->graph->outputs()[i]->name()] = result->outputs[i];
    if (auto status = writeValues(dir, outputs); !status) return report(status);
    if (flags.inputList.empty())
      std::cout << "kiln: wrote " << outputs.size() << " output(s) to " << dir.string() << "\n";
    if (!result->captured.empty()) {
      if (auto status = writeValues(dir / "intermediates", result->captured); !status)
        return report(status);
      std::cout << "kiln: wrote " << result->captured.size() << " captured tensor(s) to "
                << (dir / "intermediates").string() << "\n";
    }
  }
  if (!flags.inputList.empty())
    std::cout << "kiln: ran " << feedSets.size() << " input set(s); outputs in " << flags.outputDir
              << "/0 .. " << feedSets.size() - 1 << "\n";
  if (flags.profile) {
    std::vector<std::pair<std::string, kiln::rt::OpProfile>> ops(result->profile.begin(),
                                                                 result->profile.end());
    std::sort(ops.begin(), ops.end(),
              [](const auto& a, const auto& b) { return a.second.millis > b.second.millis; });
    std::cout << fmt::format("{:<24} {:>10} {:>8}  (last run)\n", "op", "ms", "calls");
    for (const auto& [op, p] : ops)
      std::cout << fmt::format("{:<24} {:>10.2f} {:>8}\n", op, p.millis, p.calls);
    const auto memory = executor.memoryStats();
    std::cout << fmt::format(
        "kiln: buffer pool {:.1f} MiB (peak in use {:.1f} MiB), {} of {} allocations reused; "
        "fp16 weights widened once: {:.1f} MiB; {} constant node(s) computed once: {:.1f} MiB; "
        "planned arena {:.1f} MiB (first run's peak in use {:.1f} MiB), {} buffers served from it, "
        "{} run(s) left the plan\n",
        memory.pooledBytes / 1048576.0, memory.peakLiveBytes / 1048576.0, memory.reused,
        memory.requests, memory.widenedWeightBytes / 1048576.0, memory.constantNodes,
        memory.constantBytes / 1048576.0, memory.arenaBytes / 1048576.0,
        memory.recordedPeakBytes / 1048576.0, memory.arenaServed, memory.divergedRuns);
  }
  if (flags.repeat > 1) {
    std::sort(millis.begin(), millis.end());
    double sum = 0;
    for (double m : millis)
      sum += m;
    std::cout << fmt::format(
        "kiln: run time over {} runs: min {:.2f} ms, median {:.2f} ms, mean {:.2f} ms\n",
        millis.size(), millis.front(), millis[millis.size() / 2], sum / millis.size());
  }
  return 0;
}

int convertModel(const std::string& path, const std::string& output,
                 const std::vector<std::string>& expose, const std::string& to, bool fp16) {
  auto model = kiln::loadModel(path);
  if (!model) return report(model.status());
  for (const std::string& name : expose) {
    kiln::Value* value = model->graph->findLocalValue(name);
    if (!value)
      return report(kiln::Status(kiln::ErrorCode::BadFlag,
                                 fmt::format("--expose: no value named '{}'", name),
                                 "see `kiln inspect --ir` for value names"));
    if (!value->isGraphOutput()) model->graph->addOutput(value);
  }
  if (to == "ms") {
    kiln::ConversionOptions conversion;
    conversion.target = "ms";
    if (auto result = kiln::runConversionPipeline(*model, conversion); !result)
      return report(result.status());
    kiln::MsWriteOptions options;
    options.fp16Weights = fp16;
    if (auto status = kiln::writeMsFile(*model, options, output); !status) return report(status);
    std::cout << "kiln: wrote " << output << "\n";
    return 0;
  }
  if (auto status = kiln::writeOnnxFile(*model, output); !status) return report(status);
  std::cout << "kiln: wrote " << output << " (" << model->graph->nodeCount() << " nodes)\n";
  return 0;
}

struct CompareFlags {
  std::string reference;
  std::string candidate;
  std::vector<std::string> inputs;
  std::string inputShape;
  uint32_t seed = 1;
  bool json = false;
  bool perTensor = false;
  double minCosine = 0.999;
};

kiln::Expected<std::map<std::string, kiln::rt::RtValue>>
readFeeds(const kiln::Graph& graph, const std::vector<std::string>& specs) {
  std::map<std::string, kiln::rt::RtValue> feeds;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    if (eq == std::string::npos || eq == 0)
      return kiln::Status(kiln::ErrorCode::BadFlag,
                          fmt::format("--input '{}' is not NAME=FILE.pb", spec),
                          "write --input x=input_0.pb");
    std::string name = spec.substr(0, eq);
    const kiln::Value* target = nullptr;
    for (const kiln::Value* in : graph.inputs())
      if (in->name() == name) target = in;
    if (!target)
      return kiln::Status(kiln::ErrorCode::BadFlag,
                          fmt::format("--input: '{}' is not a graph input", name),
                          "see `kiln inspect` for the input names");
    KILN_ASSIGN_OR_RETURN(feeds[name], kiln::readValueFile(spec.substr(eq + 1), target->type()));
  }
  return feeds;
}

int compareCommand(const CompareFlags& flags) {
  auto reference = kiln::loadModel(flags.reference);
  if (!reference) return report(reference.status());
  auto candidate = kiln::loadModel(flags.candidate);
  if (!candidate) return report(candidate.status());
  // An AIPP .om takes a uint8 image: the reference gets the same preprocessing first.
  auto aipp = kiln::applyArtifactAipp(*reference, *candidate);
  if (!aipp) return report(aipp.status());
  if (!aipp->empty()) std::cerr << "kiln: " << *aipp << "\n";
  std::map<std::string, kiln::rt::RtValue> feeds;
  if (!flags.inputs.empty()) {
    auto read = readFeeds(*reference->graph, flags.inputs);
    if (!read) return report(read.status());
    feeds = read.take();
  } else {
    // Generated inputs need static shapes: fix them on the reference's inputs first, from
    // --input-shape or else from the shapes the converted artifact was made with.
    std::optional<kiln::ShapeSpec> spec;
    if (!flags.inputShape.empty()) {
      auto parsed = kiln::parseShapeSpec(flags.inputShape, kiln::ShapeDialect::Atc);
      if (!parsed) return report(parsed.status());
      spec = parsed.take();
    } else if ((spec = kiln::inputShapesFromArtifact(*reference->graph, *candidate))) {
      std::vector<std::string> entries;
      for (const auto& entry : spec->inputs)
        entries.push_back(entry.text);
      std::cerr << fmt::format("kiln: input shapes from {}: {}\n", flags.candidate,
                               fmt::join(entries, ";"));
    }
    if (spec) {
      kiln::PipelineOptions options;
      options.inputShapes = &*spec;
      auto fixed = kiln::runPipeline(*reference, {"fix-input-shapes"}, options);
      if (!fixed) return report(fixed.status());
    }
    auto made = kiln::makeDeterministicInputs(*reference->graph, flags.seed);
    if (!made) return report(made.status());
    feeds = made.take();
  }
  if (flags.perTensor) {
    // Known shapes size the capture batches (compareTensors); a model shape inference cannot
    // follow still compares, in smaller batches.
    if (auto inferred = kiln::runPipeline(*reference, {"infer-shapes"}, {}); !inferred)
      spdlog::debug("per-tensor compare: shape inference on the reference failed: {}",
                    inferred.status().message());
    auto tensors = kiln::compareTensors(*reference, *candidate, feeds, flags.minCosine);
    if (!tensors) return report(tensors.status());
    const kiln::PerTensorReport& perTensor = *tensors;
    std::cout << fmt::format("{:<40} {:<20} {:>12} {:>14} {:>12}\n", "tensor", "op", "cosine",
                             "mean_rel_err", "max_abs_err");
    for (const auto& t : perTensor.tensors)
      std::cout << fmt::format("{:<40} {:<20} {:>12.8f} {:>14.3e} {:>12.3e}\n", t.name, t.opType,
                               t.metrics.cosine, t.metrics.meanRelativeError,
                               t.metrics.maxAbsError);
    if (perTensor.firstDivergent >= 0) {
      const auto& t = perTensor.tensors[static_cast<size_t>(perTensor.firstDivergent)];
      std::string producer = t.node.empty() ? fmt::format("the unnamed node producing '{}'", t.name)
                                            : fmt::format("node '{}'", t.node);
      std::cout << fmt::format(
          "first divergent tensor: '{}' (cosine {:.6f} < {}) produced by {} ({})\n", t.name,
          t.metrics.cosine, flags.minCosine, producer, t.opType);
      return 1;
    }
    std::cout << fmt::format("no tensor diverges (all {} compared tensors have cosine >= {})\n",
                             perTensor.tensors.size(), flags.minCosine);
    return 0;
  }
  auto result = kiln::compareModels(*reference, *candidate, feeds);
  if (!result) return report(result.status());
  if (flags.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& o : *result)
      out.push_back({{"output", o.name},
                     {"shape", o.dims},
                     {"cosine", o.metrics.cosine},
                     {"mean_relative_error", o.metrics.meanRelativeError},
                     {"max_abs_error", o.metrics.maxAbsError},
                     {"sqnr_db", std::isinf(o.metrics.sqnrDb) ? nlohmann::json("inf")
                                                              : nlohmann::json(o.metrics.sqnrDb)}});
    std::cout << kiln::jsonText(out, 2) << "\n";
  } else {
    std::cout << fmt::format("{:<32} {:>12} {:>14} {:>14} {:>10}\n", "output", "cosine",
                             "mean_rel_err", "max_abs_err", "sqnr_db");
    for (const auto& o : *result)
      std::cout << fmt::format("{:<32} {:>12.8f} {:>14.3e} {:>14.3e} {:>10.2f}\n", o.name,
                               o.metrics.cosine, o.metrics.meanRelativeError, o.metrics.maxAbsError,
                               o.metrics.sqnrDb);
  }
  // NaN / Inf where the reference is finite is a failed comparison, however the metrics read.
  for (const auto& o : *result)
    if (o.metrics.nonFinite)
      return report(kiln::Status(
          kiln::ErrorCode::CompareNonFinite,
          fmt::format("output '{}': {} of {} values are NaN or Inf where the reference is finite",
                      o.name, o.metrics.nonFiniteCount, o.metrics.elements),
          "kiln compare --per-tensor names the first tensor that goes non-finite; keep it in "
          "float32 (--keep_dtype / mixed precision) or clip the weights"));
  return 0;
}

struct CheckFlags {
  std::string model;
  kiln::CheckOptions options;
  std::string shapeDialect = "atc";
  std::string jsonPath;
};

int checkCommand(CheckFlags& flags) {
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  flags.options.converterLiteDialect = flags.shapeDialect == "lite";
  auto result = kiln::checkModel(*model, flags.options);
  if (!result) return report(result.status());
  std::cout << result->toText();
  if (!flags.jsonPath.empty())
    if (auto status = kiln::writeFileAtomically(flags.jsonPath, result->toJson()); !status)
      return report(status);
  return result->ok() ? 0 : 1;
}

struct LowerFlags {
  std::string model;
  kiln::LowerOptions options;
};

int lowerCommand(LowerFlags& flags) {
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  auto text = kiln::lowerToText(*model, flags.options);
  if (!text) return report(text.status());
  std::cout << *text;
  return 0;
}

struct OptFlags {
  std::string model;
  std::vector<std::string> passes;
  std::string pipeline;
  std::string printIrAfter;
  bool printPassStats = false;
  bool explain = false;
  std::string output;
  std::string inputShape;
  std::string shapeDialect = "atc";
  std::string precisionMode;
  std::vector<std::string> keepDtypeNodes;
  std::string keepDtypeFile;
  std::string precisionReport;
  std::vector<std::string> sampleInputs; // --input NAME=FILE.pb: data for the activation ranges
  std::vector<std::string> inputFp16Nodes;
  std::string outputType = "FP32";
  int weightQuantBits = 0;
  kiln::WeightQuantOptions weightQuant;
  std::string insertOpConf; // AIPP configuration inserted after the passes
};

const std::map<std::string, kiln::PrecisionMode>& precisionModes() {
  static const std::map<std::string, kiln::PrecisionMode> modes = {
      {"force_fp16", kiln::PrecisionMode::ForceFp16},
      {"allow_fp32_to_fp16", kiln::PrecisionMode::AllowFp32ToFp16},
      {"allow_mix_precision", kiln::PrecisionMode::AllowMixPrecision},
      {"must_keep_origin_dtype", kiln::PrecisionMode::KeepOrigin},
      {"force_fp32", kiln::PrecisionMode::ForceFp32},
      {"fp16_weights", kiln::PrecisionMode::WeightsOnlyFp16},
  };
  return modes;
}

struct SensitivityFlags {
  std::string model;
  std::vector<std::string> inputs;
  std::string inputShape;
  uint32_t seed = 1;
  std::string precisionMode; // FP16 variant
  std::string keepDtypeFile; // the user's own keep list
  std::string config;        // converter_lite config (weight quant variant)
  int weightQuantBits = 0;   // weight quant without a config: converter_lite's defaults
  std::optional<double> targetCosine;
  std::optional<double> targetMrePercent;
  std::string writeKeepDtype;
  std::string writeConfig;
  size_t top = 20;
  bool json = false;
  size_t threads = 0;                  // 0: one per CPU, at most 8
  std::optional<uint64_t> maxStoredMb; // hidden: 0 checks the kept-tensor path against full runs
};

int sensitivityCommand(const SensitivityFlags& flags) {
  using kiln::ErrorCode;
  using kiln::Status;
  const bool fp16 = !flags.precisionMode.empty();
  const bool quant = !flags.config.empty() || flags.weightQuantBits > 0;
  if (fp16 == quant)
    return report(Status(ErrorCode::BadFlag,
                         "give either --precision-mode (FP16) or --config / --weight-quant-bits "
                         "(weight quantization)",
                         "pick the conversion whose sensitivity you want"));
  if (flags.targetCosine && flags.targetMrePercent)
    return report(Status(ErrorCode::BadFlag, "--target-cosine and --target-mre exclude each other",
                         "give one target"));
  if (!flags.writeKeepDtype.empty() && !fp16)
    return report(Status(ErrorCode::BadFlag, "--write-keep-dtype needs --precision-mode",
                         "use --write-config for weight quantization"));
  if (!flags.writeConfig.empty() && !quant)
    return report(Status(ErrorCode::BadFlag, "--write-config needs --config or --weight-quant-bits",
                         "use --write-keep-dtype for FP16"));
  if ((!flags.writeKeepDtype.empty() || !flags.writeConfig.empty()) && !flags.targetCosine &&
      !flags.targetMrePercent)
    return report(Status(ErrorCode::BadFlag, "writing a keep list needs a target",
                         "add --target-cosine or --target-mre"));

  // Each trial's executor allocates and frees the model's tensors again: kept in the heap rather
  // than unmapped and page-faulted back in (as `kiln run` does, runModel).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, -1);
  kiln::SensitivityOptions options;
  options.variant = fp16 ? kiln::SensitivityVariant::Fp16 : kiln::SensitivityVariant::WeightQuant;
  std::string configText;
  if (fp16) {
    options.precision.mode = precisionModes().at(flags.precisionMode);
    if (!flags.keepDtypeFile.empty()) {
      auto entries = kiln::readKeepDtypeFile(flags.keepDtypeFile);
      if (!entries) return report(entries.status());
      options.precision.keepNodeNames = *entries;
    }
  } else if (!flags.config.empty()) {
    auto config = kiln::parseConverterConfigFile(flags.config);
    if (!config) return report(config.status());
    if (!kiln::weightQuantOptionsFor(*config, options.weightQuant))
      return report(Status(ErrorCode::BadFlag,
                           fmt::format("{} asks for no weight quantization", flags.config),
                           "set [common_quant_param] quant_type=WEIGHT_QUANT"));
    auto text = kiln::readInputFile(flags.config); // parsed above, so readable
    if (!text) return report(text.status());
    configText = text.take();
  } else {
    options.weightQuant.bitNum = flags.weightQuantBits;
    options.weightQuant.symmetric = false; // converter_lite's CPU weight quant
  }
  options.metric = flags.targetMrePercent || (fp16 && !flags.targetCosine)
                       ? kiln::SensitivityMetric::MeanRelativeError
                       : kiln::SensitivityMetric::Cosine;
  if (flags.targetCosine) options.target = *flags.targetCosine;
  if (flags.targetMrePercent) options.target = *flags.targetMrePercent / 100;
  options.threads =
      flags.threads ? flags.threads : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  if (flags.maxStoredMb) options.maxStoredBytes = *flags.maxStoredMb << 20;

  // The model as the converting CLIs see it before their precision pass.
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  kiln::ConversionOptions simplify; // the conversion pipeline's simplification stage
  std::optional<kiln::ShapeSpec> spec;
  if (!flags.inputShape.empty()) {
    auto parsed = kiln::parseShapeSpec(flags.inputShape, kiln::ShapeDialect::Atc);
    if (!parsed) return report(parsed.status());
    spec = parsed.take();
    simplify.inputShapes = &*spec;
  }
  if (auto ran = kiln::runConversionPipeline(*model, simplify); !ran) return report(ran.status());
  auto feeds = flags.inputs.empty() ? kiln::makeDeterministicInputs(*model->graph, flags.seed)
                                    : readFeeds(*model->graph, flags.inputs);
  if (!feeds) return report(feeds.status());

  auto result = kiln::analyzeSensitivity(*model, *feeds, options);
  if (!result) return report(result.status());
  const kiln::SensitivityReport& r = *result;
  const bool cosine = options.metric == kiln::SensitivityMetric::Cosine;
  auto show = [&](double score) {
    return cosine ? fmt::format("{:.6f}", score) : fmt::format("{:.3f}%", score * 100);
  };
  if (flags.json) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const auto& n : r.nodes)
      nodes.push_back({{"node", n.node}, {"op_type", n.opType}, {"score", n.score}});
    nlohmann::json out = {{"metric", cosine ? "cosine" : "mean_relative_error"},
                          {"candidates", r.candidates},
                          {"converted_all", r.convertedAll},
                          {"nodes", nodes},
                          {"float_bytes", r.floatBytes},
                          {"converted_bytes", r.convertedBytes},
                          {"runs", r.runs}};
    if (options.target)
      out["target"] = {{"value", *options.target},
                       {"keep", r.keep},
                       {"score", r.keptScore},
                       {"met", r.targetMet}};
    std::cout << kiln::jsonText(out, 2) << "\n";
  } else {
    std::cout << fmt::format("{} of {} candidate nodes converted: {} {}\n",
                             fp16 ? "FP16" : "weight quant", r.candidates,
                             cosine ? "cosine" : "mean relative error", show(r.convertedAll));
    std::cout << fmt::format("{:<40} {:<16} {:>14}  (score with only this node converted)\n",
                             "node", "op", cosine ? "cosine" : "mean_rel_err");
    for (size_t i = 0; i < r.nodes.size() && i < flags.top; ++i)
      std::cout << fmt::format("{:<40} {:<16} {:>14}\n", r.nodes[i].node, r.nodes[i].opType,
                               show(r.nodes[i].score));
    if (options.target)
      std::cout << fmt::format(
          "target {} {}: keeping {} node(s) in float gives {} ({})\n", cosine ? ">=" : "<=",
          cosine ? fmt::format("{}", *options.target) : fmt::format("{}%", *options.target * 100),
          r.keep.size(), show(r.keptScore), r.targetMet ? "met" : "NOT met");
    std::cout << fmt::format("parameters: {} bytes converted{}, {} bytes float ({:.3f})\n",
                             r.convertedBytes, options.target ? " with the kept nodes" : "",
                             r.floatBytes,
                             r.floatBytes ? double(r.convertedBytes) / double(r.floatBytes) : 0.0);
    std::cout << fmt::format("{} model runs\n", r.runs);
  }
  if (!flags.writeKeepDtype.empty() && options.precision.keepNodeNames.empty() && r.keep.empty()) {
    // atc rejects a --keep_dtype file without entries, so none is written.
    std::cerr << "kiln: note: no node needs to stay in float; " << flags.writeKeepDtype
              << " not written (convert without --keep_dtype)\n";
  } else if (!flags.writeKeepDtype.empty()) {
    std::string text;
    for (const auto& k : options.precision.keepNodeNames)
      text += k + "\n";
    for (const auto& k : r.keep)
      text += k + "\n";
    if (auto s = kiln::writeFileAtomically(flags.writeKeepDtype, text); !s) return report(s);
    std::cerr << "kiln: wrote " << flags.writeKeepDtype << " (atc --keep_dtype, " << r.keep.size()
              << " node(s) added)\n";
  }
  if (!flags.writeConfig.empty()) {
    std::vector<std::string> skip = options.weightQuant.skipNodes;
    skip.insert(skip.end(), r.keep.begin(), r.keep.end());
    std::string text = kiln::withSkipQuantNodes(configText, skip, options.weightQuant.bitNum);
    if (auto s = kiln::writeFileAtomically(flags.writeConfig, text); !s) return report(s);
    std::cerr << "kiln: wrote " << flags.writeConfig << " (converter_lite --configFile, "
              << r.keep.size() << " node(s) added to skip_quant_node)\n";
  }
  return options.target && !r.targetMet ? 1 : 0;
}

struct QuantizeFlags {
  std::string model;
  std::string calibration;
  std::string output;
  std::string method = "minmax";
  double percentile = 99.99;
  size_t calibrationSize = 0;
  std::string activationType = "uint8";
  bool floatBias = false;
  bool quantizeOutputs = false;
  bool equalizeChannels = false;
  bool biasCorrection = false;
  std::vector<std::string> exclude;
  int threads = 1;
  std::optional<double> targetCosine;
  size_t evalSamples = 4;
};

const std::map<std::string, kiln::CalibrationMethod>& calibrationMethods() {
  static const std::map<std::string, kiln::CalibrationMethod> methods = {
      {"minmax", kiln::CalibrationMethod::MinMax},
      {"percentile", kiln::CalibrationMethod::Percentile},
      {"entropy", kiln::CalibrationMethod::Entropy},
      {"mse", kiln::CalibrationMethod::Mse},
  };
  return methods;
}

int quantizeCommand(const QuantizeFlags& flags) {
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  auto data = kiln::CalibrationData::open(*model->graph, flags.calibration);
  if (!data) return report(data.status());
  kiln::QdqOptions options;
  options.calibration.method = calibrationMethods().at(flags.method);
  options.calibration.percentile = flags.percentile;
  options.calibration.maxSamples = flags.calibrationSize;
  options.calibration.threads = flags.threads;
  options.int8Activations = flags.activationType == "int8";
  options.quantizeBias = !flags.floatBias;
  options.quantizeOutputs = flags.quantizeOutputs;
  options.equalizeChannels = flags.equalizeChannels;
  options.biasCorrection = flags.biasCorrection;
  options.exclude = flags.exclude;
  options.targetCosine = flags.targetCosine;
  options.evaluationSamples = flags.evalSamples;
  auto result = kiln::quantizeToQdq(*model, *data, options);
  if (!result) return report(result.status());
  if (auto written = kiln::writeOnnxFile(*model, flags.output); !written) return report(written);
  const kiln::QdqReport& r = *result;
  for (const std::string& note : r.notes)
    std::cerr << "kiln: note: " << note << "\n";
  const double perSample =
      r.calibration.samples ? r.calibration.seconds / double(r.calibration.samples) : 0.0;
  std::cout << fmt::format("quantized {} node(s) ({} excluded): {} QuantizeLinear, {} "
                           "DequantizeLinear added{}\n",
                           r.quantizedNodes, r.excludedNodes, r.quantizeLinear, r.dequantizeLinear,
                           flags.quantizeOutputs
                               ? fmt::format(", {} output(s) quantized", r.quantizedOutputs)
                               : std::string());
  if (flags.equalizeChannels)
    std::cout << fmt::format("channel equalization: {} tensor(s) rescaled\n", r.equalizedTensors);
  if (flags.biasCorrection)
    std::cout << fmt::format("bias correction: {} int32 bias(es) shifted\n", r.correctedBiases);
  std::cout << fmt::format("calibration: {} ({}), {} sample(s), {} run(s), {:.3f} s ({:.4f} s "
                           "per sample), {} tensor(s)\n",
                           flags.method, flags.activationType, r.calibration.samples,
                           r.calibration.runs, r.calibration.seconds, perSample,
                           r.calibration.tensors.size());
  if (r.cosine)
    std::cout << fmt::format(
        "target cosine >= {}: {} node(s) kept float, worst output cosine {:.6f} "
        "on {} sample(s) ({} trial(s)){}{}\n",
        *flags.targetCosine, r.keptFloat.size(), *r.cosine,
        std::min(flags.evalSamples, r.calibration.samples), r.trials,
        r.keptFloat.empty() ? "" : ": ", fmt::join(r.keptFloat, ", "));
  std::cerr << "kiln: wrote " << flags.output << "\n";
  return 0;
}

// Renders dot text to SVG with Graphviz (`dot -Tsvg`), which kiln does not bundle.
int writeSvg(const std::string& dot, const std::string& path) {
  if (std::system("command -v dot >/dev/null 2>&1") != 0)
    return report(kiln::Status(kiln::ErrorCode::BadFlag,
                               "--svg needs Graphviz's `dot`, which is not on PATH",
                               "install graphviz (apt-get install graphviz), or use --dot > "
                               "model.dot and render it elsewhere"));
  // `dot` writes the target itself: hold it to the rules every output follows.
  if (auto s = kiln::checkOutputTarget(path); !s) return report(s);
  std::string tmp = path + ".dot.tmp";
  if (auto s = kiln::writeFileAtomically(tmp, dot); !s) return report(s);
  std::string command = "dot -Tsvg -o '" + path + "' '" + tmp + "'";
  int rc = std::system(command.c_str());
  std::filesystem::remove(tmp);
  if (rc != 0)
    return report(kiln::Status(kiln::ErrorCode::FileWriteFailed,
                               fmt::format("`dot -Tsvg` failed writing '{}'", path),
                               "check the output path, or use --dot"));
  std::cerr << "kiln: wrote " << path << "\n";
  return 0;
}

int optimizeModel(const OptFlags& flags) {
  auto model = kiln::loadModel(flags.model);
  if (!model) return report(model.status());
  std::vector<std::string> passes = flags.passes;
  if (!flags.pipeline.empty()) {
    auto named = kiln::pipelineByName(flags.pipeline);
    if (!named) return report(named.status());
    passes.insert(passes.begin(), named->begin(), named->end());
  }
  kiln::PipelineOptions options;
  std::optional<kiln::ShapeSpec> spec;
  if (!flags.inputShape.empty()) {
    auto parsed = kiln::parseShapeSpec(flags.inputShape, flags.shapeDialect == "lite"
                                                             ? kiln::ShapeDialect::ConverterLite
                                                             : kiln::ShapeDialect::Atc);
    if (!parsed) return report(parsed.status());
    spec = parsed.take();
    options.inputShapes = &*spec;
    // --input-shape is what fix-input-shapes applies: run it first when no pass list has it.
    if (std::find(passes.begin(), passes.end(), "fix-input-shapes") == passes.end()) {
      passes.insert(passes.begin(), "fix-input-shapes");
      if (flags.pipeline.empty())
        std::cerr << "kiln: note: --input-shape runs the fix-input-shapes pass first; add "
                     "--pipeline default to simplify the fixed model too\n";
    }
  }
  kiln::PrecisionOptions precision;
  kiln::PrecisionReport precisionReport;
  if (!flags.precisionReport.empty()) options.precisionReport = &precisionReport;
  if (!flags.precisionMode.empty()) {
    precision.mode = precisionModes().at(flags.precisionMode);
    precision.keepNodeNames = flags.keepDtypeNodes;
    if (!flags.keepDtypeFile.empty()) {
      auto unknown = kiln::addKeepDtypeFile(*model->graph, flags.keepDtypeFile, precision);
      if (!unknown) return report(unknown.status());
      for (const auto& entry : *unknown)
        std::cerr << "kiln: note: keep_dtype entry '" << kiln::displayName(entry)
                  << "' names nothing in " << flags.model << "\n";
      precisionReport.keepDtypeUnknown = *unknown;
    }
    precision.inputFp16Nodes = flags.inputFp16Nodes;
    precision.outputsFp16 = flags.outputType == "FP16";
    // With a report, an fp32 run finds activations beyond fp16's range (kept fp32 in the mixed
    // modes, reported under force_fp16): on the sample given, else on seeded uniform data.
    if (!flags.precisionReport.empty())
      precision.measureActivationPeaks =
          [&flags](const kiln::Model& converted) -> kiln::Expected<std::map<std::string, double>> {
        std::map<std::string, kiln::rt::RtValue> feeds;
        if (!flags.sampleInputs.empty()) {
          KILN_ASSIGN_OR_RETURN(feeds, readFeeds(*converted.graph, flags.sampleInputs));
        } else {
          KILN_ASSIGN_OR_RETURN(feeds, kiln::makeDeterministicInputs(*converted.graph, 1));
        }
        return kiln::measureValuePeaks(converted, feeds);
      };
    options.precision = &precision;
  }
  kiln::WeightQuantOptions weightQuant = flags.weightQuant;
  if (flags.weightQuantBits > 0) {
    weightQuant.bitNum = flags.weightQuantBits;
    options.weightQuant = &weightQuant;
  }
  options.printIrAfter = flags.printIrAfter;
  options.irStream = &std::cout;
  options.explain = flags.explain;
  if (flags.explain) spdlog::set_level(spdlog::level::debug);
  std::optional<kiln::AippConfig> aipp;
  if (!flags.insertOpConf.empty()) {
    auto parsed = kiln::parseAippConfigFile(flags.insertOpConf);
    if (!parsed) return report(parsed.status());
    aipp = parsed.take();
  }
  auto result = kiln::runPipeline(*model, passes, options);
  if (!result) return report(result.status());
  if (aipp) {
    kiln::AippContext aippContext;
    aippContext.inputFp16Nodes = flags.inputFp16Nodes;
    if (auto status = kiln::insertAipp(*model, *aipp, aippContext); !status) return report(status);
  }
  if (flags.printPassStats) std::cerr << kiln::formatPassStats(*result);
  if (!flags.precisionReport.empty())
    if (auto status = kiln::writePrecisionReport(precisionReport, flags.precisionReport); !status)
      return report(status);
  for (const auto& note : result->notes)
    std::cerr << "kiln: note: " << kiln::displayLine(note) << "\n";
  if (!flags.output.empty()) {
    if (auto status = kiln::writeOnnxFile(*model, flags.output); !status) return report(status);
    std::cout << "kiln: wrote " << flags.output << " (" << model->graph->nodeCount() << " nodes)\n";
  } else if (flags.printIrAfter.empty()) {
    std::cout << kiln::modelToText(*model);
  }
  return 0;
}

struct TensorFlags {
  std::string source;               // make: a .npy / .pb / raw file; show: the file shown
  std::vector<std::string> sources; // benchmark-data: kiln run's output files
  std::string output;
  std::string name;
  std::string dtype;
  std::string shape;
  std::string fill;
  std::string range;
  bool random = false;
  uint64_t seed = 0;
  size_t count = 8;
  bool dtypeGiven = false, shapeGiven = false, seedGiven = false, rangeGiven = false,
       fillGiven = false;
};

// --dtype / --shape as given (nullopt when absent), for raw files and for conversions.
kiln::Expected<kiln::RawLayout> rawLayout(const TensorFlags& flags) {
  kiln::RawLayout layout;
  if (flags.dtypeGiven) {
    KILN_ASSIGN_OR_RETURN(layout.dtype, kiln::parseTensorFileDType(flags.dtype, "--dtype"));
  }
  if (flags.shapeGiven) {
    KILN_ASSIGN_OR_RETURN(layout.dims, kiln::parseTensorFileShape(flags.shape, "--shape"));
  }
  return layout;
}

kiln::Expected<kiln::NamedTensor> makeTensor(const TensorFlags& flags) {
  const int sources = !flags.source.empty() + flags.random + flags.fillGiven;
  if (sources != 1)
    return kiln::Status(kiln::ErrorCode::BadFlag,
                        "kiln tensor make: give exactly one of FILE (.npy, .pb or raw), --random "
                        "or --fill VALUE",
                        "e.g. kiln tensor make --random --seed 1 --shape 1,3,224,224 -o x.pb");
  if ((flags.seedGiven || flags.rangeGiven) && !flags.random)
    return kiln::Status(
        kiln::ErrorCode::BadFlag,
        fmt::format("{}: only --random draws values", flags.seedGiven ? "--seed" : "--range"),
        "add --random, or drop the flag");
  KILN_ASSIGN_OR_RETURN(kiln::RawLayout layout, rawLayout(flags));
  kiln::NamedTensor made;
  if (!flags.source.empty()) {
    KILN_ASSIGN_OR_RETURN(made, kiln::readTensorFile(flags.source, layout));
    // A .npy or .pb source is converted to the --dtype and --shape asked for.
    if (layout.dtype) {
      KILN_ASSIGN_OR_RETURN(made.tensor, kiln::castTensorFile(made.tensor, *layout.dtype));
    }
    if (layout.dims) {
      KILN_ASSIGN_OR_RETURN(made.tensor, kiln::reshapeTensorFile(made.tensor, *layout.dims));
    }
  } else {
    if (!layout.dims)
      return kiln::Status(
          kiln::ErrorCode::BadFlag,
          fmt::format("--shape: {} needs the tensor's dims", flags.random ? "--random" : "--fill"),
          "add --shape with the dims, e.g. --shape 1,3,224,224");
    const kiln::DType dtype = layout.dtype.value_or(kiln::DType::Float32);
    if (flags.random) {
      KILN_ASSIGN_OR_RETURN(kiln::RandomRange range, kiln::tensorRandomRange(dtype, flags.range));
      made.tensor = kiln::randomTensor(dtype, *layout.dims, flags.seed, range);
    } else {
      KILN_ASSIGN_OR_RETURN(made.tensor, kiln::filledTensor(dtype, *layout.dims, flags.fill));
    }
  }
  if (!flags.name.empty())
    made.name = flags.name;
  else if (made.name.empty())
    made.name = std::filesystem::path(flags.output).stem().string();
  return made;
}

int tensorMakeCommand(const TensorFlags& flags) {
  auto made = makeTensor(flags);
  if (!made) return report(made.status());
  if (auto status = kiln::writeTensorFile(flags.output, made->name, made->tensor); !status)
    return report(status);
  std::cout << fmt::format(
      "kiln: wrote {} ('{}', {} [{}])\n", flags.output, kiln::displayName(made->name),
      kiln::tensorFileDTypeName(made->tensor.dtype()), fmt::join(made->tensor.dims(), ","));
  return 0;
}

int tensorShowCommand(const TensorFlags& flags) {
  auto layout = rawLayout(flags);
  if (!layout) return report(layout.status());
  auto read = kiln::readTensorFile(flags.source, *layout);
  if (!read) return report(read.status());
  std::cout << kiln::tensorSummaryText(*read, flags.count);
  return 0;
}

int tensorBenchmarkDataCommand(const TensorFlags& flags) {
  std::vector<kiln::NamedTensor> tensors;
  for (const std::string& path : flags.sources) {
    auto read = kiln::readTensorFile(path, {});
    if (!read) return report(read.status());
    tensors.push_back(read.take());
  }
  auto text = kiln::benchmarkDataText(tensors, flags.sources);
  if (!text) return report(text.status());
  if (auto status = kiln::writeFileAtomically(flags.output, *text); !status) return report(status);
  std::cout << fmt::format("kiln: wrote {} ({} tensor(s))\n", flags.output, tensors.size());
  return 0;
}

CLI::App* findVerb(CLI::App& parent, const std::string& name) {
  auto found =
      parent.get_subcommands([&](const CLI::App* verb) { return verb->get_name() == name; });
  return found.empty() ? nullptr : found.front();
}

// An unknown --flag after a verb: CLI11 would call it an unexpected argument, or take it for the
// value of the flag before it and complain about a missing required one. Named here with the
// verb's closest flag instead (`kiln compare --input_shape` → --input-shape). Ok when every
// --flag belongs to its verb, one of the verb's parents, or no verb is given.
kiln::Status unknownVerbFlag(CLI::App& app, int argc, char** argv) {
  CLI::App* verb = nullptr;
  std::string verbPath = "kiln";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("-", 0) != 0) { // a verb (`tensor make`) or a positional argument
      if (CLI::App* sub = findVerb(verb ? *verb : app, arg)) {
        verb = sub;
        verbPath += " " + arg;
      }
      continue;
    }
    if (!verb || arg.rfind("--", 0) != 0) continue; // global and short flags, negative numbers
    const std::string name = arg.substr(0, arg.find('='));
    bool known = name == "--help";
    for (CLI::App* scope = verb; scope && !known; scope = scope->get_parent())
      known = scope->get_option_no_throw(name) != nullptr;
    if (known) continue;
    std::vector<std::string> names;
    for (const CLI::Option* option : verb->get_options())
      for (const std::string& longName : option->get_lnames())
        names.push_back("--" + longName);
    const std::string near = kiln::closestSpelling(name, names);
    return kiln::Status(kiln::ErrorCode::BadFlag,
                        near.empty() ? fmt::format("unknown flag {} for {}", name, verbPath)
                                     : fmt::format("unknown flag {} for {}; did you mean {}?", name,
                                                   verbPath, near),
                        fmt::format("run '{} --help' for its flags", verbPath));
  }
  return kiln::Status::ok();
}

int runTool(int argc, char** argv) {
  kiln::enableProgress(); // long conversions show progress on a terminal's stderr
  // Named, so usage lines say "kiln", not the path it was started by.
  CLI::App app{"kiln — ONNX to Ascend .om / MindSpore Lite .ms conversion toolchain", "kiln"};
  app.set_version_flag(
      "--version", [] { return kiln::versionBanner("kiln"); }, "print the version and exit");
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "debug logging");

  std::string inspectPath;
  bool inspectAsJson = false;
  bool inspectIr = false;
  auto* inspect =
      app.add_subcommand("inspect", "print inputs, outputs, op histogram and parameter bytes");
  inspect->add_option("model", inspectPath, "model file (.onnx, .onnxtxt, .ms, .om)")->required();
  inspect->add_flag("--json", inspectAsJson, "print JSON");
  inspect->add_flag("--ir", inspectIr, "print the whole graph in kiln's text IR");
  bool inspectDot = false;
  std::string inspectSvg;
  inspect->add_flag("--dot", inspectDot,
                    "print the graph as Graphviz dot (node names, op types, tensor shapes)");
  inspect->add_option("--svg", inspectSvg,
                      "write the graph as SVG to this file (needs Graphviz `dot` on PATH)");

  std::string convertPath, convertOutput, convertTo = "onnx";
  std::vector<std::string> convertExpose;
  auto* convert = app.add_subcommand("convert", "import a model and write it in a target format");
  convert->add_option("model", convertPath, "input model (.onnx, .onnxtxt, .ms, .om)")->required();
  convert->add_option("-o,--output", convertOutput, "output file")->required();
  bool convertFp16 = false;
  convert->add_option("--to", convertTo, "target format")->check(CLI::IsMember({"onnx", "ms"}));
  convert->add_flag("--fp16", convertFp16, "--to ms: store float weights as float16");
  convert->add_option("--expose", convertExpose,
                      "also make this value a graph output (repeatable)");

  RunFlags runFlags;
  auto* run =
      app.add_subcommand("run", "execute a model on CPU; outputs are written as TensorProto files");
  run->add_option("model", runFlags.model, "model file (.onnx, .onnxtxt, .ms, .om)")->required();
  run->add_option("--input", runFlags.inputs, "NAME=FILE.pb, once per graph input");
  run->add_option("--input-list", runFlags.inputList,
                  "text file, one input set per line (NAME=FILE.pb ..., paths relative to the "
                  "file); set K's outputs go to OUTPUT_DIR/K");
  run->add_option("--output-dir", runFlags.outputDir, "folder for <output>.pb files")->required();
  run->add_flag("--capture-all", runFlags.captureAll, "also write every intermediate tensor");
  run->add_option("--capture", runFlags.capture,
                  "also write this intermediate tensor (repeatable)");
  run->add_option("--threads", runFlags.threads, "worker threads")->check(CLI::Range(1, 256));
  run->add_flag("--profile", runFlags.profile,
                "print time per op type (elementwise nodes fused into a Conv count as Conv)");
  run->add_flag("--no-fuse", runFlags.noFuse,
                "run every node on its own (no elementwise chains inside Conv)");
  run->add_option("--repeat", runFlags.repeat, "run N times and print timing")
      ->check(CLI::Range(1, 100000));

  OptFlags optFlags;
  auto* opt =
      app.add_subcommand("opt", "run graph passes; prints the resulting IR unless -o is given");
  opt->add_option("model", optFlags.model, "model file")->required();
  opt->add_option("--passes", optFlags.passes, "passes to run, in order (comma separated)")
      ->delimiter(',');
  opt->add_option("--pipeline", optFlags.pipeline,
                  "named pipeline run before --passes (default, none)");
  opt->add_option("--print-ir-after", optFlags.printIrAfter,
                  "print the IR after this pass (or 'all')");
  opt->add_flag("--print-pass-stats", optFlags.printPassStats,
                "per-pass time and node counts on stderr");
  opt->add_flag("--explain", optFlags.explain, "log why rewrites declined");
  opt->add_option("-o,--output", optFlags.output, "write the result as ONNX");
  opt->add_option("--input-shape", optFlags.inputShape,
                  "fix input shapes: name:1,3,224,224;name2:...");
  std::vector<std::string> modeNames;
  for (const auto& [name, mode] : precisionModes())
    modeNames.push_back(name);
  opt->add_option("--precision-mode", optFlags.precisionMode, "precision for the convert-fp16 pass")
      ->check(CLI::IsMember(modeNames));
  opt->add_option("--keep-dtype", optFlags.keepDtypeNodes,
                  "node names kept in fp32 (comma separated)")
      ->delimiter(',');
  opt->add_option("--keep-dtype-file", optFlags.keepDtypeFile,
                  "ATC --keep_dtype file: node names or OpType::<type>, one per line");
  opt->add_option("--precision-report", optFlags.precisionReport,
                  "write what convert-fp16 / quantize-weights decided as JSON");
  opt->add_option("--input", optFlags.sampleInputs,
                  "NAME=FILE.pb sample input for --precision-report's fp32 activation ranges "
                  "(default: seeded uniform [-1,1) data)");
  opt->add_option("--input-fp16-nodes", optFlags.inputFp16Nodes,
                  "graph inputs that take fp16 data (comma separated)")
      ->delimiter(',');
  opt->add_option("--insert-op-conf", optFlags.insertOpConf,
                  "AIPP configuration (atc --insert_op_conf) inserted as preprocessing ops");
  opt->add_option("--output-type", optFlags.outputType, "float outputs as FP32 (default) or FP16")
      ->check(CLI::IsMember({"FP32", "FP16"}));
  opt->add_option("--weight-quant-bits", optFlags.weightQuantBits,
                  "quantize-weights: bit_num (1-16)")
      ->check(CLI::Range(1, 16));
  opt->add_flag("!--weight-quant-asymmetric", optFlags.weightQuant.symmetric,
                "quantize-weights: asymmetric ranges");
  opt->add_flag("!--no-weight-quant-bias-correction", optFlags.weightQuant.biasCorrection,
                "quantize-weights: keep plain (q - zero) * scale, without restoring each "
                "channel's mean and deviation");
  opt->add_option("--min-quant-weight-size", optFlags.weightQuant.minQuantWeightSize,
                  "quantize-weights threshold");
  opt->add_option("--min-quant-weight-channel", optFlags.weightQuant.minQuantWeightChannel,
                  "quantize-weights: Conv channel threshold");
  opt->add_option("--skip-quant-node", optFlags.weightQuant.skipNodes, "node names left in float")
      ->delimiter(',');
  opt->add_option("--shape-dialect", optFlags.shapeDialect, "grammar of --input-shape: atc or lite")
      ->check(CLI::IsMember({"atc", "lite"}));

  QuantizeFlags quantizeFlags;
  auto* quantize = app.add_subcommand(
      "quantize", "calibrate on sample inputs and write a QDQ (int8) ONNX model");
  quantize->add_option("model", quantizeFlags.model, "float model (.onnx, .onnxtxt)")->required();
  quantize
      ->add_option("--calibration", quantizeFlags.calibration,
                   "folder of samples: one subfolder per sample with INPUT.npy/.pb/.bin per "
                   "input, or (one-input models) the sample files")
      ->required();
  quantize->add_option("-o,--output", quantizeFlags.output, "QDQ model to write (.onnx)")
      ->required();
  quantize
      ->add_option("--method", quantizeFlags.method,
                   "activation range: minmax, percentile, entropy, mse")
      ->check(CLI::IsMember({"minmax", "percentile", "entropy", "mse"}));
  quantize->add_option("--percentile", quantizeFlags.percentile,
                       "--method percentile: % of |x| inside the range (default 99.99)");
  quantize->add_option("--calibration-size", quantizeFlags.calibrationSize,
                       "use the first N samples (default: all)");
  quantize
      ->add_option("--activation-type", quantizeFlags.activationType,
                   "uint8 (asymmetric, default) or int8 (symmetric)")
      ->check(CLI::IsMember({"uint8", "int8"}));
  quantize->add_flag("--float-bias", quantizeFlags.floatBias,
                     "keep Conv/Gemm biases float instead of int32");
  quantize->add_flag("--quantize-outputs", quantizeFlags.quantizeOutputs,
                     "also quantize each Conv/MatMul/Gemm output (after a Relu that alone "
                     "reads it), so targets run them in integers from codes to codes");
  quantize->add_flag("--equalize-channels", quantizeFlags.equalizeChannels,
                     "rescale Conv outputs and depthwise Conv inputs per channel (absorbed by the "
                     "per-channel weights) so every channel spans the per-tensor activation range");
  quantize->add_flag("--bias-correction", quantizeFlags.biasCorrection,
                     "shift each int32 Conv/Gemm bias to cancel the per-channel mean output error "
                     "its int8 weights cause on the calibration samples");
  quantize->add_option("--exclude", quantizeFlags.exclude,
                       "node name (or OpType::TYPE) to leave float (repeatable)");
  quantize->add_option("--target-cosine", quantizeFlags.targetCosine,
                       "keep the most sensitive nodes float until the worst output cosine vs "
                       "the float model reaches this");
  quantize->add_option("--eval-samples", quantizeFlags.evalSamples,
                       "--target-cosine: calibration samples it is measured on (default 4)");
  quantize->add_option("--threads", quantizeFlags.threads,
                       "executor threads (the result does not depend on it)");

  SensitivityFlags sensitivityFlags;
  auto* sensitivity = app.add_subcommand(
      "sensitivity", "rank nodes by what their FP16 conversion or weight quantization costs at the "
                     "outputs, and find the fewest to keep in float for an accuracy target");
  sensitivity->add_option("model", sensitivityFlags.model, "float model (.onnx)")->required();
  sensitivity->add_option("--input", sensitivityFlags.inputs,
                          "NAME=FILE.pb, once per graph input (default: generated inputs)");
  sensitivity->add_option("--input-shape", sensitivityFlags.inputShape,
                          "fix input shapes as the converting CLI would: name:1,3,224,224;...");
  sensitivity->add_option("--seed", sensitivityFlags.seed, "seed for generated inputs");
  sensitivity
      ->add_option("--precision-mode", sensitivityFlags.precisionMode,
                   "FP16: the precision mode (atc --precision_mode; fp16_weights = "
                   "converter_lite --fp16=on)")
      ->check(CLI::IsMember(
          {"allow_fp32_to_fp16", "allow_mix_precision", "force_fp16", "fp16_weights"}));
  sensitivity->add_option("--keep-dtype-file", sensitivityFlags.keepDtypeFile,
                          "FP16: nodes already kept (atc --keep_dtype file)");
  sensitivity->add_option("--config", sensitivityFlags.config,
                          "weight quant: converter_lite --configFile with quant_type=WEIGHT_QUANT");
  sensitivity
      ->add_option("--weight-quant-bits", sensitivityFlags.weightQuantBits,
                   "weight quant without a config: bit_num, converter_lite's other defaults")
      ->check(CLI::Range(1, 16));
  sensitivity->add_option("--target-cosine", sensitivityFlags.targetCosine,
                          "keep nodes in float until the mean output cosine is at least this");
  sensitivity->add_option("--target-mre", sensitivityFlags.targetMrePercent,
                          "keep nodes in float until the mean relative error (percent, as "
                          "benchmark's --accuracyThreshold) is at most this");
  sensitivity->add_option("--write-keep-dtype", sensitivityFlags.writeKeepDtype,
                          "FP16: write the kept nodes as an atc --keep_dtype file");
  sensitivity->add_option("--write-config", sensitivityFlags.writeConfig,
                          "weight quant: write the config with the kept nodes in skip_quant_node");
  sensitivity->add_option("--top", sensitivityFlags.top, "rows of the ranking to print");
  sensitivity->add_flag("--json", sensitivityFlags.json, "print JSON (every node)");
  sensitivity
      ->add_option("--threads", sensitivityFlags.threads,
                   "trials run in parallel (the result does not depend on it; default: one per "
                   "CPU, at most 8)")
      ->check(CLI::Range(1, 256));
  // Not in --help: what a user would tune is --threads; this bounds the float run's kept
  // tensors, and 0 makes every trial run the whole model (the same report, to check it).
  sensitivity->add_option("--max-stored-mb", sensitivityFlags.maxStoredMb)->group("");

  CheckFlags checkFlags;
  auto* check =
      app.add_subcommand("check", "validate input shapes and op support before converting");
  check->add_option("model", checkFlags.model, "model file (.onnx, .onnxtxt, .ms, .om)")
      ->required();
  check->add_option("--input-shape", checkFlags.options.inputShape, "name:1,3,224,224;name2:...");
  check
      ->add_option("--shape-dialect", checkFlags.shapeDialect,
                   "grammar of --input-shape: atc or lite")
      ->check(CLI::IsMember({"atc", "lite"}));
  check->add_option("--target", checkFlags.options.target,
                    "target to check against: ms|om[:SOC] (default: cpu, kiln's executor)");
  check->add_option("--json", checkFlags.jsonPath, "also write the report as JSON here");

  LowerFlags lowerFlags;
  auto* lower = app.add_subcommand(
      "lower", "lower a model for a target and print the target graph as stable text");
  lower->add_option("model", lowerFlags.model, "model file")->required();
  lower->add_option("--target", lowerFlags.options.target, "ms|om[:SOC]");
  lower->add_option("--input-shape", lowerFlags.options.inputShape,
                    "name:1,3,224,224;name2:... (ATC grammar)");
  lower->add_option("--config", lowerFlags.options.configFile,
                    "converter_lite --configFile (ms): WEIGHT_QUANT / DYNAMIC_QUANT as it applies "
                    "them");

  CompareFlags compareFlags;
  auto* compare =
      app.add_subcommand("compare", "run two models on the same inputs and compare their outputs");
  compare
      ->add_option("reference", compareFlags.reference,
                   "reference model (.onnx, .onnxtxt, .ms, .om)")
      ->required();
  compare->add_option("model", compareFlags.candidate, "model to check (.onnx, .onnxtxt, .ms, .om)")
      ->required();
  compare->add_option("--input", compareFlags.inputs,
                      "NAME=FILE.pb (default: deterministic generated inputs)");
  compare->add_option("--input-shape", compareFlags.inputShape,
                      "shapes for generated inputs (name:1,3,224,224)");
  compare->add_option("--seed", compareFlags.seed, "seed for generated inputs");
  compare->add_flag("--json", compareFlags.json, "print JSON");
  compare->add_flag("--per-tensor", compareFlags.perTensor,
                    "compare every tensor by name; name the first divergent node");
  compare->add_option("--min-cosine", compareFlags.minCosine,
                      "cosine below which a tensor diverges (--per-tensor)");

  TensorFlags tensorFlags;
  auto* tensor = app.add_subcommand(
      "tensor", "make, show and convert tensor files (.pb, .npy, raw .bin) without Python");
  tensor->require_subcommand(1);
  auto* tensorMake = tensor->add_subcommand(
      "make", "write a tensor as .pb (kiln run --input), .bin (benchmark --inDataFile) or .npy "
              "from a .npy/.pb/raw file, --random or --fill");
  tensorMake->add_option("file", tensorFlags.source,
                         "source: .npy, .pb, or raw data (with --dtype and --shape)");
  tensorMake->add_option("-o,--output", tensorFlags.output, "FILE.pb, FILE.bin or FILE.npy")
      ->required();
  tensorMake->add_flag("--random", tensorFlags.random,
                       "uniform values from --seed: floats in [-1,1), int8/uint8 over the type, "
                       "int32/int64 in [-1000,1000), bool 0/1 (or --range)");
  tensorMake->add_option("--fill", tensorFlags.fill, "every element this value (1.5, -3, nan)");
  tensorMake->add_option("--dtype", tensorFlags.dtype,
                         "float32 (default), float16, float64, int8, uint8, int32, int64, bool; "
                         "converts a .npy/.pb source");
  tensorMake->add_option(
      "--shape", tensorFlags.shape,
      "dims, comma separated (1,3,224,224; \"\" for a scalar); reshapes a .npy/.pb source");
  tensorMake->add_option("--seed", tensorFlags.seed, "--random: the seed (default 0)");
  tensorMake->add_option("--range", tensorFlags.range, "--random: LOW,HIGH, values in [LOW,HIGH)");
  tensorMake->add_option("--name", tensorFlags.name,
                         "the TensorProto's name (default: the source's, else the output's stem)");
  auto* tensorShow =
      tensor->add_subcommand("show", "print a tensor file's name, dtype, shape and values");
  tensorShow->add_option("file", tensorFlags.source, ".pb, .npy, or raw data")->required();
  tensorShow->add_option("--dtype", tensorFlags.dtype, "raw data: element type");
  tensorShow->add_option("--shape", tensorFlags.shape, "raw data: dims, comma separated");
  tensorShow->add_option("--count", tensorFlags.count, "how many leading values to print");
  auto* tensorBenchmarkData = tensor->add_subcommand(
      "benchmark-data", "write kiln run's output .pb files as benchmark --benchmarkDataFile text");
  tensorBenchmarkData->add_option("files", tensorFlags.sources, "OUT_DIR/*.pb")->required();
  tensorBenchmarkData->add_option("-o,--output", tensorFlags.output, "expected.txt")->required();

  std::vector<std::string> conformancePaths;
  kiln::ConformanceOptions conformanceOptions;
  auto* conformance =
      app.add_subcommand("conformance", "run ONNX backend test cases and compare outputs");
  conformance->add_option("paths", conformancePaths, "case folders or folders holding them")
      ->required();
  conformance
      ->add_option("--via", conformanceOptions.via,
                   "artifact path to run: onnx or a target (ms, om, om:<soc_version>)")
      ->check([](const std::string& via) -> std::string {
        return via == "onnx" || kiln::findTarget(via) ? "" : "no artifact path '" + via + "'";
      });
  conformance->add_option("--precision", conformanceOptions.precision, "precision")
      ->check(CLI::IsMember({"fp32", "fp16"}));
  conformance
      ->add_option("--pipeline", conformanceOptions.pipeline,
                   "pass pipeline run on each model first")
      ->check(CLI::IsMember({"none", "default"}));
  conformance->add_option("--expect", conformanceOptions.expectFile,
                          "list of cases that must pass");
  conformance->add_option("--write-expected", conformanceOptions.writeExpected,
                          "write the passing cases here");
  conformance->add_option("-j,--jobs", conformanceOptions.jobs, "cases run in parallel")
      ->check(CLI::Range(1, 64));
  conformance->add_option("--timeout", conformanceOptions.timeoutSeconds, "seconds per case");
  conformance->add_flag("--input-shape-from-data", conformanceOptions.inputShapeFromData,
                        "fix input shapes to the first test data set's before the pipeline");
  conformance
      ->add_option("--rtol", conformanceOptions.rtol,
                   "relative tolerance: |actual - expected| <= atol + rtol * |expected| "
                   "(default 1e-3, 1e-2 with --precision fp16)")
      ->check(CLI::Range(0.0, 1.0e6));
  conformance
      ->add_option("--atol", conformanceOptions.atol,
                   "absolute tolerance (default 1e-7, 1e-2 with --precision fp16; a real model's "
                   "folder, outside the ONNX backend test suites: 1e-4, fp16 1e-2, times each "
                   "output's largest expected magnitude)")
      ->check(CLI::Range(0.0, 1.0e6));
  conformance->add_option(
      "--keep-artifacts", conformanceOptions.keepArtifacts,
      "write each case's artifact, inputs and expected outputs under this folder "
      "(for the outside judges in tests/judges)");
  conformance->add_flag("-q,--quiet", conformanceOptions.quiet,
                        "print only cases that did not pass");

  if (kiln::Status unknown = unknownVerbFlag(app, argc, argv); !unknown) return report(unknown);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    std::cout << e.what();
    return 0;
  } catch (const CLI::ParseError& e) {
    return report(kiln::Status(kiln::ErrorCode::BadFlag, e.what(),
                               "run 'kiln --help' for the accepted flags"));
  }
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);

  if (inspect->parsed()) {
    // .ms files: the summary/JSON come from the FlatBuffer itself; --ir shows what readMsFile
    // builds.
    const bool picture = inspectDot || !inspectSvg.empty();
    if (picture) {
      auto model = kiln::loadModel(inspectPath);
      if (!model) return report(model.status());
      // Shapes on every edge: infer what the file does not store (a model that does not infer
      // is drawn with the shapes it has).
      kiln::PipelineOptions inferOptions;
      if (auto inferred = kiln::runPipeline(*model, {"infer-shapes"}, inferOptions); !inferred)
        spdlog::info("shape inference: {}", inferred.status().toString());
      std::string dot = kiln::inspectDot(*model);
      if (inspectSvg.empty()) {
        std::cout << dot;
        return 0;
      }
      return writeSvg(dot, inspectSvg);
    }
    if (std::filesystem::path(inspectPath).extension() == ".ms" && !inspectIr) {
      auto dump =
          inspectAsJson ? kiln::dumpMsFile(inspectPath) : kiln::summarizeMsFile(inspectPath);
      if (!dump) return report(dump.status());
      std::cout << *dump;
      return 0;
    }
    // .om files are dumped as stored: files from other converters hold ops kiln does not run.
    if (std::filesystem::path(inspectPath).extension() == ".om" && !inspectIr) {
      auto dump =
          inspectAsJson ? kiln::dumpOmFile(inspectPath) : kiln::summarizeOmFile(inspectPath);
      if (!dump) return report(dump.status());
      std::cout << *dump;
      return 0;
    }
    auto model = kiln::loadModel(inspectPath);
    if (!model) return report(model.status());
    if (inspectIr)
      std::cout << kiln::modelToText(*model);
    else
      std::cout << (inspectAsJson ? kiln::inspectJson(*model) : kiln::inspectText(*model));
    return 0;
  }
  if (convert->parsed())
    return convertModel(convertPath, convertOutput, convertExpose, convertTo, convertFp16);
  if (run->parsed()) return runModel(runFlags);
  if (opt->parsed()) return optimizeModel(optFlags);
  if (compare->parsed()) return compareCommand(compareFlags);
  if (check->parsed()) return checkCommand(checkFlags);
  if (lower->parsed()) return lowerCommand(lowerFlags);
  if (sensitivity->parsed()) return sensitivityCommand(sensitivityFlags);
  if (quantize->parsed()) return quantizeCommand(quantizeFlags);
  if (tensor->parsed()) {
    for (CLI::App* sub : {tensorMake, tensorShow}) {
      tensorFlags.dtypeGiven = tensorFlags.dtypeGiven || sub->count("--dtype") > 0;
      tensorFlags.shapeGiven = tensorFlags.shapeGiven || sub->count("--shape") > 0;
    }
    tensorFlags.seedGiven = tensorMake->count("--seed") > 0;
    tensorFlags.rangeGiven = tensorMake->count("--range") > 0;
    tensorFlags.fillGiven = tensorMake->count("--fill") > 0;
    if (tensorMake->parsed()) return tensorMakeCommand(tensorFlags);
    if (tensorShow->parsed()) return tensorShowCommand(tensorFlags);
    return tensorBenchmarkDataCommand(tensorFlags);
  }
  if (conformance->parsed())
    return kiln::runConformance(conformancePaths, conformanceOptions, std::cout);
  return 0;
}

} // namespace

// The last resort: an exception the library let through is still one coded line, not an abort.
int main(int argc, char** argv) {
  try {
    return runTool(argc, argv);
  } catch (...) {
    return report(kiln::statusFromCurrentException());
  }
}
