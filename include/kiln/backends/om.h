// The Ascend .om backend: lowering ONNX-semantics IR to GraphEngine ops, writing the IMOD
// container, reading .om files back into executable IR, and dumps for `kiln inspect` / `atc`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln {

// ATC's dynamic gears (--dynamic_batch_size / --dynamic_image_size / --dynamic_dims, om.md §2.6):
// one static model per gear, written as GraphEngine writes them — a Case op with one branch per
// gear, picked by MapIndex from the extra input `ascend_mbatch_shape_data`; weights every gear
// shares are Consts of the root graph passed into the branches.
struct OmGears {
  int dynamicType = 1; // ACL's DynamicType: 1 batch, 2 height/width, 3 dims
  std::vector<std::vector<int64_t>> gears; // the profiles, in flag order
  std::vector<std::string> shapeOrder;     // the --input_shape entry names
  std::vector<Model> models;               // one per gear: same inputs and outputs, static shapes
};

struct OmWriteOptions {
  std::string socVersion = "Ascend310P3";
  std::string modelName; // header name / ModelDef.name (ATC: basename of --output), ≤ 31 bytes
  bool externalWeight = false; // --external_weight: weights in files beside the .om (om.md §1.16)
  std::map<std::string, std::string> modelAttributes; // extra ModelDef attrs the caller sets
  int coreType = 0; // ModelDef attr core_type: 0 AiCore, 1 VectorCore (atc --core_type)
  // When set, the model written is these gears (the `model` argument is not lowered).
  std::shared_ptr<const OmGears> gears;
};

// A built model: the .om bytes and, with externalWeight, the weight files that go beside it
// (paths relative to the .om's folder, e.g. "weight/weight_conv1_W").
struct OmArtifact {
  std::vector<uint8_t> om;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> externalFiles;
};

// Lowers `model` (ONNX-semantics IR, passes already run; shapes should be static) and serializes
// it. Nodes without a GraphEngine op give K8101 OmLowerUnsupported listing all of them; a value
// the chip cannot take (data type, attribute) gives K8102 OmLowerBadAttribute.
Expected<OmArtifact> buildOmArtifact(const Model& model, const OmWriteOptions& options);
// The .om bytes alone (with externalWeight the weight files are not part of the result).
Expected<std::vector<uint8_t>> buildOmBuffer(const Model& model, const OmWriteOptions& options);
// Builds and writes `path` (and the weight files beside it) atomically: on failure nothing is left.
Status writeOmFile(const Model& model, const OmWriteOptions& options, const std::string& path);

// Reads an .om file into executable IR (ONNX-semantics ops). Layout errors are K8001
// OmFileInvalid naming the offset; ops or data the reader cannot express are K8002
// OmReadUnsupported naming the op.
Expected<Model> readOmFile(const std::string& path);
// The same on bytes in memory; external weight files are looked up beside `displayName`.
Expected<Model> readOmBuffer(const uint8_t* data, size_t size, const std::string& displayName);

// `atc --mode=1 --om`: the (decompressed) ModelDef as JSON, following the om.md §2.7 rules.
Expected<std::string> omToJson(const std::string& path);
// `atc --mode=6`: the "Display Model Info" block (om.md §2.7).
Expected<std::string> omInfoText(const std::string& path);
// `kiln inspect X.om --json`: header fields, every model block's partitions, graphs and ops.
Expected<std::string> dumpOmFile(const std::string& path);
// `kiln inspect X.om`: a few lines for people.
Expected<std::string> summarizeOmFile(const std::string& path);

// `kiln lower --target om`: the lowered graph as protobuf text (the ModelDef the writer would
// serialize, heavy formats applied; weights only counted). Refusals as buildOmArtifact's.
Expected<std::string> omLoweredText(const Model& model, const OmWriteOptions& options);

// Why `node` cannot be lowered for `socVersion` ("" when it lowers).
std::string omUnsupportedReason(const Node& node, const std::string& socVersion, int64_t opset);

} // namespace kiln
