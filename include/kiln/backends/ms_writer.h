// Writing MindSpore Lite .ms files: lowering ONNX-semantics IR to the .ms op set and serializing
// it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

struct MsWriteOptions {
  bool fp16Weights = false; // converter_lite --fp16=on: float weights stored as float16
  // "MindSpore Lite X.Y.Z" (ms.md §1.3). 2.1.0: at least 1.8.0, so the runtime picks per-channel
  // dequant axes by the modern rule for every op (deconvolution included), and no later than the
  // 2.x runtimes in use, so none of them warns that the model is newer than the engine.
  std::string version = "MindSpore Lite 2.1.0";
  // bit_num the quantize-weights pass used for the DequantizeLinear weights in the model (1..16).
  // The IR stores codes of 1..8 bits as int8 and 9..16 bits as int16, so the width itself is not
  // in the graph; 0 means the storage width (8 or 16). Widths other than 8/16 are bit-packed.
  int weightQuantBits = 0;
  // converter_lite's [common_quant_param] enable_encode: quantized weights take the INDEXING or
  // SPARSE coding when it is smaller than their plain / bit-packed bytes (ms.md §3.4).
  bool encodeWeights = true;
  // converter_lite's DYNAMIC_QUANT ([dynamic_quant_param] quant_strategy): a MatMul / Gemm whose
  // weight is int8 with zero points 0 (quantize-weights, symmetric) becomes a DynamicQuant of its
  // input and an int8 MatMulFusion (quantType QUANT_DYNAMIC) the runtime computes in integers.
  enum class DynamicQuant { Off, ActivationLayerWeightChannel, ActivationChannelWeightLayer };
  DynamicQuant dynamicQuant = DynamicQuant::Off;
  // Weights move to `<path>w` when the FlatBuffer would exceed this many bytes (2 GiB, ms.md §6.2);
  // tests lower it to exercise the split.
  uint64_t externalDataThreshold = uint64_t{2} << 30;
};

// Lowers a copy of `model` (ONNX-semantics IR, already through the pass pipeline; may hold
// DequantizeLinear nodes over constant int weights made by the quantize-weights pass) and
// serializes it.
Expected<std::vector<uint8_t>> buildMsBuffer(const Model& model, const MsWriteOptions& options);
// Same, written atomically to `path`; weights go to `<path>w` (.msw, ms.md §6.3) when the buffer
// would pass 2 GB.
Status writeMsFile(const Model& model, const MsWriteOptions& options, const std::string& path);
// "" when the node lowers to .ms ops, else the reason (kiln check --target ms; converter_lite's
// unsupported list).
std::string msUnsupportedReason(const Node& node, int64_t opset);

} // namespace kiln
