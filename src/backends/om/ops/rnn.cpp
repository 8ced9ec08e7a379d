// .om rules of the rnn family. formats/om.md describes no GraphEngine recurrent op, so RNN, GRU
// and LSTM are unrolled into standard ops by the conversion pipeline (passes/expand_rnn.cpp, run
// through the om target's prepare hook) before lowering; these rules only refuse what is left,
// saying why it could not be unrolled.
#include "../om_context.h"
#include "kiln/passes/expand_rnn.h"

namespace kiln::om {
namespace {

std::string checkRecurrent(const Node& n, const OpContext&) {
  const std::string why = "kiln writes no GraphEngine recurrent op (formats/om.md has none)";
  const std::string blocker = rnnUnrollBlocker(n);
  if (blocker.empty()) return why + "; the conversion pipeline unrolls it into standard ops";
  return why + ", and it cannot be unrolled: " + blocker;
}

Status lowerRecurrent(Lowerer&, const Node& n) {
  return Status(ErrorCode::OmLowerUnsupported, checkRecurrent(n, OpContext{}),
                "convert through atc or `kiln check --target om`, which unroll it");
}

void recurrentRules() {
  for (const char* op : {"RNN", "GRU", "LSTM"})
    addLowering(op, checkRecurrent, lowerRecurrent, __FILE__);
}
const bool kRecurrentRulesRegistered = (recurrentRules(), true);

} // namespace
} // namespace kiln::om
