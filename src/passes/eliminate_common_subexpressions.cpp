// eliminate-common-subexpressions: merges nodes that compute the same thing, and identical small
// initializers.
//
//   init %a = f32[2] {1, 2}; init %b = f32[2] {1, 2}   →  init %a       (readers of %b read %a)
//   %p = Relu(%x); %q = Relu(%x)                       →  %p = Relu(%x)  (readers of %q read %p)
// Two nodes match when op type, domain, inputs (the same values) and attributes (kind and value,
// tensors by contents, floats bit for bit) agree; their outputs then agree too. The first
// occurrence in topological order survives and takes the other's locations, so results do not
// depend on hashing. Random ops, training Dropout and nodes holding subgraphs never match, and a
// duplicate whose output is a graph output stays, as replacing it would rename the output.
// Initializers above 1 MiB, graph inputs (callers may override them) and outputs are not merged.
#include <map>
#include <unordered_map>

#include <spdlog/spdlog.h>

#include "kiln/ir/node_equality.h"
#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

constexpr size_t kMaxMergedInitializerBytes = 1u << 20;

void mix(size_t& seed, size_t value) {
  seed ^= value + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2);
}

size_t hashBytes(const uint8_t* data, size_t size) {
  return std::hash<std::string_view>{}(std::string_view(reinterpret_cast<const char*>(data), size));
}

size_t tensorHash(const Tensor& t) {
  size_t seed = static_cast<size_t>(t.dtype());
  for (int64_t d : t.dims())
    mix(seed, static_cast<size_t>(d));
  if (t.dtype() == DType::String) {
    for (const std::string& s : t.stringValues())
      mix(seed, std::hash<std::string>{}(s));
  } else {
    mix(seed, hashBytes(t.data(), t.byteSize()));
  }
  return seed;
}

// --- initializers ---

bool mergeInitializers(Graph& graph, bool explain) {
  std::unordered_map<size_t, std::vector<Value*>> byHash;
  std::vector<std::pair<Value*, Value*>> merges; // duplicate → survivor
  for (Value* init : graph.initializers()) {
    const Tensor& t = init->initializer();
    if (init->isGraphInput() || init->isGraphOutput() || t.byteSize() > kMaxMergedInitializerBytes)
      continue;
    auto& bucket = byHash[tensorHash(t)];
    auto same = std::find_if(bucket.begin(), bucket.end(),
                             [&](const Value* v) { return v->initializer().sameContents(t); });
    if (same == bucket.end())
      bucket.push_back(init);
    else
      merges.emplace_back(init, *same);
  }
  for (auto [dup, survivor] : merges) {
    if (explain)
      spdlog::debug("eliminate-common-subexpressions: initializer '{}' is a copy of '{}'",
                    dup->name(), survivor->name());
    graph.replaceAllUsesWith(dup, survivor);
    graph.eraseValue(dup);
  }
  return !merges.empty();
}

// --- nodes ---

// Attributes by name, so the hash does not depend on the order they were written in.
std::map<std::string, const Attribute*> attributeMap(const Node& node) {
  std::map<std::string, const Attribute*> out;
  for (const auto& [name, value] : node.attributes())
    out.emplace(name, &value);
  return out;
}

bool sameComputation(const Node& a, const Node& b) {
  if (a.opType() != b.opType() || a.domain() != b.domain() || a.inputs() != b.inputs() ||
      a.outputs().size() != b.outputs().size())
    return false;
  for (size_t i = 0; i < a.outputs().size(); ++i)
    if (!a.output(i) && b.output(i)) return false; // b computes an output a skipped
  return sameAttributes(a, b);
}

size_t nodeHash(const Node& node) {
  size_t seed = std::hash<std::string>{}(node.opType());
  mix(seed, std::hash<std::string>{}(node.domain()));
  for (const Value* in : node.inputs())
    mix(seed, std::hash<const Value*>{}(in));
  for (const auto& [name, attr] : attributeMap(node)) {
    mix(seed, std::hash<std::string>{}(name));
    mix(seed, static_cast<size_t>(attr->kind()));
    if (attr->kind() == AttrKind::Int) mix(seed, static_cast<size_t>(attr->asInt()));
    if (attr->kind() == AttrKind::Ints)
      for (int64_t v : attr->asInts())
        mix(seed, static_cast<size_t>(v));
  }
  return seed;
}

bool isCandidate(const Node& node) {
  if (node.outputs().empty() || !node.subgraphs().empty()) return false;
  const bool onnx = node.domain().empty() || node.domain() == "ai.onnx";
  if (onnx && drawsRandomNumbers(node.opType())) return false;
  if (onnx && node.opType() == "Dropout" && node.input(2)) {
    // Dropout draws a fresh mask in training mode; only a constant false is deterministic.
    auto training = rewrite::constantTensor(node.input(2));
    if (!training || training->copyValues<uint8_t>() != std::vector<uint8_t>{0}) return false;
  }
  return true;
}

bool eliminate(Graph& graph, bool explain);

bool mergeNodes(Graph& graph, bool explain) {
  bool changed = false;
  std::unordered_map<size_t, std::vector<Node*>> byHash;
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  // Topological order: a merge rewires later readers before they are hashed, so chains of
  // duplicates collapse in one sweep. Only the visited node is erased.
  for (Node* node : order) {
    for (Graph* sub : node->subgraphs()) // merged within their own scope
      changed |= eliminate(*sub, explain);
    if (!isCandidate(*node)) continue;
    auto& bucket = byHash[nodeHash(*node)];
    auto same = std::find_if(bucket.begin(), bucket.end(),
                             [&](const Node* n) { return sameComputation(*n, *node); });
    if (same == bucket.end()) {
      bucket.push_back(node);
      continue;
    }
    Node* survivor = *same;
    bool namesOutput = std::any_of(node->outputs().begin(), node->outputs().end(),
                                   [](const Value* v) { return v && v->isGraphOutput(); });
    if (namesOutput) {
      if (explain)
        spdlog::debug("eliminate-common-subexpressions: keeping '{}' ({}): its output is a graph "
                      "output",
                      node->name(), node->opType());
      continue;
    }
    if (explain)
      spdlog::debug("eliminate-common-subexpressions: '{}' ({}) repeats '{}'", node->name(),
                    node->opType(), survivor->name());
    for (size_t i = 0; i < node->outputs().size(); ++i)
      if (Value* out = node->output(i)) graph.replaceAllUsesWith(out, survivor->output(i));
    survivor->mergeLocations(*node);
    graph.eraseNode(node);
    changed = true;
  }
  return changed;
}

bool eliminate(Graph& graph, bool explain) {
  bool changed = mergeInitializers(graph, explain);
  return mergeNodes(graph, explain) || changed;
}

class EliminateCommonSubexpressions : public Pass {
 public:
  std::string_view name() const override { return "eliminate-common-subexpressions"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return eliminate(graph, context.explain);
  }
};

} // namespace

std::unique_ptr<Pass> makeEliminateCommonSubexpressionsPass() {
  return std::make_unique<EliminateCommonSubexpressions>();
}

} // namespace kiln
