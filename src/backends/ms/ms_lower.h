// The lowered .ms graph (tensors and nodes in MindSpore Lite terms) that ms_writer.cpp serializes.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <flatbuffers/flatbuffers.h>

#include "kiln/backends/lowering.h"
#include "kiln/backends/ms_writer.h"
#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::ms {

// .ms constants: TypeId numbers (ms.md §2.2), Format numbers (§2.3), Tensor.nodeType (§2.1).
enum TypeIdValue : int {
  kTypeBool = 30,
  kTypeInt8 = 32,
  kTypeInt16 = 33,
  kTypeInt32 = 34,
  kTypeInt64 = 35,
  kTypeUInt8 = 37,
  kTypeUInt16 = 38,
  kTypeUInt32 = 39,
  kTypeUInt64 = 40,
  kTypeFloat16 = 42,
  kTypeFloat32 = 43,
  kTypeFloat64 = 44,
};
enum FormatValue : int { kFormatNCHW = 0, kFormatNHWC = 1, kFormatKHWC = 7 };
enum NodeTypeValue : int { kNodeValue = 0, kNodeCNode = 2 };

struct MsQuantParam {
  double scale = 1;
  int32_t zeroPoint = 0;
  int numBits = 8;
  int dstDtype = kTypeInt8;
  float meanCorr = 0; // added after (q - zeroPoint) * scale (varCorr is folded into scale)
};

// Weight-quant params the writer makes from a model's own per-block scale and zero-point tensors
// (MatMulNBits), one QuantParam per row of the stored [rows, block] codes: a 1.5B-parameter
// model has tens of millions of blocks, which need no MsQuantParam each while lowering.
// Row r is block r % blocks of output column r / blocks.
struct MsRowQuant {
  std::shared_ptr<const Buffer> scales; // float32 or float16 (scaleIsHalf), one per row
  bool scaleIsHalf = false;
  // Packed `bits`-bit zero points, zeroPointRowBytes per output column; null: 2^(bits-1).
  std::shared_ptr<const Buffer> zeroPoints;
  int64_t rows = 0, blocks = 1, zeroPointRowBytes = 0;
  int bits = 4;
};

struct MsTensor {
  std::string name;
  int nodeType = kNodeCNode;
  int dataType = kTypeFloat32;
  std::vector<int32_t> dims;
  int format = kFormatNCHW;
  std::shared_ptr<const Buffer> data; // constants only
  // Set for a constant stored in another dimension order (Conv weights to KHWC, 4-D constants to
  // NHWC): `data` holds the source bytes in `sourceDims` order and the stored element i of `dims`
  // order comes from source index permuted by `writePerm` (dims[k] = sourceDims[writePerm[k]]).
  // The writer permutes while it writes, a chunk at a time, so the permuted copy of the weights
  // never exists whole.
  std::vector<int64_t> writePerm;
  std::vector<int64_t> sourceDims;
  std::vector<MsQuantParam> quantParams;
  // Set instead of quantParams for codes stored as the model packed them (MsRowQuant).
  std::shared_ptr<const MsRowQuant> rowQuant;
  int compressType = 0; // WeightQuantCompressType
  // Weight-quant codes before packing (int8 or int16 element bytes in `data`); the writer packs
  // them when numBits is not the storage width.
  bool isQuantizedWeight = false;
  // The model's own codes (kModelWeightCodesDoc): stored plain, never INDEXING / SPARSE coded.
  bool modelCodes = false;
};

using AttrBuilder = std::function<flatbuffers::Offset<void>(flatbuffers::FlatBufferBuilder&)>;

struct MsNode {
  std::string name;
  uint8_t primitiveType = 0; // kiln::msfb::PrimitiveType
  AttrBuilder attributes;    // builds the op table; never empty
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  int quantType = 0; // 4 = QUANT_WEIGHT when an input is a quantized weight
};

// One SubGraph of a control-flow model (ms.md §4.2): its parameters, results and nodes (indices
// into MsGraph::nodes, in execution order). Subgraph 0 is the main graph.
struct MsSubGraph {
  std::string name;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<uint32_t> nodes;
};

struct MsGraph {
  std::string name;
  std::vector<MsTensor> tensors;
  std::vector<MsNode> nodes; // execution order
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  // Empty for a single-graph model (one SubGraph with every node and tensor); otherwise every
  // subgraph, main first, with PartialFusion nodes naming the others by index.
  std::vector<MsSubGraph> subgraphs;
};

// Lowers ONNX-semantics IR to .ms ops: NHWC 4-D activations (graph inputs/outputs keep the ONNX
// layout and names), KHWC conv weights, int32 index constants, fused activations, quantized
// weights from DequantizeLinear. Every refused node at once, "<label>: <reason>" joined by "; ":
// K7101 when any refusal is about the op itself, else K7102 (a value the target cannot take).
// `refusals`, when given, receives every refusal (check- and lower-time) as data.
Expected<MsGraph> lowerToMs(const Model& model, const MsWriteOptions& options,
                            std::vector<lowering::Refusal>* refusals = nullptr);

} // namespace kiln::ms
