// GraphEngine AttrDef construction and reading, and the ONNX attribute / constant readers the .om
// rules share (declared in om_internal.h and om_context.h).
#include <algorithm>

#include "kiln/ir/constant.h"
#include "kiln/runtime/tensor_util.h"
#include "om_context.h"

namespace kiln::om {

// ---------------------------------------------------------------------------------------------
// AttrDef construction and reading.

AttrDef attrI(int64_t v) {
  AttrDef a;
  a.set_i(v);
  return a;
}

AttrDef attrDt(int64_t v) {
  AttrDef a;
  a.set_dt(v);
  return a;
}
AttrDef attrF(float v) {
  AttrDef a;
  a.set_f(v);
  return a;
}
AttrDef attrB(bool v) {
  AttrDef a;
  a.set_b(v);
  return a;
}
AttrDef attrS(const std::string& v) {
  AttrDef a;
  a.set_s(v);
  return a;
}
AttrDef attrInts(const std::vector<int64_t>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_INT);
  for (int64_t x : v)
    list->add_i(x);
  return a;
}
AttrDef attrFloats(const std::vector<float>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_FLOAT);
  for (float x : v)
    list->add_f(x);
  return a;
}
AttrDef attrStrings(const std::vector<std::string>& v) {
  AttrDef a;
  auto* list = a.mutable_list();
  list->set_val_type(AttrDef::ListValue::VT_LIST_STRING);
  for (const auto& x : v)
    list->add_s(x);
  return a;
}

const AttrDef* findAttr(const OpDef& op, const std::string& name) {
  auto it = op.attr().find(name);
  return it == op.attr().end() ? nullptr : &it->second;
}
int64_t getI(const OpDef& op, const std::string& name, int64_t def) {
  const AttrDef* a = findAttr(op, name);
  if (!a) return def;
  if (a->value_case() == AttrDef::kI) return a->i();
  if (a->value_case() == AttrDef::kB) return a->b();
  if (a->value_case() == AttrDef::kDt) return a->dt();
  return def;
}
float getF(const OpDef& op, const std::string& name, float def) {
  const AttrDef* a = findAttr(op, name);
  return a && a->value_case() == AttrDef::kF ? a->f() : def;
}
bool getB(const OpDef& op, const std::string& name, bool def) {
  const AttrDef* a = findAttr(op, name);
  if (!a) return def;
  if (a->value_case() == AttrDef::kB) return a->b();
  if (a->value_case() == AttrDef::kI) return a->i() != 0;
  return def;
}
std::string getS(const OpDef& op, const std::string& name, const std::string& def) {
  const AttrDef* a = findAttr(op, name);
  return a && a->value_case() == AttrDef::kS ? a->s() : def;
}
std::vector<int64_t> getInts(const OpDef& op, const std::string& name) {
  const AttrDef* a = findAttr(op, name);
  if (!a || a->value_case() != AttrDef::kList) return {};
  return {a->list().i().begin(), a->list().i().end()};
}

// ONNX attribute → AttrDef (generic rules keep the value, under GraphEngine's name).
std::optional<AttrDef> toAttrDef(const Attribute& a) {
  switch (a.kind()) {
  case AttrKind::Int:
    return attrI(a.asInt());
  case AttrKind::Float:
    return attrF(a.asFloat());
  case AttrKind::String:
    return attrS(a.asString());
  case AttrKind::Ints:
    return attrInts(a.asInts());
  case AttrKind::Floats:
    return attrFloats(a.asFloats());
  case AttrKind::Strings:
    return attrStrings(a.asStrings());
  default:
    return std::nullopt;
  }
}
std::optional<Attribute> fromAttrDef(const AttrDef& a) {
  switch (a.value_case()) {
  case AttrDef::kI:
    return Attribute::ofInt(a.i());
  case AttrDef::kB:
    return Attribute::ofInt(a.b() ? 1 : 0);
  case AttrDef::kF:
    return Attribute::ofFloat(a.f());
  case AttrDef::kS:
    return Attribute::ofString(a.s());
  case AttrDef::kList:
    switch (a.list().val_type()) {
    case AttrDef::ListValue::VT_LIST_INT:
      return Attribute::ofInts({a.list().i().begin(), a.list().i().end()});
    case AttrDef::ListValue::VT_LIST_FLOAT:
      return Attribute::ofFloats({a.list().f().begin(), a.list().f().end()});
    case AttrDef::ListValue::VT_LIST_STRING:
      return Attribute::ofStrings({a.list().s().begin(), a.list().s().end()});
    default:
      if (a.list().i_size()) return Attribute::ofInts({a.list().i().begin(), a.list().i().end()});
      if (a.list().f_size()) return Attribute::ofFloats({a.list().f().begin(), a.list().f().end()});
      if (a.list().s_size())
        return Attribute::ofStrings({a.list().s().begin(), a.list().s().end()});
      return Attribute::ofInts({});
    }
  default:
    return std::nullopt;
  }
}

int64_t nodeInt(const Node& n, const std::string& name, int64_t def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Int ? a->asInt() : def;
}
float nodeFloat(const Node& n, const std::string& name, float def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::Float ? a->asFloat() : def;
}
std::string nodeString(const Node& n, const std::string& name, const std::string& def) {
  const Attribute* a = n.attribute(name);
  return a && a->kind() == AttrKind::String ? a->asString() : def;
}
std::optional<std::vector<int64_t>> nodeInts(const Node& n, const std::string& name) {
  const Attribute* a = n.attribute(name);
  if (!a || a->kind() != AttrKind::Ints) return std::nullopt;
  return a->asInts();
}

std::optional<std::vector<int64_t>> tensorInts(const Tensor& t) {
  if (t.dtype() == DType::Int64) return t.copyValues<int64_t>();
  if (t.dtype() == DType::Int32) {
    auto v = t.copyValues<int32_t>();
    return std::vector<int64_t>(v.begin(), v.end());
  }
  return std::nullopt;
}
const Tensor* constInput(const Node& n, size_t i) {
  const Value* v = n.input(i);
  return v && v->isInitializer() ? &v->initializer() : nullptr;
}
std::optional<std::vector<int64_t>> constInts(const Node& n, size_t i) {
  const Tensor* t = constInput(n, i);
  return t ? tensorInts(*t) : std::nullopt;
}

} // namespace kiln::om
