// IR → ONNX ModelProto export (tensors inline as raw_data).
#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"
#include "kiln/support/atomic_file.h"

namespace kiln {
namespace {} // namespace

void tensorToOnnx(const Tensor& tensor, const std::string& name, onnx::TensorProto& proto) {
  if (!name.empty()) proto.set_name(name);
  proto.set_data_type(dtypeToOnnx(tensor.dtype()));
  for (int64_t d : tensor.dims())
    proto.add_dims(d);
  if (tensor.dtype() == DType::String) {
    for (const auto& s : tensor.stringValues())
      proto.add_string_data(s);
  } else {
    proto.set_raw_data(reinterpret_cast<const char*>(tensor.data()), tensor.byteSize());
  }
}

namespace {

void exportShape(const Shape& shape, onnx::TensorShapeProto& proto) {
  for (const Dim& d : shape.dims()) {
    auto* dim = proto.add_dim();
    if (d.isStatic())
      dim->set_dim_value(d.value());
    else if (d.isSymbolic())
      dim->set_dim_param(d.symbol());
  }
}

void exportValueInfo(const Value& value, onnx::ValueInfoProto& proto) {
  proto.set_name(value.name());
  if (!value.docString().empty()) proto.set_doc_string(value.docString());
  if (value.type().kind == TypeKind::Unknown) return;
  valueTypeToOnnx(value.type(), *proto.mutable_type());
}

// `weightsAsInputsAbove`: see OnnxExportOptions (only the main graph is exported with it).
void exportGraph(const Graph& graph, onnx::GraphProto& proto,
                 size_t weightsAsInputsAbove = SIZE_MAX, bool omitInitializers = false);

void exportAttribute(const std::string& name, const Attribute& attr, onnx::AttributeProto& proto) {
  proto.set_name(name);
  if (!attr.refAttrName().empty()) proto.set_ref_attr_name(attr.refAttrName());
  if (!attr.docString().empty()) proto.set_doc_string(attr.docString());
  switch (attr.kind()) {
  case AttrKind::Float:
    proto.set_type(onnx::AttributeProto::FLOAT);
    proto.set_f(attr.asFloat());
    break;
  case AttrKind::Int:
    proto.set_type(onnx::AttributeProto::INT);
    proto.set_i(attr.asInt());
    break;
  case AttrKind::String:
    proto.set_type(onnx::AttributeProto::STRING);
    proto.set_s(attr.asString());
    break;
  case AttrKind::Tensor:
    proto.set_type(onnx::AttributeProto::TENSOR);
    tensorToOnnx(attr.asTensor(), "", *proto.mutable_t());
    break;
  case AttrKind::Graph:
    proto.set_type(onnx::AttributeProto::GRAPH);
    exportGraph(*attr.asGraph(), *proto.mutable_g());
    break;
  case AttrKind::SparseTensor:
    proto.set_type(onnx::AttributeProto::SPARSE_TENSOR);
    proto.mutable_sparse_tensor()->ParseFromString(attr.asSparseTensor().bytes);
    break;
  case AttrKind::TypeProto:
    proto.set_type(onnx::AttributeProto::TYPE_PROTO);
    proto.mutable_tp()->ParseFromString(attr.asTypeProto().bytes);
    break;
  case AttrKind::Floats:
    proto.set_type(onnx::AttributeProto::FLOATS);
    for (float v : attr.asFloats())
      proto.add_floats(v);
    break;
  case AttrKind::Ints:
    proto.set_type(onnx::AttributeProto::INTS);
    for (int64_t v : attr.asInts())
      proto.add_ints(v);
    break;
  case AttrKind::Strings:
    proto.set_type(onnx::AttributeProto::STRINGS);
    for (const auto& v : attr.asStrings())
      proto.add_strings(v);
    break;
  case AttrKind::Tensors:
    proto.set_type(onnx::AttributeProto::TENSORS);
    for (const auto& t : attr.asTensors())
      tensorToOnnx(t, "", *proto.add_tensors());
    break;
  case AttrKind::Graphs:
    proto.set_type(onnx::AttributeProto::GRAPHS);
    for (const auto& g : attr.asGraphs())
      exportGraph(*g, *proto.add_graphs());
    break;
  case AttrKind::SparseTensors:
    proto.set_type(onnx::AttributeProto::SPARSE_TENSORS);
    for (const auto& s : attr.asSparseTensors())
      proto.add_sparse_tensors()->ParseFromString(s.bytes);
    break;
  case AttrKind::TypeProtos:
    proto.set_type(onnx::AttributeProto::TYPE_PROTOS);
    for (const auto& t : attr.asTypeProtos())
      proto.add_type_protos()->ParseFromString(t.bytes);
    break;
  }
}

void exportGraph(const Graph& graph, onnx::GraphProto& proto, size_t weightsAsInputsAbove,
                 bool omitInitializers) {
  proto.set_name(graph.name());
  if (!graph.docString().empty()) proto.set_doc_string(graph.docString());
  std::vector<const Value*> weightInputs;
  for (const Value* init : graph.initializers()) {
    if (omitInitializers) break;
    const Tensor& t = init->initializer();
    bool asInput = t.byteSize() > weightsAsInputsAbove && t.dtype() != DType::Int64 &&
                   t.dtype() != DType::Int32;
    if (asInput) {
      if (!init->isGraphInput()) weightInputs.push_back(init);
      continue;
    }
    tensorToOnnx(t, init->name(), *proto.add_initializer());
  }
  for (const Value* in : graph.inputs())
    exportValueInfo(*in, *proto.add_input());
  for (const Value* w : weightInputs)
    exportValueInfo(*w, *proto.add_input());
  for (const Value* out : graph.outputs())
    exportValueInfo(*out, *proto.add_output());
  for (const Value* value : graph.annotatedValues())
    exportValueInfo(*value, *proto.add_value_info());
  for (const auto& node : graph.nodes())
    nodeToOnnx(*node, *proto.add_node());
}

} // namespace

void valueTypeToOnnx(const ValueType& type, onnx::TypeProto& proto) {
  switch (type.kind) {
  case TypeKind::Unknown:
    return;
  case TypeKind::Tensor: {
    auto* tensorType = proto.mutable_tensor_type();
    tensorType->set_elem_type(dtypeToOnnx(type.dtype));
    if (type.shape.hasRank()) exportShape(type.shape, *tensorType->mutable_shape());
    break;
  }
  default:
    proto.ParseFromString(type.onnxType.bytes);
    break;
  }
  if (!type.denotation.empty()) proto.set_denotation(type.denotation);
}

void nodeToOnnx(const Node& node, onnx::NodeProto& proto) {
  proto.set_op_type(node.opType());
  if (!node.name().empty()) proto.set_name(node.name());
  if (!node.domain().empty()) proto.set_domain(node.domain());
  if (!node.docString().empty()) proto.set_doc_string(node.docString());
  for (const Value* in : node.inputs())
    proto.add_input(in ? in->name() : "");
  for (const Value* out : node.outputs())
    proto.add_output(out ? out->name() : "");
  for (const auto& [name, attr] : node.attributes())
    exportAttribute(name, attr, *proto.add_attribute());
}

Status exportOnnx(const Model& model, onnx::ModelProto& proto, const OnnxExportOptions& options) {
  if (!model.graph) return Status(ErrorCode::Internal, "model has no graph", "");
  proto.Clear();
  proto.set_ir_version(model.irVersion);
  for (const OpsetImport& opset : model.opsets) {
    auto* entry = proto.add_opset_import();
    entry->set_domain(opset.domain);
    entry->set_version(opset.version);
  }
  if (!model.producerName.empty()) proto.set_producer_name(model.producerName);
  if (!model.producerVersion.empty()) proto.set_producer_version(model.producerVersion);
  if (!model.domain.empty()) proto.set_domain(model.domain);
  if (model.modelVersion) proto.set_model_version(model.modelVersion);
  if (!model.docString.empty()) proto.set_doc_string(model.docString);
  for (const auto& [key, value] : model.metadata) {
    auto* prop = proto.add_metadata_props();
    prop->set_key(key);
    prop->set_value(value);
  }
  for (const auto& function : model.functions)
    proto.add_functions()->ParseFromString(function.bytes);
  exportGraph(*model.graph, *proto.mutable_graph(), options.weightsAsInputsAbove,
              options.omitMainInitializers);
  return Status::ok();
}

namespace {

void putVarint(std::ostream& out, uint64_t value) {
  char bytes[10];
  int n = 0;
  do {
    bytes[n] = static_cast<char>(value & 0x7f);
    value >>= 7;
    if (value) bytes[n] |= static_cast<char>(0x80);
    ++n;
  } while (value);
  out.write(bytes, n);
}

size_t varintSize(uint64_t value) {
  size_t n = 1;
  while (value >= 0x80) {
    value >>= 7;
    ++n;
  }
  return n;
}

constexpr char kModelGraphTag = (7 << 3) | 2;       // ModelProto.graph, length-delimited
constexpr char kGraphInitializerTag = (5 << 3) | 2; // GraphProto.initializer
constexpr char kTensorRawDataTag = (9 << 3) | 2;    // TensorProto.raw_data

} // namespace

// Streams the model so weights go from their buffers (often the mapped source file) straight to
// disk: the proto is serialized without the main graph's initializers, then a second `graph` field
// carrying them follows. Protobuf merges repeated occurrences of a message field, so readers see
// one graph whose initializers come last — in the IR's order.
Status writeOnnxFile(const Model& model, const std::string& path) {
  onnx::ModelProto proto;
  OnnxExportOptions options;
  options.omitMainInitializers = true;
  KILN_TRY(exportOnnx(model, proto, options));
  std::vector<std::string> headers; // TensorProto fields other than raw_data, per initializer
  uint64_t initializerBytes = 0;
  for (const Value* init : model.graph->initializers()) {
    const Tensor& t = init->initializer();
    onnx::TensorProto header;
    if (t.dtype() == DType::String) {
      tensorToOnnx(t, init->name(), header);  // strings are small and live in string_data
    } else {
      tensorToOnnx(Tensor(t.dtype(), t.dims(), Buffer::owned({})), init->name(), header);
      header.clear_raw_data();
    }
    headers.push_back(header.SerializeAsString());
    uint64_t raw = t.dtype() == DType::String ? 0 : 1 + varintSize(t.byteSize()) + t.byteSize();
    uint64_t payload = headers.back().size() + raw;
    initializerBytes += 1 + varintSize(payload) + payload;
  }
  if (proto.ByteSizeLong() + initializerBytes > static_cast<uint64_t>(INT32_MAX))
    return makeError(ErrorCode::FileWriteFailed,
                     "ONNX files over 2 GiB need external data (not yet written)",
                     "'{}' would be {} bytes", path, proto.ByteSizeLong() + initializerBytes);
  return writeFileAtomically(path, [&](std::ostream& stream) {
    if (!proto.SerializeToOstream(&stream))
      return makeError(ErrorCode::FileWriteFailed, "check free disk space",
                       "serializing '{}' failed", path);
    if (headers.empty()) return Status::ok();
    stream.put(kModelGraphTag);
    putVarint(stream, initializerBytes);
    size_t i = 0;
    for (const Value* init : model.graph->initializers()) {
      const Tensor& t = init->initializer();
      const std::string& header = headers[i++];
      bool raw = t.dtype() != DType::String;
      uint64_t payload = header.size() + (raw ? 1 + varintSize(t.byteSize()) + t.byteSize() : 0);
      stream.put(kGraphInitializerTag);
      putVarint(stream, payload);
      stream.write(header.data(), static_cast<std::streamsize>(header.size()));
      if (raw) {
        stream.put(kTensorRawDataTag);
        putVarint(stream, t.byteSize());
        stream.write(reinterpret_cast<const char*>(t.data()),
                     static_cast<std::streamsize>(t.byteSize()));
      }
    }
    return Status::ok();
  });
}

} // namespace kiln
