// The MindSpore Lite `benchmark` drop-in: its flags, input and expected-output files, the
// accuracy rule (mean bias over out-of-tolerance elements, cosine) and the lines it prints.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln {

struct BenchmarkOptions {
  std::string modelFile;
  std::vector<std::string> inDataFiles; // one raw binary file per graph input, in input order
  std::string benchmarkDataFile;        // expected outputs (text); enables accuracy mode
  std::string benchmarkDataType = "FLOAT";
  double accuracyThreshold = 0.5;        // max mean bias, percent
  double cosineDistanceThreshold = -1.1; // min mean cosine similarity; checked when >= -1
  int loopCount = 10;
  int warmUpLoopCount = 3;
  int numThreads = 2;
  std::string inputShapes; // legacy positional "1,32,32,3:1,10"
  std::string inputShape;  // named "in1:1,32,32,3;in2:1,10" (wins when both are given)
  bool timeProfiling = false;
  // Flags benchmark accepts that change nothing here, each with what it would have done.
  std::vector<std::string> notes;
};

// Parses benchmark's command line (argv without the program name): strictly --name=value, every
// flag benchmark knows is accepted; bad values are ErrorCode::BadFlag. `wantsHelp` as for
// converter_lite.
Expected<BenchmarkOptions> parseBenchmarkArgs(const std::vector<std::string>& args,
                                              bool& wantsHelp);
std::string benchmarkUsage();

// One output's expected data from the --benchmarkDataFile text format: a line
// "<name> <ndim> <d0> ... <dn-1>" followed by a line of prod(dims) numbers.
struct BenchmarkDataTensor {
  std::string name;
  std::vector<int64_t> dims;
  std::vector<float> values;
};
// Bad counts, numbers or shapes give ErrorCode::BenchmarkDataInvalid naming `displayName` and
// the line; a name given twice keeps the first entry.
Expected<std::vector<BenchmarkDataTensor>> parseBenchmarkData(const std::string& text,
                                                              const std::string& displayName);

struct BenchmarkTensorAccuracy {
  double meanError = 0; // fraction (printed ×100 as percent)
  double cosine = 1;
  bool nonFinite = false; // NaN or Inf in the output: an immediate failure
};
// benchmark's per-tensor rule: elements within 1e-8 + 1e-5·|expected| are ignored; of the others a
// near-zero expected (|e| < FLT_EPSILON) adds the absolute error when above 1e-5, the rest add
// the relative error; the mean is over the added elements (0 when none).
BenchmarkTensorAccuracy compareBenchmarkTensor(const std::vector<float>& expected,
                                               const std::vector<float>& actual);

// Loads the model (loadModel: .onnx, and .ms once a reader is registered), fixes input shapes,
// reads or generates inputs (fixed seed), then either compares one run with the expected data
// (accuracy mode) or times warm-up + loopCount runs, printing benchmark's lines to `out`. Accuracy
// below the thresholds is ErrorCode::BenchmarkAccuracyFailed; bad data files BenchmarkDataInvalid.
Status runBenchmark(const BenchmarkOptions& options, std::ostream& out);

} // namespace kiln
