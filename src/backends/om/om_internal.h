// Shared pieces of the .om backend: container constants and structs, data type and format
// numbering, and the lowering / raising entry points between IR and ge.proto.ModelDef.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/backends/lowering.h"
#include "kiln/backends/om.h"
#include "kiln/ir/graph.h"
#include "kiln/support/status.h"
#include "kiln_proto/ge_ir.pb.h"

namespace kiln::om {

// docs/formats/om.md §1.2 / §1.5 / §1.6.
constexpr uint32_t kMagic = 0x444F4D49; // "IMOD" in file byte order
constexpr uint32_t kHeaderSize = 256;
constexpr uint32_t kVersion2 = 0x20000000;
constexpr uint32_t kVersion1 = 0x10000000;
constexpr uint32_t kOmProtoVersion = 2;

enum PartitionType : uint32_t {
  kModelDef = 0,
  kWeightsData = 1,
  kTaskInfo = 2,
  kTbeKernels = 3,
  kCustAicpuKernels = 4,
  kSoBins = 5,
  kFlowModel = 6,
  kFlowSubmodel = 7,
  kModelInoutInfo = 8,
  kTilingData = 12,
  kCustomOps = 26,
};
const char* partitionTypeName(uint32_t type);

enum ModelHeaderType : uint8_t { kIrModel = 0, kFlowModelType = 3 };

// Which header layout a file uses (om.md §1.3).
enum class HeaderGeneration { Current, Legacy2020, Intermediate, Mobile };
const char* headerGenerationName(HeaderGeneration generation);

struct OmHeader {
  uint32_t magic = 0;
  uint32_t headSize = 0;
  uint32_t version = 0;
  uint32_t length = 0;
  uint8_t isEncrypt = 0;
  uint8_t isChecksum = 0;
  uint8_t modelType = 0;
  uint8_t genMode = 0;
  std::string name;
  uint32_t ops = 0;
  uint32_t omIrVersion = 0;
  uint32_t modelNum = 1;
  std::string platformVersion;
  uint8_t platformType = 0;
  uint64_t modelLength = 0;
  uint8_t needCheckOsCpuInfo = 0;
  uint8_t isUnknownModel = 0;
  HeaderGeneration generation = HeaderGeneration::Current;
};

struct Partition {
  uint32_t type = 0;
  uint64_t offset = 0; // as the table states it (relative to the end of the table)
  uint64_t size = 0;
  uint64_t fileOffset = 0; // where the bytes really are (the loader walks sizes in order)
  const uint8_t* data = nullptr;
};

struct ModelBlock {
  uint64_t tableOffset = 0; // file offset of the partition table
  bool wideTable = true;
  std::vector<Partition> partitions;
  const Partition* find(uint32_t type) const;
};

struct OmContainer {
  OmHeader header;
  std::vector<ModelBlock> blocks;
};

// Parses the header and every block's partition table; checks bounds and the total length.
// Errors are K8001 OmFileInvalid naming `displayName` and the offset.
Expected<OmContainer> parseContainer(const uint8_t* data, size_t size,
                                     const std::string& displayName);
// The 256 header bytes for a current-generation file.
std::vector<uint8_t> encodeHeader(const OmHeader& header);

// Data types. The proto numbering (ModelDef) and the C++ ge::DataType numbering
// (MODEL_INOUT_INFO, Cast's dst_type) differ; both are keyed by name.
std::optional<ge::proto::DataType> toGeDType(DType type);
std::optional<DType> fromGeDType(int protoType);
int geProtoToCxxDType(int protoType); // -1 when unknown
int geCxxToProtoDType(int cxxType);   // -1 when unknown
const char* geDTypeName(int protoType);

// AttrDef construction and reading (om_context.cpp); getters return `def` when the attribute is
// absent or of another kind.
ge::proto::AttrDef attrI(int64_t v);
// A Type attribute (ge::DataType numbering), as the IR declares `dtype` of ArgMaxV2 or
// FileConstant.
ge::proto::AttrDef attrDt(int64_t v);
ge::proto::AttrDef attrF(float v);
ge::proto::AttrDef attrB(bool v);
ge::proto::AttrDef attrS(const std::string& v);
ge::proto::AttrDef attrInts(const std::vector<int64_t>& v);
ge::proto::AttrDef attrFloats(const std::vector<float>& v);
ge::proto::AttrDef attrStrings(const std::vector<std::string>& v);
const ge::proto::AttrDef* findAttr(const ge::proto::OpDef& op, const std::string& name);
int64_t getI(const ge::proto::OpDef& op, const std::string& name, int64_t def);
float getF(const ge::proto::OpDef& op, const std::string& name, float def);
bool getB(const ge::proto::OpDef& op, const std::string& name, bool def);
std::string getS(const ge::proto::OpDef& op, const std::string& name, const std::string& def);
std::vector<int64_t> getInts(const ge::proto::OpDef& op, const std::string& name);

// ge::Format numbering (om.md §1.12).
enum GeFormat : int {
  kFormatNchw = 0,
  kFormatNhwc = 1,
  kFormatNd = 2,
  kFormatNc1hwc0 = 3,
  kFormatFractalZ = 4,
  kFormatNcdhw = 30,
};
std::string formatName(int format);
int formatFromName(const std::string& name); // -1 when unknown

// One graph input or output as MODEL_INOUT_INFO describes it.
struct IoTensor {
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims; // -1 for unknown dims
  int format = kFormatNd;
};

// WEIGHTS_DATA constants start on this boundary while lowering (layOutAsAtc moves them).
constexpr size_t kWeightAlign = 32;

// Receives output bytes in pieces; false stops the write (an I/O error).
using ByteSink = std::function<bool(const uint8_t*, size_t)>;

// One constant's bytes as they will be written (om_weights.cpp): a window of the lowered tensor's
// buffer (for imported weights, the mapped model file), rearranged to FRACTAL_Z on the way out
// when `fractal` is set. Nothing is copied until the file is written.
struct WeightSource {
  std::shared_ptr<const Buffer> buffer;
  uint64_t size = 0; // bytes written (the rearranged size when fractal)
  bool fractal = false;
  std::vector<int64_t> origin; // fractal: the plain OIHW dims
  size_t elementBytes = 0;
  int64_t c0 = 0;
  int64_t groups = 1;

  static WeightSource of(std::shared_ptr<const Buffer> buffer);
  // Marks the bytes for FRACTAL_Z and sets `size` to the rearranged size.
  void makeFractal(std::vector<int64_t> plainDims, size_t elementBytes, int64_t c0, int64_t groups);
  // Streams the bytes to `sink` (a rearranged tensor is built one at a time), then gives the
  // mapped pages back (releasePages).
  bool emit(const ByteSink& sink) const;
  std::vector<uint8_t> bytes() const;
};

// WEIGHTS_DATA as a layout: where each constant starts and where its bytes come from; the bytes
// between constants are zeros. Produced when the file is written (emit), never held whole.
struct WeightsLayout {
  std::map<uint64_t, WeightSource> pieces; // by offset; empty constants have no piece
  uint64_t size = 0;                       // bytes of WEIGHTS_DATA

  bool empty() const { return size == 0; }
  // Puts `source` at the next kWeightAlign boundary; returns its offset.
  uint64_t append(WeightSource source);
  const WeightSource* at(uint64_t offset) const;
  bool emit(const ByteSink& sink) const;
  std::vector<uint8_t> bytes() const;
};

// The lowered model before it is laid out in a container.
struct LoweredModel {
  ge::proto::ModelDef modelDef;
  WeightsLayout weights;
  std::vector<std::pair<std::string, WeightSource>> externalFiles;
  std::vector<IoTensor> inputs;
  std::vector<IoTensor> outputs;
  uint64_t memorySize = 0; // feature-map bytes (no reuse)
  // A gear model's profiles for MODEL_INOUT_INFO TLVs 2-4 (om.md §1.9): the Case's _dynamic_type
  // (1 batch, 2 H/W, 3 dims; -1 none) and _pred_value_<g>.
  int dynamicType = -1;
  std::vector<std::vector<int64_t>> gears;
};

// The platform version ATC stamps into the header (platform_version) and ModelDef.custom_version:
// GraphEngine's framework version "1.11.z" plus ".0" (om.md §1.2, §1.11).
constexpr const char* kPlatformVersion = "1.11.z.0";

// What ATC's builder does to every model before saving it (om_layout.cpp): scalar shapes
// present, padded tensor sizes, weights on 512-byte boundaries from byte 512, custom_version,
// and the input/output name-index attributes.
void layOutAsAtc(LoweredModel& model);

// IR port names of a GraphEngine op kiln writes (nullptr when kiln has none): a name ending in '*'
// is a dynamic port (x0, x1, ...).
struct OmPorts {
  std::vector<std::string> inputs, outputs;
};
const OmPorts* irPortsOf(const std::string& opType);
// The op with its inputs back on their IR port slots (absent ports as "" entries with placeholder
// descs) when its name map places them elsewhere, as in files listing only the inputs an op has;
// nullopt when they already sit on their slots or kiln knows no ports for the type.
std::optional<ge::proto::OpDef> withPortSlots(const ge::proto::OpDef& op);

// ONNX-semantics IR → GraphEngine ops (om_context.cpp, rules in ops/<family>.cpp). When given,
// `refusals` receives every node that cannot lower (before the error is returned).
Expected<LoweredModel> lowerModel(const Model& model, const OmWriteOptions& options,
                                  std::vector<lowering::Refusal>* refusals = nullptr);

// Lowers each gear's model and joins them as GraphEngine lays out gear models (om_gears.cpp).
Expected<LoweredModel> lowerGearModels(const OmGears& gears, const OmWriteOptions& options);

// Puts convolution chains in the layouts ATC gives them (om_heavy_formats.cpp, om.md §5.3):
// NC1HWC0 feature maps, FRACTAL_Z weights (rearranged in WEIGHTS_DATA / the external files) and
// TransData ops where a heavy-format tensor meets an op that reads NCHW.
Status applyHeavyFormats(LoweredModel& model);
// Casts around ops whose public IR declares no kernel for a value's integer/bool type
// (om_dtypes.cpp).
void legalizeDTypes(LoweredModel& model);
// One layout per tensor across each edge (om_edge_formats.cpp).
void agreeEdgeFormats(LoweredModel& model);
// The group count a FRACTAL_Z descriptor carries as its format_for_int sub-format (1 when none).
int64_t fractalGroups(const ge::proto::TensorDescriptor& desc);
// "op:-1": a control edge, not a data input.
bool isControlInput(const std::string& input);
// An absent optional input's desc, as GraphEngine writes one: DT_UNDEFINED, format RESERVED
// (om_layout.cpp).
void fillPlaceholderDesc(ge::proto::TensorDescriptor* d);
bool isPlaceholderDesc(const ge::proto::TensorDescriptor& d);

// ge.proto.ModelDef (attributes decompressed) → executable IR (om_raiser.cpp; each op's raising
// rule sits beside the lowering it inverts in ops/<family>.cpp). `weights` is the WEIGHTS_DATA
// partition; `baseDir` holds external weight files.
Expected<Model> raiseModelDef(const ge::proto::ModelDef& modelDef, const uint8_t* weights,
                              size_t weightsSize, const std::string& baseDir,
                              const std::string& displayName);

// Undoes attribute-name/value compression (om.md §1.14) in place.
void decompressAttributes(ge::proto::ModelDef& modelDef);

// Opens and parses a file's first ModelDef (decompressed). Used by the dumps.
struct LoadedOm {
  std::vector<uint8_t> bytes;
  OmContainer container;
  std::vector<ge::proto::ModelDef> modelDefs; // one per block that has a MODEL_DEF
};
Expected<LoadedOm> loadOmFile(const std::string& path);
Expected<ge::proto::ModelDef> parseModelDef(const Partition& partition,
                                            const std::string& displayName);

} // namespace kiln::om
