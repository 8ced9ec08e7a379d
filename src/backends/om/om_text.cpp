// `kiln lower --target om`: the lowered GraphEngine graph (heavy formats applied) in protobuf's
// text format, the ModelDef as the writer would serialize it, weights aside; one line per op so
// golden tests and diffs read op by op.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/text_format.h>

#include "kiln/backends/om.h"
#include "om_internal.h"

namespace kiln {

Expected<std::string> omLoweredText(const Model& model, const OmWriteOptions& options) {
  KILN_ASSIGN_OR_RETURN(om::LoweredModel lowered, om::lowerModel(model, options));
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  auto line = [&](const google::protobuf::Message& message) {
    std::string text;
    printer.PrintToString(message, &text);
    while (!text.empty() && text.back() == ' ')
      text.pop_back();
    return text;
  };
  const ge::proto::ModelDef& def = lowered.modelDef;
  std::string out = fmt::format("om model '{}' version {}, {} bytes of weights\n", def.name(),
                                def.version(), lowered.weights.size);
  for (const auto& [key, value] :
       std::map<std::string, ge::proto::AttrDef>(def.attr().begin(), def.attr().end()))
    out += fmt::format("attr {}: {}\n", key, line(value));
  for (const auto& graph : def.graph()) {
    // Outputs are the NetOutput op's inputs (GE leaves GraphDef.output empty).
    out += fmt::format("graph '{}' inputs [{}]\n", graph.name(), fmt::join(graph.input(), ", "));
    for (const auto& op : graph.op())
      out += "op " + line(op) + "\n";
  }
  return out;
}

} // namespace kiln
