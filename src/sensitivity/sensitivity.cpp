// Precision sensitivity: one trial per candidate node (only that node converted), then a binary
// search over the worst-first prefix kept in float. Trials are independent re-imports of one
// serialized copy of the model, so the result does not depend on trial order. The float model runs
// once and its tensors are kept: a trial runs only the nodes its conversion changed and those
// downstream of them, fed from the kept tensors.
#include "kiln/sensitivity.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <set>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include "kiln/compare.h"
#include "kiln/frontend/onnx.h"
#include "kiln/ir/node_equality.h"
#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/precision_report.h"
#include "kiln/pipelines/conversion.h"
#include "kiln/runtime/executor.h"

namespace kiln {
namespace {

// An executor runs a trial's model once per input set (at most a few times): the arena planned
// from a first run would not pay for that run's fresh mappings, so buffers come from the pool.
rt::ExecutorOptions trialExecutorOptions() {
  rt::ExecutorOptions options;
  options.plannedArena = false;
  return options;
}

class Trials {
 public:
  Trials(std::shared_ptr<const std::string> bytes,
         const std::vector<std::map<std::string, rt::RtValue>>& inputSets,
         const SensitivityOptions& options)
      : bytes_(std::move(bytes)), inputSets_(inputSets), options_(options) {}

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

  // One trial's tensors, input set after input set: the outputs and, under a gate, the captured
  // logits (empty when absent). Entry k holds output k % (graph outputs) of one set.
  struct Ran {
    std::vector<Tensor> outputs;
    std::vector<std::optional<Tensor>> logits;
  };

  // Runs a trial's model on every input set. Where it computes what the float model computed (the
  // same operation on the same inputs, so everything before its first converted node), the float
  // run's stored tensors stand in: only the converted nodes and what depends on them run. Every
  // kernel is a function of its inputs, so the numbers are those of running the whole model.
  // The model is cut down in place.
  Expected<Ran> run(Model& model) {
    const Graph& graph = *model.graph;
    std::vector<std::string> logitNames(outputNames_.size());
    for (size_t i = 0; i < logitNames_.size() && i < logitNames.size(); ++i)
      if (!logitNames_[i].empty() && graph.findLocalValue(logitNames_[i]))
        logitNames[i] = logitNames_[i];
    const size_t before = graph.nodeCount();
    const Cut cut = cutAtStored(model, logitNames);
    nodesRun_.fetch_add(cut.storedOutputs ? 0 : graph.nodeCount(), std::memory_order_relaxed);
    nodesInTrials_.fetch_add(before, std::memory_order_relaxed);
    rt::ExecutorOptions executorOptions = trialExecutorOptions();
    // The cut's inputs are the float model's own tensors, whose declared shapes may be symbolic.
    executorOptions.checkFeeds = cut.feeds.empty();
    for (size_t i = 0; i < logitNames.size(); ++i)
      if (!logitNames[i].empty() && !cut.storedLogits[i])
        executorOptions.captureNames.push_back(logitNames[i]);
    std::optional<rt::Executor> executor;
    if (!cut.storedOutputs) {
      executor.emplace(model, executorOptions);
      KILN_TRY(executor->checkSupported());
    }
    Ran ran;
    for (size_t set = 0; set < inputSets_.size(); ++set) {
      rt::RunResult result;
      if (cut.storedOutputs) {
        // Every output is one the float model computed: nothing to run.
        for (const Value* out : *cut.storedOutputs)
          result.outputs.push_back(stored_.bySet[set].at(out));
      } else if (cut.feeds.empty()) {
        KILN_ASSIGN_OR_RETURN(result, executor->run(inputSets_[set]));
      } else {
        std::map<std::string, rt::RtValue> feeds = inputSets_[set];
        for (const auto& [name, value] : cut.feeds)
          feeds[name] = stored_.bySet[set].at(value);
        KILN_ASSIGN_OR_RETURN(result, executor->run(feeds));
      }
      runs_.fetch_add(1, std::memory_order_relaxed);
      KILN_TRY(appendOutputs(result, ran, [&](size_t i) -> std::optional<Tensor> {
        if (i < cut.storedLogits.size() && cut.storedLogits[i]) {
          if (const rt::RtValue& v = stored_.bySet[set].at(cut.storedLogits[i]); v.isTensor())
            return v.tensor;
        } else if (i < logitNames.size() && !logitNames[i].empty()) {
          if (auto it = result.captured.find(logitNames[i]);
              it != result.captured.end() && it->second.isTensor())
            return it->second.tensor;
        }
        return std::nullopt;
      }));
    }
    return ran;
  }

  // Appends one run's outputs to `ran`, each with its logits as `logitsOf(output index)` finds
  // them (the trial and the reference run find them in different places).
  Status appendOutputs(const rt::RunResult& result, Ran& ran,
                       const std::function<std::optional<Tensor>(size_t)>& logitsOf) const {
    for (size_t i = 0; i < result.outputs.size(); ++i) {
      if (!result.outputs[i].isTensor())
        return Status(ErrorCode::RuntimeUnsupported,
                      fmt::format("output '{}' is not a tensor", outputNames_[i]),
                      "sensitivity scores tensor outputs only");
      ran.outputs.push_back(result.outputs[i].tensor);
      ran.logits.push_back(logitsOf(i));
    }
    return Status::ok();
  }

  // Score of `keep`-in-float against the float reference outputs.
  Expected<double> score(const std::vector<std::string>& keep) {
    KILN_ASSIGN_OR_RETURN(Model model, convert(keep));
    KILN_ASSIGN_OR_RETURN(Ran ran, run(model));
    if (options_.gate) return gateRatio(ran);
    double sum = 0;
    for (size_t i = 0; i < ran.outputs.size(); ++i) {
      TensorMetrics m = computeMetrics(referenceRan_.outputs[i], ran.outputs[i]);
      if (m.nonFinite) return options_.metric == SensitivityMetric::Cosine ? -1.0 : 1e30;
      sum += options_.metric == SensitivityMetric::Cosine ? m.cosine : m.meanRelativeError;
    }
    return ran.outputs.empty() ? 0.0 : sum / static_cast<double>(ran.outputs.size());
  }

  // The worst check of the gate (SensitivityGate) over every output of every input set.
  struct GateWorst {
    double ratio = 0; // error over allowance; above 1 misses the gate
    std::string tensor;
    double meanRelativeError = 0, cosine = 1;
  };

  GateWorst gateWorst(const Ran& ran) const {
    const SensitivityGate& gate = *options_.gate;
    const double cosineAllowance = std::max(1e-12, 1.0 - gate.minCosine);
    const double mreAllowance = std::max(1e-12, gate.maxMeanRelativeError);
    GateWorst worst;
    const size_t perSet = std::max<size_t>(1, outputNames_.size());
    for (size_t i = 0; i < ran.outputs.size(); ++i) {
      const std::string& output = outputNames_[i % perSet];
      const std::string& logitName = i % perSet < logitNames_.size() ? logitNames_[i % perSet] : "";
      auto consider = [&](const TensorMetrics& m, const std::string& name, bool gatedMre) {
        double ratio = m.nonFinite ? 1e30 : (1.0 - m.cosine) / cosineAllowance;
        if (gatedMre) ratio = std::max(ratio, m.meanRelativeError / mreAllowance);
        if (ratio > worst.ratio) worst = {ratio, name, m.meanRelativeError, m.cosine};
      };
      TensorMetrics out = computeMetrics(referenceRan_.outputs[i], ran.outputs[i]);
      const bool hasLogits = referenceRan_.logits[i] && ran.logits[i];
      consider(out, output, !hasLogits);
      if (hasLogits)
        consider(computeMetrics(*referenceRan_.logits[i], *ran.logits[i]), logitName, true);
    }
    return worst;
  }

  double gateRatio(const Ran& ran) const { return gateWorst(ran).ratio; }

  // The gate's worst check with `keep` in float (the precision guard's check).
  Expected<GateWorst> gateWorstWith(const std::vector<std::string>& keep) {
    KILN_ASSIGN_OR_RETURN(Model model, convert(keep));
    KILN_ASSIGN_OR_RETURN(Ran ran, run(model));
    return gateWorst(ran);
  }

  Status runReference() {
    KILN_ASSIGN_OR_RETURN(reference_, load());
    for (const Value* out : reference_.graph->outputs()) {
      outputNames_.push_back(out->name());
      if (options_.gate) {
        // The logits of an output a saturating activation makes: the tensor the gate's MRE reads.
        const Node* producer = out->producer();
        const bool saturating =
            producer && producer->inputs().size() >= 1 &&
            (producer->opType() == "Sigmoid" || producer->opType() == "Softmax" ||
             producer->opType() == "LogSoftmax");
        logitNames_.push_back(saturating && producer->input(0) &&
                                      !producer->input(0)->isInitializer()
                                  ? producer->input(0)->name()
                                  : std::string());
      }
    }
    if (options_.maxStoredBytes == 0) {
      KILN_ASSIGN_OR_RETURN(referenceRan_, run(reference_));
      return Status::ok();
    }
    // One run per set that hands over every tensor it makes; kept while the set's share of the
    // budget lasts, in the order they are made (the same on every run, so every set keeps the
    // same values), the logits whatever the budget.
    stored_.bySet.assign(inputSets_.size(), {});
    const uint64_t budgetPerSet = options_.maxStoredBytes / std::max<size_t>(1, inputSets_.size());
    for (size_t set = 0; set < inputSets_.size(); ++set) {
      std::map<std::string, Tensor> logits;
      uint64_t setBytes = 0;
      rt::ExecutorOptions executorOptions = trialExecutorOptions();
      executorOptions.captureIntermediates = true;
      executorOptions.observeCaptured = [&](const Value& value, const rt::RtValue& produced) {
        if (!produced.isTensor()) return;
        if (std::find(logitNames_.begin(), logitNames_.end(), value.name()) != logitNames_.end())
          logits[value.name()] = produced.tensor;
        const uint64_t bytes = produced.tensor.byteSize();
        if (setBytes + bytes > budgetPerSet) return;
        if (stored_.bySet[set].emplace(&value, produced).second) setBytes += bytes;
      };
      rt::Executor executor(reference_, executorOptions);
      KILN_TRY(executor.checkSupported());
      KILN_ASSIGN_OR_RETURN(rt::RunResult result, executor.run(inputSets_[set]));
      stored_.bytes += setBytes;
      runs_.fetch_add(1, std::memory_order_relaxed);
      KILN_TRY(appendOutputs(result, referenceRan_, [&](size_t i) -> std::optional<Tensor> {
        if (i < logitNames_.size() && logits.count(logitNames_[i])) return logits[logitNames_[i]];
        return std::nullopt;
      }));
    }
    // A value serves a trial only when it is kept for every set.
    for (size_t set = 1; set < stored_.bySet.size(); ++set)
      std::erase_if(stored_.bySet[0],
                    [&](const auto& entry) { return !stored_.bySet[set].count(entry.first); });
    return Status::ok();
  }

  size_t runs() const { return runs_.load(); }
  uint64_t storedBytes() const { return stored_.bytes; }
  std::pair<size_t, size_t> nodesRunOfTotal() const {
    return {nodesRun_.load(), nodesInTrials_.load()};
  }

 private:
  // Where a trial's model is cut: the values read from the float run instead of computed (the
  // new graph inputs that stand for them, by name, and the float model's value each one is), and
  // the logits read from it (by output index). `storedOutputs` is set when every output is
  // stored: then nothing runs.
  struct Cut {
    std::vector<std::pair<std::string, const Value*>> feeds;
    std::vector<const Value*> storedLogits;
    std::optional<std::vector<const Value*>> storedOutputs;
  };

  // The trial's values that are the float model's (by name, made by the same operation from the
  // same inputs, or the same graph input), kept in the float run: trial value -> float value.
  std::unordered_map<const Value*, const Value*> storedEquivalents(const Graph& graph) const {
    std::unordered_map<const Value*, const Value*> same;
    const Graph& floatGraph = *reference_.graph;
    for (const Value* in : graph.inputs())
      if (const Value* f = floatGraph.findLocalValue(in->name());
          f && !in->isInitializer() && f->isGraphInput() && !f->isInitializer())
        same.emplace(in, f);
    auto sameInput = [&](const Value* a, const Value* b) {
      if (!a || !b) return !a && !b;
      if (auto it = same.find(a); it != same.end()) return it->second == b;
      return a->isInitializer() && b->isInitializer() && !a->isGraphInput() && !b->isGraphInput() &&
             a->initializer().sameContents(b->initializer());
    };
    for (const auto& node : graph.nodes()) {
      if (!node->subgraphs().empty() || drawsRandomNumbers(node->opType()) ||
          node->opType() == "Dropout")
        continue;
      const Value* first = nullptr;
      for (const Value* out : node->outputs())
        if (out && !first) first = out;
      const Value* floatFirst = first ? floatGraph.findLocalValue(first->name()) : nullptr;
      const Node* floatNode = floatFirst ? floatFirst->producer() : nullptr;
      if (!floatNode || floatNode->opType() != node->opType() ||
          floatNode->domain() != node->domain() ||
          floatNode->inputs().size() != node->inputs().size() ||
          floatNode->outputs().size() != node->outputs().size() ||
          !sameAttributes(*floatNode, *node))
        continue;
      bool equal = true;
      for (size_t i = 0; i < node->outputs().size() && equal; ++i) {
        const Value *a = node->output(i), *b = floatNode->output(i);
        equal = (!a && !b) || (a && b && a->name() == b->name());
      }
      for (size_t i = 0; i < node->inputs().size() && equal; ++i)
        equal = sameInput(node->input(i), floatNode->input(i));
      if (!equal) continue;
      for (size_t i = 0; i < node->outputs().size(); ++i)
        if (node->output(i)) same.emplace(node->output(i), floatNode->output(i));
    }
    return same;
  }

  // Cuts the trial's model at the stored values it needs: they become graph inputs, and the
  // nodes that only led to them go.
  Cut cutAtStored(Model& model, const std::vector<std::string>& logitNames) const {
    Cut cut;
    cut.storedLogits.assign(logitNames.size(), nullptr);
    if (stored_.bySet.empty()) return cut;
    Graph& graph = *model.graph;
    // A subgraph may read outer values without naming them as inputs: not traced, so such
    // models run whole.
    for (const auto& node : graph.nodes())
      if (!node->subgraphs().empty()) return cut;
    const auto same = storedEquivalents(graph);
    auto storedOf = [&](const Value* v) -> const Value* {
      if (!v || !v->producer()) return nullptr; // graph inputs are fed, initializers held
      auto it = same.find(v);
      return it != same.end() && stored_.bySet[0].count(it->second) ? it->second : nullptr;
    };
    // What the outputs and the logits need, back to stored values.
    std::vector<Value*> pending(graph.outputs().begin(), graph.outputs().end());
    for (size_t i = 0; i < logitNames.size(); ++i)
      if (!logitNames[i].empty()) {
        Value* logit = graph.findLocalValue(logitNames[i]);
        if (const Value* stored = storedOf(logit))
          cut.storedLogits[i] = stored;
        else
          pending.push_back(logit);
      }
    std::unordered_set<const Node*> needed;
    std::vector<Value*> frontier;
    std::unordered_set<const Value*> inFrontier;
    while (!pending.empty()) {
      Value* v = pending.back();
      pending.pop_back();
      if (!v || !v->producer()) continue;
      if (storedOf(v)) {
        if (inFrontier.insert(v).second) frontier.push_back(v);
        continue;
      }
      if (!needed.insert(v->producer()).second) continue;
      for (Value* in : v->producer()->inputs())
        pending.push_back(in);
    }
    if (needed.empty()) {
      std::vector<const Value*> outputs;
      for (const Value* out : graph.outputs())
        outputs.push_back(storedOf(out));
      if (std::all_of(outputs.begin(), outputs.end(), [](const Value* v) { return v; })) {
        cut.storedOutputs = std::move(outputs);
        return cut;
      }
    }
    for (Value* v : frontier) {
      Value* fed = graph.addValue(graph.uniqueName(v->name()));
      fed->setType(v->type());
      graph.addInput(fed);
      graph.replaceAllUsesWith(v, fed);
      cut.feeds.emplace_back(fed->name(), storedOf(v));
    }
    std::vector<Node*> unneeded;
    for (const auto& node : graph.nodes())
      if (!needed.count(node.get())) unneeded.push_back(node.get());
    for (auto it = unneeded.rbegin(); it != unneeded.rend(); ++it)
      graph.eraseNode(*it);
    return cut;
  }

  std::shared_ptr<const std::string> bytes_;
  const std::vector<std::map<std::string, rt::RtValue>>& inputSets_;
  const SensitivityOptions& options_;
  std::vector<std::string> outputNames_;
  std::vector<std::string> logitNames_; // by output index; "" when the output itself is gated
  Model reference_;                     // the float model, whose run is stored
  Ran referenceRan_;
  // The float run's tensors by its values, one map per input set (only values kept for every
  // set are in the first): filled before the trials, only read while they run.
  struct Stored {
    std::vector<std::unordered_map<const Value*, rt::RtValue>> bySet;
    uint64_t bytes = 0;
  } stored_;
  std::atomic<size_t> runs_{0}; // trials may run on several threads
  // Nodes of the trials' models, and of those the nodes that ran (the rest was read back).
  std::atomic<size_t> nodesInTrials_{0}, nodesRun_{0};
};

// One serialized copy of the model that every trial re-imports.
Expected<std::shared_ptr<const std::string>> serializedForTrials(const Model& model) {
  onnx::ModelProto proto;
  KILN_TRY(exportOnnx(model, proto));
  auto bytes = std::make_shared<std::string>();
  if (!proto.SerializeToString(bytes.get()))
    return Status(ErrorCode::Internal, "the model could not be serialized for the trials",
                  "report this model");
  return std::shared_ptr<const std::string>(std::move(bytes));
}

uint64_t parameterBytes(const Model& model) {
  uint64_t bytes = 0;
  for (const Value* init : model.graph->initializers())
    bytes += init->initializer().byteSize();
  return bytes;
}

double lossOf(double score, const SensitivityOptions& options) {
  if (options.gate) return score;
  return options.metric == SensitivityMetric::Cosine ? 1.0 - score : score;
}

bool meets(double score, const SensitivityOptions& options) {
  if (options.gate) return score <= 1.0;
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
  return analyzeSensitivity(model, std::vector<std::map<std::string, rt::RtValue>>{inputs},
                            options);
}

Expected<SensitivityReport>
analyzeSensitivity(const Model& model,
                   const std::vector<std::map<std::string, rt::RtValue>>& inputSets,
                   const SensitivityOptions& options) {
  KILN_ASSIGN_OR_RETURN(auto bytes, serializedForTrials(model));
  Trials trials(bytes, inputSets, options);
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
        {candidates[i].first, candidates[i].second, score, lossOf(score, options)});
  }
  std::stable_sort(report.nodes.begin(), report.nodes.end(),
                   [](const NodeSensitivity& a, const NodeSensitivity& b) {
                     return a.loss != b.loss ? a.loss > b.loss : a.node < b.node;
                   });

  if (options.target || options.gate) {
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
  report.storedBytes = trials.storedBytes();
  std::tie(report.trialNodesRun, report.trialNodes) = trials.nodesRunOfTotal();
  spdlog::debug(
      "sensitivity: {} model runs; {:.1f} MiB of the float run's tensors kept; the trials "
      "ran {} of their models' {} nodes",
      report.runs, report.storedBytes / 1048576.0, report.trialNodesRun, report.trialNodes);
  return report;
}

namespace {

double staticElements(const Value* value) {
  if (!value || value->type().kind != TypeKind::Tensor || !value->shape().isStatic()) return -1;
  double n = 1;
  for (int64_t d : value->shape().staticDims())
    n *= static_cast<double>(std::max<int64_t>(d, 0));
  return n;
}

// Multiply-adds of one run of a graph without subgraphs, from static shapes: Conv/ConvTranspose/
// MatMul/Gemm as their inner products, every other node as one per output element. nullopt when
// a shape is not static.
// Hand-written: a rough cost for a budget decision, which no library gives for this IR.
std::optional<double> estimateMultiplyAdds(const Graph& graph) {
  double total = 0;
  for (const auto& node : graph.nodes()) {
    double inner = 1;
    const std::string& op = node->opType();
    if ((op == "Conv" || op == "ConvTranspose") && node->input(1)) {
      const double weight = staticElements(node->input(1));
      if (weight < 0) return std::nullopt;
      const auto dims = node->input(1)->shape().staticDims();
      inner = dims.empty() || dims[0] <= 0 ? 1 : weight / static_cast<double>(dims[0]);
      if (op == "ConvTranspose") {
        // Each input element is scattered through one filter's worth of outputs.
        const double in = staticElements(node->input(0));
        if (in < 0) return std::nullopt;
        total += in * inner;
        continue;
      }
    } else if ((op == "MatMul" || op == "Gemm") && node->input(0)) {
      if (!node->input(0)->shape().isStatic()) return std::nullopt;
      const auto dims = node->input(0)->shape().staticDims();
      if (!dims.empty()) inner = static_cast<double>(std::max<int64_t>(dims.back(), 1));
      if (op == "Gemm" && dims.size() == 2)
        if (const Attribute* transA = node->attribute("transA");
            transA && transA->kind() == AttrKind::Int && transA->asInt() != 0)
          inner = static_cast<double>(std::max<int64_t>(dims[0], 1));
    }
    for (const Value* out : node->outputs()) {
      if (!out || out->name().empty()) continue;
      const double n = staticElements(out);
      if (n < 0) return std::nullopt;
      total += n * inner;
    }
  }
  return total;
}

} // namespace

PrecisionGuardMode precisionGuardMode() {
  const char* value = std::getenv("KILN_PRECISION_GUARD");
  const std::string v = value ? value : "";
  if (v == "off" || v == "0" || v == "false") return PrecisionGuardMode::Off;
  if (v == "keep") return PrecisionGuardMode::Keep;
  return PrecisionGuardMode::Check;
}

PrecisionGuardResult guardFp16Precision(const Model& model, const PrecisionOptions& precision,
                                        const PrecisionGuardOptions& options) {
  PrecisionGuardResult result;
  if (options.mode == PrecisionGuardMode::Off) return result;
  const double mrePercent = options.gate.maxMeanRelativeError * 100;
  const std::string gateText =
      fmt::format("MRE <= {}% (on the logits before a final Sigmoid/Softmax) and cosine >= {}",
                  mrePercent, options.gate.minCosine);
  // `kiln sensitivity`'s name of the mode, and what follows from its finding.
  const bool weightsOnly = precision.mode == PrecisionMode::WeightsOnlyFp16;
  const char* modeName = weightsOnly ? "fp16_weights"
                         : precision.mode == PrecisionMode::AllowMixPrecision
                             ? "allow_mix_precision"
                             : "force_fp16";
  const std::string fix =
      weightsOnly
          ? fmt::format("`kiln sensitivity MODEL --precision-mode fp16_weights --target-mre {}` "
                        "names the weights that cost it",
                        mrePercent)
          : fmt::format("`kiln sensitivity MODEL --precision-mode {} --target-mre {}` finds nodes "
                        "to keep fp32 (atc --keep_dtype); KILN_PRECISION_GUARD=keep makes the "
                        "conversion search and keep them",
                        modeName, mrePercent);
  auto skipped = [&](const std::string& why) {
    result.notes.push_back(fmt::format("precision guard: not run ({}); the FP16 conversion is not "
                                       "checked against {}",
                                       why, gateText));
    return result;
  };
  // Running a model the user uploaded must stay bounded: a Loop's trip count or a branch's work
  // is not known from the shapes, so control flow is not run.
  for (const auto& node : model.graph->nodes())
    if (!node->subgraphs().empty())
      return skipped(
          fmt::format("node '{}' ({}) has a subgraph, whose cost the shapes do not bound",
                      keepDtypeNodeName(*node), node->opType()));
  // The trials hold a serialized copy and converted copies of the weights: bounded in bytes, so a
  // conversion's peak memory stays near the model's size for large models (bench/ convert_memory).
  const uint64_t weightBytes = parameterBytes(model);
  if (weightBytes > options.maxWeightBytes)
    return skipped(
        fmt::format("its trials copy the weights: {:.1f} MiB, above its budget of {:.0f} "
                    "MiB",
                    weightBytes / 1048576.0, options.maxWeightBytes / 1048576.0));
  for (const Value* in : model.graph->inputs())
    if (!in->isInitializer() &&
        (in->type().kind != TypeKind::Tensor ||
         !(isFloatingPoint(in->dtype()) || isInteger(in->dtype()) || in->dtype() == DType::Bool)))
      return skipped(fmt::format("input '{}' is not a numeric tensor", in->name()));
  const auto macs = estimateMultiplyAdds(*model.graph);
  if (!macs) return skipped("the model has shapes that are not static");
  // The values one run makes, in bytes (each set's runs hold about this much): bounded like the
  // weights, so an uploaded model cannot make its conversion allocate gigabytes.
  double valueBytes = 0;
  for (const auto& node : model.graph->nodes())
    for (const Value* out : node->outputs())
      if (out && !out->name().empty())
        valueBytes += staticElements(out) * std::max(8, dtypeBits(out->dtype())) / 8.0;
  if (valueBytes > static_cast<double>(options.maxWeightBytes) * 4)
    return skipped(fmt::format("one run makes {:.1f} MiB of values, above its budget of {:.0f} MiB",
                               valueBytes / 1048576.0, options.maxWeightBytes * 4 / 1048576.0));
  const double nodes = static_cast<double>(model.graph->nodes().size());
  // A check runs the float and the converted model once per set; a search about once per
  // candidate node (plus a binary search) per set.
  const double runsPerSet = options.mode == PrecisionGuardMode::Check
                                ? 2.0
                                : nodes + 2 * std::log2(std::max(2.0, nodes)) + 3;
  const uint32_t setCount = options.inputs ? 1 : std::max<uint32_t>(1, options.seededSets);
  const double cost = setCount * runsPerSet * *macs;
  if (cost > options.maxTrialMultiplyAdds)
    return skipped(fmt::format("it would take about {:.2g} multiply-adds, above its budget of "
                               "{:.2g}",
                               cost, options.maxTrialMultiplyAdds));
  std::vector<std::map<std::string, rt::RtValue>> inputSets;
  if (options.inputs) {
    inputSets.push_back(*options.inputs);
  } else {
    for (uint32_t seed = 0; seed < setCount; ++seed) {
      auto made = makeDeterministicInputs(*model.graph, seed);
      if (!made) return skipped(made.status().message());
      inputSets.push_back(made.take());
    }
  }
  const std::string inputsText = options.inputs
                                     ? std::string("the sample inputs")
                                     : fmt::format("{} seeded input sets", inputSets.size());
  SensitivityOptions sensitivity;
  sensitivity.variant = SensitivityVariant::Fp16;
  sensitivity.precision = precision;
  sensitivity.gate = options.gate;
  sensitivity.threads = options.threads
                            ? options.threads
                            : std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 8);
  // The float run's tensors kept for the trials, within the budget of one run's values: a
  // conversion's memory stays bounded (the trials recompute what is not kept).
  sensitivity.maxStoredBytes = options.maxWeightBytes * 4;

  if (options.mode == PrecisionGuardMode::Check) {
    // One trial that converts every node: nothing of the float run would be reused.
    sensitivity.maxStoredBytes = 0;
    auto bytes = serializedForTrials(model);
    if (!bytes) return skipped(bytes.status().message());
    Trials trials(bytes.take(), inputSets, sensitivity);
    if (Status st = trials.runReference(); !st) return skipped(st.message());
    auto worst = trials.gateWorstWith({});
    if (!worst) return skipped(worst.status().message());
    if (worst->ratio <= 1.0) return result;
    result.notes.push_back(fmt::format(
        "precision guard: the FP16 conversion misses {} on {}: '{}' has MRE {:.3f}% and cosine "
        "{:.8f} ({:.2f} times the allowance). {}",
        gateText, inputsText, worst->tensor, worst->meanRelativeError * 100, worst->cosine,
        worst->ratio, fix));
    return result;
  }

  auto report = analyzeSensitivity(model, inputSets, sensitivity);
  if (!report) return skipped(report.status().message());
  if (report->convertedAll <= 1.0) return result; // the conversion meets the gate as it is
  if (!report->targetMet)
    return skipped(
        fmt::format("keeping all {} candidate nodes fp32 still misses it", report->candidates));
  result.keep = report->keep;
  std::string names;
  for (size_t i = 0; i < result.keep.size(); ++i) {
    if (i == 12) {
      names += fmt::format(", ... ({} more)", result.keep.size() - i);
      break;
    }
    names += (i ? ", " : "") + result.keep[i];
  }
  result.notes.push_back(fmt::format(
      "precision guard: {} of {} node(s) kept fp32 so the outputs meet {} on {} (worst check at "
      "{:.2f} of the allowance, {:.2f} with every node converted): {}",
      result.keep.size(), report->candidates, gateText, inputsText, report->keptScore,
      report->convertedAll, names));
  return result;
}

} // namespace kiln
