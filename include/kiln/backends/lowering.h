// Per-op rule tables shared by the .ms and .om backends: one lowering rule per ONNX op (a pure
// `check` and the `lower` that emits target ops) and one raising rule per target op, registered
// from the backend's family files (src/backends/<target>/ops/<family>.cpp) by static initializers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::lowering {

// What a rule may know about where a node is going: the model's opset for the node's domain and
// the target variant (the SoC for .om, "" for .ms).
struct OpContext {
  int64_t opset = 0;
  std::string variant;
};

// A node's one label in every message: "node 'conv1' (Conv)" or, unnamed, "node producing 'y'
// (Conv)" (the first named output) or "node #7 (Conv)" (its position) when it has no output.
std::string nodeLabel(const Node& node, size_t position = 0);

// The key a node's lowering rule is registered under: the op type for ai.onnx, "domain::op" for
// other domains ("com.microsoft::MatMulNBits"), as the executor's kernel registry names them.
inline std::string ruleKey(const Node& node) {
  if (node.domain().empty() || node.domain() == "ai.onnx") return node.opType();
  return node.domain() + "::" + node.opType();
}

// Lowering rule for one ONNX op. `check` is pure and says why the node cannot be taken ("" when
// it can): it is what `kiln check --target`, `atc --mode=3` and the converters report, every
// problem at once. `lower` fails only for what `check` cannot know.
template <typename Ctx> struct LoweringRule {
  std::function<std::string(const Node&, const OpContext&)> check;
  std::function<Status(Ctx&, const Node&)> lower;
  const char* file = ""; // the family file that registered it (docs/ops.md, coverage test)
};

// Raising rule for one target op (the reader's inverse of a lowering), keyed by the target's op
// name (GE type for .om, PrimitiveType name for .ms).
template <typename Ctx, typename TargetOp> struct RaisingRule {
  std::function<Status(Ctx&, const TargetOp&)> raise;
  const char* file = "";
};

// A name → rule map; registering one key twice is a programming error and aborts at start-up.
template <typename Rule> class RuleTable {
 public:
  explicit RuleTable(const char* what) : what_(what) {}
  bool add(const std::string& key, Rule rule) {
    if (!rules_.emplace(key, std::move(rule)).second) {
      std::fprintf(stderr, "kiln: internal error: %s rule '%s' registered twice\n", what_,
                   key.c_str());
      std::abort();
    }
    return true;
  }
  const Rule* find(const std::string& key) const {
    auto it = rules_.find(key);
    return it == rules_.end() ? nullptr : &it->second;
  }
  const std::map<std::string, Rule>& all() const { return rules_; }

 private:
  const char* what_;
  std::map<std::string, Rule> rules_;
};

// One node the target cannot take, and why.
struct Refusal {
  const Node* node = nullptr;
  std::string label;  // nodeLabel(node)
  std::string reason; // the rule's words
  // true: the op itself (no rule, domain, subgraphs, attribute kinds); false: a value the target
  // cannot hold (dtype, shape) — the backends report the two with different codes.
  bool isOp = true;
  // Set by collectUnsupported when the op's own rule check refused the node (the checks every
  // target shares passed), so a backend can code the two kinds without checking again.
  bool byRule = false;
  // A refusal only fixed input shapes lift (a size the model leaves dynamic).
  bool dynamic = false;
};

// The checks every target shares before its own rule: the node's domain, subgraphs, the
// attribute kinds against the ONNX schema of the model's opset, and a rule for the op.
// "" when they pass.
std::string commonReason(const Node& node, const OpContext& context, bool hasRule);

// Every node of `graph` (not its subgraphs) that `table` cannot take, in graph order.
template <typename Ctx>
std::vector<Refusal> collectUnsupported(const Graph& graph,
                                        const RuleTable<LoweringRule<Ctx>>& table,
                                        const OpContext& context) {
  std::vector<Refusal> refusals;
  size_t position = 0;
  for (const auto& node : graph.nodes()) {
    ++position;
    const LoweringRule<Ctx>* rule = table.find(ruleKey(*node));
    std::string reason = commonReason(*node, context, rule != nullptr);
    const bool byRule = reason.empty();
    if (byRule && rule && rule->check) reason = rule->check(*node, context);
    if (!reason.empty())
      refusals.push_back({node.get(), nodeLabel(*node, position), reason, true, byRule});
  }
  return refusals;
}

} // namespace kiln::lowering

#define KILN_LOWERING_CONCAT_INNER(a, b) a##b
#define KILN_LOWERING_CONCAT(a, b) KILN_LOWERING_CONCAT_INNER(a, b)
// Registers `rule` under `key` in `table` from a static initializer (one per line).
#define KILN_REGISTER_RULE(table, key, ...)                                                        \
  static const bool KILN_LOWERING_CONCAT(kilnRuleRegistered_, __LINE__) =                          \
      (table).add(key, __VA_ARGS__)
