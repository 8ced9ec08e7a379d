// Model summaries shared by `kiln inspect` text and JSON output.
#include "kiln/inspect.h"

#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/target.h"
#include "kiln/frontend/onnx.h"
#include "kiln/ir/printer.h"
#include "kiln/support/display.h"
#include "kiln/support/json_text.h"

namespace kiln {
namespace {

struct Summary {
  std::map<std::string, size_t> opCounts; // sorted: stable output
  size_t nodeCount = 0;
  uint64_t parameterCount = 0;
  uint64_t parameterBytes = 0;
  size_t subgraphCount = 0;
};

void accumulate(const Graph& graph, Summary& summary) {
  for (const Value* init : graph.initializers()) {
    summary.parameterCount += init->initializer().elementCount();
    summary.parameterBytes += init->initializer().byteSize();
  }
  for (const auto& node : graph.nodes()) {
    ++summary.nodeCount;
    // Weights stored as Constant nodes count as parameters too (many exporters write them so).
    if (node->opType() == "Constant" && (node->domain().empty() || node->domain() == "ai.onnx"))
      if (const Attribute* value = node->attribute("value");
          value && value->kind() == AttrKind::Tensor) {
        summary.parameterCount += value->asTensor().elementCount();
        summary.parameterBytes += value->asTensor().byteSize();
      }
    std::string op = node->domain().empty() || node->domain() == "ai.onnx"
                         ? node->opType()
                         : node->domain() + "::" + node->opType();
    ++summary.opCounts[op];
    for (Graph* sub : node->subgraphs()) {
      ++summary.subgraphCount;
      accumulate(*sub, summary);
    }
  }
}

nlohmann::json valueJson(const Value* value) {
  nlohmann::json out = {{"name", value->name()}};
  const ValueType& type = value->type();
  if (type.kind == TypeKind::Tensor) {
    out["dtype"] = dtypeName(type.dtype);
    if (type.shape.hasRank()) {
      nlohmann::json dims = nlohmann::json::array();
      for (const Dim& d : type.shape.dims()) {
        if (d.isStatic())
          dims.push_back(d.value());
        else if (d.isSymbolic())
          dims.push_back(d.symbol());
        else
          dims.push_back(nullptr);
      }
      out["shape"] = dims;
    }
  } else {
    out["type"] = typeToText(type);
  }
  return out;
}

std::vector<const Value*> realInputs(const Graph& graph) {
  std::vector<const Value*> out;
  for (const Value* in : graph.inputs())
    if (!in->isInitializer()) out.push_back(in);
  return out;
}

} // namespace

std::string inspectText(const Model& model) {
  Summary summary;
  accumulate(*model.graph, summary);
  std::string out = fmt::format("model: {}\n", model.sourcePath);
  out += fmt::format("format: onnx (ir_version {}, producer '{}' {})\n", model.irVersion,
                     displayName(model.producerName), displayName(model.producerVersion));
  out += "opsets:";
  for (const auto& opset : model.opsets)
    out += fmt::format(" {}:{}", opset.domain.empty() ? "ai.onnx" : displayName(opset.domain),
                       opset.version);
  out += "\ninputs:\n";
  for (const Value* in : realInputs(*model.graph))
    out += fmt::format("  {}: {}\n", displayName(in->name()), typeToText(in->type()));
  out += "outputs:\n";
  for (const Value* o : model.graph->outputs())
    out += fmt::format("  {}: {}\n", displayName(o->name()), typeToText(o->type()));
  out += fmt::format("nodes: {} ({} subgraphs)\n", summary.nodeCount, summary.subgraphCount);
  out += "ops:\n";
  for (const auto& [op, count] : summary.opCounts)
    out += fmt::format("  {:<24} {}\n", displayName(op), count);
  out += fmt::format("parameters: {} elements, {} bytes\n", summary.parameterCount,
                     summary.parameterBytes);
  return out;
}

std::string inspectJson(const Model& model) {
  Summary summary;
  accumulate(*model.graph, summary);
  nlohmann::json out;
  out["model"] = model.sourcePath;
  out["format"] = "onnx";
  out["ir_version"] = model.irVersion;
  out["producer"] = {{"name", model.producerName}, {"version", model.producerVersion}};
  nlohmann::json opsets = nlohmann::json::object();
  for (const auto& opset : model.opsets)
    opsets[opset.domain.empty() ? "ai.onnx" : opset.domain] = opset.version;
  out["opsets"] = opsets;
  out["inputs"] = nlohmann::json::array();
  for (const Value* in : realInputs(*model.graph))
    out["inputs"].push_back(valueJson(in));
  out["outputs"] = nlohmann::json::array();
  for (const Value* o : model.graph->outputs())
    out["outputs"].push_back(valueJson(o));
  out["node_count"] = summary.nodeCount;
  out["subgraph_count"] = summary.subgraphCount;
  out["ops"] = summary.opCounts;
  out["parameters"] = {{"elements", summary.parameterCount}, {"bytes", summary.parameterBytes}};
  return jsonText(out, 2) + "\n";
}

namespace {

std::string dotQuote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n')
      out += "\\n"; // a line break inside a dot label
    else
      out += c;
  }
  return out + "\"";
}

std::string valueLabel(const Value* v) {
  return fmt::format("{}\n{}", v->name(), typeToText(v->type()));
}

void dotGraph(const Graph& graph, const std::string& prefix, std::string& out,
              std::map<const Value*, std::string>& producers, size_t& clusters) {
  for (const Value* in : realInputs(graph)) {
    std::string id = prefix + "in_" + std::to_string(producers.size());
    producers[in] = id;
    out += fmt::format("  {} [shape=ellipse, style=filled, fillcolor=lightblue, label={}];\n",
                       dotQuote(id), dotQuote(valueLabel(in)));
  }
  size_t index = 0;
  for (const auto& node : graph.nodes()) {
    std::string id = prefix + "n" + std::to_string(index++);
    std::string op = node->domain().empty() || node->domain() == "ai.onnx"
                         ? node->opType()
                         : node->domain() + "::" + node->opType();
    std::string name = node->name();
    if (name.empty() && !node->outputs().empty() && node->output(0)) name = node->output(0)->name();
    std::string label = name.empty() ? op : fmt::format("{}\n{}", op, name);
    out += fmt::format("  {} [shape=box, label={}];\n", dotQuote(id), dotQuote(label));
    for (const Value* in : node->inputs()) {
      if (!in) continue;
      auto it = producers.find(in);
      if (it == producers.end()) {
        if (!in->isInitializer()) continue; // an outer-scope value seen from a subgraph
        std::string wid = prefix + "w_" + std::to_string(producers.size());
        it = producers.emplace(in, wid).first;
        out += fmt::format("  {} [shape=note, fontsize=9, label={}];\n", dotQuote(wid),
                           dotQuote(valueLabel(in)));
      }
      out += fmt::format("  {} -> {} [label={}];\n", dotQuote(it->second), dotQuote(id),
                         dotQuote(typeToText(in->type())));
    }
    for (const Value* o : node->outputs())
      if (o) producers[o] = id;
    for (const Graph* sub : node->subgraphs()) {
      std::string subPrefix = prefix + "s" + std::to_string(clusters) + "_";
      out += fmt::format("  subgraph cluster_{} {{\n  label={};\n", clusters++,
                         dotQuote(fmt::format("{} of {}", sub->name(), label)));
      dotGraph(*sub, subPrefix, out, producers, clusters);
      out += "  }\n";
    }
  }
  for (const Value* o : graph.outputs()) {
    std::string id = prefix + "out_" + std::to_string(producers.size());
    out += fmt::format("  {} [shape=ellipse, style=filled, fillcolor=palegreen, label={}];\n",
                       dotQuote(id), dotQuote(valueLabel(o)));
    if (auto it = producers.find(o); it != producers.end())
      out += fmt::format("  {} -> {};\n", dotQuote(it->second), dotQuote(id));
  }
}

} // namespace

std::string inspectDot(const Model& model) {
  std::string out =
      fmt::format("digraph {} {{\n  rankdir=TB;\n  node [fontname=\"Helvetica\"];\n",
                  dotQuote(model.graph->name().empty() ? "model" : model.graph->name()));
  std::map<const Value*, std::string> producers;
  size_t clusters = 0;
  dotGraph(*model.graph, "", out, producers, clusters);
  return out + "}\n";
}

Expected<Model> loadModel(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  if (const TargetHooks* target = findTargetForExtension(ext); target && target->read)
    return target->read(path);
  if (ext == ".ms" || ext == ".om")
    return makeError(ErrorCode::UnsupportedFormat,
                     "pass an .onnx model; this build has no reader for this format",
                     "{}: reading {} files is not supported", path, ext);
  if (ext == ".onnxtxt") return importOnnxTextFile(path);
  return importOnnxFile(path);
}

} // namespace kiln
