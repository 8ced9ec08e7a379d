// AIPP (ATC --insert_op_conf): the parsed and validated configuration, and its insertion into a
// model as a preprocessing sub-graph of ONNX ops the executor runs.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

enum class AippMode { Undefined = 0, Static = 1, Dynamic = 2 };

// AippOpParams.InputFormat, numbered as in the file format (docs/formats/om.md §6.2).
enum class AippInputFormat : int {
  Undefined = 0,
  Yuv420spU8 = 1,
  Xrgb8888U8 = 2,
  Rgb888U8 = 3,
  Yuv400U8 = 4,
  // 5..20 are other hardware formats the documentation does not list as supported.
};

// The enum name as written in the file ("YUV420SP_U8"), or the number for unknown values.
std::string aippInputFormatName(int format);

// One `aipp_op { ... }` block after defaults (§6.4) were applied.
struct AippOp {
  int line = 0; // line of the block's first token in the file (1-based)
  AippMode mode = AippMode::Undefined;
  uint32_t relatedInputRank = 0;
  bool relatedInputRankSet = false; // written in the file (proto3 has no presence for scalars)
  std::string relatedInputName;
  std::vector<uint32_t> inputEdgeIdx;
  uint32_t maxSrcImageSize = 0;
  int inputFormat = 0; // AippInputFormat value (kept as int: the file may name any of 0..20)
  bool cscSwitch = false;
  bool rbuvSwapSwitch = false;
  bool axSwapSwitch = false;
  int32_t srcImageSizeW = 0;
  int32_t srcImageSizeH = 0;
  bool crop = false;
  int32_t loadStartPosW = 0;
  int32_t loadStartPosH = 0;
  int32_t cropSizeW = 0;
  int32_t cropSizeH = 0;
  bool resize = false;
  int32_t resizeOutputW = 0;
  int32_t resizeOutputH = 0;
  bool padding = false;
  int32_t leftPaddingSize = 0;
  int32_t rightPaddingSize = 0;
  int32_t topPaddingSize = 0;
  int32_t bottomPaddingSize = 0;
  float paddingValue = 0;
  std::array<int32_t, 4> meanChn{0, 0, 0, 0};
  std::array<float, 4> minChn{0, 0, 0, 0};
  std::array<float, 4> varReciChn{1, 1, 1, 1};
  // matrix[row][col]; filled with the §6.4 defaults when csc_switch is on in static mode.
  std::array<std::array<int32_t, 3>, 3> matrix{};
  std::array<int32_t, 3> outputBias{16, 128, 128};
  std::array<int32_t, 3> inputBias{16, 128, 128};
  bool supportRotation = false;
  bool singleLineMode = false;
  bool resizeSet = false; // "resize: true" given (reserved; rejected at insertion)
};

struct AippMultiShapeOp {
  int line = 0;
  int mode = 0; // 0 batch, 1 resolution
  uint32_t relatedInputRank = 0;
  std::vector<uint32_t> batchList;
};

struct AippConfig {
  std::string path; // where it was read from (names the file in errors)
  std::string text; // the file as given: recorded in the model so the .om keeps it
  std::vector<AippOp> ops;
  std::vector<AippMultiShapeOp> multiShapeOps; // legacy; parsed, rejected at insertion
};

// Reads, parses (protobuf text of domi.InsertNewOps), validates (§6.3 checks that need no model)
// and applies the §6.4 defaults. A missing file is K1001 FileNotFound; a syntax error is
// K8301 AippConfigSyntax (peer E13018) naming line and column; an invalid configuration is
// K8302 AippConfigInvalid (peer E10052) whose message ends in "Reason: <ATC's reason text>".
Expected<AippConfig> parseAippConfigFile(const std::string& path);
// The same on text already in memory; `displayName` names the source in errors.
Expected<AippConfig> parseAippConfigText(const std::string& text, const std::string& displayName);

// What ATC flags matter to AIPP insertion.
struct AippContext {
  std::vector<std::string> inputFp16Nodes; // --input_fp16_nodes: an AIPP input here is E10034
  bool dynamicImageSize = false;           // --dynamic_image_size given
  bool dynamicDims = false;                // --dynamic_dims given (E10001 with AIPP)
  std::string inputFormat;                 // --input_format: "" or NCHW (default), NHWC, ND
};

// Model metadata key (and .om ModelDef attribute) recording the AIPP a model was given, as JSON:
// {"config": file text, "file": name, "layout": "NCHW"|"NHWC", "inputs": {name: [original dims]}}.
// `kiln compare ONNX X.om` reads it to give the ONNX model the same preprocessing.
inline constexpr const char* kAippMetadataKey = "kiln.aipp";

// Checks the configuration against the model (input rank/name, shapes, flags) and replaces each
// targeted model input by a UINT8 NHWC input of the source image size followed by ONNX ops that
// compute what AIPP computes: channel swap → crop → CSC → normalization → padding → layout and
// dtype of the original input. Errors are K8302 with peer E10052 / E10001 / E10034 as ATC gives.
// A model below opset 11 is first up-converted to opset 11 (the preprocessing ops' form). The
// configuration and the original input shapes are recorded under kAippMetadataKey.
Status insertAipp(Model& model, const AippConfig& config, const AippContext& context = {});

} // namespace kiln
