// ATC --keep_dtype files: node names (and `OpType::Type` entries) kept at their original dtype.
#pragma once

#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/passes/pass.h"
#include "kiln/support/status.h"

namespace kiln {

// Reads a --keep_dtype file: one entry per line, either a node name or `OpType::<op type>`;
// surrounding blank space and empty lines are ignored, CRLF line ends accepted. Entries are
// returned as written (`OpType::Softmax` keeps its prefix; PrecisionOptions::keepNodeNames accepts
// both forms). Errors: K4201 PrecisionConfigInvalid naming the file (and line): the file cannot be
// read, holds no entry, or a line is `OpType::` with no type or holds a control character.
Expected<std::vector<std::string>> readKeepDtypeFile(const std::string& path);
// The same on text already in memory; `displayName` names the source in errors (the fuzz target
// tests/fuzz/keep_dtype_fuzz.cpp feeds it arbitrary bytes).
Expected<std::vector<std::string>> parseKeepDtypeText(const std::string& text,
                                                      const std::string& displayName);

// Entries of `entries` that name no node (and no op type) of `graph`, as written. Callers report
// them as notes; K4201 (naming `path`) when none of the entries matches anything.
struct KeepDtypeCheck {
  std::vector<std::string> unknown; // entries that match nothing in the graph
};
Expected<KeepDtypeCheck> checkKeepDtypeEntries(const Graph& graph,
                                               const std::vector<std::string>& entries,
                                               const std::string& path);

// Reads and checks a --keep_dtype file against `graph` and adds its entries to
// `precision.keepNodeNames`: the one reading atc, `kiln opt` and `kiln sensitivity` share (an empty
// file or one naming nothing is K4201 for all of them). Returns the entries that name nothing, for
// callers to note.
Expected<std::vector<std::string>> addKeepDtypeFile(const Graph& graph, const std::string& path,
                                                    PrecisionOptions& precision);

// The name a keep_dtype entry matches: the node's name, or for an unnamed node (ONNX allows them)
// its first output's name.
std::string keepDtypeNodeName(const Node& node);

// Whether one of `entries` (keep_dtype names and `OpType::` entries) names `node`: by its own name
// and op type, or by the name or op type of any source node fused into it (its locations), so an
// entry naming a node a fusion absorbed (MatMul + Add → Gemm) still keeps the fused node.
bool keepDtypeNames(const Node& node, const std::vector<std::string>& entries);

// The `OpType::` prefix of an entry naming an op type rather than a node.
inline constexpr const char* kKeepDtypeOpTypePrefix = "OpType::";

} // namespace kiln
