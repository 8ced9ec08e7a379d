// The benchmark drop-in's library side: flags, raw inputs, the expected-output text format, the
// mean-bias/cosine accuracy rule and the timing loop, printing the lines benchmark prints.
#include "kiln/backends/ms_benchmark.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/compare.h"
#include "kiln/inspect.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/shape_spec.h"
#include "kiln/support/display.h"
#include "kiln/support/input_file.h"
#include "lite_flags.h"

namespace kiln {
namespace {

// Every flag benchmark knows; `values` restricts the value ({} = any), `kind` checks numbers.
enum class FlagKind { String, Int, Double, Bool, Enum };
struct FlagSpec {
  const char* name;
  FlagKind kind = FlagKind::String;
  std::vector<const char*> values = {};
};

const std::vector<FlagSpec>& flagSpecs() {
  static const std::vector<FlagSpec> specs = {
      {"modelFile"},
      {"modelType", FlagKind::Enum, {"MindIR", "MindIR_Lite"}},
      {"inDataFile"},
      {"benchmarkDataFile"},
      {"benchmarkDataType", FlagKind::Enum, {"FLOAT", "INT32", "INT8", "UINT8"}},
      {"accuracyThreshold", FlagKind::Double},
      {"cosineDistanceThreshold", FlagKind::Double},
      {"loopCount", FlagKind::Int},
      {"warmUpLoopCount", FlagKind::Int},
      {"numThreads", FlagKind::Int},
      {"cpuBindMode", FlagKind::Int},
      {"device", FlagKind::Enum, {"CPU", "GPU", "NPU", "Ascend", "Auto"}},
      {"provider", FlagKind::Enum, {"litert", "tensorrt", "mindrt"}},
      {"enableFp16", FlagKind::Bool},
      {"enableParallel", FlagKind::Bool},
      {"inputShapes"},
      {"inputShape"},
      {"timeProfiling", FlagKind::Bool},
      {"perfProfiling", FlagKind::Bool},
      {"perfEvent", FlagKind::Enum, {"CYCLE", "CACHE", "STALL"}},
      {"configFile"},
      {"GroupInfoFile"},
      {"decryptKey"},
      {"cryptoLibPath"},
      {"enableParallelPredict", FlagKind::Bool},
      {"parallelNum", FlagKind::Int},
      {"parallelTaskNum", FlagKind::Int},
      {"workersNum", FlagKind::Int},
      {"cpuCoreList"},
      {"interOpParallelNum", FlagKind::Int},
      {"enableGLTexture", FlagKind::Bool},
      {"delegateMode"},
      {"enableSharedThreadPool", FlagKind::Bool},
      {"threadNumLimitPerWorker", FlagKind::Int},
      {"threadNumRemainingPerWorker", FlagKind::Int},
  };
  return specs;
}

// The most worker threads a run takes (as `kiln run --threads`): each one costs a stack and
// scratch memory, so 100000 would only exhaust memory.
constexpr int kMaxBenchmarkThreads = 256;

Status badFlag(const std::string& message, const std::string& hint) {
  return Status(ErrorCode::BadFlag, message, hint).withPeerCode("-1");
}

Status dataInvalid(const std::string& message, const std::string& hint) {
  return Status(ErrorCode::BenchmarkDataInvalid, message, hint).withPeerCode("-1");
}

std::vector<std::string> splitAny(const std::string& s, const std::string& separators) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find_first_of(separators, start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

template <typename T> bool parseNumber(const std::string& text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

// Bytes of a tensor of `type` and `dims`, or nothing when they do not fit in int64 (dims come
// from the command line and from model files; the tensor code would get a 0-byte buffer).
std::optional<uint64_t> staticByteSize(DType type, const std::vector<int64_t>& dims) {
  auto count = checkedElementCount(dims);
  if (!count) return std::nullopt;
  auto bytes = dtypeStorageBytes(type, *count);
  if (!bytes || *bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return std::nullopt;
  return bytes;
}

// Input dims after --inputShape / --inputShapes, checked against the graph's inputs.
Status applyInputShapes(const BenchmarkOptions& options, Graph& graph) {
  std::vector<Value*> inputs;
  for (Value* in : graph.inputs())
    if (!in->isInitializer()) inputs.push_back(in);
  std::vector<std::pair<Value*, std::vector<int64_t>>> shapes;
  if (!options.inputShape.empty()) {
    auto spec = parseShapeSpec(options.inputShape, ShapeDialect::ConverterLite);
    if (!spec)
      return Status(ErrorCode::BadFlag, "--inputShape: " + spec.status().message(),
                    spec.status().hint());
    for (const InputShapeSpec& entry : spec->inputs) {
      Value* in = findSpecInput(entry, graph);
      if (!in || in->isInitializer()) {
        std::vector<std::string> names;
        for (Value* v : inputs)
          names.push_back(v->name());
        return Status(
            ErrorCode::ShapeSpecUnknownInput,
            fmt::format("--inputShape: '{}' is not an input of {}", entry.name, options.modelFile),
            fmt::format("the inputs are: {}", fmt::join(names, ", ")));
      }
      std::vector<int64_t> dims;
      for (const DimSpec& d : entry.dims)
        dims.push_back(d.lo);
      shapes.emplace_back(in, dims);
    }
  } else if (!options.inputShapes.empty()) {
    std::vector<std::string> entries = splitAny(options.inputShapes, ":");
    if (entries.size() > inputs.size())
      return Status(ErrorCode::ShapeSpecSyntax,
                    fmt::format("--inputShapes gives {} shapes but {} has {} input(s)",
                                entries.size(), options.modelFile, inputs.size()),
                    "give one shape per input, separated by ':'");
    for (size_t i = 0; i < entries.size(); ++i) {
      std::vector<int64_t> dims;
      for (const std::string& d : splitAny(entries[i], ",")) {
        int64_t v = 0;
        if (!parseNumber(d, v) || v < 0)
          return Status(ErrorCode::ShapeSpecBadDim,
                        fmt::format("--inputShapes: '{}' in '{}' is not a non-negative integer", d,
                                    entries[i]),
                        "write shapes as 1,32,32,3:1,10");
        dims.push_back(v);
      }
      shapes.emplace_back(inputs[i], dims);
    }
  }
  for (auto& [in, dims] : shapes) {
    if (!staticByteSize(in->dtype(), dims))
      return Status(
          ErrorCode::ShapeSpecBadDim,
          fmt::format("input '{}': the shape given ({}) holds more bytes than a tensor can",
                      displayName(in->name()), fmt::join(dims, ",")),
          "give the dims the model is meant to run at");
    if (in->shape().hasRank() && in->shape().rank() != dims.size())
      return Status(ErrorCode::ShapeSpecRankMismatch,
                    fmt::format("input '{}' has rank {} ({}) but the shape given has {} dims",
                                in->name(), in->shape().rank(), in->shape().toString(),
                                dims.size()),
                    "give as many dims as the input has");
    ValueType type = in->type();
    type.kind = TypeKind::Tensor;
    type.shape = Shape::fromStatic(dims);
    in->setType(type);
  }
  for (Value* in : inputs) {
    if (!in->shape().isStatic())
      return Status(ErrorCode::RuntimeMissingInput,
                    fmt::format("The shape of input '{}' is {}, which contains a dynamic or "
                                "negative dimension",
                                in->name(), in->shape().toString()),
                    fmt::format("give it with --inputShape=\"{}:...\"", in->name()));
    // The model file's own dims (a damaged .ms can say 2147483647 for each) must give a size
    // that fits before any input is generated or read.
    if (!staticByteSize(in->dtype(), in->shape().staticDims()))
      return Status(
          ErrorCode::RuntimeBadInput,
          fmt::format("input '{}' has shape {}, which holds more bytes than a tensor can",
                      displayName(in->name()), in->shape().toString()),
          fmt::format("give its real shape with --inputShape=\"{}:...\"", displayName(in->name())));
  }
  return Status::ok();
}

Expected<std::map<std::string, rt::RtValue>> readInputs(const BenchmarkOptions& options,
                                                        const Graph& graph) {
  if (options.inDataFiles.empty()) return makeDeterministicInputs(graph, 1);
  std::vector<const Value*> inputs;
  for (const Value* in : graph.inputs())
    if (!in->isInitializer()) inputs.push_back(in);
  if (options.inDataFiles.size() != inputs.size())
    return dataInvalid(fmt::format("--inDataFile names {} file(s) but {} has {} input(s)",
                                   options.inDataFiles.size(), options.modelFile, inputs.size()),
                       "give one raw binary file per input, in input order, separated by ','");
  std::map<std::string, rt::RtValue> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string& path = options.inDataFiles[i];
    const Value* in = inputs[i];
    if (dtypeBits(in->dtype()) < 8)
      return dataInvalid(fmt::format("input '{}' has type {}, which a raw binary file cannot hold",
                                     in->name(), dtypeName(in->dtype())),
                         "benchmark this model with generated inputs (no --inDataFile)");
    auto required = staticByteSize(in->dtype(), in->shape().staticDims());
    auto read = readInputFile(path);
    if (!read && read.status().code() == ErrorCode::FileNotFound)
      return Status(ErrorCode::FileNotFound, fmt::format("--inDataFile: {} cannot be opened", path),
                    "check the path (files are separated by ',')");
    if (!read) return read.status().withContext("--inDataFile").withPeerCode("-1");
    const std::string& bytes = *read;
    if (!required || bytes.size() != *required)
      return dataInvalid(fmt::format("Input binary file size error, required: {}, in fact: {} "
                                     "({} for input '{}' {} {})",
                                     required ? fmt::format("{}", *required) : "too many",
                                     bytes.size(), path, displayName(in->name()),
                                     dtypeName(in->dtype()), in->shape().toString()),
                         "write exactly elements × sizeof(dtype) bytes per input, or fix the "
                         "shape with --inputShape");
    rt::OutTensor tensor(in->dtype(), in->shape().staticDims());
    std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(tensor.bytes()));
    feeds[in->name()] = rt::RtValue::ofTensor(std::move(tensor).finish());
  }
  return feeds;
}

std::string modelName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

std::string joinFirst(const std::vector<float>& values, size_t count) {
  std::string out;
  for (size_t i = 0; i < values.size() && i < count; ++i)
    out += fmt::format("{:g} ", values[i]);
  return out;
}

Status compareOutputs(const BenchmarkOptions& options, const Model& model, const rt::RunResult& run,
                      std::ostream& out) {
  auto text = readInputFile(options.benchmarkDataFile);
  if (!text && text.status().code() == ErrorCode::FileNotFound)
    return Status(
        ErrorCode::FileNotFound,
        fmt::format("--benchmarkDataFile: {} cannot be opened", options.benchmarkDataFile),
        "check the path");
  if (!text) return text.status().withContext("--benchmarkDataFile");
  KILN_ASSIGN_OR_RETURN(std::vector<BenchmarkDataTensor> expected,
                        parseBenchmarkData(*text, options.benchmarkDataFile));
  std::map<std::string, size_t> outputIndex;
  std::vector<std::string> outputNames;
  for (size_t i = 0; i < model.graph->outputs().size(); ++i) {
    outputIndex[model.graph->outputs()[i]->name()] = i;
    outputNames.push_back(model.graph->outputs()[i]->name());
  }
  std::set<std::string> expectedNames;
  for (const auto& e : expected)
    expectedNames.insert(e.name);
  for (const auto& e : expected)
    if (!outputIndex.count(e.name))
      return dataInvalid(fmt::format("The output tensor name is wrong: {} names '{}', but the "
                                     "model's outputs are {}",
                                     options.benchmarkDataFile, e.name,
                                     fmt::join(outputNames, ", ")),
                         "regenerate the data file for this model");
  for (const std::string& name : outputNames)
    if (!expectedNames.count(name))
      return dataInvalid(fmt::format("{} has no data for output '{}' (it has {})",
                                     options.benchmarkDataFile, name,
                                     fmt::join(expectedNames, ", ")),
                         "regenerate the data file for this model");
  double biasSum = 0, cosineSum = 0;
  for (const BenchmarkDataTensor& e : expected) {
    const rt::RtValue& value = run.outputs[outputIndex[e.name]];
    if (!value.isTensor())
      return dataInvalid(fmt::format("output '{}' is not a tensor", e.name),
                         "benchmark compares tensor outputs only");
    if (value.tensor.dims() != e.dims)
      return dataInvalid(fmt::format("output '{}': the model produces {} but {} expects {}", e.name,
                                     Shape::fromStatic(value.tensor.dims()).toString(),
                                     options.benchmarkDataFile,
                                     Shape::fromStatic(e.dims).toString()),
                         "regenerate the data file, or give the inputs' shapes with --inputShape");
    std::vector<float> actual = rt::toFloatVector(value.tensor);
    out << "Data of node " << displayName(e.name) << " : " << joinFirst(actual, 50) << "\n";
    BenchmarkTensorAccuracy accuracy = compareBenchmarkTensor(e.values, actual);
    if (accuracy.nonFinite)
      return Status(ErrorCode::BenchmarkAccuracyFailed,
                    fmt::format("output '{}' holds NaN or Inf", e.name),
                    "kiln compare --per-tensor names the first node that goes non-finite")
          .withPeerCode("-1");
    out << fmt::format("Mean bias of node/tensor {} : {:f}%\n", displayName(e.name),
                       accuracy.meanError * 100);
    biasSum += accuracy.meanError;
    cosineSum += accuracy.cosine;
  }
  double meanBias = expected.empty() ? 0 : biasSum / static_cast<double>(expected.size()) * 100;
  double meanCosine = expected.empty() ? 1 : cosineSum / static_cast<double>(expected.size());
  out << fmt::format("Mean bias of all nodes/tensors: {:f}%\n", meanBias);
  if (options.cosineDistanceThreshold >= -1)
    out << fmt::format("Cosine distance of all nodes/tensors: {:f}\n", meanCosine);
  if (meanBias > options.accuracyThreshold) {
    out << fmt::format("Mean bias of all nodes/tensors is too big: {:f}%\n", meanBias);
    return Status(ErrorCode::BenchmarkAccuracyFailed,
                  fmt::format("{}: mean bias {:f}% is above --accuracyThreshold={}%",
                              options.modelFile, meanBias, options.accuracyThreshold),
                  "check the conversion (kiln compare --per-tensor names the first divergent node)")
        .withPeerCode("-1");
  }
  if (options.cosineDistanceThreshold >= -1 && meanCosine < options.cosineDistanceThreshold)
    return Status(ErrorCode::BenchmarkAccuracyFailed,
                  fmt::format("{}: mean cosine similarity {:f} is below "
                              "--cosineDistanceThreshold={}",
                              options.modelFile, meanCosine, options.cosineDistanceThreshold),
                  "check the conversion (kiln compare --per-tensor names the first divergent node)")
        .withPeerCode("-1");
  return Status::ok();
}

} // namespace

std::string benchmarkUsage() {
  return "usage: benchmark --modelFile=MODEL [options]\n"
         "Runs a model (.ms, .om or .onnx) on kiln's CPU executor, as MindSpore Lite's benchmark "
         "does.\n"
         "  --modelFile=PATH                model to run: .ms, .om (atc's) or .onnx\n"
         "  --inDataFile=A.bin,B.bin        raw binary input per graph input (default: generated)\n"
         "  --benchmarkDataFile=OUT.txt     expected outputs: \"name ndim d0 d1 ...\" + a line of "
         "values\n"
         "  --benchmarkDataType=FLOAT|INT32|INT8|UINT8\n"
         "  --accuracyThreshold=0.5         max mean bias of all outputs, percent\n"
         "  --cosineDistanceThreshold=-1.1  min mean cosine similarity (checked when >= -1)\n"
         "  --loopCount=10 --warmUpLoopCount=3 --numThreads=2\n"
         "  --inputShape=\"in:1,3,224,224;...\"  --inputShapes=1,3,224,224:1,10\n"
         "  --timeProfiling=true            time per op type\n"
         "Other MindSpore Lite benchmark flags are accepted; device settings other than CPU "
         "fail.\n";
}

Expected<BenchmarkOptions> parseBenchmarkArgs(const std::vector<std::string>& args,
                                              bool& wantsHelp) {
  wantsHelp = false;
  for (const std::string& arg : args)
    if (arg == "--help" || arg == "-h") {
      wantsHelp = true;
      return BenchmarkOptions{};
    }
  std::vector<std::string> known;
  for (const FlagSpec& f : flagSpecs())
    known.push_back(f.name);
  auto split = splitLiteFlags(
      args, known, "see benchmark --help for the flags", "-1",
      [&](const std::string& name, const std::string& value) -> Status {
        const FlagSpec& spec = *std::find_if(flagSpecs().begin(), flagSpecs().end(),
                                             [&](const FlagSpec& f) { return name == f.name; });
        bool ok = true;
        switch (spec.kind) {
        case FlagKind::String:
          break;
        case FlagKind::Int: {
          int64_t v;
          ok = parseNumber(value, v);
          break;
        }
        case FlagKind::Double: {
          double v;
          ok = parseNumber(value, v);
          break;
        }
        case FlagKind::Bool:
          ok = value == "true" || value == "false";
          break;
        case FlagKind::Enum:
          ok = std::find_if(spec.values.begin(), spec.values.end(),
                            [&](const char* v) { return value == v; }) != spec.values.end();
          break;
        }
        if (!ok) {
          std::string expected = spec.kind == FlagKind::Int      ? "an integer"
                                 : spec.kind == FlagKind::Double ? "a number"
                                 : spec.kind == FlagKind::Bool
                                     ? "true or false"
                                     : fmt::format("one of {}", fmt::join(spec.values, ", "));
          return badFlag(fmt::format("--{}={}: the value must be {}", name, value, expected),
                         fmt::format("write --{}=<{}>", name, expected));
        }
        return Status::ok();
      });
  if (!split) return split.status();
  std::map<std::string, std::string> given = split.take();
  auto get = [&](const char* name, const std::string& fallback = "") {
    auto it = given.find(name);
    return it == given.end() ? fallback : it->second;
  };
  BenchmarkOptions options;
  options.modelFile = get("modelFile");
  if (options.modelFile.empty())
    return badFlag("--modelFile is required", "pass --modelFile=MODEL.ms");
  options.inDataFiles = splitAny(get("inDataFile"), ", \t");
  options.benchmarkDataFile = get("benchmarkDataFile");
  options.benchmarkDataType = get("benchmarkDataType", "FLOAT");
  if (given.count("accuracyThreshold"))
    parseNumber(get("accuracyThreshold"), options.accuracyThreshold);
  if (given.count("cosineDistanceThreshold"))
    parseNumber(get("cosineDistanceThreshold"), options.cosineDistanceThreshold);
  // Counts must be integers that fit: "abc" or 99999999999 is an error, not the default.
  for (auto [name, value] : {std::pair<const char*, int*>{"loopCount", &options.loopCount},
                             {"warmUpLoopCount", &options.warmUpLoopCount},
                             {"numThreads", &options.numThreads}})
    if (given.count(name) && !parseNumber(get(name), *value))
      return badFlag(fmt::format("--{}={} is not an integer", name, displayName(get(name))),
                     fmt::format("pass --{} as a whole number", name));
  if (options.accuracyThreshold < 0)
    return badFlag(fmt::format("--accuracyThreshold={} is negative", options.accuracyThreshold),
                   "give the maximum mean bias in percent, e.g. 0.5");
  if (options.loopCount < 1)
    return badFlag(
        fmt::format("--loopCount={}: LoopCount must be greater than 0", options.loopCount),
        "pass --loopCount=1 or more");
  if (options.warmUpLoopCount < 0)
    return badFlag(fmt::format("--warmUpLoopCount={}: WarmUpLoopCount must be greater than or "
                               "equal to 0",
                               options.warmUpLoopCount),
                   "pass --warmUpLoopCount=0 or more");
  if (options.numThreads < 1)
    return badFlag(
        fmt::format("--numThreads={}: numThreads must be greater than 0", options.numThreads),
        "pass --numThreads=1 or more");
  if (options.numThreads > kMaxBenchmarkThreads)
    return badFlag(fmt::format("--numThreads={}: numThreads must be at most {}", options.numThreads,
                               kMaxBenchmarkThreads),
                   fmt::format("pass --numThreads from 1 to {}", kMaxBenchmarkThreads));
  if (get("device", "CPU") != "CPU")
    return Status(ErrorCode::BadFlag,
                  fmt::format("--device={}: kiln's benchmark runs on the CPU only", get("device")),
                  "drop --device or pass --device=CPU")
        .withPeerCode("-7");
  options.inputShapes = get("inputShapes");
  options.inputShape = get("inputShape");
  options.timeProfiling = get("timeProfiling", "false") == "true";
  // Accepted for compatibility, with no effect: say so instead of ignoring them silently.
  static const std::set<std::string> used = {"modelFile",
                                             "modelType",
                                             "inDataFile",
                                             "benchmarkDataFile",
                                             "benchmarkDataType",
                                             "accuracyThreshold",
                                             "cosineDistanceThreshold",
                                             "loopCount",
                                             "warmUpLoopCount",
                                             "numThreads",
                                             "device",
                                             "inputShapes",
                                             "inputShape",
                                             "timeProfiling"};
  for (const auto& [name, value] : given) {
    if (used.count(name)) continue;
    if (name == "enableFp16" && value == "true")
      options.notes.push_back("--enableFp16=true has no effect: kiln's benchmark computes in "
                              "the model's own types (a float32 model runs in float32); convert "
                              "with --fp16=on to store and run float16");
    else if (name == "enableFp16")
      continue;
    else if (name == "provider")
      options.notes.push_back(fmt::format("--provider={} has no effect: kiln's benchmark has one "
                                          "executor, kiln's CPU reference executor",
                                          value));
    else
      options.notes.push_back(
          fmt::format("--{}={} is accepted for compatibility and has no effect in kiln's benchmark",
                      name, value));
  }
  return options;
}

Expected<std::vector<BenchmarkDataTensor>> parseBenchmarkData(const std::string& text,
                                                              const std::string& displayName) {
  std::vector<BenchmarkDataTensor> out;
  std::set<std::string> seen;
  std::istringstream stream(text);
  std::string header;
  int line = 0;
  while (std::getline(stream, header)) {
    ++line;
    std::vector<std::string> fields = splitAny(header, " \t\r");
    if (fields.empty()) continue;
    BenchmarkDataTensor tensor;
    tensor.name = fields[0];
    int64_t rank = 0;
    if (fields.size() < 2 || !parseNumber(fields[1], rank) || rank < 0)
      return dataInvalid(
          fmt::format("{}:{}: '{}' is not \"<name> <ndim> <dims...>\"", displayName, line, header),
          "each output takes a line \"name ndim d0 d1 ...\" and a line of values");
    if (fields.size() != static_cast<size_t>(rank) + 2)
      return dataInvalid(fmt::format("{}:{}: tensor '{}' says {} dims but lists {}", displayName,
                                     line, tensor.name, rank, fields.size() - 2),
                         "list exactly ndim dims after ndim");
    uint64_t count = 1;
    for (size_t i = 2; i < fields.size(); ++i) {
      int64_t d = 0;
      if (!parseNumber(fields[i], d) || d < 0)
        return dataInvalid(fmt::format("{}:{}: dim '{}' of tensor '{}' is not a non-negative "
                                       "integer",
                                       displayName, line, fields[i], tensor.name),
                           "write dims as integers");
      tensor.dims.push_back(d);
      count *= static_cast<uint64_t>(d);
    }
    std::string data;
    if (!std::getline(stream, data))
      return dataInvalid(fmt::format("{}:{}: tensor '{}' has no line of values after its header",
                                     displayName, line, tensor.name),
                         "put all values of the tensor on the next line");
    ++line;
    for (const std::string& v : splitAny(data, " \t\r")) {
      // strtof takes "nan"/"inf" and exponents as the text format may hold them.
      char* end = nullptr;
      float f = std::strtof(v.c_str(), &end);
      if (end != v.c_str() + v.size())
        return dataInvalid(fmt::format("{}:{}: '{}' in the values of '{}' is not a number",
                                       displayName, line, v, tensor.name),
                           "write values as decimal numbers separated by spaces");
      tensor.values.push_back(f);
    }
    if (tensor.values.size() != count)
      return dataInvalid(fmt::format("{}:{}: tensor '{}' {} needs {} values but the line has {}",
                                     displayName, line, tensor.name,
                                     Shape::fromStatic(tensor.dims).toString(), count,
                                     tensor.values.size()),
                         "write prod(dims) values on the line after the header");
    if (seen.insert(tensor.name).second) out.push_back(std::move(tensor));
  }
  if (out.empty())
    return dataInvalid(fmt::format("{} holds no tensors", displayName),
                       "write \"name ndim d0 d1 ...\" and a line of values per output");
  return out;
}

BenchmarkTensorAccuracy compareBenchmarkTensor(const std::vector<float>& expected,
                                               const std::vector<float>& actual) {
  BenchmarkTensorAccuracy result;
  for (float v : actual)
    if (!std::isfinite(v)) result.nonFinite = true;
  // One rule for kiln compare and benchmark (computeMetrics follows benchmark's definition).
  std::vector<int64_t> ed = {static_cast<int64_t>(expected.size())},
                       ad = {static_cast<int64_t>(actual.size())};
  TensorMetrics m = computeMetrics(Tensor::fromValues<float>(DType::Float32, ed, expected),
                                   Tensor::fromValues<float>(DType::Float32, ad, actual));
  result.meanError = m.meanRelativeError;
  result.cosine = m.cosine;
  return result;
}

Status runBenchmark(const BenchmarkOptions& options, std::ostream& out) {
  KILN_ASSIGN_OR_RETURN(Model model, loadModel(options.modelFile));
  KILN_TRY(applyInputShapes(options, *model.graph));
  KILN_ASSIGN_OR_RETURN(auto feeds, readInputs(options, *model.graph));
  rt::ExecutorOptions executorOptions;
  executorOptions.threads = options.numThreads;
  executorOptions.profile = options.timeProfiling;
  rt::Executor executor(model, executorOptions);
  KILN_TRY(executor.checkSupported());
  const std::string name = modelName(options.modelFile);
  out << "ModelPath = " << options.modelFile << "\n";
  out << "NumThreads = " << options.numThreads << "\n";
  if (!options.benchmarkDataFile.empty()) {
    out << "MarkAccuracy\n";
    KILN_ASSIGN_OR_RETURN(rt::RunResult run, executor.run(feeds));
    KILN_TRY(compareOutputs(options, model, run, out));
  } else {
    out << "Running warm up loops...\n";
    for (int i = 0; i < options.warmUpLoopCount; ++i) {
      auto run = executor.run(feeds);
      if (!run) return run.status();
    }
    out << "Running benchmark loops...\n";
    double minMs = 1e300, maxMs = 0, sumMs = 0;
    std::map<std::string, rt::OpProfile> profile;
    uint64_t nonFinite = 0, values = 0; // in the last run's outputs
    for (int i = 0; i < options.loopCount; ++i) {
      auto start = std::chrono::steady_clock::now();
      auto run = executor.run(feeds);
      double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count();
      if (!run) return run.status();
      if (i + 1 == options.loopCount) {
        for (const rt::RtValue& v : run->outputs) {
          if (!v.isTensor() || !isFloatingPoint(v.tensor.dtype())) continue;
          for (float x : rt::toFloatVector(v.tensor)) {
            ++values;
            nonFinite += !std::isfinite(x);
          }
        }
      }
      minMs = std::min(minMs, ms);
      maxMs = std::max(maxMs, ms);
      sumMs += ms;
      for (const auto& [op, p] : run->profile) {
        profile[op].millis += p.millis;
        profile[op].calls += p.calls;
      }
    }
    if (options.timeProfiling) {
      out << "-------------------------------------------------------------------------\n";
      out << fmt::format("{:<24}{:>16}{:>12}{:>16}\n", "opType", "avg(ms)", "calls", "total(ms)");
      for (const auto& [op, p] : profile)
        out << fmt::format("{:<24}{:>16f}{:>12}{:>16f}\n", displayName(op),
                           p.millis / static_cast<double>(options.loopCount),
                           p.calls / static_cast<uint64_t>(options.loopCount), p.millis);
    }
    out << fmt::format("Model = {}, NumThreads = {}, MinRunTime = {:f} ms, MaxRuntime = {:f} ms, "
                       "AvgRunTime = {:f} ms\n",
                       name, options.numThreads, minMs, maxMs,
                       sumMs / static_cast<double>(options.loopCount));
    // Timing alone says nothing of the numbers; an overflowed model still runs fast.
    if (nonFinite > 0)
      out << fmt::format("Warning: {} of {} output values are NaN or Inf (check the model's "
                         "numbers with --benchmarkDataFile or kiln compare)\n",
                         nonFinite, values);
  }
  out << "Run Benchmark " << name << " Success.\n";
  return Status::ok();
}

} // namespace kiln
