// Casts around GraphEngine ops whose IR declares no kernel type for a value's data type (CANN's
// public operator IR): the input is widened to a declared type, the op computes there, and an
// output of the original type is cast back, as ATC inserts Casts. One table says what each op
// takes.
#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "om_internal.h"

namespace kiln::om {
namespace {

using ge::proto::DataType;
using ge::proto::OpDef;
using ge::proto::TensorDescriptor;

struct TypeRule {
  std::set<int> accepted;   // ge::proto::DataType values the IR declares for the data inputs
  bool outputFollowsInputs; // outputs of the inputs' type are cast back (false: e.g. bool out)
};

const std::map<std::string, TypeRule>& typeRules() {
  using namespace ge::proto;
  static const std::map<std::string, TypeRule> rules = {
      {"Maximum",
       {{DT_FLOAT16, DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BF16, DT_INT8, DT_UINT8}, true}},
      {"Minimum",
       {{DT_FLOAT16, DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BF16, DT_INT8, DT_UINT8}, true}},
      {"FloorMod", {{DT_INT32, DT_INT64, DT_FLOAT, DT_FLOAT16, DT_DOUBLE, DT_BF16}, true}},
      {"Pow",
       {{DT_BF16, DT_DOUBLE, DT_FLOAT, DT_FLOAT16, DT_INT16, DT_INT32, DT_INT64, DT_INT8, DT_UINT8},
        true}},
      {"NotEqual",
       {{DT_BF16, DT_DOUBLE, DT_FLOAT, DT_FLOAT16, DT_INT16, DT_INT32, DT_INT64, DT_INT8, DT_UINT16,
         DT_UINT32, DT_UINT64, DT_UINT8},
        false}},
  };
  return rules;
}

// The declared type an unsupported integer or bool widens to without losing a value (uint64 past
// 2^63 excepted: int64 is the widest integer the ops take).
std::optional<int> widened(int dtype) {
  using namespace ge::proto;
  switch (dtype) {
  case DT_BOOL:
  case DT_INT8:
  case DT_UINT8:
  case DT_INT16:
  case DT_UINT16:
    return DT_INT32;
  case DT_UINT32:
  case DT_UINT64:
    return DT_INT64;
  default:
    return std::nullopt;
  }
}

void retype(TensorDescriptor* d, int dtype) {
  const int from = d->dtype();
  d->set_dtype(static_cast<DataType>(dtype));
  auto fromType = fromGeDType(from), toType = fromGeDType(dtype);
  if (d->size() > 0 && fromType && toType && dtypeBits(*fromType) > 0)
    d->set_size(d->size() / static_cast<int64_t>(dtypeBits(*fromType)) *
                static_cast<int64_t>(dtypeBits(*toType)));
}

class TypeLegalizer {
 public:
  explicit TypeLegalizer(ge::proto::GraphDef& g) : g_(g) {
    for (const OpDef& op : g_.op()) {
      names_.insert(op.name());
      nextId_ = std::max(nextId_, op.id() + 1);
    }
  }

  void run() {
    const int count = g_.op_size(); // ops added below are Casts, which need nothing
    for (int k = 0; k < count; ++k) {
      auto rule = typeRules().find(g_.op(k).type());
      if (rule != typeRules().end()) legalize(k, rule->second);
    }
  }

 private:
  std::string freshName(const std::string& base) {
    std::string name = base;
    for (int i = 1; !names_.insert(name).second; ++i)
      name = fmt::format("{}_{}", base, i);
    return name;
  }

  // A Cast reading `source` described by `in`, producing `to`; returns its output name.
  std::string addCast(const std::string& base, const std::string& source,
                      const TensorDescriptor& in, int to) {
    OpDef* cast = g_.add_op();
    cast->set_name(freshName(base));
    cast->set_type("Cast");
    cast->set_id(nextId_++);
    cast->set_stream_id(0);
    cast->set_has_out_attr(true);
    cast->add_input(source);
    *cast->add_input_desc() = in;
    TensorDescriptor* out = cast->add_output_desc();
    *out = in;
    out->clear_name();
    retype(out, to);
    (*cast->mutable_attr())["dst_type"] = attrI(geProtoToCxxDType(to));
    return cast->name() + ":0";
  }

  void legalize(int k, const TypeRule& rule) {
    std::optional<int> from;
    int to = 0;
    for (int i = 0; i < g_.op(k).input_size() && i < g_.op(k).input_desc_size(); ++i) {
      const OpDef& op = g_.op(k);
      if (op.input(i).empty() || isControlInput(op.input(i))) continue;
      const int dtype = op.input_desc(i).dtype();
      if (rule.accepted.count(dtype)) continue;
      auto wide = widened(dtype);
      if (!wide || !rule.accepted.count(*wide)) continue;
      const std::string cast =
          addCast(fmt::format("{}_in{}_cast", op.name(), i), op.input(i), op.input_desc(i), *wide);
      OpDef* mutableOp = g_.mutable_op(k);
      mutableOp->set_input(i, cast);
      retype(mutableOp->mutable_input_desc(i), *wide);
      from = dtype;
      to = *wide;
    }
    if (!from || !rule.outputFollowsInputs) return;
    for (int o = 0; o < g_.op(k).output_desc_size(); ++o) {
      if (g_.op(k).output_desc(o).dtype() != *from) continue;
      const std::string produced = fmt::format("{}:{}", g_.op(k).name(), o);
      TensorDescriptor original = g_.op(k).output_desc(o);
      retype(g_.mutable_op(k)->mutable_output_desc(o), to);
      TensorDescriptor wideDesc = g_.op(k).output_desc(o);
      wideDesc.clear_name();
      const std::string back =
          addCast(fmt::format("{}_out{}_cast", g_.op(k).name(), o), produced, wideDesc, *from);
      // The cast-back output carries the value's name and type; every reader moves to it.
      OpDef& castOp = *g_.mutable_op(g_.op_size() - 1);
      castOp.mutable_output_desc(0)->set_name(original.name());
      for (OpDef& reader : *g_.mutable_op())
        if (&reader != &castOp)
          for (int i = 0; i < reader.input_size(); ++i)
            if (reader.input(i) == produced) reader.set_input(i, back);
    }
  }

  ge::proto::GraphDef& g_;
  std::set<std::string> names_;
  int64_t nextId_ = 0;
};

} // namespace

void legalizeDTypes(LoweredModel& model) {
  for (auto& g : *model.modelDef.mutable_graph())
    TypeLegalizer(g).run();
}

} // namespace kiln::om
