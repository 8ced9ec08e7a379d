// Output comparison between two models run by the CPU executor.
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "kiln/compare.h"
#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"

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
    } // other types stay zero-filled
    feeds[in->name()] = rt::RtValue::ofTensor(std::move(out).finish());
  }
  return feeds;
}

Expected<std::vector<CompareOutput>>
compareModels(const Model& reference, const Model& candidate,
              const std::map<std::string, rt::RtValue>& inputs) {
  rt::Executor refExec(reference), candExec(candidate);
  KILN_TRY(refExec.checkSupported());
  KILN_TRY(candExec.checkSupported());
  KILN_ASSIGN_OR_RETURN(rt::RunResult refRun, refExec.run(inputs));
  KILN_ASSIGN_OR_RETURN(rt::RunResult candRun, candExec.run(inputs));
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

// Reference tensor names by producing node name, for mapping fused candidate nodes back.
std::map<std::string, std::string> outputByNodeName(const Graph& graph) {
  std::map<std::string, std::string> out;
  for (const auto& node : graph.nodes())
    if (!node->name().empty() && !node->outputs().empty() && node->output(0))
      out[node->name()] = node->output(0)->name();
  return out;
}

} // namespace

Expected<PerTensorReport> compareTensors(const Model& reference, const Model& candidate,
                                         const std::map<std::string, rt::RtValue>& inputs,
                                         double minCosine) {
  rt::ExecutorOptions options;
  options.captureIntermediates = true;
  rt::Executor refExec(reference, options), candExec(candidate, options);
  KILN_TRY(refExec.checkSupported());
  KILN_TRY(candExec.checkSupported());
  KILN_ASSIGN_OR_RETURN(rt::RunResult refRun, refExec.run(inputs));
  KILN_ASSIGN_OR_RETURN(rt::RunResult candRun, candExec.run(inputs));
  auto byNode = outputByNodeName(*reference.graph);
  PerTensorReport report;
  for (const auto& node : candidate.graph->nodes()) {
    for (const Value* out : node->outputs()) {
      if (!out) continue;
      auto cand = candRun.captured.find(out->name());
      if (cand == candRun.captured.end() || !cand->second.isTensor()) continue;
      std::string refName = out->name();
      auto ref = refRun.captured.find(refName);
      if (ref == refRun.captured.end() && !node->locations().empty()) {
        auto mapped = byNode.find(node->locations().back().nodeName);
        if (mapped != byNode.end()) {
          refName = mapped->second;
          ref = refRun.captured.find(refName);
        }
      }
      if (ref == refRun.captured.end() || !ref->second.isTensor()) continue;
      const Tensor& r = ref->second.tensor;
      const Tensor& c = cand->second.tensor;
      if (r.dims() != c.dims() || !isFloatingPoint(r.dtype()) || !isFloatingPoint(c.dtype()))
        continue;
      report.tensors.push_back(
          {out->name(), refName, node->name(), node->opType(), c.dims(), computeMetrics(r, c)});
      const TensorMetrics& m = report.tensors.back().metrics;
      if (report.firstDivergent < 0 && (m.cosine < minCosine || m.nonFinite))
        report.firstDivergent = static_cast<int>(report.tensors.size()) - 1;
    }
  }
  return report;
}

} // namespace kiln
