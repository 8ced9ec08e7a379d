// Reading and writing ONNX test-data protos (the layout of the ONNX backend test cases).
#include "kiln/frontend/value_io.h"

#include <filesystem>

#include <onnx/onnx-data_pb.h>
#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/mapped_file.h"

namespace kiln {
namespace {

Status badData(const std::string& path, const std::string& what) {
  return Status(ErrorCode::ConformanceDataBad, fmt::format("{}: {}", path, what),
                "pass a serialized onnx TensorProto / SequenceProto / OptionalProto file");
}

Expected<rt::RtValue> fromSequence(const onnx::SequenceProto& proto, const std::string& path) {
  if (proto.elem_type() != onnx::SequenceProto::TENSOR &&
      proto.elem_type() != onnx::SequenceProto::UNDEFINED)
    return badData(path, "only sequences of tensors are supported");
  std::vector<Tensor> items;
  for (const auto& t : proto.tensor_values()) {
    KILN_ASSIGN_OR_RETURN(Tensor item, tensorFromOnnx(t, "", path));
    items.push_back(std::move(item));
  }
  return rt::RtValue::ofSequence(std::move(items));
}

} // namespace

Expected<rt::RtValue> readValueFile(const std::string& path, const ValueType& expected) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  const void* data = file->data();
  int size = static_cast<int>(file->size());
  std::string baseDir = std::filesystem::path(path).parent_path().string();
  if (expected.kind == TypeKind::Sequence) {
    onnx::SequenceProto proto;
    if (!proto.ParseFromArray(data, size)) return badData(path, "not a SequenceProto");
    return fromSequence(proto, path);
  }
  if (expected.kind == TypeKind::Optional) {
    onnx::OptionalProto proto;
    if (!proto.ParseFromArray(data, size)) return badData(path, "not an OptionalProto");
    if (proto.has_tensor_value()) {
      KILN_ASSIGN_OR_RETURN(Tensor t, tensorFromOnnx(proto.tensor_value(), baseDir, path));
      return rt::RtValue::ofTensor(std::move(t));
    }
    if (proto.has_sequence_value()) return fromSequence(proto.sequence_value(), path);
    return rt::RtValue::none();
  }
  onnx::TensorProto proto;
  if (!proto.ParseFromArray(data, size)) return badData(path, "not a TensorProto");
  KILN_ASSIGN_OR_RETURN(Tensor t, tensorFromOnnx(proto, baseDir, path));
  return rt::RtValue::ofTensor(std::move(t));
}

Status writeValueFile(const std::string& path, const std::string& name, const rt::RtValue& value) {
  std::string bytes;
  if (value.isTensor()) {
    onnx::TensorProto proto;
    tensorToOnnx(value.tensor, name, proto);
    bytes = proto.SerializeAsString();
  } else if (value.isSequence()) {
    onnx::SequenceProto proto;
    proto.set_name(name);
    proto.set_elem_type(onnx::SequenceProto::TENSOR);
    for (const Tensor& t : value.sequence)
      tensorToOnnx(t, "", *proto.add_tensor_values());
    bytes = proto.SerializeAsString();
  } else {
    onnx::OptionalProto proto;
    proto.set_name(name);
    bytes = proto.SerializeAsString();
  }
  return writeFileAtomically(path, bytes);
}

} // namespace kiln
