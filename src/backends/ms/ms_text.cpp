// `kiln lower --target ms`: a built .ms buffer as stable text, one line per tensor and per node.
// Op tables print through FlatBuffers reflection over the embedded binary schema, so every field
// the lowering set shows, for every op, without a hand-kept printer per table.
#include <algorithm>
#include <string>
#include <vector>

#include <flatbuffers/reflection.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kiln/backends/ms.h"
#include "kiln_proto/ms_model_bfbs_generated.h"
#include "ms_model_schema.h"
#include "ms_type_ids.h"

namespace kiln {
namespace {

namespace fb = kiln::msfb;
using reflection::BaseType;

const reflection::Schema& msSchema() {
  static const reflection::Schema* schema =
      reflection::GetSchema(fb::MetaGraphBinarySchema::data());
  return *schema;
}

bool isIntegerType(BaseType t) { return t >= reflection::UType && t <= reflection::ULong; }
bool isFloatType(BaseType t) { return t == reflection::Float || t == reflection::Double; }

std::string number(double v) { return fmt::format("{}", v); }

// An integer field or element: its enum name when the schema gives the field an enum.
std::string integerText(int64_t v, int enumIndex) {
  const reflection::Schema& schema = msSchema();
  if (enumIndex >= 0 && static_cast<size_t>(enumIndex) < schema.enums()->size()) {
    const reflection::Enum* e = schema.enums()->Get(static_cast<flatbuffers::uoffset_t>(enumIndex));
    if (const reflection::EnumVal* val = e->values()->LookupByKey(v)) return val->name()->str();
  }
  return std::to_string(v);
}

std::string tableText(const flatbuffers::Table& table, const reflection::Object& object);

std::string fieldText(const flatbuffers::Table& table, const reflection::Field& field) {
  const reflection::Type& type = *field.type();
  const BaseType base = type.base_type();
  if (base == reflection::Bool) return flatbuffers::GetAnyFieldI(table, field) ? "true" : "false";
  if (isIntegerType(base))
    return integerText(flatbuffers::GetAnyFieldI(table, field), type.index());
  if (isFloatType(base)) return number(flatbuffers::GetAnyFieldF(table, field));
  if (base == reflection::String) {
    const flatbuffers::String* s = flatbuffers::GetFieldS(table, field);
    return fmt::format("\"{}\"", s ? s->str() : "");
  }
  if (base == reflection::Obj) {
    const reflection::Object* sub =
        msSchema().objects()->Get(static_cast<flatbuffers::uoffset_t>(type.index()));
    if (sub->is_struct()) return "{struct}";
    const flatbuffers::Table* t = flatbuffers::GetFieldT(table, field);
    return t ? tableText(*t, *sub) : "{}";
  }
  if (base == reflection::Vector) {
    const flatbuffers::VectorOfAny* v = flatbuffers::GetFieldAnyV(table, field);
    if (!v) return "[]";
    const BaseType element = type.element();
    std::vector<std::string> items;
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      if (element == reflection::Bool)
        items.push_back(flatbuffers::GetAnyVectorElemI(v, element, i) ? "true" : "false");
      else if (isIntegerType(element))
        items.push_back(integerText(flatbuffers::GetAnyVectorElemI(v, element, i), type.index()));
      else if (isFloatType(element))
        items.push_back(number(flatbuffers::GetAnyVectorElemF(v, element, i)));
      else if (element == reflection::String)
        items.push_back(fmt::format("\"{}\"", flatbuffers::GetAnyVectorElemS(v, element, i)));
      else if (element == reflection::Obj) {
        const reflection::Object* sub =
            msSchema().objects()->Get(static_cast<flatbuffers::uoffset_t>(type.index()));
        if (sub->is_struct()) {
          items.push_back("{struct}");
        } else {
          const auto* t = flatbuffers::GetAnyVectorElemPointer<const flatbuffers::Table>(v, i);
          items.push_back(t ? tableText(*t, *sub) : "{}");
        }
      } else {
        items.push_back("?");
      }
    }
    return fmt::format("[{}]", fmt::join(items, ", "));
  }
  return "?"; // unions inside op tables: none in the schema today
}

// The fields `table` sets, in schema order (field id), as "{name: value, ...}".
std::string tableText(const flatbuffers::Table& table, const reflection::Object& object) {
  std::vector<const reflection::Field*> fields(object.fields()->begin(), object.fields()->end());
  std::sort(fields.begin(), fields.end(),
            [](const auto* a, const auto* b) { return a->id() < b->id(); });
  std::vector<std::string> parts;
  for (const reflection::Field* field : fields) {
    if (field->deprecated() || !table.CheckField(field->offset())) continue;
    parts.push_back(fmt::format("{}: {}", field->name()->str(), fieldText(table, *field)));
  }
  return fmt::format("{{{}}}", fmt::join(parts, ", "));
}

std::string indexList(const flatbuffers::Vector<uint32_t>* v) {
  std::vector<std::string> items;
  if (v)
    for (uint32_t i : *v)
      items.push_back(fmt::format("%{}", i));
  return fmt::format("{}", fmt::join(items, ", "));
}

std::string tensorLine(const fb::Tensor& t, uint32_t index) {
  std::string line = fmt::format("tensor %{} '{}'", index, t.name() ? t.name()->str() : "");
  auto dtype = ms::dtypeOfTypeId(t.dataType());
  line += " " + (dtype ? std::string(dtypeName(*dtype)) : fmt::format("type{}", t.dataType()));
  std::vector<std::string> dims;
  if (t.dims())
    for (int32_t d : *t.dims())
      dims.push_back(std::to_string(d));
  line += fmt::format(" [{}] {}", fmt::join(dims, ","), fb::EnumNameFormat(t.format()));
  if (t.nodeType() == 0) line += " const";
  if (t.data() && t.data()->size() > 0) line += fmt::format(" {}B", t.data()->size());
  if (t.weightQuantCompressType() != fb::WeightQuantCompressType_NONE)
    line += fmt::format(" {}", fb::EnumNameWeightQuantCompressType(t.weightQuantCompressType()));
  if (t.quantParams() && t.quantParams()->size() > 0) {
    const fb::QuantParam* q = t.quantParams()->Get(0);
    line += fmt::format(" quant[{} x {} bits]", t.quantParams()->size(), q ? q->numBits() : 0);
    // The first channel's parameters: what a weight's codes stand for.
    if (q) line += fmt::format(" scale {} zero {}", static_cast<float>(q->scale()), q->zeroPoint());
  }
  return line;
}

} // namespace

Expected<std::string> msBufferToText(const uint8_t* data, size_t size) {
  flatbuffers::Verifier verifier(data, size, ms::kVerifierMaxDepth, ms::kVerifierMaxTables);
  if (!fb::VerifyMetaGraphBuffer(verifier))
    return Status(ErrorCode::MsFileInvalid, "the .ms buffer does not verify as a MetaGraph",
                  "this is a kiln bug: the writer produced a buffer its own schema rejects");
  const fb::MetaGraph* graph = fb::GetMetaGraph(data);
  std::string out = fmt::format("ms graph '{}'\n", graph->name() ? graph->name()->str() : "");
  out += fmt::format("inputs ({})\n", indexList(graph->inputIndex()));
  if (graph->allTensors())
    for (flatbuffers::uoffset_t i = 0; i < graph->allTensors()->size(); ++i)
      out += tensorLine(*graph->allTensors()->Get(i), i) + "\n";
  const reflection::Schema& schema = msSchema();
  if (graph->nodes())
    for (const fb::CNode* node : *graph->nodes()) {
      std::string op = "?";
      std::string attrs = "{}";
      if (const fb::Primitive* p = node->primitive()) {
        op = fb::EnumNamePrimitiveType(p->value_type());
        if (op.empty()) op = fmt::format("PrimitiveType#{}", static_cast<int>(p->value_type()));
        const reflection::Object* object =
            schema.objects()->LookupByKey(("kiln.msfb." + op).c_str());
        if (object && p->value())
          attrs = tableText(*static_cast<const flatbuffers::Table*>(p->value()), *object);
      }
      out += fmt::format("node '{}' {}({}) -> ({}) {}", node->name() ? node->name()->str() : "", op,
                         indexList(node->inputIndex()), indexList(node->outputIndex()), attrs);
      if (node->quantType() != fb::QuantType_QUANT_NONE)
        out += fmt::format(" {}", fb::EnumNameQuantType(node->quantType()));
      out += "\n";
    }
  out += fmt::format("outputs ({})\n", indexList(graph->outputIndex()));
  // Control flow: which nodes and parameters each subgraph holds (one subgraph is all of them).
  if (graph->subGraph() && graph->subGraph()->size() > 1)
    for (flatbuffers::uoffset_t i = 0; i < graph->subGraph()->size(); ++i) {
      const fb::SubGraph* sub = graph->subGraph()->Get(i);
      out += fmt::format("subgraph {} '{}' ({}) -> ({}) nodes [{}]\n", i,
                         sub->name() ? sub->name()->str() : "", indexList(sub->inputIndices()),
                         indexList(sub->outputIndices()),
                         sub->nodeIndices() ? fmt::format("{}", fmt::join(*sub->nodeIndices(), ","))
                                            : std::string());
    }
  return out;
}

} // namespace kiln
