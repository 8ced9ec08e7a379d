// Accuracy metrics between a reference and a converted model's tensors (`kiln compare`).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/runtime/value.h"
#include "kiln/shape_spec.h"
#include "kiln/support/status.h"

namespace kiln {

struct TensorMetrics {
  uint64_t elements = 0;
  double cosine = 1.0; // dot / (|a||b|); 1 when both are all zero
  double meanRelativeError =
      0.0; // MindSpore Lite benchmark's definition (mean over out-of-tolerance elements)
  double maxAbsError = 0.0;
  double sqnrDb = 0.0;         // 10 log10(|ref|^2 / |ref - out|^2); +inf when identical
  bool nonFinite = false;      // NaN/Inf in the output where the reference is finite
  uint64_t nonFiniteCount = 0; // how many such elements
};

// Both tensors as float; shapes must match (checked by the caller).
TensorMetrics computeMetrics(const Tensor& reference, const Tensor& output);

// Deterministic inputs for every non-initializer graph input with a static shape: floats uniform in
// [-1, 1) from a fixed LCG seeded by `seed` and the input index, uint8 (images) over 0..255 from
// the same LCG, other integers 0, bools false.
Expected<std::map<std::string, rt::RtValue>> makeDeterministicInputs(const Graph& graph,
                                                                     uint32_t seed);

struct CompareOutput {
  std::string name;
  std::vector<int64_t> dims;
  TensorMetrics metrics;
};

struct CompareTensor {
  std::string name;      // candidate tensor name
  std::string reference; // reference tensor it is compared with (same name, or found via locations)
  std::string node;      // candidate node producing it
  std::string opType;
  std::vector<int64_t> dims;
  TensorMetrics metrics;
};

struct PerTensorReport {
  std::vector<CompareTensor> tensors; // candidate topological order
  int firstDivergent = -1;            // index into tensors, -1 when none diverges
};

// Runs both models capturing every tensor; compares each candidate tensor with the reference tensor
// of the same name, or (for fused nodes) with the output of the reference node named by the
// candidate node's last location. A tensor diverges when its cosine falls below `minCosine`.
Expected<PerTensorReport> compareTensors(const Model& reference, const Model& candidate,
                                         const std::map<std::string, rt::RtValue>& inputs,
                                         double minCosine);

// Static input shapes a converted artifact (.om/.ms) was made with, in the reference's layout,
// for each reference input whose shape is not static; nullopt when there is none to take. So
// `kiln compare MODEL.onnx X.om` of a dynamic ONNX model runs both at the artifact's shapes.
std::optional<ShapeSpec> inputShapesFromArtifact(const Graph& reference, const Model& candidate);

// When `candidate` is an .om made with AIPP (atc --insert_op_conf; recorded under
// kAippMetadataKey), gives `reference` the same preprocessing: its inputs are fixed to the shapes
// they had at conversion and the recorded configuration is inserted before them, so both models
// take the same uint8 NHWC image and the ONNX model sees the float NCHW tensor AIPP computes
// (colour conversion, crop, mean/min/var, padding) in float32. Returns one line saying so, or ""
// when the candidate has no AIPP.
Expected<std::string> applyArtifactAipp(Model& reference, const Model& candidate);

// Largest finite |value| of every floating-point tensor (graph inputs and node outputs, by name)
// in one run of `model` on `inputs`, read as each is produced (memory stays that of a plain run).
// convert-fp16 uses it to find activations beyond fp16's range (PrecisionOptions).
Expected<std::map<std::string, double>>
measureValuePeaks(const Model& model, const std::map<std::string, rt::RtValue>& inputs);

// Runs both models on `inputs` and compares outputs by position; a candidate input stored in
// another layout (Model::sourceLayouts) gets the same data transposed.
Expected<std::vector<CompareOutput>>
compareModels(const Model& reference, const Model& candidate,
              const std::map<std::string, rt::RtValue>& inputs);

} // namespace kiln
