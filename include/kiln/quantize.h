// Calibrated post-training quantization (`kiln quantize`): activation statistics collected by
// running the float model in kiln's executor over a calibration folder, activation ranges from
// them (MinMax, Percentile, Entropy/KL), and the QDQ rewrite that puts QuantizeLinear /
// DequantizeLinear around Conv, MatMul and Gemm so the result is a standard quantized ONNX model.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/image_preprocess.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/value.h"
#include "kiln/support/status.h"

namespace kiln {

enum class CalibrationMethod {
  MinMax,     // the smallest and largest value seen
  Percentile, // |x| clipped at a percentile of its histogram
  Entropy,    // |x| clipped where the quantized histogram loses least information (KL divergence)
  Mse         // |x| clipped where the expected squared error (rounding + clipping) is least
};

// Bins of the |x| histograms Percentile and Entropy work on.
inline constexpr size_t kCalibrationBins = 2048;

// A histogram of |x| over [0, limit]: bin i counts values in [i·w, (i+1)·w), w = limit / bins;
// values at or past `limit` count in the last bin. Counts are integers, so the histogram of a set
// of samples is the same whatever order (or thread) they were added in.
struct AbsHistogram {
  double limit = 0;
  std::vector<uint64_t> counts;

  AbsHistogram() = default;
  AbsHistogram(double limitValue, size_t bins) : limit(limitValue), counts(bins, 0) {}
  void add(const float* values, size_t count);
  uint64_t total() const;
  double binWidth() const {
    return counts.empty() ? 0 : limit / static_cast<double>(counts.size());
  }
};

// The upper edge of the first bin at which the running count reaches `percentile` % of all
// values (so the true percentile lies within one bin width below it); `limit` for an empty one.
double percentileThreshold(const AbsHistogram& histogram, double percentile);

// The clipping threshold that minimizes the KL divergence between the histogram clipped there
// (outliers folded into its last bin) and that clipped histogram squeezed into `levels` quantized
// bins and spread back (TensorRT's entropy calibration). Always a bin edge in [levels·w, limit].
double entropyThreshold(const AbsHistogram& histogram, size_t levels);

// The clipping threshold T (a bin edge) that minimizes the expected squared quantization error of
// the histogram's values over the range [max(min, -T), min(max, T)] (widened to hold 0): values
// inside lose step²/12 each to rounding, values past T lose (|x| - T)² to clipping, bin centres
// standing for their values. `int8Symmetric`: step T / 127, else the range over 255 steps.
double mseThreshold(const AbsHistogram& histogram, double min, double max, bool int8Symmetric);

// What calibration learned about one tensor over every sample.
struct ActivationStats {
  double min = 0, max = 0; // over finite values
  uint64_t count = 0;      // elements seen (all samples)
  AbsHistogram histogram;  // Percentile / Entropy only; limit = max(|min|, |max|)
  // max |x| per channel (axis 1) of a tensor of rank >= 3 (what channel equalization scales by)
  std::vector<double> channelPeak;
};

struct CalibrationOptions {
  CalibrationMethod method = CalibrationMethod::MinMax;
  double percentile = 99.99; // Percentile: % of |x| kept inside the range
  size_t maxSamples = 0;     // 0: every sample of the folder
  int threads = 1;           // executor threads; the statistics do not depend on it
};

// One calibration image (PNG, JPEG or BMP) preprocessed into a tensor for an input of type
// `input`; K4001 naming the file when it cannot be decoded, is too large, or does not fit.
Expected<Tensor> loadCalibrationImage(const std::string& path, const ValueType& input,
                                      const ImagePreprocess& preprocess);
// The same from the file's bytes (`path` names it in messages).
Expected<Tensor> calibrationImageFromBytes(std::string_view bytes, const std::string& path,
                                           const ValueType& input,
                                           const ImagePreprocess& preprocess);

// A calibration folder. Either one subfolder per sample holding one file per graph input, named
// after the input (`x.npy`, `x.pb`, or raw `x.bin` for an input with a static shape), or, for a
// model with one input, the sample files side by side. Samples are taken in name order.
class CalibrationData {
 public:
  // K1001 when `dir` is missing, K1002 when it is no folder, K4001 naming --calibration when it
  // holds no sample or a subfolder lacks an input's file.
  static Expected<CalibrationData> open(const Graph& graph, const std::string& dir);
  // converter_lite's layout (`calibrate_path=x:/data/x,y:/data/y`): one folder per input, sample k
  // being the k-th file of each in name order (.npy, .pb, or raw .bin for a static shape). Every
  // graph input needs a folder and every folder the same number of files, else K4001 naming
  // `flag`; a missing folder is K1001.
  // With `images`, the folders hold PNG / JPEG / BMP files preprocessed so (input_type=IMAGE).
  static Expected<CalibrationData>
  fromInputFolders(const Graph& graph, const std::map<std::string, std::string>& folders,
                   const std::string& flag, const ImagePreprocess* images = nullptr);
  size_t size() const { return samples_.size(); }
  const std::string& sampleName(size_t i) const { return samples_[i].name; }
  // Reads sample `i` (one sample in memory at a time). Files of another numeric type than the
  // input are cast to it.
  Expected<std::map<std::string, rt::RtValue>> load(size_t i) const;

 private:
  struct Sample {
    std::string name;
    std::map<std::string, std::string> files; // input name -> path
  };
  std::vector<Sample> samples_;
  std::map<std::string, ValueType> inputTypes_;
  std::optional<ImagePreprocess> images_;
};

struct CalibrationResult {
  std::map<std::string, ActivationStats> tensors; // by value name; float32 tensors only
  size_t samples = 0;
  size_t runs = 0; // model executions (two per sample for Percentile / Entropy)
  double seconds = 0;
};

// Runs `model` (not changed) on every sample and collects the statistics of the `tensors` named
// (graph inputs or node outputs of the main graph). Memory: one sample's tensors plus one
// histogram per tensor. MinMax takes one run per sample; Percentile and Entropy take a second
// pass with histograms over the range the first found.
Expected<CalibrationResult> calibrate(const Model& model, const CalibrationData& data,
                                      const std::vector<std::string>& tensors,
                                      const CalibrationOptions& options);

// The float range [min, max] a tensor is quantized over: MinMax as seen; Percentile / Entropy /
// Mse clip both ends at the threshold found on |x| (`levels` quantized bins for Entropy; Mse
// weighs the steps of int8 symmetric or uint8 asymmetric codes).
std::pair<double, double> activationRange(const ActivationStats& stats,
                                          const CalibrationOptions& options, size_t levels,
                                          bool int8Symmetric = false);

struct QuantParam {
  float scale = 1;
  int32_t zeroPoint = 0;
};
// uint8 asymmetric (the range widened to hold 0, zero point in [0, 255]) or int8 symmetric (zero
// point 0, scale = max|x| / 127). A zero range gives scale 1.
QuantParam activationQuantParam(double min, double max, bool int8Symmetric);

struct QdqOptions {
  CalibrationOptions calibration;
  bool int8Activations = false; // int8 symmetric instead of uint8 asymmetric
  bool quantizeBias = true;     // Conv / Gemm bias as int32 with scale x_scale · w_scale
  // Full-integer form: the output of each quantized node (or of the Relu that alone reads it) gets
  // its own QuantizeLinear → DequantizeLinear, calibrated like the inputs, so every Conv / MatMul
  // sits between codes and a backend can run it in integers from codes to codes (QLinearConv);
  // what converter_lite's FULL_QUANT writes.
  bool quantizeOutputs = false;
  bool perChannelWeights = true; // false: one scale per weight tensor
  // Channel equalization before calibration (equalizeChannels): Conv outputs and depthwise Conv
  // inputs rescaled per channel so every channel spans the tensor's per-tensor int8 range.
  bool equalizeChannels = false;
  // Bias correction after the rewrite (correctBiases): int32 Conv / Gemm bias codes shifted so each
  // output channel's mean over the calibration samples is what the float weights would give.
  bool biasCorrection = false;
  // Only nodes whose weight is a constant (what targets run as integer kernels); FULL_QUANT.
  bool constantWeightsOnly = false;
  // Nodes left float: ONNX node names (an unnamed node by its first output's name) or
  // `OpType::Conv` for every node of a type.
  std::vector<std::string> exclude;
  // Accuracy-aware mode: keep the fewest most sensitive nodes float so that the worst output
  // cosine against the float model, on the first `evaluationSamples` calibration samples, is at
  // least this (QdqReport::keptFloat, cosine).
  std::optional<double> targetCosine;
  size_t evaluationSamples = 4;
};

struct QdqReport {
  size_t quantizedNodes = 0; // Conv / MatMul / Gemm given QDQ inputs
  size_t excludedNodes = 0;  // named by --exclude
  size_t quantizeLinear = 0; // nodes added
  size_t dequantizeLinear = 0;
  size_t quantizedOutputs = 0; // quantizeOutputs: outputs given their own pair
  size_t equalizedTensors = 0; // equalizeChannels: activations rescaled per channel
  size_t correctedBiases = 0;  // biasCorrection: int32 biases whose codes were shifted
  CalibrationResult calibration;
  std::vector<std::string> notes;
  // Accuracy-aware mode: the nodes kept float for the target (by keep-list name), the worst
  // output cosine measured with them, and how many quantized copies were scored.
  std::vector<std::string> keptFloat;
  std::optional<double> cosine;
  size_t trials = 0;
};

// Channel equalization for per-tensor activation codes (QdqOptions::equalizeChannels), on the
// Conv nodes `targets` names (those about to be quantized), from per-channel peaks calibrated on
// `data`. A Conv output whose channels' peaks differ is divided per channel (the Conv's weights
// and bias scaled by 1/t, t = peak_c / max peak) and multiplied back by a float Mul for its
// non-Conv readers, or by folding t into the input channels of quantized Conv readers' weights;
// the input of a depthwise Conv made by other ops is divided by a Mul and its weights multiplied.
// Per-channel weight codes absorb the scales, so the float model computes the same values while
// each channel spans the whole int8 range. Returns how many tensors were rescaled.
Expected<size_t> equalizeChannels(Model& model, const CalibrationData& data,
                                  const std::vector<const Node*>& targets,
                                  const CalibrationOptions& options);

// Bias correction (QdqOptions::biasCorrection): runs `quantized` on the first `maxSamples` samples
// (0: all) with, beside each quantized Conv / Gemm, a twin reading the same quantized input and
// bias with the float weights of `reference` (the float model the QDQ form was made from), and
// adds to the int32 bias codes, per output channel, the mean of twin output minus quantized output
// (in codes of the bias scale): the mean shift the layer's own weight rounding causes.
// Means are summed in double in sample order: the result does not depend on `threads`. Returns
// how many biases changed.
Expected<size_t> correctBiases(Model& quantized, const Model& reference,
                               const CalibrationData& data, size_t maxSamples, int threads);

// Raises the model's default-domain opset to 13 when it is older: ops that mean the same at 13 are
// kept, Clip/Slice/Squeeze/Unsqueeze/Split/ReduceSum attributes become inputs, Softmax/LogSoftmax
// over the last axis get axis -1. Any other op (or a subgraph) is K4002 naming it, and the model is
// left unchanged. Returns notes.
Expected<std::vector<std::string>> raiseOpsetTo13(Model& model);

// Calibrates `model` on `data` and rewrites it in place into QDQ form: each Conv/MatMul/Gemm
// activation input goes through QuantizeLinear → DequantizeLinear (one pair per tensor, shared by
// its consumers); constant weights become int8 symmetric per-channel initializers (Conv: axis 0,
// MatMul/Gemm: the output axis) behind a DequantizeLinear; biases int32 when asked. An opset
// below 13 is raised first (raiseOpsetTo13); when that is refused, opsets 10-12 get per-tensor
// weights and a note, older ones the refusal.
Expected<QdqReport> quantizeToQdq(Model& model, const CalibrationData& data,
                                  const QdqOptions& options);

} // namespace kiln
