// What the precision passes decided (convert-fp16, quantize-weights), for --precision-report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln {

struct PrecisionKeptNode {
  std::string node;
  std::string opType;
  // "op_block_list", "keep_dtype", "integer_accumulator", "weight_out_of_range",
  // "graph_output" or "output_type_unknown"
  std::string reason;
  std::string detail;      // human-readable explanation
  std::string weight;      // weight_out_of_range: the weight
  double maxAbsWeight = 0; // weight_out_of_range: its max |w|
};

struct PrecisionCast {
  std::string value; // the Cast's output
  std::string from;  // the value cast
  std::string to;    // "float16" or "float32"
  std::string node;  // the consumer it was placed for ("" for graph outputs)
};

struct QuantizedWeight {
  std::string weight;
  std::string node;
  std::string opType;
  int bits = 0;
  int64_t axis = 0; // per-channel axis (Gather: rows)
  bool symmetric = true;
  uint64_t bytesBefore = 0;
  uint64_t bytesAfter = 0; // codes + scales + zero points
};

struct SkippedWeight {
  std::string weight;
  std::string node;
  std::string opType;
  std::string reason; // "skip_quant_node", "min_quant_weight_size", "min_quant_weight_channel", ...
};

// A value an fp32 run drove beyond fp16's range (PrecisionOptions::activationPeaks).
struct ActivationOverflow {
  std::string node;
  std::string opType;
  std::string value;
  double maxAbs = 0;
  bool keptFp32 = false; // false under force_fp16: the node computes in fp16 and overflows
};

// Filled by the passes when PipelineOptions::precisionReport points at one.
struct PrecisionReport {
  std::string mode;          // precision mode name ("" when convert-fp16 did not run)
  uint64_t nodesLowered = 0; // nodes computing in fp16
  std::vector<PrecisionKeptNode> keptFp32;
  std::vector<PrecisionCast> casts;
  uint64_t weightsConverted = 0;    // constants stored as fp16
  uint64_t valuesFlushedToZero = 0; // nonzero weight values below half the smallest fp16 subnormal
  uint64_t valuesSubnormal = 0;     // weight values stored as fp16 subnormals (reduced precision)
  std::vector<std::string> keepDtypeUnknown; // keep_dtype entries that matched nothing
  std::vector<ActivationOverflow> activationOverflows;
  bool activationsMeasured = false; // activationPeaks were given (else overflows are unknown)
  std::vector<QuantizedWeight> quantized;
  std::vector<SkippedWeight> skipped;
};

// The report as pretty-printed JSON (stable key order; byte-identical for the same report).
std::string precisionReportToJson(const PrecisionReport& report);
// Writes the JSON atomically; K1003 when the file cannot be written.
Status writePrecisionReport(const PrecisionReport& report, const std::string& path);

} // namespace kiln
