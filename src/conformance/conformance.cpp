// Runs ONNX backend test cases (model.onnx + test_data_set_*/{input,output}_N.pb) through kiln.
#include "kiln/conformance.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <onnx/defs/schema.h>

#include "kiln/backends/target.h"
#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_element_types.h"
#include "kiln/frontend/value_io.h"
#include "kiln/passes/pass.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/shape_spec.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/input_file.h"
#include "kiln_proto/ge_ir.pb.h"
#include "ops/matmul_nbits.h"
#include "ops/validate.h"
#include "runtime/kernels/nn_util.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

enum class Outcome { Pass, Fail, Skip };

struct CaseResult {
  std::string name;
  Outcome outcome = Outcome::Fail;
  std::string reason;
};

std::string compareTensors(const Tensor& e, const Tensor& a, const Tolerance& tol) {
  if (e.dtype() != a.dtype())
    return fmt::format("dtype {} expected, got {}", dtypeName(e.dtype()), dtypeName(a.dtype()));
  if (e.dims() != a.dims())
    return fmt::format("shape {} expected, got {}", Shape::fromStatic(e.dims()).toString(),
                       Shape::fromStatic(a.dims()).toString());
  uint64_t n = e.elementCount();
  if (e.dtype() == DType::String) {
    for (uint64_t i = 0; i < n; ++i)
      if (e.stringValues()[i] != a.stringValues()[i])
        return fmt::format("element {}: '{}' expected, got '{}'", i, e.stringValues()[i],
                           a.stringValues()[i]);
    return "";
  }
  if (isFloatingPoint(e.dtype()) || e.dtype() == DType::Complex64 ||
      e.dtype() == DType::Complex128) {
    uint64_t m = n * ((e.dtype() == DType::Complex64 || e.dtype() == DType::Complex128) ? 2 : 1);
    Tensor ef = e, af = a;
    if (e.dtype() == DType::Complex64) {
      ef = Tensor(DType::Float32, {static_cast<int64_t>(m)}, e.buffer());
      af = Tensor(DType::Float32, {static_cast<int64_t>(m)}, a.buffer());
    } else if (e.dtype() == DType::Complex128) {
      ef = Tensor(DType::Float64, {static_cast<int64_t>(m)}, e.buffer());
      af = Tensor(DType::Float64, {static_cast<int64_t>(m)}, a.buffer());
    }
    for (uint64_t i = 0; i < m; ++i) {
      double ev = rt::elementAsDouble(ef, i), av = rt::elementAsDouble(af, i);
      if (std::isnan(ev) && std::isnan(av)) continue;
      if (std::isinf(ev) && ev == av) continue;
      if (!(std::fabs(av - ev) <= tol.atol + tol.rtol * std::fabs(ev))) {
        std::string held; // the tolerance missed, when the caller named it
        if (!tol.name.empty())
          held = fmt::format("; {}: atol {:.3g}{} + rtol {:g} × |expected|", tol.name, tol.atol,
                             tol.atolFrom, tol.rtol);
        return fmt::format("element {}: {} expected, got {} (abs err {:.3g}{})", i, ev, av,
                           std::fabs(av - ev), held);
      }
    }
    return "";
  }
  if (e.byteSize() != a.byteSize() ||
      (e.byteSize() && std::memcmp(e.data(), a.data(), e.byteSize()) != 0)) {
    for (uint64_t i = 0; i < n; ++i)
      if (rt::elementAsDouble(e, i) != rt::elementAsDouble(a, i))
        return fmt::format("element {}: {} expected, got {}", i, rt::elementAsDouble(e, i),
                           rt::elementAsDouble(a, i));
    return "bytes differ";
  }
  return "";
}

std::vector<fs::path> sortedMatches(const fs::path& dir, const std::string& prefix) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) return out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(entry.path());
  }
  // input_10 sorts after input_9: order by the trailing number.
  std::sort(out.begin(), out.end(), [&](const fs::path& a, const fs::path& b) {
    auto number = [&](const fs::path& p) {
      std::string stem = p.stem().string().substr(prefix.size());
      return std::atoll(stem.c_str());
    };
    return number(a) < number(b);
  });
  return out;
}

// The static shapes of test_data_set_0's tensor inputs, as an input-shape spec naming each
// graph input they feed whose declared shape is not static (static ones are left as declared:
// some cases feed data of another shape on purpose).
Expected<ShapeSpec> shapesOfFirstDataSet(const fs::path& dir, const Graph& graph) {
  ShapeSpec spec;
  auto sets = sortedMatches(dir, "test_data_set_");
  if (sets.empty()) return spec;
  std::vector<const Value*> feedInputs;
  for (const Value* in : graph.inputs())
    if (!in->isInitializer()) feedInputs.push_back(in);
  auto files = sortedMatches(sets.front(), "input_");
  for (size_t i = 0; i < files.size() && i < feedInputs.size(); ++i) {
    const Value* input = feedInputs[i];
    if (input->type().kind != TypeKind::Tensor ||
        (input->shape().hasRank() && input->shape().isStatic()))
      continue;
    KILN_ASSIGN_OR_RETURN(rt::RtValue value, readValueFile(files[i].string(), input->type()));
    if (!value.isTensor()) continue;
    InputShapeSpec entry;
    entry.name = input->name();
    entry.position = i;
    for (int64_t d : value.tensor.dims())
      entry.dims.push_back(DimSpec{d, d, false});
    entry.text = fmt::format("{}:{}", entry.name, entry.dimsText());
    spec.inputs.push_back(std::move(entry));
  }
  return spec;
}

// One io.tsv line: role, index, name, dtype, dims joined by ','.
std::string ioLine(const char* role, size_t index, const std::string& name, const Tensor& t) {
  std::string dims;
  for (int64_t d : t.dims())
    dims += (dims.empty() ? "" : ",") + std::to_string(d);
  return fmt::format("{}\t{}\t{}\t{}\t{}\n", role, index, name, dtypeName(t.dtype()), dims);
}

// Writes one raw tensor of the kept case; strings have no raw form, so such a case keeps no data.
bool keepRawTensor(const fs::path& path, const rt::RtValue& value) {
  if (!value.isTensor() || value.tensor.dtype() == DType::String) return false;
  const Tensor& t = value.tensor;
  return writeFileAtomically(path.string(),
                             std::string(reinterpret_cast<const char*>(t.data()), t.byteSize()))
      .isOk();
}

// The folders of the ONNX backend test suites: one operator (or a function's expansion, or a
// few layers) per case, held to the backend tests' tolerance. Every other case (a model zoo folder,
// the backend's `real` suite, a user's own model with data sets) is a real model, compared at each
// output's scale (docs/conformance.md, "Tolerances").
bool inBackendTestSuite(const std::string& caseName) {
  const std::string suite = caseName.substr(0, caseName.find('/'));
  return suite == "node" || suite == "pytorch-converted" || suite == "pytorch-operator" ||
         suite == "simple";
}

// Real models: atol is this fraction of the output's largest expected magnitude. Float32: rounding
// that differs in summation order (a lowering that folds BatchNorm into Conv, another
// accumulation order) leaves errors near 1e-7..1e-6 of the output's scale on the real models
// measured, so 1e-4 keeps two orders of headroom while a 1% error anywhere still fails. FP16
// (--precision fp16): 1e-2, about ten fp16 steps of the largest value.
constexpr double kRealModelScaleFp32 = 1e-4;
constexpr double kRealModelScaleFp16 = 1e-2;
// The floor of a real model's atol: an output of all zeros still compares to float32 noise.
constexpr double kRealModelAtolFloor = 1e-7;

// Over real and imaginary parts alike for complex tensors.
double largestFiniteMagnitude(const Tensor& tensor) {
  Tensor t = tensor;
  if (tensor.dtype() == DType::Complex64 || tensor.dtype() == DType::Complex128)
    t = Tensor(tensor.dtype() == DType::Complex64 ? DType::Float32 : DType::Float64,
               {static_cast<int64_t>(2 * tensor.elementCount())}, tensor.buffer());
  double largest = 0;
  for (uint64_t k = 0; k < t.elementCount(); ++k) {
    const double e = std::fabs(rt::elementAsDouble(t, k));
    if (std::isfinite(e)) largest = std::max(largest, e);
  }
  return largest;
}

CaseResult runCase(const fs::path& dir, const std::string& name,
                   const ConformanceOptions& options) {
  const bool realModel = !inBackendTestSuite(name);
  CaseResult result{name, Outcome::Fail, ""};
  auto model = importOnnxFile((dir / "model.onnx").string());
  if (!model) {
    // A valid model in an element type this build lacks is a skip that names the type; any other
    // import error (a damaged file, an unknown type number) fails the case.
    if (auto type = unsupportedOnnxElementType(model.status())) {
      result.outcome = Outcome::Skip;
      result.reason =
          fmt::format("unsupported element type {}: {}", *type, model.status().toString());
      return result;
    }
    result.reason = "import: " + model.status().toString();
    return result;
  }
  // The declared dtypes of the ONNX graph's inputs and outputs: a target that carries float64 as
  // float32, or int16/uint16/uint32/uint64 as int32/int64 (.ms), declares that type where ONNX
  // says the other; the test data is converted to feed it and its outputs converted back to
  // compare (docs/conformance.md).
  std::map<std::string, DType> sourceInputs;
  std::vector<DType> sourceOutputs;
  // Outputs a DFT or STFT computes (per-op tolerance below), known before the pipeline renames.
  std::vector<bool> spectralOutputs;
  for (const Value* out : model->graph->outputs())
    spectralOutputs.push_back(out->producer() && (out->producer()->opType() == "DFT" ||
                                                  out->producer()->opType() == "STFT"));
  for (const Value* in : model->graph->inputs())
    sourceInputs[in->name()] = in->dtype();
  for (const Value* out : model->graph->outputs())
    sourceOutputs.push_back(out->dtype());
  auto demoted = [](DType source, DType declared) {
    return (source == DType::Float64 && declared == DType::Float32) ||
           ((source == DType::Int16 || source == DType::UInt16) && declared == DType::Int32) ||
           ((source == DType::UInt32 || source == DType::UInt64) && declared == DType::Int64);
  };
  std::optional<ShapeSpec> dataShapes;
  if (options.inputShapeFromData) {
    auto shapes = shapesOfFirstDataSet(dir, *model->graph);
    if (!shapes) {
      result.reason = shapes.status().toString();
      return result;
    }
    if (!shapes->inputs.empty()) dataShapes = shapes.take(); // only dynamic inputs get fixed
  }
  if (options.pipeline != "none") {
    ConversionOptions conversion; // the simplification every converting front-end runs
    conversion.simplify = options.pipeline;
    conversion.inputShapes = dataShapes ? &*dataShapes : nullptr;
    if (options.via != "onnx") conversion.target = options.via;
    auto ran = runConversionPipeline(*model, conversion);
    if (!ran) {
      result.reason =
          (ran.status().code() == ErrorCode::BadFlag ? "" : "pipeline: ") + ran.status().toString();
      return result;
    }
  }
  // --precision fp16 via onnx: the convert-fp16 pass (force_fp16, ATC's default) on the imported
  // model; the backends apply their own FP16 conversion in their round trips.
  if (options.via == "onnx" && options.precision == "fp16") {
    // Outputs in fp16 too (else a single-op case would keep its one node in fp32), widened back to
    // the declared float32 so the expected data compares as is.
    std::vector<bool> wasF32;
    for (const Value* out : model->graph->outputs())
      wasF32.push_back(out->type().kind == TypeKind::Tensor && out->dtype() == DType::Float32);
    PrecisionOptions precision;
    precision.mode = PrecisionMode::ForceFp16;
    precision.outputsFp16 = true;
    PipelineOptions pipelineOptions;
    pipelineOptions.precision = &precision;
    auto ran = runPipeline(*model, {"infer-shapes", "convert-fp16"}, pipelineOptions);
    if (!ran) {
      result.reason = "fp16: " + ran.status().toString();
      return result;
    }
    Graph& graph = *model->graph;
    for (size_t i = 0; i < graph.outputs().size() && i < wasF32.size(); ++i) {
      Value* out = graph.outputs()[i];
      if (!wasF32[i] || out->dtype() != DType::Float16) continue;
      std::string name = out->name();
      graph.renameValue(out, graph.uniqueName(name + "_fp16"));
      Node* cast = graph.insertNodeBefore(nullptr, "Cast", {out}, {name});
      cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Float32)));
      ValueType type = out->type();
      type.dtype = DType::Float32;
      cast->output(0)->setType(type);
      graph.setOutput(i, cast->output(0));
    }
  }
  fs::path keepDir; // --keep-artifacts: this case's folder once its artifact is written
  if (options.via != "onnx") {
    const TargetHooks* target = findTarget(options.via);
    if (!target || !target->roundTrip) {
      result.reason = fmt::format("no artifact path '{}' in this build", options.via);
      return result;
    }
    std::string variant;
    if (auto colon = options.via.find(':'); colon != std::string::npos)
      variant = options.via.substr(colon + 1);
    RoundTripOptions roundTrip{variant, options.precision, ""};
    if (!options.keepArtifacts.empty()) {
      keepDir = fs::path(options.keepArtifacts) / name;
      if (Status made = makeOutputFolder(keepDir.string()); !made) {
        result.reason = made.toString();
        return result;
      }
      roundTrip.artifactPath = (keepDir / ("model" + target->extensions.front())).string();
    }
    auto viaModel = target->roundTrip(model.take(), roundTrip);
    if (!viaModel) {
      const auto& codes = target->unsupportedCodes;
      bool doesNotLower =
          std::find(codes.begin(), codes.end(), viaModel.status().code()) != codes.end();
      result.outcome = doesNotLower ? Outcome::Skip : Outcome::Fail;
      result.reason = (doesNotLower ? "does not lower: " : "via " + options.via + ": ") +
                      viaModel.status().toString();
      return result;
    }
    model = viaModel.take();
  }
  rt::ExecutorOptions executorOptions;
  executorOptions.checkFeeds = false; // the test data contradicts some declared inputs (see there)
  rt::Executor executor(*model, executorOptions);
  if (auto status = executor.checkSupported(); !status) {
    result.outcome = Outcome::Skip;
    result.reason = status.message();
    return result;
  }
  std::vector<const Value*> feedInputs;
  for (const Value* in : model->graph->inputs())
    if (!in->isInitializer()) feedInputs.push_back(in);
  auto sets = sortedMatches(dir, "test_data_set_");
  if (sets.empty()) {
    result.outcome = Outcome::Skip;
    result.reason = "no test_data_set_* folders";
    return result;
  }
  const bool fp16 = options.precision == "fp16";
  Tolerance tolerance;
  if (fp16) { // docs/conformance.md "FP16": ~20 fp16 steps, absolute 1e-2
    tolerance.rtol = 1e-2;
    tolerance.atol = 1e-2;
  }
  if (options.rtol) tolerance.rtol = *options.rtol;
  if (options.atol) tolerance.atol = *options.atol;
  if (options.rtol && options.atol)
    tolerance.name = "--rtol/--atol tolerance";
  else
    tolerance.name =
        fmt::format("{}{} tolerance{}", fp16 ? "fp16 " : "", realModel ? "real-model" : "node-test",
                    options.rtol   ? " with --rtol"
                    : options.atol ? " with --atol"
                                   : "");
  for (const auto& set : sets) {
    // The judges run the first data set only; a value without a raw form leaves io.tsv unwritten.
    const bool keeping = !keepDir.empty() && set == sets.front();
    std::string keptIo;
    bool keptAll = keeping;
    std::map<std::string, rt::RtValue> feeds;
    auto inputFiles = sortedMatches(set, "input_");
    for (size_t i = 0; i < inputFiles.size(); ++i) {
      // Files beyond the declared feed inputs bind initializer-backed inputs in order.
      const Value* target = nullptr;
      if (i < feedInputs.size())
        target = feedInputs[i];
      else if (i < model->graph->inputs().size())
        target = model->graph->inputs()[i];
      if (!target) {
        result.reason = fmt::format("{} has more inputs than the graph", set.filename().string());
        return result;
      }
      auto value = readValueFile(inputFiles[i].string(), target->type());
      if (!value) {
        result.reason = value.status().toString();
        return result;
      }
      if (auto it = sourceInputs.find(target->name());
          it != sourceInputs.end() && demoted(it->second, target->dtype()) && value->isTensor() &&
          value->tensor.dtype() == it->second)
        if (auto narrowed = rt::castTensor(value->tensor, target->dtype()))
          value->tensor = *narrowed;
      if (keeping && i < feedInputs.size()) {
        keptAll = keptAll && keepRawTensor(keepDir / fmt::format("input_{}.bin", i), *value);
        if (value->isTensor()) keptIo += ioLine("input", i, target->name(), value->tensor);
      }
      feeds[target->name()] = value.take();
    }
    auto run = executor.run(feeds);
    if (!run) {
      result.outcome =
          run.status().code() == ErrorCode::RuntimeUnsupported ? Outcome::Skip : Outcome::Fail;
      result.reason = run.status().toString();
      return result;
    }
    auto outputFiles = sortedMatches(set, "output_");
    for (size_t i = 0; i < outputFiles.size(); ++i) {
      if (i >= run->outputs.size()) {
        result.reason = "fewer outputs than expected";
        return result;
      }
      const Value* out = model->graph->outputs()[i];
      auto expected = readValueFile(outputFiles[i].string(), out->type());
      if (!expected) {
        result.reason = expected.status().toString();
        return result;
      }
      // Older test data stores bfloat16 tensors as uint16 words: read them as the declared type.
      if (expected->isTensor() && expected->tensor.dtype() == DType::UInt16 &&
          out->dtype() == DType::BFloat16)
        expected->tensor =
            Tensor(DType::BFloat16, expected->tensor.dims(), expected->tensor.buffer());
      // Per-op exception (docs/conformance.md): bfloat16 results are compared to one bfloat16 step,
      // since the 1.12 test data truncates float → bfloat16 where kiln rounds to nearest even.
      Tolerance outputTolerance = tolerance;
      if (out->dtype() == DType::BFloat16) outputTolerance.rtol = 1.0 / 128;
      // Per-op exception (docs/conformance.md): the test data's float32 transforms are rounded at
      // float32's precision of the output's largest value, so a value that is exactly 0 may be
      // stored as 1.9e-7 next to values of 50; DFT and STFT outputs are compared to an absolute
      // 1e-6 of the largest expected magnitude (the ONNX project relaxes these tests too).
      const bool floatOutput =
          expected->isTensor() && (isFloatingPoint(expected->tensor.dtype()) ||
                                   expected->tensor.dtype() == DType::Complex64 ||
                                   expected->tensor.dtype() == DType::Complex128);
      if (floatOutput && !options.atol && realModel) {
        // A real model's atol follows the output's scale (it replaces fp16's absolute 1e-2 too,
        // which would pass anything on an output whose values are all below it).
        const double scale = fp16 ? kRealModelScaleFp16 : kRealModelScaleFp32;
        const double largest = largestFiniteMagnitude(expected->tensor);
        outputTolerance.atol = std::max(kRealModelAtolFloor, scale * largest);
        outputTolerance.atolFrom = fmt::format(" ({:g} × max|expected| {:.4g})", scale, largest);
      } else if (i < spectralOutputs.size() && spectralOutputs[i] && !options.atol && floatOutput) {
        const double largest = largestFiniteMagnitude(expected->tensor);
        if (1e-6 * largest > outputTolerance.atol) {
          outputTolerance.atol = 1e-6 * largest;
          outputTolerance.atolFrom =
              fmt::format(" (1e-06 × max|expected| {:.4g}, DFT/STFT)", largest);
        }
      }
      if (keeping) {
        // The expected data in the artifact's output dtype (a float64 output the target declares
        // float32 is compared in float32, as above).
        rt::RtValue kept = *expected;
        if (i < sourceOutputs.size() && demoted(sourceOutputs[i], out->dtype()) &&
            kept.isTensor() && kept.tensor.dtype() == sourceOutputs[i])
          if (auto narrowed = rt::castTensor(kept.tensor, out->dtype())) kept.tensor = *narrowed;
        keptAll = keptAll && keepRawTensor(keepDir / fmt::format("expected_{}.bin", i), kept);
        if (kept.isTensor()) keptIo += ioLine("output", i, out->name(), kept.tensor);
      }
      rt::RtValue actual = run->outputs[i];
      if (i < sourceOutputs.size() && demoted(sourceOutputs[i], out->dtype()) &&
          actual.isTensor() && actual.tensor.dtype() == out->dtype() && expected->isTensor() &&
          expected->tensor.dtype() == sourceOutputs[i])
        if (auto widened = rt::castTensor(actual.tensor, sourceOutputs[i]))
          actual.tensor = *widened;
      std::string problem = compareValues(*expected, actual, outputTolerance);
      if (!problem.empty()) {
        result.reason =
            fmt::format("{} output '{}': {}", set.filename().string(), out->name(), problem);
        return result;
      }
    }
    if (keeping && keptAll)
      if (Status s = writeFileAtomically((keepDir / "io.tsv").string(), keptIo); !s) {
        result.reason = s.toString();
        return result;
      }
  }
  result.outcome = Outcome::Pass;
  return result;
}

std::vector<std::pair<fs::path, std::string>> findCases(const std::vector<std::string>& paths) {
  std::vector<std::pair<fs::path, std::string>> cases;
  auto caseName = [](const fs::path& dir) {
    return dir.parent_path().filename().string() + "/" + dir.filename().string();
  };
  for (const auto& p : paths) {
    // Absolute, so a case given as a bare folder name still has a suite ("dir/case", not "/case").
    fs::path root = fs::absolute(fs::path(p)).lexically_normal();
    if (!root.has_filename() && root.has_parent_path()) root = root.parent_path();
    if (fs::exists(root / "model.onnx")) {
      cases.emplace_back(root, caseName(root));
      continue;
    }
    if (!fs::is_directory(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root))
      if (entry.path().filename() == "model.onnx")
        cases.emplace_back(entry.path().parent_path(), caseName(entry.path().parent_path()));
  }
  std::sort(cases.begin(), cases.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  cases.erase(std::unique(cases.begin(), cases.end()),
              cases.end()); // a folder named twice runs once
  return cases;
}

// Child process protocol: one line "P|F|S<tab>reason" on the pipe.
struct Running {
  pid_t pid;
  int fd;
  size_t index;
  std::string buffer;
  std::chrono::steady_clock::time_point start;
};

std::string oneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

} // namespace

std::string compareValues(const rt::RtValue& expected, const rt::RtValue& actual,
                          const Tolerance& tolerance) {
  if (expected.kind != actual.kind)
    return "value kind differs (tensor / sequence / empty optional)";
  if (expected.isTensor()) return compareTensors(expected.tensor, actual.tensor, tolerance);
  if (expected.isSequence()) {
    if (expected.sequence.size() != actual.sequence.size())
      return fmt::format("sequence of {} expected, got {}", expected.sequence.size(),
                         actual.sequence.size());
    for (size_t i = 0; i < expected.sequence.size(); ++i) {
      std::string p = compareTensors(expected.sequence[i], actual.sequence[i], tolerance);
      if (!p.empty()) return fmt::format("sequence item {}: {}", i, p);
    }
  }
  return "";
}

void warmUpBeforeForking() {
  onnx::OpSchemaRegistry::Schema("Relu", 14, "");
  ops::registerMicrosoftSchemas();
  // Wraps every checked op's inference function: ~20% of a small case's CPU via om.
  ops::guardShapeInference();
  ge::proto::ModelDef::descriptor(); // the .om writer walks the ModelDef by reflection
  const float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1};
  float c[4] = {};
  rt::nn::gemm(1, false, false, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
}

int runConformance(const std::vector<std::string>& paths, const ConformanceOptions& options,
                   std::ostream& out) {
  if (!options.keepArtifacts.empty() && options.via == "onnx") {
    out << "kiln: error "
        << Status(ErrorCode::BadFlag,
                  "--keep-artifacts keeps what a target writes, and --via onnx writes nothing",
                  "add --via om or --via ms")
               .toString()
        << "\n";
    return 2;
  }
  auto cases = findCases(paths);
  warmUpBeforeForking();
  std::vector<CaseResult> results(cases.size());
  std::vector<Running> running;
  size_t next = 0;
  const int jobs = std::max(1, options.jobs);
  while (next < cases.size() || !running.empty()) {
    while (next < cases.size() && static_cast<int>(running.size()) < jobs) {
      int fds[2];
      if (pipe(fds) != 0) {
        out << "kiln: cannot create a pipe\n";
        return 1;
      }
      out.flush();
      pid_t pid = fork();
      if (pid == 0) {
        close(fds[0]);
        CaseResult r = runCase(cases[next].first, cases[next].second, options);
        std::string line = std::string(r.outcome == Outcome::Pass   ? "P"
                                       : r.outcome == Outcome::Skip ? "S"
                                                                    : "F") +
                           "\t" + oneLine(r.reason) + "\n";
        ssize_t ignored = write(fds[1], line.data(), line.size());
        (void)ignored;
        _exit(0);
      }
      close(fds[1]);
      running.push_back({pid, fds[0], next, "", std::chrono::steady_clock::now()});
      ++next;
    }
    std::vector<pollfd> polls;
    for (const auto& r : running)
      polls.push_back({r.fd, POLLIN, 0});
    poll(polls.data(), polls.size(), 1000);
    for (size_t k = 0; k < running.size();) {
      Running& r = running[k];
      bool done = false;
      if (polls.size() > k && (polls[k].revents & (POLLIN | POLLHUP))) {
        char chunk[4096];
        ssize_t got = read(r.fd, chunk, sizeof chunk);
        if (got > 0)
          r.buffer.append(chunk, static_cast<size_t>(got));
        else
          done = true;
      }
      bool timedOut =
          std::chrono::steady_clock::now() - r.start > std::chrono::seconds(options.timeoutSeconds);
      if (timedOut && !done) kill(r.pid, SIGKILL);
      if (done || timedOut) {
        int status = 0;
        waitpid(r.pid, &status, 0);
        close(r.fd);
        CaseResult& result = results[r.index];
        result.name = cases[r.index].second;
        if (timedOut) {
          result.outcome = Outcome::Fail;
          result.reason = fmt::format("timed out after {} s", options.timeoutSeconds);
        } else if (r.buffer.size() >= 2) {
          result.outcome = r.buffer[0] == 'P'   ? Outcome::Pass
                           : r.buffer[0] == 'S' ? Outcome::Skip
                                                : Outcome::Fail;
          result.reason = r.buffer.substr(2, r.buffer.size() - 3);
        } else {
          result.outcome = Outcome::Fail;
          result.reason = WIFSIGNALED(status)
                              ? fmt::format("crashed with signal {}", WTERMSIG(status))
                              : "child exited without a result";
        }
        running.erase(running.begin() + static_cast<std::ptrdiff_t>(k));
        polls.erase(polls.begin() + static_cast<std::ptrdiff_t>(k));
        continue;
      }
      ++k;
    }
  }

  size_t passed = 0, failed = 0, skipped = 0;
  std::set<std::string> passing;
  for (const auto& r : results) {
    const char* label = r.outcome == Outcome::Pass   ? "PASS"
                        : r.outcome == Outcome::Skip ? "SKIP"
                                                     : "FAIL";
    if (r.outcome == Outcome::Pass) {
      ++passed;
      passing.insert(r.name);
    } else if (r.outcome == Outcome::Skip) {
      ++skipped;
    } else {
      ++failed;
    }
    if (!options.quiet || r.outcome != Outcome::Pass)
      out << label << " " << r.name << (r.reason.empty() ? "" : ": " + r.reason) << "\n";
  }
  int exitCode = 0;
  if (!options.expectFile.empty()) {
    auto listed = readInputFile(options.expectFile);
    if (!listed) {
      out << "kiln: cannot read expectation list " << options.expectFile << ": "
          << listed.status().message() << "\n";
      return 1;
    }
    std::istringstream in(*listed);
    std::set<std::string> found;
    for (const auto& c : cases)
      found.insert(c.second);
    std::string line;
    size_t regressions = 0, expectedCount = 0;
    std::set<std::string> expected;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      expected.insert(line);
      if (!found.count(line)) continue; // not among the paths given
      ++expectedCount;
      if (!passing.count(line)) {
        out << "REGRESSION " << line << " is listed in " << options.expectFile
            << " but did not pass\n";
        ++regressions;
      }
    }
    size_t fresh = 0;
    for (const auto& name : passing)
      if (!expected.count(name)) ++fresh;
    out << fmt::format(
        "expectations: {} listed cases run, {} regressed, {} newly passing (not listed)\n",
        expectedCount, regressions, fresh);
    if (regressions) exitCode = 1;
  }
  if (!options.writeExpected.empty()) {
    std::string list =
        "# Cases expected to pass `kiln conformance` (regenerate with --write-expected).\n";
    for (const auto& name : passing)
      list += name + "\n";
    if (Status s = writeFileAtomically(options.writeExpected, list); !s) {
      out << "kiln: error " << s.toString() << "\n";
      return 1;
    }
  }
  out << fmt::format("{} passed, {} failed, {} skipped\n", passed, failed, skipped);
  if (options.expectFile.empty() && failed > 0) exitCode = 1;
  return exitCode;
}

} // namespace kiln
