// Precision sensitivity: one trial per candidate node (only that node converted), then a binary
// search over the worst-first prefix kept in float. Trials are independent re-imports of one
// serialized copy of the model, so the result does not depend on trial order.
#include "kiln/sensitivity.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include "kiln/compare.h"
#include "kiln/frontend/onnx.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/precision_report.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"

namespace kiln {
namespace {

class Trials {
 public:
  Trials(std::shared_ptr<const std::string> bytes, const std::map<std::string, rt::RtValue>& inputs,
         const SensitivityOptions& options)
      : bytes_(std::move(bytes)), inputs_(inputs), options_(options) {}

  Expected<Model> load() const {
    OnnxImportOptions import;
    import.verify = false; // the same bytes were verified when the model was first loaded
    return importOnnxBytes(reinterpret_cast<const uint8_t*>(bytes_->data()), bytes_->size(), bytes_,
                           "sensitivity copy", "", import);
  }

  // Applies the variant with `keep` left in float (plus the user's own list); fills `report`
  // when given.
  Expected<Model> convert(const std::vector<std::string>& keep,
                          PrecisionReport* report = nullptr) const {
    KILN_ASSIGN_OR_RETURN(Model model, load());
    // The precision stage of the conversion pipeline the converting CLIs run (the model was
    // simplified once, before the trials).
    ConversionOptions conversion;
    conversion.simplify = "none";
    conversion.precisionReport = report;
    PrecisionOptions precision = options_.precision;
    WeightQuantOptions weightQuant = options_.weightQuant;
    if (options_.variant == SensitivityVariant::Fp16) {
      precision.keepNodeNames.insert(precision.keepNodeNames.end(), keep.begin(), keep.end());
      conversion.precision = &precision;
    } else {
      weightQuant.skipNodes.insert(weightQuant.skipNodes.end(), keep.begin(), keep.end());
      conversion.weightQuant = &weightQuant;
    }
    auto ran = runConversionPipeline(model, conversion);
    if (!ran) return ran.status();
    // Drops the float originals the conversion replaced, so the trial runs only what it ships.
    auto pruned = runPipeline(model, {"eliminate-dead-nodes"});
    if (!pruned) return pruned.status();
    return model;
  }

  Expected<std::vector<Tensor>> run(const Model& model) {
    rt::Executor executor(model);
    KILN_TRY(executor.checkSupported());
    KILN_ASSIGN_OR_RETURN(rt::RunResult result, executor.run(inputs_));
    runs_.fetch_add(1, std::memory_order_relaxed);
    std::vector<Tensor> outputs;
    for (size_t i = 0; i < result.outputs.size(); ++i) {
      if (!result.outputs[i].isTensor())
        return Status(ErrorCode::RuntimeUnsupported,
                      fmt::format("output '{}' is not a tensor", model.graph->outputs()[i]->name()),
                      "sensitivity scores tensor outputs only");
      outputs.push_back(result.outputs[i].tensor);
    }
    return outputs;
  }

  // Score of `keep`-in-float against the float reference outputs.
  Expected<double> score(const std::vector<std::string>& keep) {
    KILN_ASSIGN_OR_RETURN(Model model, convert(keep));
    KILN_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, run(model));
    double sum = 0;
    for (size_t i = 0; i < outputs.size(); ++i) {
      TensorMetrics m = computeMetrics(reference_[i], outputs[i]);
      if (m.nonFinite) return options_.metric == SensitivityMetric::Cosine ? -1.0 : 1e30;
      sum += options_.metric == SensitivityMetric::Cosine ? m.cosine : m.meanRelativeError;
    }
    return outputs.empty() ? 0.0 : sum / static_cast<double>(outputs.size());
  }

  Status runReference() {
    KILN_ASSIGN_OR_RETURN(Model model, load());
    KILN_ASSIGN_OR_RETURN(reference_, run(model));
    return Status::ok();
  }

  size_t runs() const { return runs_.load(); }

 private:
  std::shared_ptr<const std::string> bytes_;
  const std::map<std::string, rt::RtValue>& inputs_;
  const SensitivityOptions& options_;
  std::vector<Tensor> reference_;
  std::atomic<size_t> runs_{0}; // trials may run on several threads
};

uint64_t parameterBytes(const Model& model) {
  uint64_t bytes = 0;
  for (const Value* init : model.graph->initializers())
    bytes += init->initializer().byteSize();
  return bytes;
}

double lossOf(double score, SensitivityMetric metric) {
  return metric == SensitivityMetric::Cosine ? 1.0 - score : score;
}

bool meets(double score, const SensitivityOptions& options) {
  return options.metric == SensitivityMetric::Cosine ? score >= *options.target
                                                     : score <= *options.target;
}

// Nodes the variant converts, by keep-list name, in graph order.
Expected<std::vector<std::pair<std::string, std::string>>>
candidatesOf(const Trials& trials, const SensitivityOptions& options) {
  PrecisionReport report;
  KILN_ASSIGN_OR_RETURN(Model converted, trials.convert({}, &report));
  KILN_ASSIGN_OR_RETURN(Model original, trials.load());
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> seen;
  if (options.variant == SensitivityVariant::WeightQuant) {
    for (const auto& q : report.quantized)
      if (!q.node.empty() && seen.insert(q.node).second) out.emplace_back(q.node, q.opType);
    return out;
  }
  // FP16: every node of the float model the pass did not keep in fp32 and that computes
  // something (Constant nodes only change storage, which the keep list does not control).
  std::set<std::string> kept;
  for (const auto& k : report.keptFp32)
    kept.insert(k.node);
  for (const auto& node : original.graph->nodes()) {
    if (node->opType() == "Constant") continue;
    std::string name = keepDtypeNodeName(*node);
    if (name.empty() || kept.count(name) || !seen.insert(name).second) continue;
    out.emplace_back(name, node->opType());
  }
  return out;
}

} // namespace

Expected<SensitivityReport> analyzeSensitivity(const Model& model,
                                               const std::map<std::string, rt::RtValue>& inputs,
                                               const SensitivityOptions& options) {
  onnx::ModelProto proto;
  KILN_TRY(exportOnnx(model, proto));
  auto bytes = std::make_shared<std::string>();
  if (!proto.SerializeToString(bytes.get()))
    return Status(ErrorCode::Internal, "the model could not be serialized for the trials",
                  "report this model");
  Trials trials(bytes, inputs, options);
  KILN_TRY(trials.runReference());
  KILN_ASSIGN_OR_RETURN(auto candidates, candidatesOf(trials, options));

  SensitivityReport report;
  report.candidates = candidates.size();
  KILN_ASSIGN_OR_RETURN(report.convertedAll, trials.score({}));
  std::vector<std::string> all;
  for (const auto& c : candidates)
    all.push_back(c.first);
  // One trial per candidate, on up to options.threads threads; each trial only reads shared state,
  // and results land by candidate index, so the report is the same for any thread count.
  std::vector<std::optional<Expected<double>>> scores(candidates.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < candidates.size(); i = next++) {
      std::vector<std::string> others;
      for (const auto& n : all)
        if (n != candidates[i].first) others.push_back(n);
      scores[i] = trials.score(others);
    }
  };
  const size_t threads =
      std::clamp<size_t>(options.threads, 1, std::max<size_t>(1, candidates.size()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (auto& t : pool)
    t.join();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!*scores[i]) return scores[i]->status();
    double score = **scores[i];
    report.nodes.push_back(
        {candidates[i].first, candidates[i].second, score, lossOf(score, options.metric)});
  }
  std::stable_sort(report.nodes.begin(), report.nodes.end(),
                   [](const NodeSensitivity& a, const NodeSensitivity& b) {
                     return a.loss != b.loss ? a.loss > b.loss : a.node < b.node;
                   });

  if (options.target) {
    // Smallest worst-first prefix whose keeping meets the target. Keeping every candidate gives
    // the float model, so the search always ends; each probe is measured, never extrapolated.
    auto prefix = [&](size_t k) {
      std::vector<std::string> keep;
      for (size_t i = 0; i < k; ++i)
        keep.push_back(report.nodes[i].node);
      return keep;
    };
    size_t lo = 0, hi = report.nodes.size();
    double hiScore = 0;
    bool hiMeasured = false;
    if (meets(report.convertedAll, options)) {
      hi = 0;
      hiScore = report.convertedAll;
      hiMeasured = true;
    }
    while (lo < hi) {
      size_t mid = lo + (hi - lo) / 2;
      KILN_ASSIGN_OR_RETURN(double s, trials.score(prefix(mid)));
      if (meets(s, options)) {
        hi = mid;
        hiScore = s;
        hiMeasured = true;
      } else {
        lo = mid + 1;
      }
    }
    if (!hiMeasured) {
      KILN_ASSIGN_OR_RETURN(hiScore, trials.score(prefix(hi)));
    }
    report.keep = prefix(hi);
    report.keptScore = hiScore;
    report.targetMet = meets(hiScore, options);
  }
  report.floatBytes = parameterBytes(model);
  KILN_ASSIGN_OR_RETURN(Model converted, trials.convert(report.keep));
  report.convertedBytes = parameterBytes(converted);
  report.runs = trials.runs();
  return report;
}

} // namespace kiln
