// fuse-half-cast: the float32 → float16 Cast the .ms writer pre-rounds is a plain Cast again.
//
//   %t = Mul(%x, 8193); %r = Sub(%t, Sub(%t, %x))
//   %y = Cast(Where(Less(Abs(%x), 65520), %r, %x)) {to = float16}   →  %y = Cast(%x) {to = float16}
// The MindSpore Lite runtime's float32 → float16 Cast truncates the mantissa, so the writer first
// rounds x to float16's 11 significant bits by Veltkamp's split (src/backends/ms/ops/
// elementwise.cpp, roundedToHalf); kiln's Cast rounds to nearest itself, as ONNX says, so the
// pre-rounding only costs six full-tensor ops per Cast (a float16 .ms widens and narrows around
// every op the runtime runs in float32). The results agree but where the split and the Cast round
// a tie or a float16 subnormal differently: float rounding. Nodes of the idiom that something else
// reads stay.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

using rewrite::isOp;
using rewrite::isScalar;
using rewrite::producerOf;

// x when `cast` is the pre-rounded float32 → float16 Cast; nullptr otherwise.
Value* preRoundedInput(const Node& cast) {
  if (!isOp(&cast, "Cast", 1)) return nullptr;
  const Attribute* to = cast.attribute("to");
  if (!to || to->kind() != AttrKind::Int || to->asInt() != static_cast<int64_t>(DType::Float16))
    return nullptr;
  Node* where = producerOf(cast.input(0), "Where", 3);
  if (!where) return nullptr;
  Value* x = where->input(2);
  if (!x || x->dtype() != DType::Float32) return nullptr;
  Node* inRange = producerOf(where->input(0), "Less", 2);
  if (!inRange || !isScalar(inRange->input(1), 65520.0f)) return nullptr;
  Node* abs = producerOf(inRange->input(0), "Abs", 1);
  if (!abs || abs->input(0) != x) return nullptr;
  Node* outer = producerOf(where->input(1), "Sub", 2);
  if (!outer) return nullptr;
  Value* t = outer->input(0);
  Node* inner = producerOf(outer->input(1), "Sub", 2);
  if (!inner || inner->input(0) != t || inner->input(1) != x) return nullptr;
  Node* scale = producerOf(t, "Mul", 2);
  if (!scale || scale->input(0) != x || !isScalar(scale->input(1), 8193.0f)) return nullptr;
  return x;
}

size_t fuseHalfCasts(Graph& graph, const PassContext& context) {
  size_t count = 0;
  for (const auto& node : graph.nodes())
    for (Graph* sub : node->subgraphs())
      count += fuseHalfCasts(*sub, context);
  std::vector<Node*> order;
  for (const auto& node : graph.nodes())
    order.push_back(node.get());
  for (Node* cast : order) {
    Value* x = preRoundedInput(*cast);
    if (!x) continue;
    Node* where = cast->input(0)->producer();
    cast->setInput(0, x);
    rewrite::eraseUnread(graph, {where});
    if (context.explain)
      spdlog::debug("fuse-half-cast: '{}' casts '{}' directly", cast->output(0)->name(), x->name());
    ++count;
  }
  return count;
}

class FuseHalfCast : public Pass {
 public:
  std::string_view name() const override { return "fuse-half-cast"; }
  Expected<bool> run(Graph& graph, PassContext& context) override {
    return fuseHalfCasts(graph, context) > 0;
  }
};

} // namespace

std::unique_ptr<Pass> makeFuseHalfCastPass() { return std::make_unique<FuseHalfCast>(); }

} // namespace kiln
