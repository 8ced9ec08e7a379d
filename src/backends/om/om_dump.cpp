// Dumps of .om files: `kiln inspect` (header, partitions, graphs, ops), `atc --mode=1` (ModelDef as
// JSON) and `atc --mode=6` (the "Display Model Info" block).
#include <cstring>
#include <map>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>
#include <google/protobuf/unknown_field_set.h>
#include <nlohmann/json.hpp>

#include "kiln/backends/aipp.h"
#include "kiln/support/display.h"
#include "kiln/support/json_text.h"
#include "kiln_proto/task.pb.h"
#include "om_internal.h"

namespace kiln::om {
namespace {

using Json = nlohmann::ordered_json;
namespace pb = google::protobuf;

// Fields `atc --mode=1` never prints (om.md §2.7): weights, sizes, workspace.
const std::set<std::string>& blacklist() {
  static const std::set<std::string> fields{
      "output",      "data_offset", "data", "workspace", "workspace_bytes",
      "memory_size", "weight_size", "size", "bt",        "quantize_factor"};
  return fields;
}

std::string cEscape(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c >= 0x20 && c < 0x7f)
      out += static_cast<char>(c);
    else
      out += fmt::format("\\{:03o}", c);
  }
  return out;
}

Json messageJson(const pb::Message& m);

Json fieldValue(const pb::Message& m, const pb::FieldDescriptor* f, int index) {
  const pb::Reflection* r = m.GetReflection();
  bool rep = f->is_repeated();
  switch (f->cpp_type()) {
  case pb::FieldDescriptor::CPPTYPE_INT32:
    return rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f);
  case pb::FieldDescriptor::CPPTYPE_INT64:
    return rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f);
  case pb::FieldDescriptor::CPPTYPE_UINT32:
    return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
  case pb::FieldDescriptor::CPPTYPE_UINT64:
    return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
  case pb::FieldDescriptor::CPPTYPE_BOOL:
    return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
  case pb::FieldDescriptor::CPPTYPE_FLOAT:
    return fmt::format("{:g}", rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
  case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    return fmt::format("{:g}", rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
  case pb::FieldDescriptor::CPPTYPE_ENUM: {
    const pb::EnumValueDescriptor* e = rep ? r->GetRepeatedEnum(m, f, index) : r->GetEnum(m, f);
    return e->name();
  }
  case pb::FieldDescriptor::CPPTYPE_STRING: {
    std::string s = rep ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
    return f->type() == pb::FieldDescriptor::TYPE_BYTES ? cEscape(s) : s;
  }
  case pb::FieldDescriptor::CPPTYPE_MESSAGE:
    return messageJson(rep ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f));
  }
  return nullptr;
}

// Generic walker: set fields in declaration order, maps as [{"key", "value"}], enums by name.
Json messageJson(const pb::Message& m) {
  Json out = Json::object();
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (blacklist().count(f->name())) continue;
    if (f->is_map()) {
      // Keys in sorted order so dumps are stable.
      std::map<std::string, Json> entries;
      for (int i = 0; i < r->FieldSize(m, f); ++i) {
        const pb::Message& entry = r->GetRepeatedMessage(m, f, i);
        const pb::Descriptor* d = entry.GetDescriptor();
        Json key = fieldValue(entry, d->FindFieldByName("key"), 0);
        std::string k = key.is_string() ? key.get<std::string>() : key.dump();
        entries[k] =
            Json{{"key", key}, {"value", fieldValue(entry, d->FindFieldByName("value"), 0)}};
      }
      Json list = Json::array();
      for (auto& [k, v] : entries)
        list.push_back(std::move(v));
      out[f->name()] = std::move(list);
    } else if (f->is_repeated()) {
      Json list = Json::array();
      for (int i = 0; i < r->FieldSize(m, f); ++i)
        list.push_back(fieldValue(m, f, i));
      out[f->name()] = std::move(list);
    } else {
      out[f->name()] = fieldValue(m, f, 0);
    }
  }
  return out;
}

// A short printable form of an attribute for `kiln inspect`.
Json attrSummary(const ge::proto::AttrDef& a) {
  switch (a.value_case()) {
  case ge::proto::AttrDef::kI:
    return a.i();
  case ge::proto::AttrDef::kF:
    return a.f();
  case ge::proto::AttrDef::kB:
    return a.b();
  case ge::proto::AttrDef::kS:
    return cEscape(a.s());
  case ge::proto::AttrDef::kDt:
    return geDTypeName(static_cast<int>(a.dt()));
  case ge::proto::AttrDef::kList: {
    Json list = Json::array();
    for (const auto& s : a.list().s())
      list.push_back(cEscape(s));
    for (int64_t i : a.list().i())
      list.push_back(i);
    for (float f : a.list().f())
      list.push_back(f);
    for (bool b : a.list().b())
      list.push_back(b);
    return list;
  }
  case ge::proto::AttrDef::kT: {
    const auto& d = a.t().desc();
    std::vector<int64_t> dims(d.shape().dim().begin(), d.shape().dim().end());
    return fmt::format("tensor {} [{}] at weight offset {}", geDTypeName(d.dtype()),
                       fmt::join(dims, ","), d.data_offset());
  }
  case ge::proto::AttrDef::kTd:
    return "tensor descriptor";
  case ge::proto::AttrDef::kG:
    return "graph " + a.g().name();
  case ge::proto::AttrDef::kFunc:
    return "named attrs " + a.func().name();
  case ge::proto::AttrDef::kListListInt: {
    Json list = Json::array();
    for (const auto& l : a.list_list_int().list_list_i())
      list.push_back(std::vector<int64_t>(l.list_i().begin(), l.list_i().end()));
    return list;
  }
  default:
    return nullptr;
  }
}

Json descJson(const ge::proto::TensorDescriptor& d) {
  Json out;
  if (!d.name().empty()) out["name"] = d.name();
  out["dtype"] = geDTypeName(d.dtype());
  out["shape"] = std::vector<int64_t>(d.shape().dim().begin(), d.shape().dim().end());
  out["format"] = d.layout();
  return out;
}

Json modelDefJson(const ge::proto::ModelDef& def) {
  Json out;
  out["name"] = def.name();
  out["version"] = def.version();
  if (!def.custom_version().empty()) out["custom_version"] = def.custom_version();
  std::map<std::string, Json> attrs;
  for (const auto& [k, v] : def.attr())
    attrs[k] = attrSummary(v);
  out["attrs"] = Json::object();
  for (auto& [k, v] : attrs)
    out["attrs"][k] = std::move(v);
  out["graphs"] = Json::array();
  for (const auto& g : def.graph()) {
    Json graph;
    graph["name"] = g.name();
    graph["inputs"] = std::vector<std::string>(g.input().begin(), g.input().end());
    graph["op_count"] = g.op_size();
    std::map<std::string, int> histogram;
    Json ops = Json::array();
    for (const auto& op : g.op()) {
      ++histogram[op.type()];
      Json o;
      o["name"] = op.name();
      o["type"] = op.type();
      o["inputs"] = std::vector<std::string>(op.input().begin(), op.input().end());
      Json outs = Json::array();
      for (const auto& d : op.output_desc())
        outs.push_back(descJson(d));
      o["outputs"] = std::move(outs);
      std::map<std::string, Json> opAttrs;
      for (const auto& [k, v] : op.attr())
        opAttrs[cEscape(k)] = attrSummary(v);
      o["attrs"] = Json::object();
      for (auto& [k, v] : opAttrs)
        o["attrs"][k] = std::move(v);
      if (op.subgraph_name_size())
        o["subgraphs"] =
            std::vector<std::string>(op.subgraph_name().begin(), op.subgraph_name().end());
      ops.push_back(std::move(o));
    }
    graph["ops_by_type"] = Json::object();
    for (const auto& [t, n] : histogram)
      graph["ops_by_type"][t] = n;
    graph["ops"] = std::move(ops);
    out["graphs"].push_back(std::move(graph));
  }
  return out;
}

uint32_t u32At(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t u64At(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// MODEL_INOUT_INFO TLVs (om.md §1.9); stops quietly at anything that does not fit.
Json inoutJson(const Partition& p) {
  Json out = Json::object();
  const uint8_t* d = p.data;
  uint64_t n = p.size, at = 0;
  static const char* kNames[] = {"inputs",         "outputs",      "dynamic_batch",
                                 "dynamic_hw",     "dynamic_dims", "dynamic_output_shapes",
                                 "data_name_order"};
  while (n - at >= 8) {
    uint32_t type = u32At(d + at), len = u32At(d + at + 4);
    at += 8;
    if (len > n - at) break;
    std::string key = type < 7 ? kNames[type] : fmt::format("tlv_{}", type);
    if ((type == 0 || type == 1) && len >= 4) {
      Json list = Json::array();
      uint32_t count = u32At(d + at);
      uint64_t q = at + 4, end = at + len;
      for (uint32_t i = 0; i < count && end - q >= 32; ++i) {
        uint64_t size = u64At(d + q);
        uint32_t format = u32At(d + q + 8), dtype = u32At(d + q + 12);
        uint32_t nameLen = u32At(d + q + 16), dimsLen = u32At(d + q + 20);
        uint32_t dims2Len = u32At(d + q + 24), rangeLen = u32At(d + q + 28);
        q += 32;
        uint64_t need = uint64_t(nameLen) + dimsLen + dims2Len + rangeLen;
        if (need > end - q) break;
        Json t;
        t["name"] = std::string(reinterpret_cast<const char*>(d + q), nameLen);
        q += nameLen;
        std::vector<int64_t> dims;
        for (uint32_t k = 0; k + 8 <= dimsLen; k += 8)
          dims.push_back(static_cast<int64_t>(u64At(d + q + k)));
        q += dimsLen + dims2Len;
        std::vector<std::pair<int64_t, int64_t>> range;
        for (uint32_t k = 0; k + 16 <= rangeLen; k += 16)
          range.emplace_back(static_cast<int64_t>(u64At(d + q + k)),
                             static_cast<int64_t>(u64At(d + q + k + 8)));
        q += rangeLen;
        t["size"] = size;
        t["format"] = formatName(static_cast<int>(format));
        int proto = geCxxToProtoDType(static_cast<int>(dtype));
        t["dtype"] = proto < 0 ? fmt::format("ge::DataType {}", dtype) : geDTypeName(proto);
        t["dims"] = dims;
        if (!range.empty()) t["shape_range"] = range;
        list.push_back(std::move(t));
      }
      out[key] = std::move(list);
    } else if (type == 2 && len >= 4 && (len - 4) / 8 >= u32At(d + at) &&
               len == 4 + 8 * uint64_t(u32At(d + at))) {
      // Batch gears: u32 count, one int64 per gear.
      std::vector<int64_t> batches;
      for (uint32_t i = 0; i < u32At(d + at); ++i)
        batches.push_back(static_cast<int64_t>(u64At(d + at + 4 + 8 * uint64_t(i))));
      out[key] = batches;
    } else if ((type == 3 || type == 4) && len >= 4 && (len - 4) / 4 >= u32At(d + at)) {
      // H/W and dims gears: u32 count, u32 length per gear, then each gear's int64 values.
      const uint32_t count = u32At(d + at);
      uint64_t q = at + 4 + 4 * uint64_t(count), values = 0;
      for (uint32_t i = 0; i < count; ++i)
        values += u32At(d + at + 4 + 4 * uint64_t(i));
      if (len != 4 + 4 * uint64_t(count) + 8 * values) {
        out[key] = fmt::format("{} bytes", len);
      } else {
        Json gears = Json::array();
        for (uint32_t i = 0; i < count; ++i) {
          std::vector<int64_t> gear;
          for (uint32_t k = 0; k < u32At(d + at + 4 + 4 * uint64_t(i)); ++k, q += 8)
            gear.push_back(static_cast<int64_t>(u64At(d + q)));
          gears.push_back(gear);
        }
        out[key] = std::move(gears);
      }
    } else {
      out[key] = fmt::format("{} bytes", len);
    }
    at += len;
  }
  return out;
}

Json headerJson(const OmHeader& h) {
  Json out;
  out["magic"] = fmt::format("0x{:08X}", h.magic);
  out["head_size"] = h.headSize;
  out["version"] = fmt::format("0x{:08X}", h.version);
  out["layout"] = headerGenerationName(h.generation);
  out["name"] = h.name;
  out["length"] = h.length;
  out["model_length"] = h.modelLength;
  out["model_type"] = h.modelType;
  out["gen_mode"] = h.genMode;
  out["is_encrypt"] = h.isEncrypt;
  out["is_checksum"] = h.isChecksum;
  out["om_ir_version"] = h.omIrVersion;
  out["model_num"] = h.modelNum;
  out["platform_version"] = h.platformVersion;
  out["platform_type"] = h.platformType;
  out["need_check_os_cpu_info"] = h.needCheckOsCpuInfo;
  out["is_unknow_model"] = h.isUnknownModel;
  return out;
}

Json containerJson(const uint8_t* data, size_t size, const std::string& name, int depth);

// Flow sub-models are protobuf messages: 1 graph name, 2 engine, 3 a nested IMOD model.
Json flowSubmodelJson(const Partition& p, int depth) {
  Json out;
  pb::UnknownFieldSet fields;
  if (!fields.ParseFromArray(p.data, static_cast<int>(p.size))) {
    out["error"] = "not a protobuf message";
    return out;
  }
  for (int i = 0; i < fields.field_count(); ++i) {
    const pb::UnknownField& f = fields.field(i);
    if (f.type() != pb::UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const std::string& s = f.length_delimited();
    if (f.number() == 1)
      out["graph_name"] = s;
    else if (f.number() == 2)
      out["engine"] = s;
    else if (f.number() == 3 && s.size() >= 4 && std::memcmp(s.data(), "IMOD", 4) == 0 && depth < 2)
      out["model"] = containerJson(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "submodel",
                                   depth + 1);
  }
  return out;
}

Json containerJson(const uint8_t* data, size_t size, const std::string& name, int depth) {
  auto container = parseContainer(data, size, name);
  if (!container) return Json{{"error", container.status().toString()}};
  Json out;
  out["header"] = headerJson(container->header);
  out["blocks"] = Json::array();
  for (const ModelBlock& b : container->blocks) {
    Json block;
    block["table_offset"] = b.tableOffset;
    block["table"] = b.wideTable ? "wide" : "tiny";
    Json parts = Json::array();
    for (const Partition& p : b.partitions) {
      Json part;
      part["type"] = p.type;
      part["name"] = partitionTypeName(p.type);
      part["offset"] = p.offset;
      part["size"] = p.size;
      part["file_offset"] = p.fileOffset;
      if (p.type == kModelDef) {
        auto def = parseModelDef(p, name);
        if (def)
          block["model_def"] = modelDefJson(*def);
        else
          part["error"] = def.status().toString();
      } else if (p.type == kModelInoutInfo) {
        block["inout_info"] = inoutJson(p);
      } else if (p.type == kTaskInfo) {
        domi::ModelTaskDef task;
        if (task.ParseFromArray(p.data, static_cast<int>(p.size))) {
          Json t;
          t["version"] = task.version();
          t["task_count"] = task.task_size();
          t["memory_size"] = task.memory_size();
          t["stream_num"] = task.stream_num();
          t["weight_size"] = task.weight_size();
          block["task_info"] = std::move(t);
        }
      } else if (p.type == kFlowSubmodel) {
        part["submodel"] = flowSubmodelJson(p, depth);
      }
      parts.push_back(std::move(part));
    }
    block["partitions"] = std::move(parts);
    out["blocks"].push_back(std::move(block));
  }
  return out;
}

std::string attrString(const ge::proto::ModelDef& def, const std::string& key) {
  auto it = def.attr().find(key);
  return it != def.attr().end() && it->second.value_case() == ge::proto::AttrDef::kS
             ? it->second.s()
             : "";
}
int64_t attrInt(const ge::proto::ModelDef& def, const std::string& key) {
  auto it = def.attr().find(key);
  return it != def.attr().end() && it->second.value_case() == ge::proto::AttrDef::kI
             ? it->second.i()
             : -1;
}

} // namespace
} // namespace kiln::om

namespace kiln {

Expected<std::string> dumpOmFile(const std::string& path) {
  auto loaded = om::loadOmFile(path);
  if (!loaded) return loaded.status();
  om::Json out;
  out["file"] = path;
  out["format"] = "om";
  out["file_size"] = loaded->bytes.size();
  om::Json body = om::containerJson(loaded->bytes.data(), loaded->bytes.size(), path, 0);
  for (auto& [k, v] : body.items())
    out[k] = v;
  return jsonText(out, 2) + "\n";
}

namespace {

std::vector<int64_t> descDims(const ge::proto::TensorDescriptor& d) {
  return {d.shape().dim().begin(), d.shape().dim().end()};
}

std::string opHistogram(const ge::proto::GraphDef& g) {
  std::map<std::string, int> histogram;
  for (const auto& op : g.op())
    ++histogram[displayName(op.type())];
  std::string ops;
  for (const auto& [t, n] : histogram)
    ops += fmt::format("{}{} {}", ops.empty() ? "" : ", ", t, n);
  return ops;
}

// One gear of a gear model (atc --dynamic_batch_size / _image_size / _dims): its graph, the
// shapes of the model inputs in it and its outputs.
struct Gear {
  std::string graph;
  int ops = 0;                              // in the gear's graph and the subgraphs it holds
  std::vector<std::string> inputs, outputs; // "name [dims]"
};
struct GearLayout {
  std::vector<Gear> gears;
  std::set<std::string> members; // every graph of some gear
  std::string selector;          // the root Data choosing the gear
  size_t sharedWeights = 0;      // root Consts the gears read as Data
};

// A gear model as GraphEngine lays it out (om_gears.cpp): the root graph's Case
// ascend_mbatch_shape_case has one branch graph per gear, named root + "_ascend_mbatch_batch_<b>";
// a branch Data reads Case input `_parent_node_index` (0 is the gear index from MapIndex, then the
// root's Data inputs and shared Consts).
GearLayout gearLayout(const ge::proto::ModelDef& def) {
  GearLayout layout;
  if (def.graph_size() == 0) return layout;
  const ge::proto::GraphDef& root = def.graph(0);
  const ge::proto::OpDef* gearCase = nullptr;
  std::map<std::string, const ge::proto::OpDef*> rootOps;
  for (const auto& op : root.op()) {
    rootOps[op.name()] = &op;
    if (op.type() == "Case" && op.name() == "ascend_mbatch_shape_case") gearCase = &op;
  }
  if (!gearCase) return layout;
  layout.selector = "ascend_mbatch_shape_data";
  auto caseSource = [&](int64_t index) -> const ge::proto::OpDef* {
    if (index < 0 || index >= gearCase->input_size()) return nullptr;
    std::string name = gearCase->input(static_cast<int>(index));
    name = name.substr(0, name.rfind(':'));
    auto it = rootOps.find(name);
    return it == rootOps.end() ? nullptr : it->second;
  };
  for (int i = 1; i < gearCase->input_size(); ++i)
    if (const auto* source = caseSource(i); source && source->type() != "Data")
      ++layout.sharedWeights;
  std::map<std::string, const ge::proto::GraphDef*> graphs;
  for (const auto& g : def.graph())
    graphs[g.name()] = &g;
  for (const std::string& branch : gearCase->subgraph_name()) {
    auto found = graphs.find(branch);
    if (found == graphs.end() || branch.size() <= root.name().size()) continue;
    const std::string postfix = branch.substr(root.name().size());
    Gear gear;
    gear.graph = branch;
    for (const auto& g : def.graph())
      if (g.name().size() > postfix.size() &&
          g.name().compare(g.name().size() - postfix.size(), postfix.size(), postfix) == 0) {
        layout.members.insert(g.name());
        gear.ops += g.op_size();
      }
    for (const auto& op : found->second->op()) {
      if (op.type() == "Data" && op.output_desc_size()) {
        const auto* source = caseSource(om::getI(op, "_parent_node_index", -1));
        if (source && source->type() == "Data")
          gear.inputs.push_back(fmt::format("{} [{}]", displayName(source->name()),
                                            fmt::join(descDims(op.output_desc(0)), ",")));
      }
      if (op.type() == "NetOutput")
        for (int i = 0; i < op.input_desc_size(); ++i) {
          const auto& d = op.input_desc(i);
          gear.outputs.push_back(fmt::format("{} [{}]",
                                             displayName(d.name().empty() ? op.input(i) : d.name()),
                                             fmt::join(descDims(d), ",")));
        }
    }
    layout.gears.push_back(std::move(gear));
  }
  return layout;
}

} // namespace

Expected<std::string> summarizeOmFile(const std::string& path) {
  auto loaded = om::loadOmFile(path);
  if (!loaded) return loaded.status();
  const om::OmContainer& c = loaded->container;
  std::string out = fmt::format(
      "{}: Ascend offline model, header {} (version 0x{:08X}), name '{}', "
      "model type {}, {} model block(s), {} bytes\n",
      path, om::headerGenerationName(c.header.generation), c.header.version,
      displayName(c.header.name), c.header.modelType, c.blocks.size(), loaded->bytes.size());
  for (size_t b = 0; b < c.blocks.size(); ++b) {
    out += fmt::format("block {}:", b);
    for (const auto& p : c.blocks[b].partitions)
      out += fmt::format(" {} {} B;", om::partitionTypeName(p.type), p.size);
    out += "\n";
  }
  for (const auto& def : loaded->modelDefs) {
    std::string soc = om::attrString(def, "soc_version");
    out += fmt::format("model '{}'{}: {} graph(s)\n", displayName(def.name()),
                       soc.empty() ? "" : " for " + displayName(soc), def.graph_size());
    const GearLayout gears = gearLayout(def);
    for (const auto& g : def.graph()) {
      if (gears.members.count(g.name())) continue; // summarized in the gear table below
      out += fmt::format("  graph '{}': {} ops ({})\n", displayName(g.name()), g.op_size(),
                         opHistogram(g));
      for (const auto& op : g.op()) {
        if (op.type() == "Data" && op.output_desc_size())
          out += fmt::format("    input  {} {} [{}]{}\n", displayName(op.name()),
                             om::geDTypeName(op.output_desc(0).dtype()),
                             fmt::join(descDims(op.output_desc(0)), ","),
                             gears.selector == op.name() ? " (gear selector)" : "");
        if (op.type() == "NetOutput")
          for (int i = 0; i < op.input_desc_size(); ++i) {
            const auto& d = op.input_desc(i);
            out += fmt::format("    output {} {} [{}]\n",
                               displayName(d.name().empty() ? op.input(i) : d.name()),
                               om::geDTypeName(d.dtype()), fmt::join(descDims(d), ","));
          }
      }
    }
    // The AIPP kiln's atc recorded (aipp.h kAippMetadataKey): which inputs take an image now.
    if (std::string aipp = om::attrString(def, kAippMetadataKey); !aipp.empty()) {
      nlohmann::json record = nlohmann::json::parse(aipp, nullptr, false);
      if (record.is_object() && record["inputs"].is_object())
        for (const auto& [name, dims] : record["inputs"].items())
          out += fmt::format(
              "  aipp ({}): {} is a uint8 NHWC image; the model's {} input was "
              "[{}]\n",
              displayName(record.value("file", std::string())), displayName(name),
              displayName(record.value("layout", std::string("NCHW"))),
              dims.is_array() ? fmt::format("{}", fmt::join(dims.get<std::vector<int64_t>>(), ","))
                              : std::string());
    }
    if (!gears.gears.empty()) {
      out += fmt::format("  gears: {}, one graph each; the {} constant(s) of '{}' are shared (each "
                         "gear reads them as Data inputs)\n",
                         gears.gears.size(), gears.sharedWeights, displayName(def.graph(0).name()));
      for (size_t b = 0; b < gears.gears.size(); ++b) {
        const Gear& gear = gears.gears[b];
        out +=
            fmt::format("    gear {}: {} -> {}  ('{}', {} ops)\n", b, fmt::join(gear.inputs, ", "),
                        fmt::join(gear.outputs, ", "), displayName(gear.graph), gear.ops);
      }
    }
  }
  return out;
}

Expected<std::string> omToJson(const std::string& path) {
  auto loaded = om::loadOmFile(path);
  if (!loaded) return loaded.status();
  if (loaded->modelDefs.empty())
    return Status(ErrorCode::OmFileInvalid, fmt::format("{}: no MODEL_DEF partition", path),
                  "the file is damaged; convert the model again");
  return jsonText(om::messageJson(loaded->modelDefs.front()), 4) + "\n";
}

Expected<std::string> omInfoText(const std::string& path) {
  auto loaded = om::loadOmFile(path);
  if (!loaded) return loaded.status();
  if (loaded->modelDefs.empty())
    return Status(ErrorCode::OmFileInvalid, fmt::format("{}: no MODEL_DEF partition", path),
                  "the file is damaged; convert the model again");
  const auto& def = loaded->modelDefs.front();
  std::string out = "============ Display Model Info start ============\n";
  out += fmt::format("Original Atc command line: {}\n", om::attrString(def, "atc_cmdline"));
  out += fmt::format("system   info: atc_version[{}], soc_version[{}], framework_type[{}].\n",
                     om::attrString(def, "atc_version"), om::attrString(def, "soc_version"),
                     om::attrString(def, "framework_type"));
  out += fmt::format("resource info: memory_size[{} B], weight_size[{} B], stream_num[{}], "
                     "event_num[{}].\n",
                     om::attrInt(def, "memory_size"), om::attrInt(def, "weight_size"),
                     om::attrInt(def, "stream_num"), om::attrInt(def, "event_num"));
  auto it = def.attr().find("om_info_list");
  if (it == def.attr().end())
    return Status(ErrorCode::OmReadUnsupported,
                  fmt::format("{}: Display Model Info failed, attr \"om_info_list\" is not found "
                              "in om, check the version is matched.",
                              path),
                  "convert the model again with a current converter");
  const auto& list = it->second.list().i();
  if (list.size() != 5)
    return Status(ErrorCode::OmReadUnsupported,
                  fmt::format("{}: Display Model Info error, please check! (om_info_list has {} "
                              "entries, 5 expected)",
                              path, list.size()),
                  "convert the model again with a current converter");
  const om::Partition* p = loaded->container.blocks.front().find(om::kModelDef);
  out += fmt::format("om       info: modeldef_size[{} B], weight_data_size[{} B], "
                     "tbe_kernels_size[{} B], cust_aicpu_kernel_store_size[{} B], "
                     "task_info_size[{} B], so_store_size[{} B].\n",
                     p ? p->size : 0, list[0], list[1], list[2], list[3], list[4]);
  out += "============ Display Model Info end   ============\n";
  return out;
}

} // namespace kiln
