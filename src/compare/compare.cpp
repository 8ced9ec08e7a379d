// Output comparison between two models run by the CPU executor.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/compare.h"

#include "kiln/backends/aipp.h"
#include "kiln/passes/pass.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"
#include "runtime/kernels/shape_util.h"

namespace kiln {

TensorMetrics computeMetrics(const Tensor& reference, const Tensor& output) {
  std::vector<float> ref = rt::toFloatVector(reference), out = rt::toFloatVector(output);
  TensorMetrics m;
  m.elements = ref.size();
  double dot = 0, normRef = 0, normOut = 0, noise = 0, errorSum = 0;
  uint64_t errorCount = 0;
  for (size_t i = 0; i < ref.size() && i < out.size(); ++i) {
    double e = ref[i], a = out[i];
    if (!std::isfinite(a) && std::isfinite(e)) {
      m.nonFinite = true;
      ++m.nonFiniteCount;
    }
    double diff = std::fabs(a - e);
    m.maxAbsError = std::max(m.maxAbsError, diff);
    dot += e * a;
    normRef += e * e;
    normOut += a * a;
    noise += (a - e) * (a - e);
    // MindSpore Lite benchmark: elements within 1e-8 + 1e-5|e| are ignored; near-zero references
    // add the absolute error (when above 1e-5), others the relative error.
    if (diff <= 1e-8 + 1e-5 * std::fabs(e)) continue;
    if (std::fabs(e) < std::numeric_limits<float>::epsilon()) {
      if (diff > 1e-5) {
        errorSum += diff;
        ++errorCount;
      }
    } else {
      errorSum += diff / std::fabs(e);
      ++errorCount;
    }
  }
  m.meanRelativeError = errorCount ? errorSum / static_cast<double>(errorCount) : 0.0;
  if (normRef == 0 && normOut == 0)
    m.cosine = 1.0;
  else if (normRef == 0 || normOut == 0)
    m.cosine = 0.0;
  else
    m.cosine = dot / (std::sqrt(normRef) * std::sqrt(normOut));
  m.sqnrDb =
      noise == 0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(normRef / noise);
  return m;
}

Expected<std::map<std::string, rt::RtValue>> makeDeterministicInputs(const Graph& graph,
                                                                     uint32_t seed) {
  std::map<std::string, rt::RtValue> feeds;
  uint32_t index = 0;
  for (const Value* in : graph.inputs()) {
    if (in->isInitializer()) continue;
    ++index;
    if (in->type().kind != TypeKind::Tensor || !in->shape().isStatic())
      return Status(ErrorCode::RuntimeMissingInput,
                    fmt::format("input '{}' has no static shape ({}) to generate data for",
                                in->name(), in->shape().toString()),
                    "fix its shape with --input-shape or pass --input NAME=FILE.pb");
    // Checked here, not left to OutTensor: outside a kernel its refusal would be an exception.
    const std::vector<int64_t> dims = in->shape().staticDims();
    auto extent = checkTensorExtent(dims, static_cast<unsigned>(dtypeBits(in->dtype())),
                                    dtypeName(in->dtype()), ErrorCode::RuntimeBadInput,
                                    fmt::format("input '{}'", in->name()),
                                    "fix its shape with --input-shape");
    if (!extent) return extent.status();
    if (extent->bytes > rt::allocationLimitBytes())
      return Status(ErrorCode::RuntimeOutOfMemory,
                    fmt::format("input '{}' {} needs {} bytes, more than this machine's memory "
                                "({} bytes)",
                                in->name(), in->shape().toString(), extent->bytes,
                                rt::allocationLimitBytes()),
                    "fix its shape with --input-shape");
    rt::OutTensor out(in->dtype(), dims, rt::Init::Zeroed);
    uint32_t state = seed * 2654435761u + index;
    if (in->dtype() == DType::Float32 || in->dtype() == DType::Float16 ||
        in->dtype() == DType::Float64) {
      for (uint64_t i = 0; i < out.elementCount(); ++i) {
        state = state * 1664525u + 1013904223u;
        float v = static_cast<float>(state / 4294967296.0 * 2.0 - 1.0);
        if (in->dtype() == DType::Float32)
          out.data<float>()[i] = v;
        else if (in->dtype() == DType::Float64)
          out.data<double>()[i] = v;
        else
          out.data<uint16_t>()[i] = rt::floatToHalf(v);
      }
    } else if (in->dtype() == DType::UInt8) {
      // uint8 inputs are images (an AIPP .om's input): every pixel value, not a black frame.
      for (uint64_t i = 0; i < out.elementCount(); ++i) {
        state = state * 1664525u + 1013904223u;
        out.data<uint8_t>()[i] = static_cast<uint8_t>(state >> 24);
      }
    } // other types stay zero-filled (indices, lengths)
    feeds[in->name()] = rt::RtValue::ofTensor(std::move(out).finish());
  }
  return feeds;
}

namespace {

const std::string* lastLocation(const Node& node) {
  return node.locations().empty() ? nullptr : &node.locations().back().nodeName;
}

// A value that ends its location group: what leaves the fused node. Values inside a group (a
// reader's Transpose-Conv-Transpose of one NHWC node, a pre-activation Conv) have no reference
// counterpart, so mapping them to the source node's output would report false divergence.
bool endsLocationGroup(const Node& node, const Value& value) {
  const std::string* group = lastLocation(node);
  if (!group) return true;
  if (value.isGraphOutput()) return true;
  for (const Use& use : value.uses()) {
    const std::string* next = lastLocation(*use.user);
    if (next && *next == *group) return false;
  }
  return true;
}

// A tensor laid out as a converted model stores it: dims[i] = source dims[perm[i]]. nullopt when
// perm is no permutation of the tensor's axes or the element type is packed below a byte.
std::optional<Tensor> permuted(const Tensor& source, const std::vector<int64_t>& perm) {
  std::vector<bool> seen(source.dims().size(), false);
  if (perm.size() != seen.size()) return std::nullopt;
  for (int64_t axis : perm) {
    if (axis < 0 || static_cast<size_t>(axis) >= seen.size() || seen[static_cast<size_t>(axis)])
      return std::nullopt;
    seen[static_cast<size_t>(axis)] = true;
  }
  return rt::shape::transposed(source, perm);
}

// Whether dims fit a declared shape (unknown dims fit anything).
bool fitsShape(const std::vector<int64_t>& dims, const Shape& shape) {
  if (dims.size() != shape.rank()) return false;
  for (size_t i = 0; i < dims.size(); ++i)
    if (shape.dims()[i].isStatic() && shape.dims()[i].value() != dims[i]) return false;
  return true;
}

// Feeds for a converted model: an input it stores in another layout (an .ms NHWC input of an
// NCHW model) gets the data transposed when the data fits only the transposed shape, or both
// (square dims: the file's layout decides). Data that already fits only the candidate's shape
// (a model whose source was NHWC already) is passed as it is.
std::map<std::string, rt::RtValue> relaidFeeds(const Model& candidate,
                                               const std::map<std::string, rt::RtValue>& feeds) {
  std::map<std::string, rt::RtValue> out = feeds;
  for (auto& [name, value] : out) {
    auto layout = candidate.sourceLayouts.find(name);
    if (layout == candidate.sourceLayouts.end() || !value.isTensor()) continue;
    const Value* input = nullptr;
    for (const Value* in : candidate.graph->inputs())
      if (in->name() == name) input = in;
    if (!input) continue;
    auto relaid = permuted(value.tensor, layout->second);
    if (!relaid || !fitsShape(relaid->dims(), input->shape())) continue;
    value = rt::RtValue::ofTensor(std::move(*relaid));
  }
  return out;
}

} // namespace

Expected<std::vector<CompareOutput>>
compareModels(const Model& reference, const Model& candidate,
              const std::map<std::string, rt::RtValue>& inputs) {
  rt::Executor refExec(reference), candExec(candidate);
  KILN_TRY(refExec.checkSupported());
  KILN_TRY(candExec.checkSupported());
  KILN_ASSIGN_OR_RETURN(rt::RunResult refRun, refExec.run(inputs));
  KILN_ASSIGN_OR_RETURN(rt::RunResult candRun, candExec.run(relaidFeeds(candidate, inputs)));
  if (refRun.outputs.size() != candRun.outputs.size())
    return Status(ErrorCode::RuntimeBadInput,
                  fmt::format("the models have {} and {} outputs", refRun.outputs.size(),
                              candRun.outputs.size()),
                  "compare models with the same outputs");
  std::vector<CompareOutput> out;
  for (size_t i = 0; i < refRun.outputs.size(); ++i) {
    const auto& r = refRun.outputs[i];
    const auto& c = candRun.outputs[i];
    std::string name = reference.graph->outputs()[i]->name();
    if (!r.isTensor() || !c.isTensor())
      return Status(ErrorCode::RuntimeUnsupported, fmt::format("output '{}' is not a tensor", name),
                    "");
    if (r.tensor.dims() != c.tensor.dims())
      return Status(ErrorCode::RuntimeBadInput,
                    fmt::format("output '{}': shape {} vs {}", name,
                                Shape::fromStatic(r.tensor.dims()).toString(),
                                Shape::fromStatic(c.tensor.dims()).toString()),
                    "the models disagree on output shapes");
    out.push_back({name, r.tensor.dims(), computeMetrics(r.tensor, c.tensor)});
  }
  return out;
}

namespace {

struct TensorPair {
  const Node* node;        // candidate producer
  const Value* candidate;  // candidate value
  std::string reference;   // reference value name
  uint64_t estimatedBytes; // of the two captures together, for batching
};

uint64_t estimatedBytes(const Value* value) {
  // Unknown shapes count as large, so a batch of them still fits the budget.
  constexpr uint64_t kUnknownBytes = 64ull << 20;
  if (!value || !value->shape().isStatic()) return kUnknownBytes;
  auto count = checkedElementCount(value->shape().staticDims());
  return count ? *count * 4 : kUnknownBytes;
}

// Nodes of a graph and of its subgraphs (If branches, Loop bodies: their values are captured by
// name too), in execution order.
void collectNodes(const Graph& graph, std::vector<const Node*>& nodes) {
  for (const auto& node : graph.nodes()) {
    nodes.push_back(node.get());
    for (const Graph* sub : node->subgraphs())
      collectNodes(*sub, nodes);
  }
}

std::map<std::string, const Value*> outputsByName(const std::vector<const Node*>& nodes) {
  std::map<std::string, const Value*> byName;
  for (const Node* node : nodes)
    for (const Value* out : node->outputs())
      if (out) byName.emplace(out->name(), out);
  return byName;
}

// Which candidate tensor is compared with which reference tensor: the same name, or for a value
// that ends a fused node, the output of the reference node its location names (unless that
// reference value has a same-named twin in the candidate, which is the better match).
std::vector<TensorPair> pairTensors(const Model& reference, const Model& candidate) {
  std::vector<const Node*> refNodes, order;
  collectNodes(*reference.graph, refNodes);
  collectNodes(*candidate.graph, order);
  const std::map<std::string, const Value*> refValues = outputsByName(refNodes),
                                            candValues = outputsByName(order);
  // Reference output 0 by node name, for fused candidate nodes.
  std::map<std::string, std::string> byNode;
  for (const Node* node : refNodes)
    if (!node->name().empty() && !node->outputs().empty() && node->output(0))
      byNode.emplace(node->name(), node->output(0)->name());
  auto find = [](const std::map<std::string, const Value*>& values, const std::string& name) {
    auto it = values.find(name);
    return it == values.end() ? nullptr : it->second;
  };
  std::vector<TensorPair> pairs;
  for (const Node* node : order) {
    for (const Value* out : node->outputs()) {
      if (!out || (out->dtype() != DType::Undefined && !isFloatingPoint(out->dtype()))) continue;
      std::string refName = out->name();
      const Value* ref = find(refValues, refName);
      if (!ref && lastLocation(*node) && endsLocationGroup(*node, *out)) {
        auto mapped = byNode.find(*lastLocation(*node));
        if (mapped != byNode.end() && !find(candValues, mapped->second)) {
          refName = mapped->second;
          ref = find(refValues, refName);
        }
      }
      if (!ref || ref->isInitializer()) continue;
      // Both tensors hold the same elements: the reference's shape, when known, sizes both.
      const uint64_t bytes = ref->shape().isStatic() ? 2 * estimatedBytes(ref)
                                                     : estimatedBytes(ref) + estimatedBytes(out);
      pairs.push_back({node, out, refName, bytes});
    }
  }
  return pairs;
}

} // namespace

Expected<PerTensorReport> compareTensors(const Model& reference, const Model& candidate,
                                         const std::map<std::string, rt::RtValue>& inputs,
                                         double minCosine) {
  {
    rt::Executor refCheck(reference), candCheck(candidate);
    KILN_TRY(refCheck.checkSupported());
    KILN_TRY(candCheck.checkSupported());
  }
  const std::vector<TensorPair> pairs = pairTensors(reference, candidate);
  const std::map<std::string, rt::RtValue> candidateFeeds = relaidFeeds(candidate, inputs);
  // Capturing every tensor of a large model at once does not fit in memory (a 1024x1024
  // segmenter holds tens of GiB of activations): the pairs go in batches of bounded size, each
  // batch one run of both models that keeps only its tensors.
  const uint64_t budget = std::max<uint64_t>(rt::allocationLimitBytes() / 6, 256ull << 20);
  PerTensorReport report;
  for (size_t begin = 0; begin < pairs.size();) {
    size_t end = begin;
    uint64_t bytes = 0;
    while (end < pairs.size() && (end == begin || bytes + pairs[end].estimatedBytes <= budget))
      bytes += pairs[end++].estimatedBytes;
    rt::ExecutorOptions refOptions, candOptions;
    refOptions.fuse = candOptions.fuse = false;
    for (size_t i = begin; i < end; ++i) {
      refOptions.captureNames.push_back(pairs[i].reference);
      candOptions.captureNames.push_back(pairs[i].candidate->name());
    }
    rt::Executor refExec(reference, refOptions), candExec(candidate, candOptions);
    KILN_ASSIGN_OR_RETURN(rt::RunResult refRun, refExec.run(inputs));
    KILN_ASSIGN_OR_RETURN(rt::RunResult candRun, candExec.run(candidateFeeds));
    for (size_t i = begin; i < end; ++i) {
      const TensorPair& pair = pairs[i];
      auto cand = candRun.captured.find(pair.candidate->name());
      auto ref = refRun.captured.find(pair.reference);
      if (cand == candRun.captured.end() || !cand->second.isTensor() ||
          ref == refRun.captured.end() || !ref->second.isTensor())
        continue;
      const Tensor& c = cand->second.tensor;
      std::optional<Tensor> relaid;
      if (auto layout = candidate.sourceLayouts.find(pair.candidate->name());
          layout != candidate.sourceLayouts.end() && isFloatingPoint(ref->second.tensor.dtype()))
        relaid = permuted(ref->second.tensor, layout->second);
      const Tensor& r = relaid ? *relaid : ref->second.tensor;
      if (r.dims() != c.dims() || !isFloatingPoint(r.dtype()) || !isFloatingPoint(c.dtype()))
        continue;
      report.tensors.push_back({pair.candidate->name(), pair.reference, pair.node->name(),
                                pair.node->opType(), c.dims(), computeMetrics(r, c)});
      const TensorMetrics& m = report.tensors.back().metrics;
      if (report.firstDivergent < 0 && (m.cosine < minCosine || m.nonFinite))
        report.firstDivergent = static_cast<int>(report.tensors.size()) - 1;
    }
    begin = end;
  }
  return report;
}

Expected<std::map<std::string, double>>
measureValuePeaks(const Model& model, const std::map<std::string, rt::RtValue>& inputs) {
  std::map<std::string, double> peaks;
  auto record = [&](const std::string& name, const Tensor& tensor) {
    if (!isFloatingPoint(tensor.dtype())) return;
    double peak = 0;
    for (float v : rt::toFloatVector(tensor))
      if (std::isfinite(v)) peak = std::max(peak, static_cast<double>(std::fabs(v)));
    double& kept = peaks[name];
    kept = std::max(kept, peak);
  };
  rt::ExecutorOptions options;
  options.captureIntermediates = true;
  options.observeCaptured = [&](const Value& value, const rt::RtValue& produced) {
    if (produced.isTensor()) record(value.name(), produced.tensor);
  };
  rt::Executor executor(model, options);
  KILN_TRY(executor.checkSupported());
  KILN_ASSIGN_OR_RETURN(rt::RunResult run, executor.run(inputs));
  for (const auto& [name, value] : inputs)
    if (value.isTensor()) record(name, value.tensor);
  return peaks;
}

std::optional<ShapeSpec> inputShapesFromArtifact(const Graph& reference, const Model& candidate) {
  std::vector<const Value*> candidateInputs;
  for (const Value* in : candidate.graph->inputs())
    if (!in->isInitializer()) candidateInputs.push_back(in);
  // A gear model's inputs are dynamic; its first gear is a shape it was built for.
  std::map<std::string, std::vector<int64_t>> firstGear;
  for (const auto& [key, value] : candidate.metadata) {
    if (key != kInputGearsKey) continue;
    nlohmann::json gears = nlohmann::json::parse(value, nullptr, false);
    if (!gears.is_array() || gears.empty() || !gears.front().is_object()) continue;
    for (const auto& [name, dims] : gears.front().items())
      if (dims.is_array()) {
        std::vector<int64_t> shape;
        for (const auto& d : dims)
          if (d.is_number_integer()) shape.push_back(d.get<int64_t>());
        firstGear[name] = shape;
      }
  }
  ShapeSpec spec;
  size_t position = 0;
  for (const Value* in : reference.inputs()) {
    if (in->isInitializer()) continue;
    const size_t index = position++;
    if (in->type().kind != TypeKind::Tensor || in->shape().isStatic()) continue;
    const Value* match = nullptr;
    for (const Value* c : candidateInputs)
      if (c->name() == in->name()) match = c;
    if (!match) continue;
    std::vector<int64_t> dims;
    if (match->shape().isStatic())
      dims = match->shape().staticDims();
    else if (auto gear = firstGear.find(match->name()); gear != firstGear.end())
      dims = gear->second;
    if (dims.empty() || dims.size() != in->shape().rank()) continue;
    if (auto layout = candidate.sourceLayouts.find(match->name());
        layout != candidate.sourceLayouts.end() && layout->second.size() == dims.size()) {
      std::vector<int64_t> source(dims.size());
      for (size_t i = 0; i < dims.size(); ++i)
        source[static_cast<size_t>(layout->second[i])] = dims[i];
      dims = source;
    }
    InputShapeSpec entry;
    entry.name = in->name();
    entry.position = index;
    for (int64_t d : dims)
      entry.dims.push_back(DimSpec{d, d, false});
    entry.text = fmt::format("{}:{}", entry.name, entry.dimsText());
    spec.inputs.push_back(std::move(entry));
  }
  if (spec.inputs.empty()) return std::nullopt;
  return spec;
}

Expected<std::string> applyArtifactAipp(Model& reference, const Model& candidate) {
  const std::string* recorded = nullptr;
  for (const auto& [key, value] : candidate.metadata)
    if (key == kAippMetadataKey) recorded = &value;
  if (!recorded) return std::string();
  const std::string where = candidate.sourcePath.empty() ? "the .om" : candidate.sourcePath;
  nlohmann::json record = nlohmann::json::parse(*recorded, nullptr, false);
  if (!record.is_object() || !record["config"].is_string() || !record["inputs"].is_object())
    return Status(ErrorCode::OmFileInvalid,
                  fmt::format("{}: the recorded AIPP configuration ('{}' attribute) is not the "
                              "JSON kiln writes",
                              where, kAippMetadataKey),
                  "convert the model again with kiln's atc");
  const std::string file = record.value("file", std::string("aipp.cfg"));
  KILN_ASSIGN_OR_RETURN(AippConfig config,
                        parseAippConfigText(record["config"].get<std::string>(),
                                            fmt::format("{} ({})", file, where)));
  // The shapes the inputs had when AIPP was inserted; a dim left dynamic (batch) takes the
  // candidate's.
  ShapeSpec spec;
  std::vector<std::string> shapes;
  size_t position = 0;
  for (const Value* in : reference.graph->inputs()) {
    if (in->isInitializer()) continue;
    const size_t index = position++;
    auto dims = record["inputs"].find(in->name());
    if (dims == record["inputs"].end() || !dims->is_array()) continue;
    const Value* image = candidate.graph->findLocalValue(in->name());
    InputShapeSpec entry;
    entry.name = in->name();
    entry.position = index;
    for (size_t i = 0; i < dims->size(); ++i) {
      int64_t d = (*dims)[i].is_number_integer() ? (*dims)[i].get<int64_t>() : -1;
      if (d < 0 && i == 0 && image && image->shape().hasRank() && image->shape().rank() > 0 &&
          image->shape()[0].isStatic())
        d = image->shape()[0].value();
      entry.dims.push_back(DimSpec{d < 0 ? 1 : d, d < 0 ? 1 : d, false});
    }
    entry.text = fmt::format("{}:{}", entry.name, entry.dimsText());
    shapes.push_back(entry.text);
    spec.inputs.push_back(std::move(entry));
  }
  if (!spec.inputs.empty()) {
    PipelineOptions options;
    options.inputShapes = &spec;
    auto fixed = runPipeline(reference, {"fix-input-shapes"}, options);
    if (!fixed) return fixed.status();
  }
  AippContext context;
  context.inputFormat = record.value("layout", std::string("NCHW"));
  KILN_TRY(insertAipp(reference, config, context));
  return fmt::format("{} has AIPP ({}): the reference takes the same uint8 {} image and runs the "
                     "AIPP preprocessing in float32 before the model's {} input ({})",
                     where, file, "NHWC", context.inputFormat, fmt::join(shapes, ";"));
}

} // namespace kiln
