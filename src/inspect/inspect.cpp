// Model summaries shared by `kiln inspect` text and JSON output.
#include "kiln/inspect.h"

#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/target.h"
#include "kiln/frontend/onnx.h"
#include "kiln/ir/printer.h"

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
                     model.producerName, model.producerVersion);
  out += "opsets:";
  for (const auto& opset : model.opsets)
    out += fmt::format(" {}:{}", opset.domain.empty() ? "ai.onnx" : opset.domain, opset.version);
  out += "\ninputs:\n";
  for (const Value* in : realInputs(*model.graph))
    out += fmt::format("  {}: {}\n", in->name(), typeToText(in->type()));
  out += "outputs:\n";
  for (const Value* o : model.graph->outputs())
    out += fmt::format("  {}: {}\n", o->name(), typeToText(o->type()));
  out += fmt::format("nodes: {} ({} subgraphs)\n", summary.nodeCount, summary.subgraphCount);
  out += "ops:\n";
  for (const auto& [op, count] : summary.opCounts)
    out += fmt::format("  {:<24} {}\n", op, count);
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
  return out.dump(2) + "\n";
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
