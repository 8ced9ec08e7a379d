// Serializing a lowered model into the IMOD container: MODEL_INOUT_INFO, MODEL_DEF, WEIGHTS_DATA
// and TASK_INFO in the order ATC writes them, behind the 256-byte header and a wide table.
#include <cstring>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "kiln/support/atomic_file.h"
#include "kiln_proto/task.pb.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

// Maps serialize in key order, so the same model gives the same bytes.
template <typename Message> std::string serializeDeterministic(const Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

void putU32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void putU64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void putI64(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

// One tensor-descriptor block of MODEL_INOUT_INFO (om.md §1.9).
std::string tensorBlock(const std::vector<IoTensor>& tensors) {
  std::string out;
  putU32(out, static_cast<uint32_t>(tensors.size()));
  for (const IoTensor& t : tensors) {
    uint64_t size = 0;
    bool known = true;
    uint64_t count = 1;
    for (int64_t d : t.dims)
      if (d < 0)
        known = false;
      else
        count *= static_cast<uint64_t>(d);
    if (known)
      if (auto bytes = dtypeStorageBytes(t.dtype, count)) size = *bytes;
    bool dynamic = !known;
    putU64(out, size);
    putU32(out, static_cast<uint32_t>(t.format));
    putU32(out, static_cast<uint32_t>(
                    geProtoToCxxDType(toGeDType(t.dtype).value_or(ge::proto::DT_UNDEFINED))));
    putU32(out, static_cast<uint32_t>(t.name.size()));
    putU32(out, static_cast<uint32_t>(8 * t.dims.size()));
    putU32(out, static_cast<uint32_t>(8 * t.dims.size()));
    putU32(out, static_cast<uint32_t>(dynamic ? 16 * t.dims.size() : 0));
    out += t.name;
    for (int64_t d : t.dims)
      putI64(out, d);
    for (int64_t d : t.dims)
      putI64(out, d);
    if (dynamic)
      for (int64_t d : t.dims) {
        putI64(out, d < 0 ? 1 : d);
        putI64(out, d < 0 ? -1 : d);
      }
  }
  return out;
}

// A gear model's profiles (TLV 2, 3 or 4; om.md §1.9): batch gears are u32 count then one int64
// per gear (its batch); H/W and dims gears are u32 count, one u32 length per gear, then each
// gear's int64 values.
std::string gearBlock(const LoweredModel& lowered) {
  std::string out;
  putU32(out, static_cast<uint32_t>(lowered.gears.size()));
  if (lowered.dynamicType == 1) {
    for (const auto& gear : lowered.gears)
      putI64(out, gear.empty() ? 0 : gear.front());
    return out;
  }
  for (const auto& gear : lowered.gears)
    putU32(out, static_cast<uint32_t>(gear.size()));
  for (const auto& gear : lowered.gears)
    for (int64_t v : gear)
      putI64(out, v);
  return out;
}

std::string inoutInfo(const LoweredModel& lowered) {
  std::string out;
  auto put = [&](uint32_t type, const std::string& value) {
    putU32(out, type);
    putU32(out, static_cast<uint32_t>(value.size()));
    out += value;
  };
  put(0, tensorBlock(lowered.inputs));
  put(1, tensorBlock(lowered.outputs));
  // _dynamic_type 1/2/3 (batch, H/W, dims) are TLV types 2/3/4.
  if (lowered.dynamicType >= 1 && lowered.dynamicType <= 3 && !lowered.gears.empty())
    put(static_cast<uint32_t>(lowered.dynamicType + 1), gearBlock(lowered));
  return out;
}

const char* hostCpu() {
#if defined(__aarch64__)
  return "aarch64";
#else
  return "x86_64";
#endif
}

} // namespace
} // namespace kiln::om

namespace kiln {

Expected<OmArtifact> buildOmArtifact(const Model& model, const OmWriteOptions& options) {
  auto lowered = options.gears ? om::lowerGearModels(*options.gears, options)
                               : om::lowerModel(model, options);
  if (!lowered) return lowered.status();
  om::LoweredModel& l = *lowered;
  om::layOutAsAtc(l);

  domi::ModelTaskDef task;
  task.set_memory_size(l.memorySize);
  task.set_stream_num(1);
  task.set_weight_size(l.weights.size());
  std::string taskBytes = om::serializeDeterministic(task);

  // Model attributes ATC writes (om.md §1.13); kernels and tasks are not generated.
  auto& attrs = *l.modelDef.mutable_attr();
  attrs["soc_version"] = om::attrS(options.socVersion);
  attrs["framework_type"] = om::attrS("Onnx");
  attrs["target_type"] = om::attrS("MINI");
  attrs["host_env_os"] = om::attrS("linux");
  attrs["host_env_cpu"] = om::attrS(om::hostCpu());
  attrs["memory_size"] = om::attrI(static_cast<int64_t>(l.memorySize));
  attrs["weight_size"] = om::attrI(static_cast<int64_t>(l.weights.size()));
  attrs["stream_num"] = om::attrI(1);
  attrs["event_num"] = om::attrI(0);
  attrs["label_num"] = om::attrI(0);
  attrs["core_type"] = om::attrI(options.coreType);
  {
    ge::proto::AttrDef info;
    auto* list = info.mutable_list();
    list->set_val_type(ge::proto::AttrDef::ListValue::VT_LIST_INT);
    for (int64_t v : {static_cast<int64_t>(l.weights.size()), int64_t{0}, int64_t{0},
                      static_cast<int64_t>(taskBytes.size()), int64_t{0}})
      list->add_i(v);
    attrs["om_info_list"] = info;
  }
  for (const auto& [key, value] : options.modelAttributes)
    attrs[key] = om::attrS(value);
  std::string modelDefBytes = om::serializeDeterministic(l.modelDef);
  std::string inout = om::inoutInfo(l);

  std::vector<std::pair<uint32_t, std::string_view>> partitions;
  partitions.emplace_back(om::kModelInoutInfo, inout);
  partitions.emplace_back(om::kModelDef, modelDefBytes);
  std::string_view weights(reinterpret_cast<const char*>(l.weights.data()), l.weights.size());
  if (!l.weights.empty()) partitions.emplace_back(om::kWeightsData, weights);
  partitions.emplace_back(om::kTaskInfo, taskBytes);
  for (const auto& [type, bytes] : partitions)
    if (bytes.size() > (uint64_t{4} << 30))
      return Status(ErrorCode::FileWriteFailed,
                    fmt::format("partition {} would be {} bytes, over the 4 GiB limit",
                                om::partitionTypeName(type), bytes.size()),
                    "write the weights beside the model (--external_weight)");

  std::string table;
  om::putU32(table, static_cast<uint32_t>(partitions.size()));
  om::putU32(table, 0);
  uint64_t offset = 0;
  for (const auto& [type, bytes] : partitions) {
    om::putU32(table, type);
    om::putU32(table, 0);
    om::putU64(table, offset);
    om::putU64(table, bytes.size());
    offset += bytes.size();
  }

  om::OmHeader header;
  header.version = om::kVersion2;
  header.name = l.modelDef.name();
  header.omIrVersion = om::kOmProtoVersion;
  header.modelNum = 1;
  header.platformType = 1; // TARGET_TYPE_MINI_8BIT: Linux targets
  header.platformVersion = om::kPlatformVersion;
  header.modelLength = table.size() + offset;

  OmArtifact artifact;
  artifact.om = om::encodeHeader(header);
  artifact.om.reserve(om::kHeaderSize + header.modelLength);
  artifact.om.insert(artifact.om.end(), table.begin(), table.end());
  for (const auto& [type, bytes] : partitions)
    artifact.om.insert(artifact.om.end(), bytes.begin(), bytes.end());
  artifact.externalFiles = std::move(l.externalFiles);
  return artifact;
}

Expected<std::vector<uint8_t>> buildOmBuffer(const Model& model, const OmWriteOptions& options) {
  auto artifact = buildOmArtifact(model, options);
  if (!artifact) return artifact.status();
  return std::move(artifact->om);
}

Status writeOmFile(const Model& model, const OmWriteOptions& options, const std::string& path) {
  auto artifact = buildOmArtifact(model, options);
  if (!artifact) return artifact.status();
  namespace fs = std::filesystem;
  fs::path base = fs::path(path).parent_path();
  std::vector<fs::path> written;
  auto undo = [&] {
    std::error_code ec;
    for (const auto& p : written)
      fs::remove(p, ec);
  };
  for (const auto& [relative, bytes] : artifact->externalFiles) {
    fs::path target = base / relative;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      undo();
      return Status(
          ErrorCode::FileWriteFailed,
          fmt::format("cannot create '{}': {}", target.parent_path().string(), ec.message()),
          "check the output path");
    }
    Status s = writeFileAtomically(
        target.string(), std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    if (!s) {
      undo();
      return s;
    }
    written.push_back(target);
  }
  Status s = writeFileAtomically(
      path, std::string(reinterpret_cast<const char*>(artifact->om.data()), artifact->om.size()));
  if (!s) undo();
  return s;
}

} // namespace kiln
