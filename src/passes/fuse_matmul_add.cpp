// fuse-matmul-add: turns a 2-D MatMul by a constant followed by an Add of a bias into one Gemm.
//
//   %m = MatMul(%a: f32[M,K], %w: init f32[K,N])
//   %y = Add(%m, %c: f32[N] | f32[1,N] | f32[M,N] | f32[M,1] | f32[])   →   %y = Gemm(%a, %w, %c)
// Gemm's C broadcasts one way only (to [M, N]), so the rule declines when the Add would broadcast
// the product itself (A not 2-D, C of rank > 2 or with a dim that is neither 1 nor the product's).
// The Gemm keeps the Add's output name and the locations of both originals.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "kiln/passes/pass.h"
#include "rewrite_util.h"

namespace kiln {
namespace {

bool isOnnxOp(const Node& node, const char* op) {
  return node.opType() == op && (node.domain().empty() || node.domain() == "ai.onnx");
}

bool gemmType(DType t) {
  return t == DType::Float32 || t == DType::Float16 || t == DType::Float64 || t == DType::BFloat16;
}

// Whether dim `c` of C broadcasts to the product's dim `p` without growing it.
bool broadcastsTo(const Dim& c, const Dim& p) {
  if (c.isStatic() && c.value() == 1) return true;
  return c == p && (c.isStatic() || c.isSymbolic());
}

// Why `c` cannot be Gemm's C for a [M, N] product, or "".
std::string biasDeclineReason(const Value* c, const Dim& m, const Dim& n) {
  if (!c->shape().hasRank()) return fmt::format("bias '{}' has an unknown rank", c->name());
  const auto& dims = c->shape().dims();
  if (dims.size() > 2)
    return fmt::format("bias '{}' {} has rank > 2", c->name(), c->shape().toString());
  bool ok = true;
  if (dims.size() == 1) ok = broadcastsTo(dims[0], n);
  if (dims.size() == 2) ok = broadcastsTo(dims[0], m) && broadcastsTo(dims[1], n);
  if (!ok)
    return fmt::format("bias '{}' {} does not broadcast to [{},{}] one way", c->name(),
                       c->shape().toString(), m.toString(), n.toString());
  return "";
}

// Fuses `add` with the MatMul feeding it; returns why it declined, "" after fusing, or nullopt when
// no MatMul feeds it (not worth a word under --explain).
std::optional<std::string> tryFuse(Graph& graph, Node* add, const PassContext& context) {
  if (add->inputs().size() != 2 || !add->input(0) || !add->input(1) || !add->output(0))
    return std::nullopt;
  Node* matmul = nullptr;
  size_t productSide = 0;
  for (size_t side = 0; side < 2 && !matmul; ++side) {
    Node* p = add->input(side)->producer();
    if (p && isOnnxOp(*p, "MatMul") && p->output(0) == add->input(side) &&
        add->input(0) != add->input(1)) {
      matmul = p;
      productSide = side;
    }
  }
  if (!matmul) return std::nullopt;
  if (context.opset() < 7) return "Gemm before opset 7 needs the broadcast attribute";
  Value* product = add->input(productSide);
  Value* c = add->input(1 - productSide);
  if (!rewrite::onlyFeeds(product, add))
    return fmt::format("'{}' has other readers or is a graph output", product->name());
  Value* a = matmul->input(0);
  Value* b = matmul->input(1);
  if (!a || !b) return "MatMul is missing an input";
  if (!gemmType(a->dtype()) || a->dtype() != c->dtype() ||
      (a->dtype() == DType::BFloat16 && context.opset() < 13))
    return fmt::format("element type {} is not a Gemm float type shared by the bias",
                       dtypeName(a->dtype()));
  if (!a->shape().hasRank() || a->shape().rank() != 2)
    return fmt::format("A '{}' {} is not 2-D", a->name(), a->shape().toString());
  const Tensor* w = rewrite::constantTensor(b);
  if (!w || w->dims().size() != 2 || w->dtype() != a->dtype())
    return fmt::format("B '{}' is not a constant 2-D initializer", b->name());
  const Dim m = a->shape()[0];
  const Dim n = Dim::known(w->dims()[1]);
  if (std::string why = biasDeclineReason(c, m, n); !why.empty()) return why;
  rewrite::replaceChain(graph, {matmul, add}, "Gemm", matmul->domain(), {a, b, c}, {});
  return "";
}

bool fuse(Graph& graph, const PassContext& context) {
  // Only the visited Add and nodes before it are erased, so later entries stay valid.
  return rewrite::rewriteEachNode(graph, [&](Node* node) {
    if (!isOnnxOp(*node, "Add")) return false;
    std::string label = node->name();
    auto why = tryFuse(*node->owner(), node, context);
    if (!why) return false;
    if (why->empty()) {
      if (context.explain) spdlog::debug("fuse-matmul-add: '{}' and its MatMul → Gemm", label);
      return true;
    }
    if (context.explain) spdlog::debug("fuse-matmul-add: '{}' not fused: {}", label, *why);
    return false;
  });
}

class FuseMatMulAdd : public Pass {
 public:
  std::string_view name() const override { return "fuse-matmul-add"; }
  Expected<bool> run(Graph& graph, PassContext& context) override { return fuse(graph, context); }
};

} // namespace

std::unique_ptr<Pass> makeFuseMatMulAddPass() { return std::make_unique<FuseMatMulAdd>(); }

} // namespace kiln
