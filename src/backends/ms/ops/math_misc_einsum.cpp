// .ms rules of the math_misc family, Einsum half: .ms has no Einsum, so one- and two-operand
// equations are rewritten into Where (diagonals), ReduceFusion (summed-out labels), Transpose,
// Reshape and a batched MatMulFusion. Lowering only: every op emitted is read back elsewhere.
#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <string>
#include <vector>

#include "backends/ms/ms_chain.h"
#include "backends/ms/ms_context.h"
#include "ops/attributes.h"

namespace kiln::ms {
namespace {

using PT = fb::PrimitiveType;

// One operand while it is rewritten: its .ms tensor, one label per axis and the static dims.
struct Operand {
  uint32_t id = 0;
  std::string labels;
  std::vector<int64_t> dims;
};

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

// Parses `equation` for operands of `ranks`, spelling "..." as fresh labels ('0', '1', ...).
Expected<Equation> parseEquation(std::string eq, const std::vector<int>& ranks) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  Equation e;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    e.inputs.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.inputs.size() != ranks.size())
    return bad("equation names {} operands for {} inputs", e.inputs.size(), ranks.size());
  int ellipsis = -1;
  for (size_t i = 0; i < e.inputs.size(); ++i) {
    std::string& s = e.inputs[i];
    const size_t dots = s.find("...");
    if (dots == std::string::npos) {
      if (int(s.size()) != ranks[i]) return bad("operand '{}' for rank {}", s, ranks[i]);
      continue;
    }
    const int n = ranks[i] - int(s.size() - 3);
    if (n < 0) return bad("operand '{}' for rank {}", s, ranks[i]);
    if (ellipsis >= 0 && n != ellipsis) return bad("'...' covering different ranks");
    ellipsis = n;
    std::string fresh;
    for (int k = 0; k < n; ++k)
      fresh.push_back(char('0' + k));
    s = s.substr(0, dots) + fresh + s.substr(dots + 3);
  }
  std::string fresh;
  for (int k = 0; k < std::max(ellipsis, 0); ++k)
    fresh.push_back(char('0' + k));
  if (arrow != std::string::npos) {
    e.output = eq.substr(arrow + 2);
    const size_t dots = e.output.find("...");
    if (dots != std::string::npos)
      e.output = e.output.substr(0, dots) + fresh + e.output.substr(dots + 3);
  } else {
    // Implicit output: the ellipsis, then the labels seen once, in alphabetical order.
    std::map<char, int> seen;
    for (const auto& s : e.inputs)
      for (char c : s)
        ++seen[c];
    e.output = fresh;
    for (auto [c, k] : seen)
      if (k == 1 && !(c >= '0' && c <= '9')) e.output.push_back(c);
  }
  return e;
}

class EinsumBuilder {
 public:
  EinsumBuilder(LoweringContext& ctx, const Node& n) : ctx_(ctx), ch_(ctx, n), base_(n.output(0)->name()) {}

  std::vector<int32_t> dims32(const std::vector<int64_t>& d) {
    return std::vector<int32_t>(d.begin(), d.end());
  }

  // x[.., i, .., i, ..] → x[.., i, ..]: keep the diagonal (Where with an identity mask), then sum
  // out the second copy.
  void diagonal(Operand& x) {
    for (size_t p = 0; p < x.labels.size(); ++p)
      for (size_t q = p + 1; q < x.labels.size(); ++q) {
        if (x.labels[p] != x.labels[q]) continue;
        const int64_t n = x.dims[p];
        std::vector<int32_t> maskDims(x.dims.size(), 1);
        maskDims[p] = maskDims[q] = int32_t(n);
        std::vector<double> eye;
        for (int64_t i = 0; i < n; ++i)
          for (int64_t j = 0; j < n; ++j)
            eye.push_back(i == j);
        uint32_t mask = ch_.constant(eye, kTypeBool, maskDims);
        uint32_t zero = ch_.scalar(0, ch_.typeOf(x.id));
        x.id = ch_.op(PT::PrimitiveType_Where, {mask, x.id, zero}, ch_.tmpLike(x.id));
        sum(x, {int64_t(q)});
        q = p; // the labels shifted: look again from p
      }
  }

  // Sums out `axes` (keep_dims false).
  void sum(Operand& x, std::vector<int64_t> axes) {
    if (axes.empty()) return;
    std::sort(axes.begin(), axes.end());
    std::vector<int64_t> dims;
    std::string labels;
    for (size_t a = 0; a < x.dims.size(); ++a)
      if (!std::binary_search(axes.begin(), axes.end(), int64_t(a))) {
        dims.push_back(x.dims[a]);
        labels.push_back(x.labels[a]);
      }
    uint32_t ta = ctx_.intConst(axes, fmt::format("{}_sum_axes{}", base_, ++counter_));
    x.id = ch_.op(PT::PrimitiveType_ReduceFusion, {x.id, ta},
                  ch_.tmp(ch_.typeOf(x.id), dims32(dims)), [](FBB& b) {
                    return fb::CreateReduceFusion(b, false, fb::ReduceMode_ReduceSum, false, 0.0f)
                        .Union();
                  });
    x.dims = dims, x.labels = labels;
  }

  // Sums out the labels nothing else needs (not in `keep`).
  void sumUnused(Operand& x, const std::string& keep) {
    std::vector<int64_t> axes;
    for (size_t a = 0; a < x.labels.size(); ++a)
      if (keep.find(x.labels[a]) == std::string::npos) axes.push_back(int64_t(a));
    sum(x, axes);
  }

  // Reorders x's axes to `labels` (a permutation of x.labels).
  void permute(Operand& x, const std::string& labels, std::optional<uint32_t> out = {}) {
    std::vector<int64_t> perm, dims;
    for (char c : labels) {
      const size_t a = x.labels.find(c);
      perm.push_back(int64_t(a));
      dims.push_back(x.dims[a]);
    }
    bool identity = true;
    for (size_t i = 0; i < perm.size(); ++i)
      identity = identity && perm[i] == int64_t(i);
    if (identity && !out) return;
    uint32_t tp = ctx_.intConst(perm, fmt::format("{}_perm{}", base_, ++counter_));
    x.id = ch_.op(PT::PrimitiveType_Transpose, {x.id, tp},
                  out ? *out : ch_.tmp(ch_.typeOf(x.id), dims32(dims)));
    x.labels = labels, x.dims = dims;
  }

  uint32_t reshape(uint32_t id, const std::vector<int64_t>& dims, std::optional<uint32_t> out = {}) {
    uint32_t s = ctx_.intConst(dims, fmt::format("{}_shape{}", base_, ++counter_),
                               dims.empty() ? std::optional<std::vector<int32_t>>(
                                                  std::vector<int32_t>{0})
                                            : std::nullopt);
    return ch_.op(PT::PrimitiveType_Reshape, {id, s},
                  out ? *out : ch_.tmp(ch_.typeOf(id), dims32(dims)));
  }

  Chain& chain() { return ch_; }

 private:
  LoweringContext& ctx_;
  Chain ch_;
  std::string base_;
  int counter_ = 0;
};

std::string checkEinsum(const Node& n, const lowering::OpContext&) {
  auto eq = ops::stringAttr(n, "equation", "");
  if (!eq) return eq.status().message();
  if (n.inputs().size() > 2) return fmt::format("{} operands (.ms rewrite takes 1 or 2)", n.inputs().size());
  return {};
}

Status lowerEinsum(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const std::string text, ops::stringAttr(n, "equation", ""));
  std::vector<Operand> ops;
  std::vector<int> ranks;
  for (const Value* v : n.inputs()) {
    auto shape = v ? ctx.staticShape(v) : std::nullopt;
    if (!shape) return bad("operand of unknown shape");
    ops.push_back({0, "", *shape});
    ranks.push_back(int(shape->size()));
  }
  KILN_ASSIGN_OR_RETURN(Equation eq, parseEquation(text, ranks));
  for (size_t i = 0; i < eq.output.size(); ++i) {
    const char l = eq.output[i];
    bool found = eq.output.find(l, i + 1) == std::string::npos;
    bool present = false;
    for (const auto& in : eq.inputs)
      present = present || in.find(l) != std::string::npos;
    if (!found || !present) return bad("output label '{}' repeated or not in any operand", l);
  }
  auto outShape = ctx.staticShape(n.output(0));
  if (!outShape || outShape->size() != eq.output.size()) return bad("output of unknown shape");
  EinsumBuilder b(ctx, n);
  for (size_t i = 0; i < ops.size(); ++i) {
    auto id = ctx.input(n.input(i), Layout::Onnx);
    if (!id) return id.status();
    ops[i].id = *id;
    ops[i].labels = eq.inputs[i];
    b.diagonal(ops[i]);
  }
  auto y = ctx.output(n.output(0), Layout::Onnx);
  if (!y) return y.status();
  if (ops.size() == 1) {
    Operand& x = ops[0];
    b.sumUnused(x, eq.output);
    if (x.labels == eq.output) {
      b.reshape(x.id, *outShape, *y);
    } else {
      b.permute(x, eq.output, *y);
    }
    return Status::ok();
  }
  Operand& a = ops[0];
  Operand& c = ops[1];
  b.sumUnused(a, eq.output + c.labels);
  b.sumUnused(c, eq.output + a.labels);
  std::string batch, contract, aOnly, cOnly;
  for (char l : a.labels) {
    const bool inC = c.labels.find(l) != std::string::npos;
    const bool inOut = eq.output.find(l) != std::string::npos;
    (inC ? (inOut ? batch : contract) : aOnly).push_back(l);
  }
  for (char l : c.labels)
    if (a.labels.find(l) == std::string::npos) cOnly.push_back(l);
  auto sizeOf = [&](const Operand& x, char l) { return x.dims[x.labels.find(l)]; };
  auto prod = [&](const Operand& x, const std::string& ls) {
    int64_t p = 1;
    for (char l : ls)
      p *= sizeOf(x, l);
    return p;
  };
  for (char l : batch + contract)
    if (sizeOf(a, l) != sizeOf(c, l)) return bad("label '{}' with sizes that broadcast", l);
  b.permute(a, batch + aOnly + contract);
  b.permute(c, batch + contract + cOnly);
  const int64_t bs = prod(a, batch), m = prod(a, aOnly), k = prod(a, contract),
                nn = prod(c, cOnly);
  uint32_t a3 = b.reshape(a.id, {bs, m, k});
  uint32_t c3 = b.reshape(c.id, {bs, k, nn});
  Chain& ch = b.chain();
  uint32_t prodT = ch.op(PT::PrimitiveType_MatMulFusion, {a3, c3},
                         ch.tmp(ch.typeOf(a3), {int32_t(bs), int32_t(m), int32_t(nn)}),
                         [](FBB& fbb) { return fb::CreateMatMulFusion(fbb, false, false).Union(); });
  Operand r;
  r.labels = batch + aOnly + cOnly;
  for (char l : batch + aOnly)
    r.dims.push_back(sizeOf(a, l));
  for (char l : cOnly)
    r.dims.push_back(sizeOf(c, l));
  if (r.labels == eq.output) {
    b.reshape(prodT, *outShape, *y);
    return Status::ok();
  }
  r.id = b.reshape(prodT, r.dims);
  b.permute(r, eq.output, *y);
  return Status::ok();
}

KILN_MS_LOWERING("Einsum", checkEinsum, lowerEinsum);

} // namespace
} // namespace kiln::ms
