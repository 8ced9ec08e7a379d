// The converter_lite drop-in: its command line parsed into MsConvertOptions, and one conversion
// ONNX → passes → (fp16 | weight quant) → .ms, with converter_lite's status codes and messages.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kiln/backends/converter_config.h"
#include "kiln/support/status.h"

namespace kiln {

struct MsConvertOptions {
  std::string fmk = "ONNX";
  std::string modelFile;
  std::string outputFile;       // as given; msOutputPath() gives the file actually written
  std::string inputShape;       // converter_lite grammar: "name1:1,3,224,224;name2:1,10"
  std::string inputDataFormat;  // "", NHWC or NCHW (4-D graph inputs)
  std::string outputDataFormat; // "", NHWC or NCHW (4-D graph outputs)
  bool fp16 = false;            // --fp16=on: float32 constants stored as float16
  std::string saveType = "MINDIR_LITE";
  std::string optimize = "general"; // none: only what the conversion needs (no fusions)
  std::string configFile;           // path as given ("" when none)
  ConverterConfig config;           // parsed configFile
  bool infer = false;               // run once on deterministic inputs before writing
  bool optimizeTransformer = false; // accepted; kiln has no transformer fusions
};

// converter_lite's output naming: a trailing ".ms" is stripped and re-added, anything else gets
// ".ms" appended ("model" → "model.ms", "model.onnx" → "model.onnx.ms").
std::string msOutputPath(const std::string& outputFile);

// Parses converter_lite's command line (argv without the program name). The syntax is strictly
// --name=value; unknown, repeated or value-less flags and bad values are ErrorCode::BadFlag with
// peer code -600 and converter_lite's "INPUT ILLEGAL: ..." wording where it has one. Values the
// real tool accepts but kiln does not carry out (--fmk other than ONNX, --saveType=MINDIR,
// --device, encryption, ...) give ErrorCode::UnsupportedFormat / BadFlag with peer code -7.
// `wantsHelp` is set (and nothing else checked) when --help is given.
Expected<MsConvertOptions> parseConverterLiteArgs(const std::vector<std::string>& args,
                                                  bool& wantsHelp);
std::string converterLiteUsage();

struct UnsupportedOp {
  std::string opType;
  std::string nodeName;
  std::string reason;
  std::string label; // lowering::nodeLabel: the node's one label in every message
};

struct MsConvertReport {
  std::string outputPath;
  uint64_t bytes = 0;
  std::vector<std::string> notes;         // ignored config entries, pass notes
  std::vector<UnsupportedOp> unsupported; // filled when the conversion fails on unsupported ops
};

// One conversion. On failure nothing is written (no file, no temp file) and the Status carries
// converter_lite's status code as its peer code (msStatusCode()).
Status convertToMs(const MsConvertOptions& options, MsConvertReport* report = nullptr);

// converter_lite's status code for a kiln error: its peer code when set, else by error family
// (-200 model file, -300 unsupported op, -302 bad attribute, -500 shape inference, -600 user
// input, -1 otherwise).
int msStatusCode(const Status& status);
// The description converter_lite prints after the code ("Failed to find operator.").
std::string msStatusDescription(int code);

} // namespace kiln
