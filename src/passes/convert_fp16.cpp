// convert-fp16: lowers float32 compute to float16 under a precision mode, with casts only at
// precision boundaries.
//
//   %y = Conv(%x: f32, %w: f32)  ; %z = Softmax(%y)          (allow_mix_precision)
//     →  %x_fp16 = Cast(%x) {to = 10}
//        %y: f16 = Conv(%x_fp16, %w_fp16)          init %w_fp16 = f16[...]
//        %y_fp32 = Cast(%y) {to = 1} ; %z = Softmax(%y_fp32)   (Softmax is on the block list)
// Modes: force_fp16 lowers every op that can compute in fp16 (except ops whose float inputs are
// indices or sizes); allow_fp32_to_fp16 lowers the cube ops (Conv, ConvTranspose, MatMul, Gemm);
// allow_mix_precision lowers white-listed ops, keeps block-listed ones in fp32, and lets the others
// follow their producer; must_keep_origin_dtype / force_fp32 change nothing; weights-only
// (--fp16=on) stores float32 constants as fp16 and computes in fp32. Nodes producing graph outputs,
// nodes named in keepNodeNames (also through the nodes a fusion absorbed), nodes reading an integer
// accumulator and nodes with a weight outside the fp16 range stay fp32 (each reported in a note).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "kiln/passes/keep_dtype.h"
#include "kiln/passes/pass.h"
#include "kiln/passes/precision_report.h"
#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/page_release.h"
#include "kiln/support/progress.h"
#include "ops/control_flow.h"
#include "ops/precision.h"

namespace kiln {
namespace {

constexpr float kFp16Max = 65504.0f;
constexpr float kFp16MinSubnormal = 5.96046448e-08f;
constexpr float kFp16MinNormal = 6.10351562e-05f;

// Each op's FP16 traits live beside its other shared decisions (src/ops/<family>.cpp): kept in
// fp32 by default (numerically sensitive, docs/precision.md), white-listed for allow_mix_precision,
// cube-unit ops, and ops that never compute in fp16.
bool hasFp16Trait(const Node& node, ops::Fp16Trait trait) {
  return (ops::fp16Traits(node.opType()) & trait) != 0;
}

// Inputs that carry data (converted to fp16); others (Resize scales/roi, Clip bounds stay data)
// keep their type.
bool isDataInput(const Node& node, size_t i) {
  if (node.opType() == "Resize" || node.opType() == "Upsample") return i == 0;
  return true;
}

bool isF32(const Value* v) {
  return v && v->type().kind == TypeKind::Tensor && v->dtype() == DType::Float32;
}

bool computesInFloat(const Node& node) {
  for (const Value* in : node.inputs())
    if (isF32(in)) return true;
  for (const Value* out : node.outputs())
    if (isF32(out)) return true;
  return false;
}

// An integer wider than 8 bits cast to float (a ConvInteger / MatMulInteger accumulator): its
// values pass fp16's 65504 and its 11 significant bits, so the op reading it stays fp32.
bool readsIntegerAccumulator(const Node& node) {
  for (const Value* in : node.inputs()) {
    if (!isF32(in) || !in->producer() || in->producer()->opType() != "Cast") continue;
    const Value* source = in->producer()->input(0);
    if (!source) continue;
    switch (source->dtype()) {
    case DType::Int16:
    case DType::UInt16:
    case DType::Int32:
    case DType::UInt32:
    case DType::Int64:
    case DType::UInt64:
      return true;
    default:
      break;
    }
  }
  return false;
}

struct WeightCheck {
  bool inRange = true;
  float maxAbs = 0;
};

// Reads `t`'s float values a block at a time (no copy of the whole tensor): f(values, count).
template <typename F> void forFloatBlocks(const Tensor& t, F&& f) {
  constexpr size_t kBlock = 4096;
  float block[kBlock];
  const size_t count = t.byteSize() / 4;
  for (size_t start = 0; start < count; start += kBlock) {
    const size_t n = std::min(kBlock, count - start);
    std::memcpy(block, t.data() + start * 4, n * 4);
    f(static_cast<const float*>(block), n);
  }
}

WeightCheck checkWeight(const Tensor& t) {
  WeightCheck check;
  forFloatBlocks(t, [&](const float* values, size_t n) {
    float maxAbs = check.maxAbs;
    for (size_t i = 0; i < n; ++i)
      maxAbs = std::max(maxAbs, std::fabs(values[i]));
    check.maxAbs = maxAbs;
  });
  // NaN never raises maxAbs, and beyond fp16's range is exactly maxAbs > kFp16Max.
  check.inRange = !(check.maxAbs > kFp16Max);
  // Every weight is checked before any is converted: give the pages back, or all of a mapped
  // model would be resident at once.
  releasePages(t.buffer().get());
  return check;
}

class Lowering {
 public:
  Lowering(Graph& graph, PassContext& context, const std::map<std::string, double>* peaks)
      : graph_(graph), context_(context), options_(*context.precision), peaks_(peaks) {}

  bool run() {
    if (options_.mode == PrecisionMode::KeepOrigin || options_.mode == PrecisionMode::ForceFp32)
      return false;
    if (options_.mode == PrecisionMode::WeightsOnlyFp16) return convertWeightsOnly();
    decide();
    return rewrite();
  }

 private:
  bool blocked(const Node& node) const {
    return hasFp16Trait(node, ops::kFp16BlockByDefault) ||
           std::find(options_.keepOpTypes.begin(), options_.keepOpTypes.end(), node.opType()) !=
               options_.keepOpTypes.end();
  }

  // keep_dtype entries name a node, or every node of an op type (`OpType::Softmax`), also through
  // the nodes a fusion absorbed.
  bool namedInKeepDtype(const Node& node) const {
    return keepDtypeNames(node, options_.keepNodeNames);
  }

  void keep(const Node& node, const char* reason, const std::string& why,
            const std::string& weight = {}, double maxAbs = 0) {
    // Named as keep_dtype entries name it (an unnamed node by its first output).
    const std::string name = keepDtypeNodeName(node);
    context_.notes.push_back(
        fmt::format("fp16: node '{}' ({}) stays fp32: {}", name, node.opType(), why));
    if (context_.precisionReport)
      context_.precisionReport->keptFp32.push_back(
          {name, node.opType(), reason, why, weight, maxAbs});
  }

  // Bytes of the distinct float32 initializers `nodes` read as data (the progress totals).
  template <typename Nodes> uint64_t weightBytes(const Nodes& nodes) {
    std::set<const Value*> seen;
    uint64_t total = 0;
    for (const Node* node : nodes)
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        const Value* in = node->input(i);
        if (isF32(in) && in->isInitializer() && isDataInput(*node, i) && seen.insert(in).second)
          total += in->initializer().byteSize();
      }
    return total;
  }

  // Each weight's range is read once (a weight several nodes share is not read again).
  WeightCheck checkOnce(const Value* weight, WriteProgress& progress) {
    auto it = checked_.find(weight);
    if (it != checked_.end()) return it->second;
    WeightCheck check = checkWeight(weight->initializer());
    progress.advance(weight->initializer().byteSize());
    checked_.emplace(weight, check);
    return check;
  }

  void decide() {
    std::vector<const Node*> all;
    for (const auto& nodePtr : graph_.nodes())
      all.push_back(nodePtr.get());
    WriteProgress progress("checking weights for fp16", weightBytes(all));
    for (const auto& nodePtr : graph_.nodes()) {
      const Node& node = *nodePtr;
      if (!computesInFloat(node) || !node.subgraphs().empty() ||
          hasFp16Trait(node, ops::kFp16Never))
        continue;
      bool wanted = false;
      switch (options_.mode) {
      case PrecisionMode::ForceFp16:
        wanted = true;
        break;
      case PrecisionMode::AllowFp32ToFp16:
        wanted = hasFp16Trait(node, ops::kFp16Cube);
        break;
      case PrecisionMode::AllowMixPrecision:
        if (blocked(node)) {
          wanted = false;
          keep(node, "op_block_list", "on the fp32 block list");
        } else if (hasFp16Trait(node, ops::kFp16White)) {
          wanted = true;
        } else { // gray: follow the producer of the first float input
          for (const Value* in : node.inputs())
            if (in && in->producer() && (isF32(in) || in->dtype() == DType::Float16)) {
              wanted = lowered_.count(in->producer()) > 0;
              break;
            }
        }
        break;
      default:
        break;
      }
      if (!wanted) continue;
      if (namedInKeepDtype(node)) {
        keep(node, "keep_dtype", "named in keep_dtype");
        continue;
      }
      if (readsIntegerAccumulator(node)) {
        keep(node, "integer_accumulator",
             "it reads an integer accumulator cast to float, beyond fp16's range and precision");
        continue;
      }
      bool untyped = false;
      for (const Value* out : node.outputs())
        untyped |= out && out->dtype() == DType::Undefined;
      if (untyped) { // without output types, casts for fp32 consumers could not be placed
        keep(node, "output_type_unknown", "output types unknown (run infer-shapes first)");
        continue;
      }
      bool outputIsGraphOutput = false;
      for (const Value* out : node.outputs())
        outputIsGraphOutput |= out && out->isGraphOutput();
      if (outputIsGraphOutput && !options_.outputsFp16) {
        keep(node, "graph_output", "its output is a graph output (graph I/O types are kept)");
        continue;
      }
      bool ok = true;
      for (size_t i = 0; i < node.inputs().size(); ++i) {
        const Value* in = node.input(i);
        if (!isF32(in) || !in->isInitializer() || !isDataInput(node, i)) continue;
        WeightCheck check = checkOnce(in, progress);
        if (!check.inRange && options_.clipWeights) {
          // ATC --is_weight_clip=1: the values past the range saturate at +-65504.
          if (clippedNamed_.insert(in).second)
            context_.notes.push_back(fmt::format(
                "fp16: weight '{}' has max |w| = {} beyond fp16's {}: clipped to +-{} "
                "(--is_weight_clip=1)",
                in->name(), check.maxAbs, kFp16Max, kFp16Max));
        } else if (!check.inRange) {
          keep(node, "weight_out_of_range",
               fmt::format("weight '{}' has max |w| = {} beyond fp16's {}", in->name(),
                           check.maxAbs, kFp16Max),
               in->name(), check.maxAbs);
          ok = false;
        }
      }
      if (ok) ok = !keptForOverflow(node);
      if (ok) lowered_.insert(&node);
    }
  }

  // A node an fp32 run drove beyond fp16's range: kept fp32 in the mixed modes; force_fp16
  // converts every node (ATC's contract), so there the overflow is said, not avoided.
  bool keptForOverflow(const Node& node) {
    auto hot = overflowingOutput(node);
    if (!hot) return false;
    const std::string why = fmt::format("output '{}' reaches {} in an fp32 run, beyond fp16's {}",
                                        hot->first->name(), hot->second, kFp16Max);
    const bool keepIt = options_.mode != PrecisionMode::ForceFp16;
    if (context_.precisionReport)
      context_.precisionReport->activationOverflows.push_back(
          {keepDtypeNodeName(node), node.opType(), hot->first->name(), hot->second, keepIt});
    if (keepIt) {
      keep(node, "activation_out_of_range", why);
      return true;
    }
    context_.notes.push_back(
        fmt::format("fp16: node '{}' ({}) overflows under force_fp16: {} (it becomes inf; "
                    "--precision_mode=allow_mix_precision or --keep_dtype keeps it fp32)",
                    keepDtypeNodeName(node), node.opType(), why));
    return false;
  }

  // The first output an fp32 run drove beyond fp16's range, with its peak.
  std::optional<std::pair<const Value*, double>> overflowingOutput(const Node& node) const {
    if (!peaks_) return std::nullopt;
    for (const Value* out : node.outputs()) {
      if (!out) continue;
      auto it = peaks_->find(out->name());
      if (it != peaks_->end() && it->second > kFp16Max)
        return std::make_pair(out, it->second);
    }
    return std::nullopt;
  }

  // Subnormal accounting: values that round to zero, and values stored with reduced precision.
  void countTiny(float v) {
    float a = std::fabs(v);
    if (v != 0.0f && a < kFp16MinSubnormal / 2)
      ++flushedToZero_;
    else if (v != 0.0f && a < kFp16MinNormal)
      ++subnormal_;
  }

  void recordCast(const Node* cast, const Node* user) {
    if (!context_.precisionReport) return;
    context_.precisionReport->casts.push_back(
        {cast->output(0)->name(), cast->input(0)->name(),
         cast->output(0)->dtype() == DType::Float16 ? "float16" : "float32",
         user ? user->name() : std::string()});
  }

  Value* fp16Constant(Value* weight) {
    auto it = constants_.find(weight);
    if (it != constants_.end()) return it->second;
    // float16 bytes straight from the source, which is read once and then given back.
    const Tensor& source = weight->initializer();
    std::vector<uint8_t> halves(source.byteSize() / 2);
    size_t done = 0;
    forFloatBlocks(source, [&](const float* values, size_t n) {
      rt::floatsToHalves(reinterpret_cast<const uint8_t*>(values),
                         reinterpret_cast<uint16_t*>(halves.data()) + done, n);
      if (options_.clipWeights) // saturate what rounding made infinite (--is_weight_clip=1)
        for (size_t i = 0; i < n; ++i) {
          uint16_t& h = reinterpret_cast<uint16_t*>(halves.data())[done + i];
          if ((h & 0x7FFFu) == 0x7C00u && std::isfinite(values[i]))
            h = static_cast<uint16_t>((h & 0x8000u) | 0x7BFFu);
        }
      for (size_t i = 0; i < n; ++i)
        countTiny(values[i]);
      done += n;
    });
    releasePages(source.buffer().get());
    if (converting_) converting_->advance(source.byteSize());
    Value* converted = graph_.addInitializer(
        graph_.uniqueName(weight->name() + "_fp16"),
        Tensor(DType::Float16, weight->initializer().dims(), Buffer::owned(std::move(halves))));
    constants_[weight] = converted;
    return converted;
  }

  // A value in the wanted precision, inserting one Cast per value (before `user`, its first
  // consumer in topological order).
  Value* castOf(Value* value, DType to, Node* user, std::map<Value*, Value*>& cache,
                const char* suffix) {
    auto it = cache.find(value);
    if (it != cache.end()) return it->second;
    // Undo our own opposite cast instead of stacking a second one.
    if (value->producer() && inserted_.count(value->producer()))
      return cache[value] = value->producer()->input(0);
    Node* cast =
        graph_.insertNodeBefore(user, "Cast", {value}, {graph_.uniqueName(value->name() + suffix)});
    cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(to)));
    cast->addLocation({user->name(), "Cast"});
    ValueType type = value->type();
    type.dtype = to;
    cast->output(0)->setType(type);
    inserted_.insert(cast);
    recordCast(cast, user);
    return cache[value] = cast->output(0);
  }

  // --input_fp16_nodes: the graph input itself becomes fp16; fp32 consumers get a Cast.
  size_t retypeInputs(std::set<Value*>& nowFp16) {
    size_t count = 0;
    for (Value* in : graph_.inputs()) {
      if (!isF32(in) || in->isInitializer() ||
          std::find(options_.inputFp16Nodes.begin(), options_.inputFp16Nodes.end(), in->name()) ==
              options_.inputFp16Nodes.end())
        continue;
      ValueType type = in->type();
      type.dtype = DType::Float16;
      in->setType(type);
      nowFp16.insert(in);
      ++count;
    }
    return count;
  }

  // --output_type=FP16 for outputs whose producer stayed fp32: the producer's value is renamed and
  // a Cast produces the output under its original name.
  void castOutputs() {
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      Value* out = graph_.outputs()[i];
      if (!isF32(out) || !out->producer()) continue;
      std::string name = out->name();
      graph_.renameValue(out, graph_.uniqueName(name + "_fp32"));
      Node* cast = graph_.insertNodeBefore(nullptr, "Cast", {out}, {name});
      cast->setAttribute("to", Attribute::ofInt(dtypeToOnnx(DType::Float16)));
      ValueType type = out->type();
      type.dtype = DType::Float16;
      cast->output(0)->setType(type);
      inserted_.insert(cast);
      recordCast(cast, nullptr);
      graph_.setOutput(i, cast->output(0));
    }
  }

  bool rewrite() {
    std::vector<Node*> order;
    for (const auto& node : graph_.nodes())
      order.push_back(node.get());
    std::map<Value*, Value*> toFp16, toFp32;
    std::set<Value*> nowFp16;
    size_t retyped = retypeInputs(nowFp16);
    if (lowered_.empty() && retyped == 0 && !options_.outputsFp16) return false;
    WriteProgress progress("converting weights to fp16", weightBytes(lowered_));
    converting_ = &progress;
    for (Node* node : order) {
      bool low = lowered_.count(node) > 0;
      // A node with subgraphs stays fp32, and so do the bodies: outer values they read that are
      // fp16 now come back through a Cast before the node.
      if (!node->subgraphs().empty()) {
        const std::vector<Graph*> own = node->subgraphs();
        const std::vector<const Graph*> subs(own.begin(), own.end());
        for (const Value* captured : ops::capturedValues(subs)) {
          Value* v = const_cast<Value*>(captured);
          if (!nowFp16.count(v)) continue;
          Value* cast = castOf(v, DType::Float32, node, toFp32, "_fp32");
          std::vector<Use> uses = v->uses();
          for (const Use& use : uses)
            if (use.user->owner() != &graph_) use.user->setInput(use.inputIndex, cast);
        }
      }
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        Value* in = node->input(i);
        if (!in) continue;
        if (low && isDataInput(*node, i) && isF32(in)) {
          node->setInput(i, in->isInitializer() && !in->isGraphInput()
                                ? fp16Constant(in)
                                : castOf(in, DType::Float16, node, toFp16, "_fp16"));
        } else if (!low && nowFp16.count(in)) {
          node->setInput(i, castOf(in, DType::Float32, node, toFp32, "_fp32"));
        }
      }
      if (!low) continue;
      for (Value* out : node->outputs())
        if (isF32(out)) {
          ValueType type = out->type();
          type.dtype = DType::Float16;
          out->setType(type);
          nowFp16.insert(out);
        }
    }
    converting_ = nullptr;
    progress.finish();
    if (options_.outputsFp16) castOutputs();
    context_.notes.push_back(fmt::format(
        "fp16: {} node(s) lowered, {} cast(s) inserted, {} weight(s) converted, "
        "{} weight value(s) flushed to zero, {} stored as subnormals",
        lowered_.size(), inserted_.size(), constants_.size(), flushedToZero_, subnormal_));
    if (auto* report = context_.precisionReport) {
      report->nodesLowered += lowered_.size();
      report->weightsConverted += constants_.size();
      report->valuesFlushedToZero += flushedToZero_;
      report->valuesSubnormal += subnormal_;
    }
    return true;
  }

  // Weights-only mode: a weight stays fp32 when every node reading it is named in keep_dtype, so
  // keeping every node gives the float model back.
  bool readOnlyByKeptNodes(const Value* weight) {
    if (weight->uses().empty()) return false;
    for (const Use& use : weight->uses())
      if (use.user->owner() != &graph_ || !namedInKeepDtype(*use.user)) return false;
    for (const Use& use : weight->uses())
      if (reported_.insert(use.user).second) keep(*use.user, "keep_dtype", "named in keep_dtype");
    return true;
  }

  bool convertWeightsOnly() {
    // Stored precision only: weights round through fp16 and are used as fp32 again.
    size_t converted = 0;
    for (Value* init : graph_.initializers()) {
      if (!isF32(init) || init->isGraphInput()) continue;
      if (readOnlyByKeptNodes(init)) continue;
      WeightCheck check = checkWeight(init->initializer());
      if (!check.inRange) {
        std::string why = fmt::format("weight '{}' stays fp32: max |w| = {} beyond fp16's {}",
                                      init->name(), check.maxAbs, kFp16Max);
        context_.notes.push_back("fp16: " + why);
        if (context_.precisionReport)
          context_.precisionReport->keptFp32.push_back(
              {"", "", "weight_out_of_range", why, init->name(), check.maxAbs});
        continue;
      }
      std::vector<float> values = init->initializer().copyValues<float>();
      for (float& v : values) {
        countTiny(v);
        v = rt::halfToFloat(rt::floatToHalf(v));
      }
      init->setInitializer(
          Tensor::fromValues<float>(DType::Float32, init->initializer().dims(), values));
      ++converted;
    }
    context_.notes.push_back(fmt::format("fp16: {} weight(s) stored as fp16, {} weight value(s) "
                                         "flushed to zero, {} stored as subnormals",
                                         converted, flushedToZero_, subnormal_));
    if (auto* report = context_.precisionReport) {
      report->weightsConverted += converted;
      report->valuesFlushedToZero += flushedToZero_;
      report->valuesSubnormal += subnormal_;
    }
    return converted > 0;
  }

  Graph& graph_;
  PassContext& context_;
  const PrecisionOptions& options_;
  const std::map<std::string, double>* peaks_; // activation peaks of an fp32 run, or nullptr
  std::set<const Node*> lowered_;
  std::set<const Value*> clippedNamed_; // weights whose clipping was said
  std::set<const Node*> inserted_;
  std::set<const Node*> reported_; // weights-only: kept nodes already named in a note
  std::map<Value*, Value*> constants_;
  std::map<const Value*, WeightCheck> checked_;
  WriteProgress* converting_ = nullptr; // set while rewrite() converts weights
  size_t flushedToZero_ = 0;
  size_t subnormal_ = 0;
};

const char* modeName(PrecisionMode mode) {
  switch (mode) {
  case PrecisionMode::KeepOrigin:
    return "must_keep_origin_dtype";
  case PrecisionMode::ForceFp16:
    return "force_fp16";
  case PrecisionMode::AllowFp32ToFp16:
    return "allow_fp32_to_fp16";
  case PrecisionMode::AllowMixPrecision:
    return "allow_mix_precision";
  case PrecisionMode::ForceFp32:
    return "force_fp32";
  case PrecisionMode::WeightsOnlyFp16:
    return "fp16_weights";
  }
  return "";
}

class ConvertFp16 : public Pass {
 public:
  std::string_view name() const override { return "convert-fp16"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    if (!context.precision) return false;
    const PrecisionOptions& options = *context.precision;
    // Peaks measured on this very graph (names as convert-fp16 sees them), when asked.
    std::map<std::string, double> measured;
    const std::map<std::string, double>* peaks = options.activationPeaks;
    if (!peaks && options.measureActivationPeaks && context.model &&
        options.mode != PrecisionMode::KeepOrigin && options.mode != PrecisionMode::ForceFp32) {
      if (auto result = options.measureActivationPeaks(*context.model)) {
        measured = result.take();
        peaks = &measured;
      } else {
        context.notes.push_back("fp16: activation ranges not measured: " +
                                result.status().message());
      }
    }
    if (context.precisionReport) {
      context.precisionReport->mode = modeName(options.mode);
      context.precisionReport->activationsMeasured = peaks != nullptr;
    }
    return Lowering(graph, context, peaks).run();
  }
};

} // namespace

std::unique_ptr<Pass> makeConvertFp16Pass() { return std::make_unique<ConvertFp16>(); }

} // namespace kiln
