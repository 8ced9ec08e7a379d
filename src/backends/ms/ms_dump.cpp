// .ms reader for `kiln inspect`: verifies the FlatBuffer and dumps graph, tensors and nodes as
// JSON.
#include <map>
#include <string>

#include <flatbuffers/flatbuffers.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/ms.h"
#include "kiln/support/display.h"
#include "kiln/support/json_text.h"
#include "kiln/support/mapped_file.h"
#include "ms_model_schema.h"

namespace kiln {

namespace {

namespace fb = kiln::msfb;
using nlohmann::json;

template <typename T> json vectorJson(const flatbuffers::Vector<T>* values) {
  json out = json::array();
  if (values)
    for (auto v : *values)
      out.push_back(v);
  return out;
}

// Enum names where the schema knows the value; the raw number otherwise, so nothing is hidden.
template <typename E> json enumJson(const char* name, E value) {
  if (name && *name) return name;
  return static_cast<int64_t>(value);
}

std::string primitiveName(fb::PrimitiveType type) {
  const char* name = fb::EnumNamePrimitiveType(type);
  if (name && *name) return name;
  return fmt::format("PrimitiveType#{}", static_cast<int>(type));
}

json activationJson(fb::ActivationType type) {
  return enumJson(fb::EnumNameActivationType(type), type);
}

json formatJson(fb::Format format) { return enumJson(fb::EnumNameFormat(format), format); }

json padModeJson(fb::PadMode mode) { return enumJson(fb::EnumNamePadMode(mode), mode); }

template <typename Pool> json poolAttributes(const Pool* p) {
  return {{"kernel_size", vectorJson(p->kernel_size())},
          {"strides", vectorJson(p->strides())},
          {"pad", vectorJson(p->pad())},
          {"pad_mode", padModeJson(p->pad_mode())},
          {"round_mode", enumJson(fb::EnumNameRoundMode(p->round_mode()), p->round_mode())},
          {"format", formatJson(p->format())},
          {"global", p->global()},
          {"activation_type", activationJson(p->activation_type())}};
}

// The attributes of the op tables the schema models; other ops dump an empty object.
json attributesJson(const fb::Primitive* primitive) {
  switch (primitive->value_type()) {
  case fb::PrimitiveType_Conv2DFusion: {
    auto* c = primitive->value_as_Conv2DFusion();
    if (!c) break;
    return {{"format", formatJson(c->format())},
            {"kernel_size", vectorJson(c->kernel_size())},
            {"stride", vectorJson(c->stride())},
            {"dilation", vectorJson(c->dilation())},
            {"pad_mode", padModeJson(c->pad_mode())},
            {"pad_list", vectorJson(c->pad_list())},
            {"group", c->group()},
            {"in_channel", c->in_channel()},
            {"out_channel", c->out_channel()},
            {"activation_type", activationJson(c->activation_type())}};
  }
  case fb::PrimitiveType_Activation: {
    auto* a = primitive->value_as_Activation();
    if (!a) break;
    return {{"activation_type", activationJson(a->activation_type())},
            {"alpha", a->alpha()},
            {"min_val", a->min_val()},
            {"max_val", a->max_val()},
            {"approximate", a->approximate()}};
  }
  case fb::PrimitiveType_MaxPoolFusion:
    if (auto* p = primitive->value_as_MaxPoolFusion()) return poolAttributes(p);
    break;
  case fb::PrimitiveType_AvgPoolFusion:
    if (auto* p = primitive->value_as_AvgPoolFusion()) return poolAttributes(p);
    break;
  case fb::PrimitiveType_MatMulFusion: {
    auto* m = primitive->value_as_MatMulFusion();
    if (!m) break;
    return {{"transpose_a", m->transpose_a()},
            {"transpose_b", m->transpose_b()},
            {"activation_type", activationJson(m->activation_type())}};
  }
  case fb::PrimitiveType_FullConnection: {
    auto* f = primitive->value_as_FullConnection();
    if (!f) break;
    return {{"has_bias", f->has_bias()},
            {"use_axis", f->use_axis()},
            {"axis", f->axis()},
            {"activation_type", activationJson(f->activation_type())}};
  }
  case fb::PrimitiveType_AddFusion:
    if (auto* f = primitive->value_as_AddFusion())
      return {{"activation_type", activationJson(f->activation_type())}};
    break;
  case fb::PrimitiveType_SubFusion:
    if (auto* f = primitive->value_as_SubFusion())
      return {{"activation_type", activationJson(f->activation_type())}};
    break;
  case fb::PrimitiveType_MulFusion:
    if (auto* f = primitive->value_as_MulFusion())
      return {{"activation_type", activationJson(f->activation_type())}};
    break;
  case fb::PrimitiveType_DivFusion:
    if (auto* f = primitive->value_as_DivFusion())
      return {{"activation_type", activationJson(f->activation_type())}};
    break;
  case fb::PrimitiveType_Concat:
    if (auto* c = primitive->value_as_Concat()) return {{"axis", c->axis()}};
    break;
  case fb::PrimitiveType_Softmax:
    if (auto* s = primitive->value_as_Softmax()) return {{"axis", vectorJson(s->axis())}};
    break;
  default:
    break;
  }
  return json::object();
}

json tensorJson(const fb::Tensor* t, size_t index) {
  json out;
  out["index"] = index;
  out["name"] = t->name() ? t->name()->str() : "";
  out["dataType"] = t->dataType();
  const char* typeName = fb::EnumNameTypeId(static_cast<fb::TypeId>(t->dataType()));
  out["dataTypeName"] = typeName ? typeName : "";
  out["dims"] = vectorJson(t->dims());
  out["format"] = formatJson(t->format());
  out["nodeType"] = t->nodeType();
  out["dataBytes"] = t->data() ? t->data()->size() : 0;
  out["quantParams"] = t->quantParams() ? t->quantParams()->size() : 0;
  if (t->weightQuantCompressType() != fb::WeightQuantCompressType_NONE)
    out["weightQuantCompressType"] =
        enumJson(fb::EnumNameWeightQuantCompressType(t->weightQuantCompressType()),
                 t->weightQuantCompressType());
  if (t->externalData() && t->externalData()->size() > 0) {
    json external = json::array();
    for (const fb::ExternalData* e : *t->externalData())
      external.push_back({{"location", e->location() ? e->location()->str() : ""},
                          {"offset", e->offset()},
                          {"length", e->length()}});
    out["externalData"] = external;
  }
  return out;
}

// Index-list entries for graph inputs/outputs, with the tensor's name and shape when in range.
json ioJson(const flatbuffers::Vector<uint32_t>* indices,
            const flatbuffers::Vector<flatbuffers::Offset<fb::Tensor>>* tensors) {
  json out = json::array();
  if (!indices) return out;
  for (uint32_t i : *indices) {
    json entry = {{"index", i}};
    if (tensors && i < tensors->size()) {
      const fb::Tensor* t = tensors->Get(i);
      entry["name"] = t->name() ? t->name()->str() : "";
      entry["dataType"] = t->dataType();
      entry["dims"] = vectorJson(t->dims());
    }
    out.push_back(entry);
  }
  return out;
}

Expected<json> msJson(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(auto file, MappedFile::open(path));
  // Same check the runtime runs before it trusts any offset in the file.
  flatbuffers::Verifier verifier(file->data(), file->size(), ms::kVerifierMaxDepth,
                                 ms::kVerifierMaxTables);
  if (file->size() < 8 || !fb::MetaGraphBufferHasIdentifier(file->data()) ||
      !fb::VerifyMetaGraphBuffer(verifier))
    return makeError(
        ErrorCode::MsFileInvalid, "pass a complete .ms file written by converter_lite or kiln",
        "{}: not a valid .ms file (FlatBuffers verification failed, {} bytes)", path, file->size());
  const fb::MetaGraph* graph = fb::GetMetaGraph(file->data());
  const auto* tensors = graph->allTensors();

  json out;
  out["format"] = "ms";
  out["version"] = graph->version() ? graph->version()->str() : "";
  out["name"] = graph->name() ? graph->name()->str() : "";
  out["fmkType"] = graph->fmkType();
  out["inputs"] = ioJson(graph->inputIndex(), tensors);
  out["outputs"] = ioJson(graph->outputIndex(), tensors);

  out["tensors"] = json::array();
  if (tensors)
    for (size_t i = 0; i < tensors->size(); ++i)
      out["tensors"].push_back(tensorJson(tensors->Get(i), i));

  out["nodes"] = json::array();
  std::map<std::string, int> opCounts;
  if (graph->nodes()) {
    for (const fb::CNode* node : *graph->nodes()) {
      json n;
      n["name"] = node->name() ? node->name()->str() : "";
      const fb::Primitive* primitive = node->primitive();
      std::string type = primitive ? primitiveName(primitive->value_type()) : "";
      n["type"] = type;
      n["inputs"] = vectorJson(node->inputIndex());
      n["outputs"] = vectorJson(node->outputIndex());
      n["quantType"] = enumJson(fb::EnumNameQuantType(node->quantType()), node->quantType());
      n["attributes"] = primitive ? attributesJson(primitive) : json::object();
      out["nodes"].push_back(n);
      ++opCounts[type];
    }
  }
  out["ops"] = opCounts;

  out["subgraphs"] = json::array();
  if (graph->subGraph())
    for (const fb::SubGraph* s : *graph->subGraph())
      out["subgraphs"].push_back({{"name", s->name() ? s->name()->str() : ""},
                                  {"inputs", vectorJson(s->inputIndices())},
                                  {"outputs", vectorJson(s->outputIndices())},
                                  {"nodes", vectorJson(s->nodeIndices())},
                                  {"tensors", vectorJson(s->tensorIndices())}});
  return out;
}

std::string dimsText(const json& dims) {
  std::string text = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    text += (i ? "," : "") + std::to_string(dims[i].get<int64_t>());
  return text + "]";
}

} // namespace

Expected<std::string> dumpMsFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(json out, msJson(path));
  return jsonText(out, 2) + "\n";
}

Expected<std::string> summarizeMsFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(json out, msJson(path));
  std::string text =
      fmt::format("{}: .ms, {}\n", path, displayName(out["version"].get<std::string>()));
  for (const char* side : {"inputs", "outputs"}) {
    text += fmt::format("{}:\n", side);
    for (const json& io : out[side])
      text += fmt::format("  {} {} dataType {}\n", displayName(io.value("name", std::string())),
                          dimsText(io.value("dims", json::array())), io.value("dataType", 0));
  }
  size_t dataBytes = 0;
  for (const json& t : out["tensors"])
    dataBytes += t["dataBytes"].get<size_t>();
  text +=
      fmt::format("tensors: {} ({} bytes of data), nodes: {}, subgraphs: {}\nops:\n",
                  out["tensors"].size(), dataBytes, out["nodes"].size(), out["subgraphs"].size());
  for (const auto& [op, count] : out["ops"].items())
    text += fmt::format("  {:<24} {}\n", displayName(op), count.get<int>());
  return text;
}

} // namespace kiln
