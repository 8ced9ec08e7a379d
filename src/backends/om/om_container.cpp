// The IMOD container: header generations, tiny and wide partition tables, data type and format
// numbering, attribute decompression and loading a file's ModelDefs.
#include <algorithm>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "kiln/support/mapped_file.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

uint32_t readU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t readU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
void writeU32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
void writeU64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

std::string fixedString(const uint8_t* p, size_t n) {
  size_t len = 0;
  while (len < n && p[len] != 0)
    ++len;
  return std::string(reinterpret_cast<const char*>(p), len);
}

Status invalid(const std::string& name, uint64_t offset, const std::string& what) {
  return Status(ErrorCode::OmFileInvalid, fmt::format("{}: at byte {}: {}", name, offset, what),
                "the file is damaged or not an .om model; copy or convert it again");
}

// Proto DataType names by number (om.md §1.11), and the C++ ge::DataType number for each.
struct DTypeRow {
  int proto;
  const char* name;
  int cxx;
};
constexpr DTypeRow kDTypes[] = {
    {0, "DT_UNDEFINED", 28},      {1, "DT_FLOAT", 0},
    {2, "DT_FLOAT16", 1},         {3, "DT_INT8", 2},
    {4, "DT_UINT8", 4},           {5, "DT_INT16", 6},
    {6, "DT_UINT16", 7},          {7, "DT_INT32", 3},
    {8, "DT_INT64", 9},           {9, "DT_UINT32", 8},
    {10, "DT_UINT64", 10},        {11, "DT_BOOL", 12},
    {12, "DT_DOUBLE", 11},        {13, "DT_STRING", 13},
    {14, "DT_DUAL_SUB_INT8", 14}, {15, "DT_DUAL_SUB_UINT8", 15},
    {16, "DT_COMPLEX64", 16},     {17, "DT_COMPLEX128", 17},
    {18, "DT_QINT8", 18},         {19, "DT_QINT16", 19},
    {20, "DT_QINT32", 20},        {21, "DT_QUINT8", 21},
    {22, "DT_QUINT16", 22},       {23, "DT_RESOURCE", 23},
    {24, "DT_STRING_REF", 24},    {25, "DT_DUAL", 25},
    {26, "DT_VARIANT", 26},       {27, "DT_BF16", 27},
    {28, "DT_INT4", 29},          {29, "DT_UINT1", 30},
    {30, "DT_INT2", 31},          {31, "DT_UINT2", 32},
    {32, "DT_COMPLEX32", 33},     {33, "DT_HIFLOAT8", 34},
    {34, "DT_FLOAT8_E5M2", 35},   {35, "DT_FLOAT8_E4M3FN", 36},
    {36, "DT_FLOAT8_E8M0", 37},   {37, "DT_FLOAT6_E3M2", 38},
    {38, "DT_FLOAT6_E2M3", 39},   {39, "DT_FLOAT4_E2M1", 40},
    {40, "DT_FLOAT4_E1M2", 41},   {41, "DT_HIFLOAT4", 42},
};

struct DTypePair {
  DType ir;
  ge::proto::DataType ge;
};
constexpr DTypePair kIrDTypes[] = {
    {DType::Float32, ge::proto::DT_FLOAT},
    {DType::Float16, ge::proto::DT_FLOAT16},
    {DType::Int8, ge::proto::DT_INT8},
    {DType::UInt8, ge::proto::DT_UINT8},
    {DType::Int16, ge::proto::DT_INT16},
    {DType::UInt16, ge::proto::DT_UINT16},
    {DType::Int32, ge::proto::DT_INT32},
    {DType::Int64, ge::proto::DT_INT64},
    {DType::UInt32, ge::proto::DT_UINT32},
    {DType::UInt64, ge::proto::DT_UINT64},
    {DType::Bool, ge::proto::DT_BOOL},
    {DType::Float64, ge::proto::DT_DOUBLE},
    {DType::String, ge::proto::DT_STRING},
    {DType::Complex64, ge::proto::DT_COMPLEX64},
    {DType::Complex128, ge::proto::DT_COMPLEX128},
    {DType::BFloat16, ge::proto::DT_BF16},
    {DType::Int4, ge::proto::DT_INT4},
    {DType::Float8E5M2, ge::proto::DT_FLOAT8_E5M2},
    {DType::Float8E4M3FN, ge::proto::DT_FLOAT8_E4M3FN},
};

// ge::Format names (om.md §1.12), index = value.
constexpr const char* kFormats[] = {
    "NCHW",
    "NHWC",
    "ND",
    "NC1HWC0",
    "FRACTAL_Z",
    "NC1C0HWPAD",
    "NHWC1C0",
    "FSR_NCHW",
    "FRACTAL_DECONV",
    "C1HWNC0",
    "FRACTAL_DECONV_TRANSPOSE",
    "FRACTAL_DECONV_SP_STRIDE_TRANS",
    "NC1HWC0_C04",
    "FRACTAL_Z_C04",
    "CHWN",
    "FRACTAL_DECONV_SP_STRIDE8_TRANS",
    "HWCN",
    "NC1KHKWHWC0",
    "BN_WEIGHT",
    "FILTER_HWCK",
    "HASHTABLE_LOOKUP_LOOKUPS",
    "HASHTABLE_LOOKUP_KEYS",
    "HASHTABLE_LOOKUP_VALUE",
    "HASHTABLE_LOOKUP_OUTPUT",
    "HASHTABLE_LOOKUP_HITS",
    "C1HWNCoC0",
    "MD",
    "NDHWC",
    "FRACTAL_ZZ",
    "FRACTAL_NZ",
    "NCDHW",
    "DHWCN",
    "NDC1HWC0",
    "FRACTAL_Z_3D",
    "CN",
    "NC",
    "DHWNC",
    "FRACTAL_Z_3D_TRANSPOSE",
    "FRACTAL_ZN_LSTM",
    "FRACTAL_Z_G",
    "RESERVED",
    "ALL",
    "NULL",
    "ND_RNN_BIAS",
    "FRACTAL_ZN_RNN",
    "NYUV",
    "NYUV_A",
    "NCL",
    "FRACTAL_Z_WINO",
    "C1HWC0",
    "FRACTAL_NZ_C0_16",
    "FRACTAL_NZ_C0_32",
    "FRACTAL_NZ_C0_2",
    "FRACTAL_NZ_C0_4",
    "FRACTAL_NZ_C0_8",
};

} // namespace

const char* partitionTypeName(uint32_t type) {
  switch (type) {
  case 0:
    return "MODEL_DEF";
  case 1:
    return "WEIGHTS_DATA";
  case 2:
    return "TASK_INFO";
  case 3:
    return "TBE_KERNELS";
  case 4:
    return "CUST_AICPU_KERNELS";
  case 5:
    return "SO_BINS";
  case 6:
    return "FLOW_MODEL";
  case 7:
    return "FLOW_SUBMODEL";
  case 8:
    return "MODEL_INOUT_INFO";
  case 9:
    return "STATIC_TASK_DESC";
  case 10:
    return "DYNAMIC_TASK_DESC";
  case 11:
    return "TASK_PARAM";
  case 12:
    return "TILING_DATA";
  case 20:
    return "PRE_MODEL_DESC";
  case 21:
    return "PRE_MODEL_SQE";
  case 22:
    return "PRE_KERNEL_ARGS";
  case 23:
    return "PRE_MODEL_DESC_EXTEND";
  case 24:
    return "BUNDLE_MODEL_INFO";
  case 25:
    return "BUNDLE_MODEL_VAR_INFO";
  case 26:
    return "CUSTOM_OPS";
  default:
    return "UNKNOWN";
  }
}

const char* headerGenerationName(HeaderGeneration generation) {
  switch (generation) {
  case HeaderGeneration::Current:
    return "current";
  case HeaderGeneration::Legacy2020:
    return "2020";
  case HeaderGeneration::Intermediate:
    return "intermediate";
  case HeaderGeneration::Mobile:
    return "mobile";
  }
  return "?";
}

const ModelBlock* findBlock(const OmContainer& c, size_t i) {
  return i < c.blocks.size() ? &c.blocks[i] : nullptr;
}

const Partition* ModelBlock::find(uint32_t type) const {
  for (const Partition& p : partitions)
    if (p.type == type) return &p;
  return nullptr;
}

Expected<OmContainer> parseContainer(const uint8_t* data, size_t size,
                                     const std::string& displayName) {
  if (size < kHeaderSize)
    return invalid(displayName, 0,
                   fmt::format("file is {} bytes, shorter than the 256-byte header", size));
  OmContainer c;
  OmHeader& h = c.header;
  h.magic = readU32(data);
  if (h.magic != kMagic)
    return invalid(displayName, 0,
                   fmt::format("magic is 0x{:08X}, expected 0x{:08X} (\"IMOD\")", h.magic, kMagic));
  h.headSize = readU32(data + 4);
  if (h.headSize != kHeaderSize)
    return invalid(displayName, 4, fmt::format("header size is {}, expected 256", h.headSize));
  h.version = readU32(data + 8);
  h.length = readU32(data + 76);
  h.isEncrypt = data[80];
  h.isChecksum = data[81];
  h.modelType = data[82];
  h.genMode = data[83];
  h.name = fixedString(data + 84, 32);
  h.ops = readU32(data + 116);
  h.omIrVersion = readU32(data + 152);
  uint64_t modelLength = readU64(data + 184);
  bool flow = h.modelType == kFlowModelType;
  if (h.version == kVersion1 && modelLength == 0 && !flow) {
    // Version 1 headers: either the 2020 layout (platform_version at 156) or the intermediate one
    // (model_num at 156, platform_version at 160). A small count at 156 means the latter.
    uint32_t at156 = readU32(data + 156);
    if (at156 >= 1 && at156 <= 4096 && data[156] < 0x20) {
      h.generation = HeaderGeneration::Intermediate;
      h.modelNum = at156;
      h.platformVersion = fixedString(data + 160, 20);
      h.platformType = data[180];
    } else {
      h.generation = HeaderGeneration::Legacy2020;
      h.modelNum = 1;
      h.platformVersion = fixedString(data + 156, 20);
      h.platformType = data[176];
    }
  } else {
    h.generation = HeaderGeneration::Current;
    h.modelNum = readU32(data + 156);
    h.platformVersion = fixedString(data + 160, 20);
    h.platformType = data[180];
    h.modelLength = modelLength;
    h.needCheckOsCpuInfo = data[192];
    h.isUnknownModel = data[193];
  }
  if (h.isEncrypt != 0)
    return Status(
        ErrorCode::OmReadUnsupported,
        fmt::format("{}: the model is encrypted (is_encrypt = {})", displayName, h.isEncrypt),
        "convert the model again without encryption");
  // The current loader's rule: a model_length (or a flow model) means wide tables.
  bool wide = h.modelLength != 0 || flow;
  uint64_t body = wide ? h.modelLength : h.length;
  if (body != size - kHeaderSize)
    return invalid(displayName, wide ? 184 : 76,
                   fmt::format("the header gives {} bytes after the header, the file has {}", body,
                               size - kHeaderSize));
  if (h.modelNum == 0) return invalid(displayName, 156, "model_num is 0");
  uint64_t offset = kHeaderSize;
  uint32_t blocks = flow ? 1 : h.modelNum;
  for (uint32_t b = 0; b < blocks; ++b) {
    ModelBlock block;
    block.tableOffset = offset;
    block.wideTable = wide;
    if (size - offset < 4)
      return invalid(displayName, offset,
                     fmt::format("model block {} of {}: no room for a partition table", b, blocks));
    uint32_t num = readU32(data + offset);
    uint32_t maxNum = flow ? 4096 : 8;
    if (num < 1 || num > maxNum)
      return invalid(
          displayName, offset,
          fmt::format("model block {}: partition count {} is outside 1..{}", b, num, maxNum));
    uint64_t entry = wide ? 24 : 12;
    uint64_t tableSize = (wide ? 8 : 4) + entry * num;
    if (size - offset < tableSize)
      return invalid(
          displayName, offset,
          fmt::format("model block {}: the {}-entry partition table runs past the end", b, num));
    uint64_t cursor = offset + tableSize;
    for (uint32_t i = 0; i < num; ++i) {
      const uint8_t* e = data + offset + (wide ? 8 : 4) + entry * i;
      Partition p;
      p.type = readU32(e);
      p.offset = wide ? readU64(e + 8) : readU32(e + 4);
      p.size = wide ? readU64(e + 16) : readU32(e + 8);
      if (p.size > size - cursor)
        return invalid(displayName, cursor,
                       fmt::format("model block {}: partition {} ({}, {} bytes) runs past the end "
                                   "of the file",
                                   b, i, partitionTypeName(p.type), p.size));
      p.fileOffset = cursor;
      p.data = data + cursor;
      cursor += p.size;
      block.partitions.push_back(p);
    }
    offset = cursor;
    c.blocks.push_back(std::move(block));
  }
  if (offset != size)
    return invalid(displayName, offset,
                   fmt::format("{} bytes follow the last model block", size - offset));
  return c;
}

std::vector<uint8_t> encodeHeader(const OmHeader& h) {
  std::vector<uint8_t> out(kHeaderSize, 0);
  writeU32(out.data(), kMagic);
  writeU32(out.data() + 4, kHeaderSize);
  writeU32(out.data() + 8, h.version);
  writeU32(out.data() + 76, h.length);
  out[80] = h.isEncrypt;
  out[81] = h.isChecksum;
  out[82] = h.modelType;
  out[83] = h.genMode;
  std::memcpy(out.data() + 84, h.name.data(), std::min<size_t>(h.name.size(), 31));
  writeU32(out.data() + 116, h.ops);
  writeU32(out.data() + 152, h.omIrVersion);
  writeU32(out.data() + 156, h.modelNum);
  std::memcpy(out.data() + 160, h.platformVersion.data(),
              std::min<size_t>(h.platformVersion.size(), 19));
  out[180] = h.platformType;
  writeU64(out.data() + 184, h.modelLength);
  out[192] = h.needCheckOsCpuInfo;
  out[193] = h.isUnknownModel;
  return out;
}

std::optional<ge::proto::DataType> toGeDType(DType type) {
  for (const auto& row : kIrDTypes)
    if (row.ir == type) return row.ge;
  return std::nullopt;
}

std::optional<DType> fromGeDType(int protoType) {
  for (const auto& row : kIrDTypes)
    if (row.ge == protoType) return row.ir;
  return std::nullopt;
}

int geProtoToCxxDType(int protoType) {
  for (const auto& row : kDTypes)
    if (row.proto == protoType) return row.cxx;
  return -1;
}

int geCxxToProtoDType(int cxxType) {
  for (const auto& row : kDTypes)
    if (row.cxx == cxxType) return row.proto;
  return -1;
}

const char* geDTypeName(int protoType) {
  for (const auto& row : kDTypes)
    if (row.proto == protoType) return row.name;
  return "DT_UNKNOWN";
}

std::string formatName(int format) {
  int primary = format & 0xff;
  if (primary >= 0 && primary < static_cast<int>(std::size(kFormats))) return kFormats[primary];
  return fmt::format("FORMAT_{}", format);
}

int formatFromName(const std::string& name) {
  for (size_t i = 0; i < std::size(kFormats); ++i)
    if (name == kFormats[i]) return static_cast<int>(i);
  return -1;
}

namespace {

// Compressed keys are "\0" followed by base-127 digits of index+1, each digit + 1 (om.md §1.14).
std::optional<size_t> decodeCompressedKey(const std::string& key) {
  if (key.size() < 2 || key[0] != '\0') return std::nullopt;
  size_t value = 0;
  for (size_t i = 1; i < key.size(); ++i) {
    int digit = static_cast<unsigned char>(key[i]) - 1;
    if (digit < 0 || digit >= 127) return std::nullopt;
    value = value * 127 + static_cast<size_t>(digit);
  }
  if (value == 0) return std::nullopt;
  return value - 1;
}

using AttrMap = google::protobuf::Map<std::string, ge::proto::AttrDef>;

void decompressMap(AttrMap& attrs, const std::vector<std::string>& names,
                   const std::vector<bool>& useString, const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, ge::proto::AttrDef>> renamed;
  for (auto it = attrs.begin(); it != attrs.end();) {
    auto index = decodeCompressedKey(it->first);
    if (!index || *index >= names.size()) {
      ++it;
      continue;
    }
    ge::proto::AttrDef value = it->second;
    if (*index < useString.size() && useString[*index] &&
        value.value_case() == ge::proto::AttrDef::kI && value.i() >= 0 &&
        static_cast<size_t>(value.i()) < values.size())
      value.set_s(values[static_cast<size_t>(value.i())]);
    renamed.emplace_back(names[*index], std::move(value));
    it = attrs.erase(it);
  }
  for (auto& [name, value] : renamed)
    attrs[name] = std::move(value);
}

void decompressTensorDesc(ge::proto::TensorDescriptor& desc, const std::vector<std::string>& n,
                          const std::vector<bool>& u, const std::vector<std::string>& v) {
  decompressMap(*desc.mutable_attr(), n, u, v);
}

} // namespace

void decompressAttributes(ge::proto::ModelDef& modelDef) {
  auto& attrs = *modelDef.mutable_attr();
  auto version = attrs.find("om_compress_version");
  auto nameEnum = attrs.find("attr_name_enum");
  if (version == attrs.end() || nameEnum == attrs.end()) return;
  std::vector<std::string> names(nameEnum->second.list().s().begin(),
                                 nameEnum->second.list().s().end());
  std::vector<std::string> values;
  if (auto it = attrs.find("attr_value_enum"); it != attrs.end())
    values.assign(it->second.list().s().begin(), it->second.list().s().end());
  std::vector<bool> useString;
  if (auto it = attrs.find("attrs_use_string_value"); it != attrs.end())
    useString.assign(it->second.list().b().begin(), it->second.list().b().end());
  for (auto& graph : *modelDef.mutable_graph()) {
    decompressMap(*graph.mutable_attr(), names, useString, values);
    for (auto& op : *graph.mutable_op()) {
      decompressMap(*op.mutable_attr(), names, useString, values);
      for (auto& d : *op.mutable_input_desc())
        decompressTensorDesc(d, names, useString, values);
      for (auto& d : *op.mutable_output_desc())
        decompressTensorDesc(d, names, useString, values);
    }
  }
  attrs.erase("om_compress_version");
  attrs.erase("attr_name_enum");
  attrs.erase("attr_value_enum");
  attrs.erase("attrs_use_string_value");
}

Expected<ge::proto::ModelDef> parseModelDef(const Partition& partition,
                                            const std::string& displayName) {
  ge::proto::ModelDef def;
  if (partition.size > static_cast<uint64_t>(INT32_MAX) ||
      !def.ParseFromArray(partition.data, static_cast<int>(partition.size)))
    return invalid(displayName, partition.fileOffset,
                   fmt::format("the MODEL_DEF partition ({} bytes) is not a ge.proto.ModelDef",
                               partition.size));
  decompressAttributes(def);
  return def;
}

Expected<LoadedOm> loadOmFile(const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.status();
  LoadedOm loaded;
  loaded.bytes.assign((*file)->data(), (*file)->data() + (*file)->size());
  auto container = parseContainer(loaded.bytes.data(), loaded.bytes.size(), path);
  if (!container) return container.status();
  loaded.container = container.take();
  for (const ModelBlock& block : loaded.container.blocks) {
    const Partition* p = block.find(kModelDef);
    if (!p) continue;
    auto def = parseModelDef(*p, path);
    if (!def) return def.status();
    loaded.modelDefs.push_back(def.take());
  }
  return loaded;
}

} // namespace kiln::om
