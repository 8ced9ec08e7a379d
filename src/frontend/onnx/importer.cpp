// ONNX → IR import: validates structure, resolves external data, aliases weights in the mapped
// file.
#include <algorithm>
#include <charconv>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <spdlog/spdlog.h>

#include "kiln/frontend/onnx.h"
#include "kiln/frontend/onnx_element_types.h"
#include "kiln/ir/verifier.h"
#include "kiln/support/checked_math.h"
#include "kiln/support/contained_path.h"
#include "kiln/support/display.h"
#include "ops/attributes.h"
#include "ops/validate.h"
#include "wire_scan.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using onnx_import::ByteSpan;
using onnx_import::ScannedInitializer;

// The label every message gives a node (as lowering::nodeLabel): its name, else its first named
// output.
std::string nodeLabel(const onnx::NodeProto& node) {
  const std::string opType = displayName(node.op_type());
  if (!node.name().empty()) return fmt::format("node '{}' ({})", displayName(node.name()), opType);
  for (const auto& out : node.output())
    if (!out.empty()) return fmt::format("node producing '{}' ({})", displayName(out), opType);
  return fmt::format("unnamed node ({})", opType);
}

// Everything a subgraph reads from enclosing scopes: drives topological order of the node holding
// it.
void collectOuterReferences(const onnx::GraphProto& graph, std::set<std::string>& out) {
  std::unordered_set<std::string> defined;
  for (const auto& in : graph.input())
    defined.insert(in.name());
  for (const auto& init : graph.initializer())
    defined.insert(init.name());
  for (const auto& node : graph.node())
    for (const auto& name : node.output())
      defined.insert(name);
  std::set<std::string> referenced;
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input())
      if (!name.empty()) referenced.insert(name);
    for (const auto& attr : node.attribute()) {
      if (attr.has_g()) collectOuterReferences(attr.g(), referenced);
      for (const auto& g : attr.graphs())
        collectOuterReferences(g, referenced);
    }
  }
  for (const auto& out : graph.output())
    referenced.insert(out.name());
  for (const auto& name : referenced)
    if (!defined.count(name)) out.insert(name);
}

// Element types newer ONNX releases added, which kiln does not take (yet).
struct NewerElementType {
  int32_t number;
  const char* name;
  const char* release;
};
constexpr NewerElementType kNewerElementTypes[] = {{23, "FLOAT4E2M1", "added in ONNX 1.18"},
                                                   {24, "FLOAT8E8M0", "added after ONNX 1.18"},
                                                   {25, "UINT2", "added after ONNX 1.18"},
                                                   {26, "INT2", "added after ONNX 1.18"}};

// How the refusal of a newer type names it (unsupportedOnnxElementType reads it back).
std::string newerTypeLabel(const NewerElementType& n) {
  return fmt::format("({}, {})", n.name, n.release);
}

// The refusal for a data_type kiln does not take (K2004). Types newer ONNX releases added are
// named with the release, so the fix is a conversion in the exporter rather than "pick a number".
Status unsupportedDType(const std::string& label, const char* what, int32_t onnxType) {
  for (const NewerElementType& n : kNewerElementTypes)
    if (n.number == onnxType)
      return makeError(ErrorCode::UnknownDType,
                       "dequantize or cast the tensor to a type kiln takes (TensorProto.DataType "
                       "1-22, up to INT4) in the exporter",
                       "{} has {} {} {}, which kiln does not take", label, what, onnxType,
                       newerTypeLabel(n));
  return makeError(ErrorCode::UnknownDType,
                   "use a TensorProto.DataType value kiln takes (1-22, up to INT4)",
                   "{} has unknown {} {}", label, what, onnxType);
}

class Importer {
 public:
  Importer(std::string displayName, std::string baseDir, const uint8_t* data,
           std::shared_ptr<const void> owner, const MappedFile* file)
      : displayName_(std::move(displayName)), baseDir_(std::move(baseDir)), data_(data),
        owner_(std::move(owner)), file_(file) {}

  Expected<Model> run(const onnx::ModelProto& proto, const std::vector<ScannedInitializer>* scanned,
                      const OnnxImportOptions& options) {
    Model model;
    model.sourcePath = displayName_;
    model.irVersion = proto.ir_version();
    for (const auto& opset : proto.opset_import())
      model.opsets.push_back({opset.domain(), opset.version()});
    opsets_ = &model;
    model.producerName = proto.producer_name();
    model.producerVersion = proto.producer_version();
    model.domain = proto.domain();
    model.modelVersion = proto.model_version();
    model.docString = proto.doc_string();
    for (const auto& prop : proto.metadata_props())
      model.metadata.emplace_back(prop.key(), prop.value());
    for (const auto& function : proto.functions())
      model.functions.push_back({function.SerializeAsString()});
    if (proto.training_info_size() > 0)
      spdlog::warn("{}: training_info is not carried through conversion", displayName_);

    KILN_ASSIGN_OR_RETURN(model.graph, buildGraph(proto.graph(), nullptr, scanned));
    if (model.graph->outputs().empty())
      return makeError(ErrorCode::EmptyGraph, "export the model again with its outputs declared",
                       "graph '{}' has no outputs", model.graph->name());
    // Before any pass, inference or kernel sees a node: arity and attributes it can be run with.
    KILN_TRY(ops::validateGraph(*model.graph, model));
    if (options.verify) KILN_TRY(verifyModel(model));
    return model;
  }

  // Tensors.
  Expected<Tensor> tensor(const onnx::TensorProto& proto, const std::optional<ByteSpan>& rawSpan,
                          const std::string& where) {
    // Attribute tensors are often unnamed; their label is the attribute's.
    std::string label =
        proto.name().empty() ? where + "tensor" : fmt::format("{}tensor '{}'", where, proto.name());
    if (proto.data_type() == 0)
      return makeError(ErrorCode::UnknownDType, "set data_type to a TensorProto.DataType value",
                       "{} has no data type", label);
    auto dtype = dtypeFromOnnx(proto.data_type());
    if (!dtype) return unsupportedDType(label, "data type", proto.data_type());
    std::vector<int64_t> dims(proto.dims().begin(), proto.dims().end());
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] < 0)
        return makeError(ErrorCode::BadDim, "tensor dims must be >= 0",
                         "{} has negative dim {} at axis {}", label, dims[i], i);
    KILN_ASSIGN_OR_RETURN(TensorExtent extent,
                          checkTensorExtent(dims, dtypeBits(*dtype), dtypeName(*dtype),
                                            ErrorCode::SizeOverflow, label));
    const uint64_t count = extent.elements, bytes = extent.bytes;
    if (proto.has_segment())
      return makeError(ErrorCode::BadAttribute, "re-export without segmented tensors",
                       "{} is segmented, which is not supported", label);
    if (*dtype == DType::String) {
      if (static_cast<uint64_t>(proto.string_data_size()) != count)
        return makeError(ErrorCode::DataSizeMismatch, "store one string per element",
                         "{} holds {} strings but its shape {} needs {}", label,
                         proto.string_data_size(), Shape::fromStatic(dims).toString(), count);
      return Tensor::strings(std::move(dims),
                             {proto.string_data().begin(), proto.string_data().end()});
    }
    auto sizeMismatch = [&](uint64_t actual) {
      return makeError(ErrorCode::DataSizeMismatch,
                       "the data must be exactly elements x element size",
                       "{} has {} data bytes but {} {} x {} needs {}", label, actual,
                       Shape::fromStatic(dims).toString(), count, dtypeName(*dtype), bytes);
    };

    std::shared_ptr<const Buffer> buffer;
    if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
      KILN_ASSIGN_OR_RETURN(buffer, externalData(proto, label));
    } else if (rawSpan) {
      buffer = Buffer::borrowed(owner_, data_ + rawSpan->offset, rawSpan->length, file_);
    } else if (proto.has_raw_data()) {
      buffer = Buffer::owned({proto.raw_data().begin(), proto.raw_data().end()});
    } else {
      KILN_ASSIGN_OR_RETURN(buffer, typedData(proto, *dtype, count, label));
    }
    if (buffer->size() != bytes) return sizeMismatch(buffer->size());
    return Tensor(*dtype, std::move(dims), std::move(buffer));
  }

  template <typename Out, typename Repeated>
  static std::shared_ptr<const Buffer> narrow(const Repeated& values) {
    std::vector<uint8_t> bytes(static_cast<size_t>(values.size()) * sizeof(Out));
    for (int i = 0; i < values.size(); ++i) {
      Out v = static_cast<Out>(values.Get(i));
      std::memcpy(bytes.data() + static_cast<size_t>(i) * sizeof(Out), &v, sizeof(Out));
    }
    return Buffer::owned(std::move(bytes));
  }

  Expected<std::shared_ptr<const Buffer>> typedData(const onnx::TensorProto& proto, DType dtype,
                                                    uint64_t count, const std::string& label) {
    switch (dtype) {
    case DType::Float32:
    case DType::Complex64:
      return narrow<float>(proto.float_data());
    case DType::Float64:
    case DType::Complex128:
      return narrow<double>(proto.double_data());
    case DType::Int64:
      return narrow<int64_t>(proto.int64_data());
    case DType::UInt32:
      return narrow<uint32_t>(proto.uint64_data());
    case DType::UInt64:
      return narrow<uint64_t>(proto.uint64_data());
    case DType::Int32:
      return narrow<int32_t>(proto.int32_data());
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16:
      return narrow<uint16_t>(proto.int32_data());
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
    case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ:
    case DType::Float8E5M2:
    case DType::Float8E5M2FNUZ:
    case DType::UInt4: // two nibbles per int32_data entry
    case DType::Int4:
      return narrow<uint8_t>(proto.int32_data());
    default:
      return makeError(ErrorCode::UnknownDType, "use raw_data for this type",
                       "{}: no typed field holds {}", label, dtypeName(dtype));
    }
  }

  Expected<std::shared_ptr<const Buffer>> externalData(const onnx::TensorProto& proto,
                                                       const std::string& label) {
    std::string location;
    uint64_t offset = 0;
    std::optional<uint64_t> length;
    for (const auto& entry : proto.external_data()) {
      if (entry.key() == "location") {
        location = entry.value();
      } else if (entry.key() == "offset" || entry.key() == "length") {
        uint64_t parsed = 0;
        const std::string& text = entry.value();
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), parsed);
        if (ec != std::errc() || end != text.data() + text.size())
          return makeError(ErrorCode::ExternalDataRange,
                           "offset and length must be decimal byte counts",
                           "{}: external data {} '{}' is not a number", label, entry.key(), text);
        (entry.key() == "offset" ? offset : length.emplace()) = parsed;
      }
    }
    const SideFileRule rule{
        ErrorCode::ExternalDataEscape, "external data location",
        "keep external data files inside the model's folder, named by relative paths"};
    if (location.empty())
      return Status(rule.code, label + ": external data has no location", rule.hint);
    if (baseDir_.empty())
      return makeError(ErrorCode::ExternalDataEscape, "load the model from a file",
                       "{}: external data '{}' cannot be resolved for an in-memory model", label,
                       location);
    auto contained = resolveInsideFolder(baseDir_, location, rule);
    if (!contained) return contained.status().withContext(label);
    const std::string& resolved = *contained;
    auto cached = externalFiles_.find(resolved);
    if (cached == externalFiles_.end()) {
      auto file = MappedFile::open(resolved);
      if (!file) return file.status().withContext(label + ": external data");
      cached = externalFiles_.emplace(resolved, *file).first;
    }
    const auto& file = cached->second;
    uint64_t available = file->size();
    const std::string rangeHint = "fix offset/length or the external data file";
    if (offset > available)
      return makeError(ErrorCode::ExternalDataRange, rangeHint,
                       "{}: external data offset {} lies past the end of '{}' ({} bytes)", label,
                       offset, location, available);
    // Compared as "length fits in what is left" so a huge length cannot wrap offset + length.
    uint64_t size = length.value_or(available - offset);
    if (size > available - offset)
      return makeError(ErrorCode::ExternalDataRange, rangeHint,
                       "{}: external data at offset {} with length {} runs past the end of '{}' "
                       "({} bytes)",
                       label, offset, size, location, available);
    return Buffer::view(file, static_cast<size_t>(offset), static_cast<size_t>(size));
  }

  // Types.
  static Expected<Shape> shape(const onnx::TensorShapeProto& proto, const std::string& label) {
    std::vector<Dim> dims;
    for (int i = 0; i < proto.dim_size(); ++i) {
      const auto& d = proto.dim(i);
      if (d.has_dim_value()) {
        // -1 is what several exporters write for "dynamic"; anything lower is corrupt.
        if (d.dim_value() < -1)
          return makeError(ErrorCode::BadDim, "dims must be >= 0, or dim_param for dynamic dims",
                           "{} has dim {} at axis {}", label, d.dim_value(), i);
        dims.push_back(d.dim_value() == -1 ? Dim() : Dim::known(d.dim_value()));
      } else if (d.has_dim_param()) {
        dims.push_back(Dim::symbol(d.dim_param()));
      } else {
        dims.emplace_back();
      }
    }
    // Only the static dims multiply; a dynamic one can still be given a size later, which the
    // passes and the executor check again.
    std::vector<int64_t> known;
    for (const Dim& d : dims)
      if (d.isStatic()) known.push_back(d.value());
    if (!checkedElementCount(known))
      return makeError(ErrorCode::SizeOverflow, "check the tensor dims",
                       "{}: element count of {} overflows", label, Shape(dims).toString());
    return Shape(std::move(dims));
  }

  static Expected<ValueType> type(const onnx::TypeProto& proto, const std::string& label) {
    ValueType out;
    out.denotation = proto.denotation();
    auto elem = [&](int32_t elemType) -> Status {
      auto dtype = dtypeFromOnnx(elemType);
      if (!dtype) return unsupportedDType(label, "element type", elemType);
      out.dtype = *dtype;
      return Status::ok();
    };
    if (proto.has_tensor_type()) {
      out.kind = TypeKind::Tensor;
      KILN_TRY(elem(proto.tensor_type().elem_type()));
      if (proto.tensor_type().has_shape()) {
        KILN_ASSIGN_OR_RETURN(out.shape, shape(proto.tensor_type().shape(), label));
      }
      return out;
    }
    if (proto.has_sparse_tensor_type()) {
      out.kind = TypeKind::SparseTensor;
      KILN_TRY(elem(proto.sparse_tensor_type().elem_type()));
      if (proto.sparse_tensor_type().has_shape()) {
        KILN_ASSIGN_OR_RETURN(out.shape, shape(proto.sparse_tensor_type().shape(), label));
      }
    } else if (proto.has_sequence_type()) {
      out.kind = TypeKind::Sequence;
    } else if (proto.has_map_type()) {
      out.kind = TypeKind::Map;
    } else if (proto.has_optional_type()) {
      out.kind = TypeKind::Optional;
    } else {
      return out; // no type given
    }
    out.onnxType.bytes = proto.SerializeAsString();
    return out;
  }

  // `role` says where the declaration sits (input, output, value_info) so errors can point at it.
  Status applyValueInfo(Value* value, const onnx::ValueInfoProto& info,
                        const std::string& graphText, const char* role) {
    if (!info.has_type()) return Status::ok();
    KILN_ASSIGN_OR_RETURN(
        ValueType t, type(info.type(), fmt::format("{}: {} '{}'", graphText, role, info.name())));
    value->setType(std::move(t));
    if (!info.doc_string().empty()) value->setDocString(info.doc_string());
    return Status::ok();
  }

 private:
  // Attributes.
  Expected<Attribute> attribute(const onnx::AttributeProto& proto, Graph* owner,
                                const std::string& nodeText) {
    std::string label = fmt::format("{} attribute '{}'", nodeText, proto.name());
    if (proto.name().empty())
      return makeError(ErrorCode::BadAttribute, "give every attribute a name",
                       "{} has an unnamed attribute", nodeText);
    auto attrType = proto.type();
    if (attrType == onnx::AttributeProto::UNDEFINED) { // pre-IR-v2 models leave it unset
      if (proto.has_f())
        attrType = onnx::AttributeProto::FLOAT;
      else if (proto.has_i())
        attrType = onnx::AttributeProto::INT;
      else if (proto.has_s())
        attrType = onnx::AttributeProto::STRING;
      else if (proto.has_t())
        attrType = onnx::AttributeProto::TENSOR;
      else if (proto.has_g())
        attrType = onnx::AttributeProto::GRAPH;
      else if (proto.floats_size())
        attrType = onnx::AttributeProto::FLOATS;
      else if (proto.ints_size())
        attrType = onnx::AttributeProto::INTS;
      else if (proto.strings_size())
        attrType = onnx::AttributeProto::STRINGS;
      else if (proto.tensors_size())
        attrType = onnx::AttributeProto::TENSORS;
      else if (proto.graphs_size())
        attrType = onnx::AttributeProto::GRAPHS;
      else
        return makeError(ErrorCode::BadAttribute, "set the attribute's type and value",
                         "{} has no value", label);
    }
    Attribute out;
    switch (attrType) {
    case onnx::AttributeProto::FLOAT:
      out = Attribute::ofFloat(proto.f());
      break;
    case onnx::AttributeProto::INT:
      out = Attribute::ofInt(proto.i());
      break;
    case onnx::AttributeProto::STRING:
      out = Attribute::ofString(proto.s());
      break;
    case onnx::AttributeProto::TENSOR: {
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor(proto.t(), std::nullopt, label + " "));
      out = Attribute::ofTensor(std::move(t));
      break;
    }
    case onnx::AttributeProto::GRAPH: {
      KILN_ASSIGN_OR_RETURN(GraphPtr g, buildGraph(proto.g(), owner, nullptr));
      out = Attribute::ofGraph(std::move(g));
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSOR:
      out = Attribute::ofSparseTensor({proto.sparse_tensor().SerializeAsString()});
      break;
    case onnx::AttributeProto::TYPE_PROTO:
      out = Attribute::ofTypeProto({proto.tp().SerializeAsString()});
      break;
    case onnx::AttributeProto::FLOATS:
      out = Attribute::ofFloats({proto.floats().begin(), proto.floats().end()});
      break;
    case onnx::AttributeProto::INTS:
      out = Attribute::ofInts({proto.ints().begin(), proto.ints().end()});
      break;
    case onnx::AttributeProto::STRINGS:
      out = Attribute::ofStrings({proto.strings().begin(), proto.strings().end()});
      break;
    case onnx::AttributeProto::TENSORS: {
      std::vector<Tensor> tensors;
      for (const auto& t : proto.tensors()) {
        KILN_ASSIGN_OR_RETURN(Tensor converted, tensor(t, std::nullopt, label + " "));
        tensors.push_back(std::move(converted));
      }
      out = Attribute::ofTensors(std::move(tensors));
      break;
    }
    case onnx::AttributeProto::GRAPHS: {
      std::vector<GraphPtr> graphs;
      for (const auto& g : proto.graphs()) {
        KILN_ASSIGN_OR_RETURN(GraphPtr converted, buildGraph(g, owner, nullptr));
        graphs.push_back(std::move(converted));
      }
      out = Attribute::ofGraphs(std::move(graphs));
      break;
    }
    case onnx::AttributeProto::SPARSE_TENSORS: {
      std::vector<OpaqueProto> items;
      for (const auto& s : proto.sparse_tensors())
        items.push_back({s.SerializeAsString()});
      out = Attribute::ofSparseTensors(std::move(items));
      break;
    }
    case onnx::AttributeProto::TYPE_PROTOS: {
      std::vector<OpaqueProto> items;
      for (const auto& t : proto.type_protos())
        items.push_back({t.SerializeAsString()});
      out = Attribute::ofTypeProtos(std::move(items));
      break;
    }
    default:
      return makeError(ErrorCode::BadAttribute, "use an AttributeProto.AttributeType value",
                       "{} has unknown type {}", label, static_cast<int>(attrType));
    }
    if (!proto.ref_attr_name().empty()) out.setRefAttrName(proto.ref_attr_name());
    if (!proto.doc_string().empty()) out.setDocString(proto.doc_string());
    return out;
  }

  // Graphs.
  // Orders nodes so producers come first, keeping the file's order where it already is valid.
  Expected<std::vector<int>> topologicalOrder(const onnx::GraphProto& proto,
                                              const std::string& graphText) {
    const int n = proto.node_size();
    std::unordered_map<std::string, int> producerOf;
    for (int i = 0; i < n; ++i)
      for (const auto& name : proto.node(i).output())
        if (!name.empty()) producerOf.emplace(name, i);
    std::vector<std::vector<int>> dependents(n);
    std::vector<int> pending(n, 0);
    for (int i = 0; i < n; ++i) {
      std::set<std::string> reads(proto.node(i).input().begin(), proto.node(i).input().end());
      for (const auto& attr : proto.node(i).attribute()) {
        if (attr.has_g()) collectOuterReferences(attr.g(), reads);
        for (const auto& g : attr.graphs())
          collectOuterReferences(g, reads);
      }
      std::set<int> deps;
      for (const auto& name : reads) {
        auto it = producerOf.find(name);
        if (it != producerOf.end()) deps.insert(it->second);
      }
      for (int d : deps) {
        dependents[d].push_back(i);
        ++pending[i];
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
    for (int i = 0; i < n; ++i)
      if (pending[i] == 0) ready.push(i);
    std::vector<int> order;
    order.reserve(n);
    while (!ready.empty()) {
      int i = ready.top();
      ready.pop();
      order.push_back(i);
      for (int d : dependents[i])
        if (--pending[d] == 0) ready.push(d);
    }
    if (static_cast<int>(order.size()) != n) {
      std::vector<std::string> stuck;
      for (int i = 0; i < n && stuck.size() < 5; ++i)
        if (pending[i] > 0) stuck.push_back(nodeLabel(proto.node(i)));
      return makeError(ErrorCode::GraphCycle,
                       "break the cycle: a node may not depend on its own outputs",
                       "{} has a cycle through {}", graphText, fmt::join(stuck, ", "));
    }
    return order;
  }

  // One node into `graph` before `anchor` (nullptr: appended); its inputs must be defined.
  // `locations` replace the node's own name as its location when given.
  Expected<Node*> addNode(Graph& graph, Node* anchor, const onnx::NodeProto& nodeProto,
                          const std::string& graphText, const std::vector<Location>* locations) {
    std::vector<Value*> inputs;
    for (const auto& name : nodeProto.input())
      inputs.push_back(name.empty() ? nullptr : graph.lookupValue(name));
    Node* node = graph.insertNodeBefore(anchor, nodeProto.op_type(), inputs,
                                        {nodeProto.output().begin(), nodeProto.output().end()});
    node->setName(nodeProto.name());
    node->setDomain(nodeProto.domain());
    node->setDocString(nodeProto.doc_string());
    if (locations)
      for (const Location& location : *locations)
        node->addLocation(location);
    else
      node->addLocation({nodeProto.name(), nodeProto.op_type()});
    std::string nodeText = fmt::format("{}: {}", graphText, nodeLabel(nodeProto));
    std::unordered_set<std::string> seenAttrs;
    for (const auto& attrProto : nodeProto.attribute()) {
      if (!seenAttrs.insert(attrProto.name()).second)
        return makeError(ErrorCode::BadAttribute, "set each attribute once",
                         "{} sets attribute '{}' twice", nodeText, attrProto.name());
      KILN_ASSIGN_OR_RETURN(Attribute attr, attribute(attrProto, &graph, nodeText));
      node->setAttribute(attrProto.name(), std::move(attr));
    }
    // Every consumer (executor, checks, both backends) reads the attributes by the schema's
    // kinds: a wrong kind is refused here, once, instead of surfacing differently in each.
    std::string kindReason =
        ops::attributeKindReason(*node, opsets_ ? opsets_->opsetVersion(node->domain()) : 0);
    if (!kindReason.empty())
      return makeError(ErrorCode::BadAttribute,
                       "give the attribute the kind the ONNX operator schema names, in the "
                       "exporter",
                       "{}: {}", nodeText, kindReason);
    return node;
  }

  // Nodes into an existing graph (importOnnxNodes).
 public:
  Expected<std::vector<Node*>> importNodes(Graph& graph, Node* anchor,
                                           const std::vector<const onnx::NodeProto*>& nodes,
                                           const Model& model,
                                           const std::vector<Location>& locations) {
    opsets_ = &model;
    std::string graphText = fmt::format("graph '{}'", graph.name());
    std::vector<Node*> added;
    for (const onnx::NodeProto* nodeProto : nodes) {
      for (const auto& name : nodeProto->input())
        if (!name.empty() && !graph.lookupValue(name))
          return makeError(ErrorCode::UndefinedInput, "feed it from an earlier node",
                           "{}: {} reads '{}', which nothing produces", graphText,
                           nodeLabel(*nodeProto), name);
      for (const auto& name : nodeProto->output())
        if (!name.empty() && graph.findLocalValue(name))
          return makeError(ErrorCode::DuplicateName, "give each new value a new name",
                           "{}: {} redefines '{}'", graphText, nodeLabel(*nodeProto), name);
      KILN_ASSIGN_OR_RETURN(Node * node, addNode(graph, anchor, *nodeProto, graphText, &locations));
      KILN_TRY(ops::validateNode(*node, model.opsetVersion(node->domain()), graphText));
      added.push_back(node);
    }
    return added;
  }

 private:
  Expected<GraphPtr> buildGraph(const onnx::GraphProto& proto, Graph* parent,
                                const std::vector<ScannedInitializer>* scanned) {
    auto graph = std::make_shared<Graph>(proto.name(), parent);
    graph->setDocString(proto.doc_string());
    std::string graphText = fmt::format("graph '{}'", proto.name());
    const std::string dupHint = "every value name in a graph must be defined once";

    if (proto.sparse_initializer_size() > 0)
      return makeError(ErrorCode::BadAttribute, "densify sparse initializers before converting",
                       "{} has {} sparse initializers, which are not supported", graphText,
                       proto.sparse_initializer_size());
    int initCount = scanned ? static_cast<int>(scanned->size()) : proto.initializer_size();
    for (int i = 0; i < initCount; ++i) {
      onnx::TensorProto parsed;
      std::optional<ByteSpan> raw;
      if (scanned) {
        const auto& item = (*scanned)[static_cast<size_t>(i)];
        if (!parsed.ParseFromString(item.tensorBytes))
          return makeError(ErrorCode::NotProtobuf, "the file is damaged; export it again",
                           "{}: initializer #{} is not a valid TensorProto", graphText, i);
        raw = item.rawData;
      }
      const onnx::TensorProto& init = scanned ? parsed : proto.initializer(i);
      if (init.name().empty())
        return makeError(ErrorCode::DuplicateName, "give every initializer a name",
                         "{}: initializer #{} has no name", graphText, i);
      KILN_ASSIGN_OR_RETURN(Tensor t, tensor(init, raw, graphText + ": initializer "));
      if (!graph->addInitializer(init.name(), std::move(t)))
        return makeError(ErrorCode::DuplicateName, dupHint, "{}: initializer '{}' is defined twice",
                         graphText, init.name());
    }
    for (const auto& in : proto.input()) {
      Value* value = graph->findLocalValue(in.name());
      if (value && (!value->isInitializer() || value->isGraphInput()))
        return makeError(ErrorCode::DuplicateName, dupHint, "{}: input '{}' is declared twice",
                         graphText, in.name());
      if (in.name().empty())
        return makeError(ErrorCode::DuplicateName, "give every graph input a name",
                         "{} has an unnamed input", graphText);
      if (!value) value = graph->addValue(in.name());
      KILN_TRY(applyValueInfo(value, in, graphText, "input"));
      graph->addInput(value);
    }
    std::unordered_set<std::string> produced;
    for (const auto& node : proto.node())
      for (const auto& name : node.output()) {
        if (name.empty()) continue;
        if (graph->findLocalValue(name) || !produced.insert(name).second)
          return makeError(ErrorCode::DuplicateName, dupHint, "{}: {} redefines '{}'", graphText,
                           nodeLabel(node), name);
      }
    for (const auto& node : proto.node())
      for (const auto& name : node.input())
        if (!name.empty() && !produced.count(name) && !graph->lookupValue(name))
          return makeError(ErrorCode::UndefinedInput,
                           "feed it from a graph input, an initializer or another node's output",
                           "{}: {} reads '{}', which nothing produces", graphText, nodeLabel(node),
                           name);
    KILN_ASSIGN_OR_RETURN(std::vector<int> order, topologicalOrder(proto, graphText));

    for (int index : order) {
      auto added = addNode(*graph, nullptr, proto.node(index), graphText, nullptr);
      if (!added) return added.status();
    }
    for (const auto& out : proto.output()) {
      Value* value = graph->lookupValue(out.name());
      if (!value)
        return makeError(ErrorCode::UndefinedInput,
                         "produce each graph output with a node, input or initializer",
                         "{}: output '{}' is never produced", graphText, out.name());
      if (value->owner() == graph.get()) KILN_TRY(applyValueInfo(value, out, graphText, "output"));
      graph->addOutput(value);
    }
    std::unordered_set<const Value*> annotated;
    for (const auto& info : proto.value_info()) {
      Value* value = graph->findLocalValue(info.name());
      if (!value) {
        spdlog::debug("{}: value_info '{}' names no value; dropped", graphText, info.name());
        continue;
      }
      if (value->isGraphInput() || value->isGraphOutput() || !annotated.insert(value).second)
        continue;
      KILN_TRY(applyValueInfo(value, info, graphText, "value_info"));
      graph->addAnnotatedValue(value);
    }
    return graph;
  }

  std::string displayName_;
  std::string baseDir_;
  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  const MappedFile* file_;
  const Model* opsets_ = nullptr; // the model being built: its opset imports
  std::map<std::string, std::shared_ptr<const MappedFile>> externalFiles_;
};

// True when the first bytes are printable text: a wire-format complaint about such a file would
// only confuse, since the user most likely passed a text file (or ONNX text syntax) by mistake.
bool looksLikeText(const uint8_t* data, size_t size) {
  size_t n = std::min<size_t>(size, 256);
  for (size_t i = 0; i < n; ++i) {
    uint8_t c = data[i];
    if (!(c >= 0x20 && c < 0x7f) && c != '\n' && c != '\r' && c != '\t') return false;
  }
  return n > 0;
}

// Files users pass by mistake where an ONNX model belongs, by their leading bytes: an Ascend
// offline model ("IMOD"), a MindSpore Lite model (flatbuffer identifier "MSL" at byte 4).
std::string otherModelFormat(const uint8_t* data, size_t size) {
  if (size >= 4 && std::memcmp(data, "IMOD", 4) == 0)
    return "an Ascend .om (offline model: IMOD header)";
  if (size >= 8 && std::memcmp(data + 4, "MSL", 3) == 0) return "a MindSpore Lite .ms model";
  return "";
}

Expected<Model> importScanned(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                              const MappedFile* file, const std::string& displayName,
                              const std::string& baseDir, const OnnxImportOptions& options) {
  if (std::string other = otherModelFormat(data, size); !other.empty())
    return Status(ErrorCode::NotProtobuf,
                  fmt::format("{}: this is {}, not an ONNX model", displayName, other),
                  "pass the ONNX model it was made from; to get ONNX back from it, run `kiln "
                  "convert FILE --to onnx -o model.onnx`");
  auto scanned = onnx_import::scanModel(data, size);
  if ((!scanned || !scanned->hasGraph) && looksLikeText(data, size))
    return Status(ErrorCode::NotProtobuf,
                  fmt::format("{}: file is text, not a binary ONNX model", displayName),
                  "pass a binary ONNX model (.onnx); ONNX text syntax belongs in a .onnxtxt file");
  if (!scanned) return scanned.status().withContext(displayName);
  if (!scanned->hasGraph)
    return Status(ErrorCode::NoGraph,
                  fmt::format("{}: no ONNX graph found (is this an ONNX model?)", displayName),
                  "pass an ONNX ModelProto file");
  if (scanned->modelBytes.size() > INT_MAX || scanned->graphBytes.size() > INT_MAX)
    return Status(ErrorCode::SizeOverflow,
                  fmt::format("{}: graph structure exceeds 2 GiB", displayName),
                  "move large constants into initializers");
  onnx::ModelProto proto;
  if (!proto.ParseFromString(scanned->modelBytes) ||
      !proto.mutable_graph()->ParseFromString(scanned->graphBytes))
    return Status(ErrorCode::NotProtobuf,
                  fmt::format("{}: not a valid ONNX ModelProto", displayName),
                  "pass an ONNX model (.onnx) file");
  Importer importer(displayName, baseDir, data, std::move(owner), file);
  auto model = importer.run(proto, &scanned->initializers, options);
  if (!model) return model.status().withContext(displayName);
  return model;
}

} // namespace

Expected<Model> importOnnxFile(const std::string& path, const OnnxImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  if (file->size() == 0)
    return Status(ErrorCode::Truncated, fmt::format("{}: file is empty", path),
                  "export the model again");
  std::string baseDir = fs::path(path).parent_path().string();
  if (baseDir.empty()) baseDir = ".";
  const MappedFile* raw = file.get();
  return importScanned(raw->data(), raw->size(), std::move(file), raw, path, baseDir, options);
}

Expected<Model> importOnnxBytes(const uint8_t* data, size_t size, std::shared_ptr<const void> owner,
                                const std::string& displayName, const std::string& baseDir,
                                const OnnxImportOptions& options) {
  if (size == 0)
    return Status(ErrorCode::Truncated, fmt::format("{}: no bytes", displayName),
                  "export the model again");
  return importScanned(data, size, std::move(owner), nullptr, displayName, baseDir, options);
}

Expected<Tensor> tensorFromOnnx(const onnx::TensorProto& proto, const std::string& baseDir,
                                const std::string& label) {
  Importer importer(label, baseDir, nullptr, nullptr, nullptr);
  return importer.tensor(proto, std::nullopt, "");
}

Expected<ValueType> valueTypeFromOnnx(const onnx::TypeProto& proto, const std::string& label) {
  return Importer::type(proto, label);
}

Expected<Model> importOnnxTextFile(const std::string& path, const OnnxImportOptions& options) {
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<const MappedFile> file, MappedFile::open(path));
  std::string text(reinterpret_cast<const char*>(file->data()), file->size());
  onnx::ModelProto proto;
  auto status = onnx::OnnxParser::Parse(proto, text.c_str());
  if (!status.IsOK())
    return Status(ErrorCode::NotProtobuf,
                  fmt::format("{}: ONNX text syntax error: {}", path, status.ErrorMessage()),
                  "fix the text at the position named");
  std::string baseDir = fs::path(path).parent_path().string();
  return importOnnxProto(proto, path, baseDir.empty() ? "." : baseDir, options);
}

Expected<std::vector<Node*>> importOnnxNodes(Graph& graph, Node* anchor,
                                             const std::vector<const onnx::NodeProto*>& nodes,
                                             const Model& model,
                                             const std::vector<Location>& locations) {
  Importer importer("", "", nullptr, nullptr, nullptr);
  return importer.importNodes(graph, anchor, nodes, model, locations);
}

Expected<Model> importOnnxProto(const onnx::ModelProto& proto, const std::string& displayName,
                                const std::string& baseDir, const OnnxImportOptions& options) {
  if (!proto.has_graph())
    return Status(ErrorCode::NoGraph, fmt::format("{}: no ONNX graph", displayName),
                  "pass an ONNX ModelProto");
  Importer importer(displayName, baseDir, nullptr, nullptr, nullptr);
  auto model = importer.run(proto, nullptr, options);
  if (!model) return model.status().withContext(displayName);
  return model;
}

std::optional<std::string> unsupportedOnnxElementType(const Status& importError) {
  if (importError.code() != ErrorCode::UnknownDType) return std::nullopt;
  for (const NewerElementType& n : kNewerElementTypes)
    if (importError.message().find(newerTypeLabel(n)) != std::string::npos) return n.name;
  return std::nullopt;
}

} // namespace kiln
