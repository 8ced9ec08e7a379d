// ONNX backend-test conformance runner (`kiln conformance`) and value comparison.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kiln/runtime/value.h"

namespace kiln {

struct Tolerance {
  double rtol = 1e-3; // the ONNX backend tests' defaults
  double atol = 1e-7;
  // Which tolerance this is ("node-test tolerance", "real-model tolerance", ...) and, when atol was
  // derived from the output, how; a float mismatch names both so a failure says what it missed.
  std::string name;
  std::string atolFrom;
};

// "" when `actual` matches `expected` (|a - e| <= atol + rtol * |e|, NaN == NaN, exact for
// integers, bools and strings); otherwise a description of the first mismatch (for floats, with
// the tolerance it missed when `tolerance.name` is set).
std::string compareValues(const rt::RtValue& expected, const rt::RtValue& actual,
                          const Tolerance& tolerance);

struct ConformanceOptions {
  std::string via = "onnx";       // onnx (ms and om come with their backends)
  std::string precision = "fp32"; // fp32 (fp16 comes with the precision passes)
  std::string pipeline = "none";  // named pass pipeline run on each model before executing it
  std::string expectFile;         // cases listed here must pass
  std::string writeExpected;      // write the passing cases here
  int jobs = 1;
  int timeoutSeconds = 120;
  bool quiet = false; // print only failures and the closing line
  // Fix each model's input shapes to those of its first test data set before the pipeline (its
  // fix-input-shapes pass), so cases with dynamic inputs lower to targets that need static shapes.
  bool inputShapeFromData = false;
  // When set (and `via` is a target): each case that lowers leaves <folder>/<case>/ holding the
  // artifact (model.om / model.ms), its first data set's inputs and expected outputs as raw
  // little-endian tensors in the artifact's own dtypes (input_<k>.bin, expected_<k>.bin) and
  // io.tsv naming them, so outside judges (tests/judges) can load and run what kiln wrote.
  std::string keepArtifacts;
  // Override the comparison tolerances (else the ONNX defaults, or fp16's with --precision fp16).
  std::optional<double> rtol, atol;
};

// Sets up, in this process, what the libraries build on first use (ONNX's operator schemas and
// kiln's guards on them, protobuf descriptors, oneDNN's generated GEMM kernels), so that the
// children a fork-per-case runner forks from it inherit it instead of each building it again.
// Results do not change; runConformance calls it, and so does the crash scan (tests/cli/scan.cpp).
void warmUpBeforeForking();

// Finds case folders (holding model.onnx) under each path; runs each in a child process so a
// crash or hang fails one case, not the run. Prints a line per case and the closing
// "N passed, N failed, N skipped" line. Returns the process exit status.
int runConformance(const std::vector<std::string>& paths, const ConformanceOptions& options,
                   std::ostream& out);

} // namespace kiln
