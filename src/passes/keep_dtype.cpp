// Reader and model check for ATC --keep_dtype files (see include/kiln/passes/keep_dtype.h).
#include "kiln/passes/keep_dtype.h"

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "kiln/support/input_file.h"

namespace kiln {
namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

Status invalid(const std::string& path, size_t line, const std::string& what,
               const std::string& fix) {
  std::string where = line ? fmt::format("{}:{}", path, line) : path;
  return Status(ErrorCode::PrecisionConfigInvalid,
                fmt::format("keep_dtype file {}: {}", where, what), fix);
}

} // namespace

std::string keepDtypeNodeName(const Node& node) {
  if (!node.name().empty() || node.outputs().empty() || !node.output(0)) return node.name();
  return node.output(0)->name();
}

bool keepDtypeNames(const Node& node, const std::vector<std::string>& entries) {
  if (entries.empty()) return false;
  const std::string prefix = kKeepDtypeOpTypePrefix;
  auto named = [&](const std::string& name, const std::string& opType) {
    for (const std::string& entry : entries)
      if ((!name.empty() && entry == name) || entry == prefix + opType) return true;
    return false;
  };
  if (named(keepDtypeNodeName(node), node.opType())) return true;
  for (const Location& from : node.locations())
    if (named(from.nodeName, from.opType)) return true;
  return false;
}

Expected<std::vector<std::string>> parseKeepDtypeText(const std::string& text,
                                                      const std::string& displayName) {
  std::istringstream in(text);
  std::vector<std::string> entries;
  std::string raw;
  size_t lineNo = 0;
  const std::string prefix = kKeepDtypeOpTypePrefix;
  while (std::getline(in, raw)) {
    ++lineNo;
    std::string entry = trim(raw);
    if (entry.empty()) continue;
    for (unsigned char c : entry)
      if (c < 0x20 || c == 0x7f)
        return invalid(displayName, lineNo, fmt::format("holds control character 0x{:02x}", c),
                       "write one node name per line as plain text");
    if (entry.rfind(prefix, 0) == 0 && trim(entry.substr(prefix.size())).empty())
      return invalid(displayName, lineNo, "'OpType::' names no op type",
                     "write the op type after the prefix, e.g. OpType::Softmax");
    if (entry.rfind(prefix, 0) == 0) entry = prefix + trim(entry.substr(prefix.size()));
    entries.push_back(entry);
  }
  if (entries.empty())
    return invalid(displayName, 0, "holds no entry",
                   "list the node names to keep in fp32, one per line (or drop --keep_dtype)");
  return entries;
}

Expected<std::vector<std::string>> readKeepDtypeFile(const std::string& path) {
  auto text = readInputFile(path);
  if (!text && text.status().code() == ErrorCode::FileNotFound)
    return invalid(path, 0, "cannot be opened (File defined by keep_dtype is not found)",
                   "pass the path of an existing text file with one node name per line")
        .withPeerCode("E10410");
  if (!text)
    return invalid(path, 0, text.status().message(), text.status().hint()).withPeerCode("E10410");
  return parseKeepDtypeText(*text, path);
}

Expected<KeepDtypeCheck> checkKeepDtypeEntries(const Graph& graph,
                                               const std::vector<std::string>& entries,
                                               const std::string& path) {
  std::set<std::string> names, opTypes;
  for (const auto& node : graph.nodes()) {
    names.insert(keepDtypeNodeName(*node));
    opTypes.insert(node->opType());
    // Entries may name the nodes a fusion absorbed (convert-fp16 matches them through locations).
    for (const Location& from : node->locations()) {
      if (!from.nodeName.empty()) names.insert(from.nodeName);
      if (!from.opType.empty()) opTypes.insert(from.opType);
    }
  }
  const std::string prefix = kKeepDtypeOpTypePrefix;
  KeepDtypeCheck check;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string& e = entries[i];
    bool known =
        e.rfind(prefix, 0) == 0 ? opTypes.count(e.substr(prefix.size())) > 0 : names.count(e) > 0;
    if (!known) check.unknown.push_back(e);
  }
  if (!entries.empty() && check.unknown.size() == entries.size())
    return Status(ErrorCode::PrecisionConfigInvalid,
                  fmt::format("keep_dtype {}: none of its {} entries names a node or op type of "
                              "graph '{}' (first: '{}')",
                              path.empty() ? std::string("list") : "file " + path, entries.size(),
                              graph.name(), entries.front()),
                  "use node names as `kiln inspect --ir MODEL` prints them (after @), or "
                  "OpType::<type>");
  return check;
}

Expected<std::vector<std::string>> addKeepDtypeFile(const Graph& graph, const std::string& path,
                                                    PrecisionOptions& precision) {
  KILN_ASSIGN_OR_RETURN(std::vector<std::string> entries, readKeepDtypeFile(path));
  KILN_ASSIGN_OR_RETURN(KeepDtypeCheck check, checkKeepDtypeEntries(graph, entries, path));
  precision.keepNodeNames.insert(precision.keepNodeNames.end(), entries.begin(), entries.end());
  return check.unknown;
}

} // namespace kiln
