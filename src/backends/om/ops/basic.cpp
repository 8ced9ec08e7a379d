// .om rules for Identity, Constant, Shape and Size.
#include "kiln/ir/constant.h"

#include "../om_context.h"

namespace kiln::om {
namespace {

KILN_OM_LOWERING(
    "Constant",
    [](const Node& n, const OpContext&) -> std::string {
      const Attribute* v = n.attribute("value");
      if (v && v->kind() == AttrKind::Tensor) return "";
      for (const char* a : {"value_float", "value_int", "value_floats", "value_ints"})
        if (n.attribute(a)) return "";
      return "Constant of this kind";
    },
    [](Lowerer& l, const Node& n) {
      l.bind(n.output(0), l.constant("value", *constantNodeValue(n)));
    });
void basicRules() {
  simple("Identity", "Identity", {}, 1, noCheck, __FILE__);
  simple("Shape", "Shape", {{"start", "start"}, {"end", "end"}}, 1, noCheck, __FILE__);
  simple("Size", "Size", {}, 1, noCheck, __FILE__);
}
const bool kBasicRulesRegistered = (basicRules(), true);

} // namespace
} // namespace kiln::om
