// Text printer for graphs; output depends only on graph contents, so it is stable across runs.
#include "kiln/ir/printer.h"

#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace kiln {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string valueRef(const Value* value) { return value ? "%" + value->name() : "_"; }

std::string valueDecl(const Value* value) {
  if (!value) return "_";
  std::string type = typeToText(value->type());
  return type.empty() ? valueRef(value) : valueRef(value) + ": " + type;
}

std::string tensorSummary(const Tensor& tensor) {
  std::string head =
      fmt::format("{}{}", dtypeName(tensor.dtype()), Shape::fromStatic(tensor.dims()).toString());
  if (tensor.dtype() == DType::String)
    return head + fmt::format(" <{} strings>", tensor.stringValues().size());
  // Small tensors are printed in full so golden tests can check folded constants.
  if (tensor.elementCount() <= 8 && tensor.data()) {
    std::vector<std::string> items;
    switch (tensor.dtype()) {
    case DType::Float32:
      for (float v : tensor.copyValues<float>())
        items.push_back(fmt::format("{}", v));
      break;
    case DType::Int64:
      for (int64_t v : tensor.copyValues<int64_t>())
        items.push_back(fmt::format("{}", v));
      break;
    case DType::Int32:
      for (int32_t v : tensor.copyValues<int32_t>())
        items.push_back(fmt::format("{}", v));
      break;
    default:
      break;
    }
    if (!items.empty()) return head + " {" + fmt::format("{}", fmt::join(items, ", ")) + "}";
  }
  return head + fmt::format(" <{} bytes>", tensor.byteSize());
}

class Printer {
 public:
  Printer(std::ostream& out, const PrintOptions& options) : out_(out), options_(options) {}

  void graph(const Graph& g, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    out_ << "graph " << quoted(g.name()) << " (";
    for (size_t i = 0; i < g.inputs().size(); ++i)
      out_ << (i ? ", " : "") << valueDecl(g.inputs()[i]);
    out_ << ") -> (";
    for (size_t i = 0; i < g.outputs().size(); ++i)
      out_ << (i ? ", " : "") << valueDecl(g.outputs()[i]);
    out_ << ") {\n";
    for (const Value* init : g.initializers())
      out_ << pad << "  init " << valueRef(init) << " = " << tensorSummary(init->initializer())
           << "\n";
    for (const auto& node : g.nodes())
      this->node(*node, indent + 1);
    out_ << pad << "}";
  }

 private:
  void node(const Node& n, int indent) {
    std::string pad(static_cast<size_t>(indent) * 2, ' ');
    out_ << pad;
    for (size_t i = 0; i < n.outputs().size(); ++i)
      out_ << (i ? ", " : "") << valueDecl(n.outputs()[i]);
    if (!n.outputs().empty()) out_ << " = ";
    out_ << (n.domain().empty() ? "" : n.domain() + "::") << n.opType() << "(";
    for (size_t i = 0; i < n.inputs().size(); ++i)
      out_ << (i ? ", " : "") << valueRef(n.inputs()[i]);
    out_ << ")";
    if (!n.attributes().empty()) {
      out_ << " {";
      bool first = true;
      for (const auto& [name, attr] : n.attributes()) {
        out_ << (first ? "" : ", ") << name << " = ";
        attribute(attr, indent);
        first = false;
      }
      out_ << "}";
    }
    if (options_.locations) {
      std::vector<std::string> names;
      for (const Location& loc : n.locations())
        if (!loc.nodeName.empty()) names.push_back(quoted(loc.nodeName));
      if (!names.empty()) out_ << " @" << fmt::format("{}", fmt::join(names, "+"));
    }
    out_ << "\n";
  }

  void attribute(const Attribute& a, int indent) {
    switch (a.kind()) {
    case AttrKind::Float:
      out_ << fmt::format("{}", a.asFloat());
      break;
    case AttrKind::Int:
      out_ << a.asInt();
      break;
    case AttrKind::String:
      out_ << quoted(a.asString());
      break;
    case AttrKind::Tensor:
      out_ << tensorSummary(a.asTensor());
      break;
    case AttrKind::Graph:
      graph(*a.asGraph(), indent);
      break;
    case AttrKind::SparseTensor:
      out_ << fmt::format("<sparse_tensor {} bytes>", a.asSparseTensor().bytes.size());
      break;
    case AttrKind::TypeProto:
      out_ << fmt::format("<type_proto {} bytes>", a.asTypeProto().bytes.size());
      break;
    case AttrKind::Floats:
      out_ << fmt::format("[{}]", fmt::join(a.asFloats(), ", "));
      break;
    case AttrKind::Ints:
      out_ << fmt::format("[{}]", fmt::join(a.asInts(), ", "));
      break;
    case AttrKind::Strings: {
      out_ << "[";
      for (size_t i = 0; i < a.asStrings().size(); ++i)
        out_ << (i ? ", " : "") << quoted(a.asStrings()[i]);
      out_ << "]";
      break;
    }
    case AttrKind::Tensors: {
      out_ << "[";
      for (size_t i = 0; i < a.asTensors().size(); ++i)
        out_ << (i ? ", " : "") << tensorSummary(a.asTensors()[i]);
      out_ << "]";
      break;
    }
    case AttrKind::Graphs: {
      out_ << "[";
      for (size_t i = 0; i < a.asGraphs().size(); ++i) {
        if (i) out_ << ", ";
        graph(*a.asGraphs()[i], indent);
      }
      out_ << "]";
      break;
    }
    case AttrKind::SparseTensors:
      out_ << fmt::format("<{} sparse tensors>", a.asSparseTensors().size());
      break;
    case AttrKind::TypeProtos:
      out_ << fmt::format("<{} type protos>", a.asTypeProtos().size());
      break;
    }
  }

  std::ostream& out_;
  const PrintOptions& options_;
};

} // namespace

std::string typeToText(const ValueType& type) {
  switch (type.kind) {
  case TypeKind::Unknown:
    return "";
  case TypeKind::Tensor:
    return std::string(dtypeName(type.dtype)) + type.shape.toString();
  case TypeKind::SparseTensor:
    return "sparse";
  case TypeKind::Sequence:
    return "seq";
  case TypeKind::Map:
    return "map";
  case TypeKind::Optional:
    return "optional";
  }
  return "";
}

void printGraph(std::ostream& out, const Graph& graph, const PrintOptions& options) {
  Printer(out, options).graph(graph, 0);
  out << "\n";
}

void printModel(std::ostream& out, const Model& model, const PrintOptions& options) {
  out << "model ir_version=" << model.irVersion << " opsets={";
  for (size_t i = 0; i < model.opsets.size(); ++i)
    out << (i ? ", " : "") << (model.opsets[i].domain.empty() ? "ai.onnx" : model.opsets[i].domain)
        << ":" << model.opsets[i].version;
  out << "}\n";
  printGraph(out, *model.graph, options);
}

std::string modelToText(const Model& model, const PrintOptions& options) {
  std::ostringstream out;
  printModel(out, model, options);
  return out.str();
}

} // namespace kiln
