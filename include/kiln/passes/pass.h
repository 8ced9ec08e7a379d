// Pass interface, pass context, and the pipeline runner (per-pass timing, change counts, IR dumps).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct ShapeSpec;
struct PrecisionReport;

// The doc string decompose-quant gives the DequantizeLinear it puts over a quantized op's constant
// weight codes: a backend that stores quantized weights keeps them as the model gave them (the
// .ms writer does not search them for a smaller INDEXING / SPARSE stream, which is weight quant's
// compression of the weights it quantizes).
inline constexpr std::string_view kModelWeightCodesDoc = "kiln: the model's weight codes";

// Precision the fp16 pass aims for (ATC --precision_mode values; converter_lite --fp16=on is
// WeightsOnlyFp16: constants stored as fp16, compute unchanged).
enum class PrecisionMode {
  KeepOrigin,
  ForceFp16,
  AllowFp32ToFp16,
  AllowMixPrecision,
  ForceFp32,
  WeightsOnlyFp16
};

struct PrecisionOptions {
  PrecisionMode mode = PrecisionMode::KeepOrigin;
  std::vector<std::string>
      keepOpTypes; // extra op types kept in fp32 (added to the default block list)
  // ATC --keep_dtype entries: node names, or `OpType::<type>` for every node of that op type.
  std::vector<std::string> keepNodeNames;
  std::vector<std::string>
      inputFp16Nodes;       // ATC --input_fp16_nodes: these graph inputs take fp16 data
  bool outputsFp16 = false; // ATC --output_type=FP16: float outputs are produced as fp16
  // ATC --is_weight_clip=1 given: weights past fp16's range saturate at +-65504 and their nodes
  // are lowered; otherwise such nodes stay fp32 (kiln's default, exact).
  bool clipWeights = false;
  // Largest finite |value| each value reached in an fp32 run on sample inputs
  // (measureValuePeaks; `kiln opt --precision-report`). A node whose output passes fp16's range
  // stays fp32 in the mixed modes; force_fp16 converts it (ATC's contract) and reports the
  // overflow. nullptr: not measured.
  const std::map<std::string, double>* activationPeaks = nullptr;
  // Or measured by convert-fp16 itself on the graph it is about to convert (so value names
  // match after the other passes); a failure is a note, the conversion goes on unmeasured.
  std::function<Expected<std::map<std::string, double>>(const Model&)> measureActivationPeaks;
};

// converter_lite [common_quant_param] quant_type=WEIGHT_QUANT (defaults as MindSpore Lite's).
struct WeightQuantOptions {
  int bitNum = 8;                     // 1..16; ≤ 8 bits stored as int8, more as int16
  bool symmetric = true;              // zero point 0 and a range symmetric around it
  uint64_t minQuantWeightSize = 0;    // weights with more elements than this are quantized
  int64_t minQuantWeightChannel = 16; // Conv/ConvTranspose with fewer output channels are skipped
  std::vector<std::string> skipNodes; // skip_quant_node
  // [weight_quant_param] bias_correction: per channel, the dequantized weights get the original
  // mean and standard deviation back (the runtime's varCorr/meanCorr, formats/ms.md §3.2).
  bool biasCorrection = true;
  // One scale (and zero point) per output channel, or one for the whole tensor.
  bool perChannel = true;
  // The op types whose weights are quantized; empty: every op quantize-weights knows.
  std::vector<std::string> ops;
  // Worker threads for the per-channel work (0: one per CPU, at most 8). The codes, scales and
  // corrections are the same bytes whatever the count.
  int threads = 0;
};

// What passes share during one pipeline run.
struct PassContext {
  Model* model = nullptr; // opsets, metadata; the graph passes get is model->graph
  bool explain = false;   // passes say why a rule declined (debug log)
  // Largest tensor (in bytes) constant folding may create: keeps Tile/ConstantOfShape from blowing
  // up.
  uint64_t foldSizeLimit = 16u << 20;
  // Input shapes the user fixed (--input_shape / --inputShape); nullptr when none were given.
  const ShapeSpec* inputShapes = nullptr;
  const PrecisionOptions* precision = nullptr;
  const WeightQuantOptions* weightQuant = nullptr;
  // When set, convert-fp16 and quantize-weights record their decisions here (kiln/passes/
  // precision_report.h).
  PrecisionReport* precisionReport = nullptr;
  // The target the model is being converted for, when known: why it refuses `node` ("" when it
  // takes it), `opset` being the model's opset for the node's domain. expand-functions replaces
  // refused nodes by their ONNX function bodies.
  std::function<std::string(const Node& node, int64_t opset)> targetRefusal;
  std::string targetName; // "ms", "om:Ascend310P3": for notes
  // Whether the conversion's target takes a node as it is (decompose-quant rewrites only what it
  // refuses); unset: no target, every node the pass knows is rewritten.
  std::function<bool(const Node&)> targetTakes;
  // Notes a pass leaves for the user (e.g. tensors that stay dynamic and why).
  std::vector<std::string> notes;
  int64_t opset() const { return model ? model->opsetVersion("") : 0; }
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Stable CLI name (also the file name under src/passes/).
  virtual std::string_view name() const = 0;
  // Rewrites the graph; returns whether anything changed.
  virtual Expected<bool> run(Graph& graph, PassContext& context) = 0;
};

// The one registry of passes (src/passes/registry.cpp).
std::unique_ptr<Pass> createPass(std::string_view name);
std::vector<std::string> passNames();

struct PassStats {
  std::string name;
  double millis = 0;
  bool changed = false;
  size_t nodesBefore = 0;
  size_t nodesAfter = 0;
};

struct PipelineOptions {
  bool verifyEach = false;  // always on in debug builds
  std::string printIrAfter; // a pass name, or "all"
  std::ostream* irStream = nullptr;
  bool explain = false;
  uint64_t foldSizeLimit = 16u << 20;
  const ShapeSpec* inputShapes = nullptr;
  const PrecisionOptions* precision = nullptr;
  const WeightQuantOptions* weightQuant = nullptr;
  PrecisionReport* precisionReport = nullptr; // see PassContext
  std::function<std::string(const Node& node, int64_t opset)> targetRefusal; // see PassContext
  std::string targetName;
  std::function<bool(const Node&)> targetTakes; // see PassContext
};

struct PipelineResult {
  std::vector<PassStats> stats;
  std::vector<std::string> notes;
};

// Runs the named passes in order on model.graph.
Expected<PipelineResult> runPipeline(Model& model, const std::vector<std::string>& passes,
                                     const PipelineOptions& options = {});
// Named pipelines (src/pipelines/): "default" (simplify for any target), "none".
Expected<std::vector<std::string>> pipelineByName(const std::string& name);
std::string formatPassStats(const PipelineResult& result);

} // namespace kiln
