// The node-validation layer: every reader (ONNX importer, .ms and .om raisers) and ONNX shape
// inference run it before anything else touches a node, so a node with missing inputs or
// impossible attributes is one coded error instead of a crash in whichever stage meets it first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::ops {

// What an op family's attribute check may look at: the same questions answered from an IR node
// (at import, ranks where the model declares them) and from ONNX's inference context (inside shape
// inference, ranks as inferred so far). Absent attributes, attributes of another kind and
// unknown ranks/dims are nullopt: a check decides only what it can know.
class NodeFacts {
 public:
  virtual ~NodeFacts() = default;
  virtual const std::string& opType() const = 0;
  virtual int64_t opset() const = 0;
  virtual std::optional<int64_t> intAttr(const char* name) const = 0;
  virtual std::optional<std::vector<int64_t>> intsAttr(const char* name) const = 0;
  virtual std::optional<std::string> stringAttr(const char* name) const = 0;
  virtual size_t inputCount() const = 0;
  virtual std::optional<int64_t> inputRank(size_t input) const = 0;
  virtual std::optional<int64_t> inputDim(size_t input, size_t axis) const = 0;
};

// How many inputs and outputs an op kiln declares itself takes: its first `minInputs` inputs and
// `minOutputs` outputs are required, the rest up to the maxima optional.
struct OpArity {
  int minInputs = 0;
  int maxInputs = 0;
  int minOutputs = 0;
  int maxOutputs = 0;
};
// The arity of an op kiln declares itself at `opset` (kilnDeclaresOp), nullopt for the rest.
std::optional<OpArity> kilnArity(const std::string& opType, int64_t opset);

// One op family's attribute check: why the node's attributes are impossible ("attribute 'strides'
// has 0 at axis 0; strides must be >= 1"), "" when they are fine or cannot be judged yet.
using AttributeCheck = std::string (*)(const NodeFacts& node);

// Registers `check` for ai.onnx `op` (static initialization, beside the family's other shared
// decisions in src/ops/<family>.cpp); a second registration aborts.
bool registerAttributeCheck(const char* op, AttributeCheck check);

// Why `node`'s inputs/outputs disagree with its op's schema at `opset` (too few or too many, or
// a required input or output left empty ""), "" when they agree or no schema is known. The schema
// is the onnx library's, or kiln's own for ops newer than the library (ops/attributes.h).
std::string arityReason(const Node& node, int64_t opset);
// Why `node` lacks an attribute its schema requires (an If without then_branch, a Scan without
// body), "" otherwise.
std::string requiredAttributeReason(const Node& node, int64_t opset);
// The registered family check on `node`, ranks from its input values' shapes where known.
std::string attributeReason(const Node& node, int64_t opset);

// The whole layer for one node: K2015 BadArity, else K2013 BadAttribute (kinds, required
// attributes, the family check), naming the node as `where: node 'n' (Op): ...`.
Status validateNode(const Node& node, int64_t opset, const std::string& where);
// validateNode on every node of `graph` and of every subgraph, nested ones included, at the
// model's opsets; `where` of each node names its graph ("graph 'g'").
Status validateGraph(const Graph& graph, const Model& model);

// Makes ONNX's shape inference run the registered family checks on each node with the input
// ranks it has inferred so far, failing the node's inference (an inference error, which callers
// already handle) instead of reaching an inference function that divides by a zero stride or
// indexes dims by an out-of-range axis. Idempotent; call before any InferShapes.
void guardShapeInference();

// Shared helpers for family checks. `axisReason("axis", -99, rank, false)`: why `value` is not an
// axis of a rank-`rank` tensor (in [-rank, rank), or [-rank, rank] when `inclusiveEnd`).
std::string axisReason(const char* attribute, int64_t value, int64_t rank,
                       bool inclusiveEnd = false);
// axisReason for INT attribute `name` against input `input`'s rank when known, widened by
// `extraRank` (OneHot's axis indexes its output, one rank up).
std::string axisAttrReason(const NodeFacts& node, const char* name, size_t input = 0,
                           bool inclusiveEnd = false, int64_t extraRank = 0);
// The same for each entry of INTS attribute `name` (reduction and squeeze axes), which must also
// be distinct; `extraRank` -1 means "widened by the entry count" (Unsqueeze's axes).
std::string axesAttrReason(const NodeFacts& node, const char* name, size_t input = 0,
                           int64_t extraRank = 0);
// Why INT attribute `name` is below `least` ("" when absent or fine).
std::string atLeastReason(const NodeFacts& node, const char* name, int64_t least);

} // namespace kiln::ops

#ifndef KILN_OPS_CONCAT
#define KILN_OPS_CONCAT_INNER(a, b) a##b
#define KILN_OPS_CONCAT(a, b) KILN_OPS_CONCAT_INNER(a, b)
#endif
#define KILN_OP_CHECK(op, check)                                                                   \
  static const bool KILN_OPS_CONCAT(kilnCheckRegistered_, __LINE__) =                              \
      ::kiln::ops::registerAttributeCheck(op, check)
