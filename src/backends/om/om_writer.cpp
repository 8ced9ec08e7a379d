// Serializing a lowered model into the IMOD container: MODEL_INOUT_INFO, MODEL_DEF, WEIGHTS_DATA
// and TASK_INFO in the order ATC writes them, behind the 256-byte header and a wide table.
#include <cstring>
#include <filesystem>
#include <optional>
#include <ostream>
#include <system_error>

#include <fmt/format.h>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "kiln/backends/aipp.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/checked_math.h"
#include "kiln/support/display.h"
#include "kiln/support/mapped_file.h"
#include "kiln/support/progress.h"
#include "kiln/support/sigbus_guard.h"
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
    // Negative (dynamic) dims have no count: the size stays 0. lowering::commonReason has
    // refused static dims that overflow.
    const auto count = checkedElementCount(t.dims);
    if (count)
      if (auto bytes = dtypeStorageBytes(t.dtype, *count)) size = *bytes;
    bool dynamic = !count;
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

namespace kiln::om {
namespace {

// A model ready to be written: everything but the weights is a few small byte strings; the
// weights (WEIGHTS_DATA and the external files) are produced while writing.
struct Prepared {
  LoweredModel lowered;
  std::string head; // the 256-byte header and the partition table
  std::vector<std::pair<uint32_t, std::string>> partitions; // WEIGHTS_DATA's bytes left empty
  uint64_t fileSize = 0;
};

// The first `string` field under `message` (recursively) that is not UTF-8, as "path: value".
// protobuf parsers refuse such a ModelDef (`string` fields must be UTF-8), so neither kiln's .om
// reader nor CANN's would load the file.
std::optional<std::string> findNonUtf8String(const google::protobuf::Message& message,
                                             const std::string& path) {
  using google::protobuf::FieldDescriptor;
  const auto* reflection = message.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  reflection->ListFields(message, &fields);
  for (const FieldDescriptor* field : fields) {
    const std::string here = path.empty() ? field->name() : path + "." + field->name();
    const int count = field->is_repeated() ? reflection->FieldSize(message, field) : 1;
    for (int i = 0; i < count; ++i) {
      if (field->type() == FieldDescriptor::TYPE_STRING) {
        std::string scratch;
        const std::string& text =
            field->is_repeated()
                ? reflection->GetRepeatedStringReference(message, field, i, &scratch)
                : reflection->GetStringReference(message, field, &scratch);
        if (!isValidUtf8(text)) return fmt::format("{}: '{}'", here, displayName(text));
      } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        const auto& child = field->is_repeated() ? reflection->GetRepeatedMessage(message, field, i)
                                                 : reflection->GetMessage(message, field);
        if (auto found = findNonUtf8String(child, here)) return found;
      }
    }
  }
  return std::nullopt;
}

Expected<Prepared> prepare(const Model& model, const OmWriteOptions& options) {
  auto lowered =
      options.gears ? lowerGearModels(*options.gears, options) : lowerModel(model, options);
  if (!lowered) return lowered.status();
  Prepared p;
  p.lowered = lowered.take();
  LoweredModel& l = p.lowered;
  layOutAsAtc(l);
  const uint64_t weightSize = l.weights.size;

  domi::ModelTaskDef task;
  task.set_memory_size(l.memorySize);
  task.set_stream_num(1);
  task.set_weight_size(weightSize);
  std::string taskBytes = serializeDeterministic(task);

  // Model attributes ATC writes (om.md §1.13); kernels and tasks are not generated.
  auto& attrs = *l.modelDef.mutable_attr();
  attrs["soc_version"] = attrS(options.socVersion);
  attrs["framework_type"] = attrS("Onnx");
  attrs["target_type"] = attrS("MINI");
  attrs["host_env_os"] = attrS("linux");
  attrs["host_env_cpu"] = attrS(hostCpu());
  attrs["memory_size"] = attrI(static_cast<int64_t>(l.memorySize));
  attrs["weight_size"] = attrI(static_cast<int64_t>(weightSize));
  attrs["stream_num"] = attrI(1);
  attrs["event_num"] = attrI(0);
  attrs["label_num"] = attrI(0);
  attrs["core_type"] = attrI(options.coreType);
  {
    ge::proto::AttrDef info;
    auto* list = info.mutable_list();
    list->set_val_type(ge::proto::AttrDef::ListValue::VT_LIST_INT);
    for (int64_t v : {static_cast<int64_t>(weightSize), int64_t{0}, int64_t{0},
                      static_cast<int64_t>(taskBytes.size()), int64_t{0}})
      list->add_i(v);
    attrs["om_info_list"] = info;
  }
  for (const auto& [key, value] : options.modelAttributes)
    attrs[key] = attrS(value);
  // The AIPP the model was given, so `kiln compare` can preprocess the reference the same way.
  for (const auto& [key, value] : model.metadata)
    if (key == kAippMetadataKey) attrs[key] = attrS(value);

  if (auto bad = findNonUtf8String(l.modelDef, ""))
    return Status(ErrorCode::OmLowerBadAttribute,
                  fmt::format("a name or string in the model is not valid UTF-8, which .om "
                              "string fields require ({})",
                              *bad),
                  "rename the node, value or attribute in the ONNX model to UTF-8 text");
  p.partitions.emplace_back(kModelInoutInfo, inoutInfo(l));
  p.partitions.emplace_back(kModelDef, serializeDeterministic(l.modelDef));
  if (!l.weights.empty()) p.partitions.emplace_back(kWeightsData, std::string());
  p.partitions.emplace_back(kTaskInfo, std::move(taskBytes));
  auto sizeOf = [&](const std::pair<uint32_t, std::string>& part) -> uint64_t {
    return part.first == kWeightsData ? weightSize : part.second.size();
  };
  for (const auto& part : p.partitions)
    if (sizeOf(part) > (uint64_t{4} << 30))
      return Status(ErrorCode::FileWriteFailed,
                    fmt::format("partition {} would be {} bytes, over the 4 GiB limit",
                                partitionTypeName(part.first), sizeOf(part)),
                    "write the weights beside the model (--external_weight)");

  std::string table;
  putU32(table, static_cast<uint32_t>(p.partitions.size()));
  putU32(table, 0);
  uint64_t offset = 0;
  for (const auto& part : p.partitions) {
    putU32(table, part.first);
    putU32(table, 0);
    putU64(table, offset);
    putU64(table, sizeOf(part));
    offset += sizeOf(part);
  }

  OmHeader header;
  header.version = kVersion2;
  header.name = l.modelDef.name();
  header.omIrVersion = kOmProtoVersion;
  header.modelNum = 1;
  header.platformType = 1; // TARGET_TYPE_MINI_8BIT: Linux targets
  header.platformVersion = kPlatformVersion;
  header.modelLength = table.size() + offset;
  std::vector<uint8_t> headerBytes = encodeHeader(header);
  p.head.assign(headerBytes.begin(), headerBytes.end());
  p.head += table;
  p.fileSize = kHeaderSize + header.modelLength;
  // The ModelDef is serialized; only the weight sources are needed from here on.
  l.modelDef.Clear();
  return p;
}

// The .om in order: header, table, then each partition, WEIGHTS_DATA streamed from its sources.
bool emitOm(const Prepared& p, const ByteSink& sink) {
  if (!sink(reinterpret_cast<const uint8_t*>(p.head.data()), p.head.size())) return false;
  for (const auto& [type, bytes] : p.partitions) {
    bool ok = type == kWeightsData
                  ? p.lowered.weights.emit(sink)
                  : sink(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (!ok) return false;
  }
  return true;
}

Status writeFailed(const std::string& path) {
  return Status(ErrorCode::FileWriteFailed, fmt::format("{}: write failed", path),
                "check free space and permissions");
}

// Checks the written file (`written`, the temp file beside `target`) as kiln's .om reader first
// does: the container, its partition table and each MODEL_DEF parsed as a ModelDef. The weights
// are not read again (they can be gigabytes), so this costs about what the ModelDef does.
Status readBack(const std::string& written, const std::string& target) {
  auto file = MappedFile::open(written);
  if (!file) return file.status();
  Status problem;
  auto container = parseContainer((*file)->data(), (*file)->size(), target);
  if (!container) problem = container.status();
  for (size_t i = 0; problem.isOk() && i < container->blocks.size(); ++i)
    if (const Partition* def = container->blocks[i].find(kModelDef)) {
      auto parsed = parseModelDef(*def, target);
      if (!parsed) problem = parsed.status();
    }
  if (problem.isOk()) return problem;
  return Status(
      ErrorCode::Internal,
      fmt::format("the .om written for '{}' does not read back: {}", target, problem.toString()),
      "report it with the model and the command line; nothing was written");
}

// Streams pieces of output to `os`; counts what went through for the progress line.
ByteSink streamSink(std::ostream& os, WriteProgress& progress) {
  return [&os, &progress](const uint8_t* bytes, size_t count) {
    os.write(reinterpret_cast<const char*>(bytes), static_cast<std::streamsize>(count));
    progress.advance(count);
    return static_cast<bool>(os);
  };
}

} // namespace
} // namespace kiln::om

namespace kiln {

Expected<OmArtifact> buildOmArtifact(const Model& model, const OmWriteOptions& options) {
  KILN_ASSIGN_OR_RETURN(om::Prepared p, om::prepare(model, options));
  OmArtifact artifact;
  artifact.om.reserve(p.fileSize);
  om::emitOm(p, [&](const uint8_t* bytes, size_t count) {
    artifact.om.insert(artifact.om.end(), bytes, bytes + count);
    return true;
  });
  for (const auto& [relative, source] : p.lowered.externalFiles)
    artifact.externalFiles.emplace_back(relative, source.bytes());
  return artifact;
}

Expected<std::vector<uint8_t>> buildOmBuffer(const Model& model, const OmWriteOptions& options) {
  auto artifact = buildOmArtifact(model, options);
  if (!artifact) return artifact.status();
  return std::move(artifact->om);
}

// Writes the weight files (each streamed from its source) and then the .om (its weights streamed
// from theirs), each through a temp file renamed into place; nothing is left on failure.
Status writeOmFile(const Model& model, const OmWriteOptions& options, const std::string& path) {
  KILN_ASSIGN_OR_RETURN(om::Prepared p, om::prepare(model, options));
  uint64_t total = p.fileSize;
  for (const auto& [relative, source] : p.lowered.externalFiles)
    total += source.size;
  WriteProgress progress("writing " + path, total);
  namespace fs = std::filesystem;
  fs::path base = fs::path(path).parent_path();
  std::vector<fs::path> written;
  std::vector<int> guards;
  auto releaseGuards = [&] {
    for (int guard : guards)
      releaseUnfinishedOutput(guard);
    guards.clear();
  };
  auto undo = [&] {
    releaseGuards();
    std::error_code ec;
    for (const auto& f : written)
      fs::remove(f, ec);
  };
  // Every target is checked before any is written, so a refused one leaves nothing behind.
  KILN_TRY(checkOutputTarget(path));
  for (const auto& [relative, source] : p.lowered.externalFiles)
    KILN_TRY(checkOutputTarget((base / relative).string()));
  for (const auto& file : p.lowered.externalFiles) {
    // Named references, not a structured binding: the lambda below captures `source`, which
    // clang 14 cannot do with a binding.
    const auto& relative = file.first;
    const auto& source = file.second;
    fs::path target = base / relative;
    if (Status s = makeOutputFolder(target.parent_path().string()); !s) {
      undo();
      return s;
    }
    Status s = writeFileAtomically(target.string(), [&](std::ostream& os) {
      return source.emit(om::streamSink(os, progress)) ? Status::ok()
                                                       : om::writeFailed(target.string());
    });
    if (!s) {
      undo();
      return s;
    }
    written.push_back(target);
    // The weight files stand only once the .om that names them does.
    guards.push_back(guardUnfinishedOutput(target.string()));
  }
  Status s = writeFileAtomically(
      path,
      [&](std::ostream& os) {
        return om::emitOm(p, om::streamSink(os, progress)) ? Status::ok() : om::writeFailed(path);
      },
      [&](const std::string& written) { return om::readBack(written, path); });
  releaseGuards();
  if (!s) undo();
  progress.finish();
  return s;
}

} // namespace kiln
