// TopK and Einsum: math kernels that neither map elements nor reduce along fixed axes.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "kiln/runtime/kernel.h"
#include "math_util.h"

namespace kiln::rt {
namespace {

using namespace math;

// ---- TopK ----

// Orders NaN above every number so the comparison stays a strict weak ordering.
template <typename T> bool numberGreater(T a, T b) {
  if constexpr (isFloatT<T>) {
    if (std::isnan(a)) return !std::isnan(b);
    if (std::isnan(b)) return false;
  }
  return a > b;
}

// k comes from the attribute in opset 1 and from input 1 from opset 10. Ties keep the lower index
// first, so the result is deterministic.
Status topKKernel(KernelContext& ctx) {
  const Tensor& raw = ctx.input(0);
  const DType dt = raw.dtype();
  Tensor x = asComputeTensor(raw);
  int64_t k;
  if (ctx.opset() < 10 || !ctx.hasInput(1)) {
    k = ctx.attrInt("k", -1);
  } else {
    std::vector<int64_t> kv = ctx.inputInts(1);
    if (kv.size() != 1) return ctx.fail("K must hold a single value");
    k = kv[0];
  }
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  const int64_t axisAttr = ctx.attrInt("axis", -1);
  auto axis = normalizeAxis(axisAttr, rank);
  if (!axis) return ctx.fail("axis {} out of range for rank {}", axisAttr, rank);
  const bool largest = ctx.attrInt("largest", 1) != 0;
  const AxisSplit s = splitAtAxis(x.dims(), *axis);
  if (k < 0 || k > s.extent) return ctx.fail("k {} out of range for axis length {}", k, s.extent);
  std::vector<int64_t> outDims = x.dims();
  outDims[static_cast<size_t>(*axis)] = k;
  OutTensor indices(DType::Int64, outDims);
  int64_t* pi = indices.data<int64_t>();
  Tensor values;
  if (!dispatchArith(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        OutTensor out(x.dtype(), outDims);
        const T* in = reinterpret_cast<const T*>(x.data());
        T* pv = out.data<T>();
        std::vector<int64_t> order(static_cast<size_t>(s.extent));
        for (int64_t o = 0; o < s.outer; ++o)
          for (int64_t i = 0; i < s.inner; ++i) {
            const T* base = in + o * s.extent * s.inner + i;
            std::iota(order.begin(), order.end(), int64_t{0});
            auto before = [&](int64_t a, int64_t b) {
              const T va = base[a * s.inner], vb = base[b * s.inner];
              const bool first = largest ? numberGreater(va, vb) : numberGreater(vb, va);
              if (first) return true;
              const bool second = largest ? numberGreater(vb, va) : numberGreater(va, vb);
              return !second && a < b;
            };
            std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
            const int64_t outBase = o * k * s.inner + i;
            for (int64_t j = 0; j < k; ++j) {
              pv[outBase + j * s.inner] = base[order[static_cast<size_t>(j)] * s.inner];
              pi[outBase + j * s.inner] = order[static_cast<size_t>(j)];
            }
          }
        values = std::move(out).finish();
      }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  ctx.setOutput(0, narrowFromFloat(values, dt));
  ctx.setOutput(1, std::move(indices).finish());
  return Status::ok();
}

// ---- Einsum ----

// Labels are numbered: letters 0..51, ellipsis dimensions from kEllipsisBase on (right-aligned
// across operands, so they broadcast like numpy).
constexpr int kEllipsisBase = 52;

int letterId(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}

// Letter order for the implicit output: ASCII (upper case before lower case).
int asciiRank(int id) { return id < 26 ? 26 + id : id - 26; }

struct Term {
  std::vector<int> labels; // one per dimension, ellipsis expanded
  bool hasEllipsis = false;
};

struct EinsumPlan {
  std::vector<Term> inputs;
  std::vector<int> output;
  std::vector<int64_t> sizes; // by label id
};

// Parses one term's letters; "..." is kept as the marker -1 and expanded later.
bool parseTerm(const std::string& text, std::vector<int>& raw, bool& hasEllipsis) {
  hasEllipsis = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '.') {
      if (hasEllipsis || text.compare(i, 3, "...") != 0) return false;
      hasEllipsis = true;
      raw.push_back(-1);
      i += 2;
      continue;
    }
    int id = letterId(text[i]);
    if (id < 0) return false;
    raw.push_back(id);
  }
  return true;
}

std::vector<int> expandEllipsis(const std::vector<int>& raw, int64_t ellipsisDims,
                                int64_t maxEllipsis) {
  std::vector<int> out;
  for (int id : raw) {
    if (id != -1) {
      out.push_back(id);
      continue;
    }
    for (int64_t j = 0; j < ellipsisDims; ++j)
      out.push_back(kEllipsisBase + static_cast<int>(maxEllipsis - ellipsisDims + j));
  }
  return out;
}

Status planEinsum(KernelContext& ctx, const std::vector<Tensor>& operands, EinsumPlan& plan) {
  std::string eq;
  for (char c : ctx.attrString("equation", ""))
    if (c != ' ') eq += c;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> termTexts;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    termTexts.push_back(lhs.substr(start, comma == std::string::npos ? comma : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (termTexts.size() != operands.size())
    return ctx.fail("equation '{}' names {} operands, node has {}", eq, termTexts.size(),
                    operands.size());
  std::vector<std::vector<int>> raws(operands.size());
  std::vector<int64_t> ellipsisDims(operands.size(), 0);
  int64_t maxEllipsis = 0;
  for (size_t n = 0; n < operands.size(); ++n) {
    bool hasEllipsis;
    if (!parseTerm(termTexts[n], raws[n], hasEllipsis))
      return ctx.fail("cannot parse einsum term '{}'", termTexts[n]);
    const int64_t letters = static_cast<int64_t>(raws[n].size()) - (hasEllipsis ? 1 : 0);
    const int64_t rank = static_cast<int64_t>(operands[n].dims().size());
    if (hasEllipsis ? rank < letters : rank != letters)
      return ctx.fail("term '{}' does not match operand rank {}", termTexts[n], rank);
    ellipsisDims[n] = hasEllipsis ? rank - letters : 0;
    maxEllipsis = std::max(maxEllipsis, ellipsisDims[n]);
  }
  plan.sizes.assign(static_cast<size_t>(kEllipsisBase + maxEllipsis), -1);
  std::vector<int> counts(plan.sizes.size(), 0);
  for (size_t n = 0; n < operands.size(); ++n) {
    Term t;
    t.labels = expandEllipsis(raws[n], ellipsisDims[n], maxEllipsis);
    for (size_t d = 0; d < t.labels.size(); ++d) {
      const int id = t.labels[d];
      const int64_t dim = operands[n].dims()[d];
      int64_t& size = plan.sizes[static_cast<size_t>(id)];
      ++counts[static_cast<size_t>(id)];
      if (size == -1 || size == 1)
        size = dim;
      else if (dim != size && dim != 1)
        return ctx.fail("label dimension mismatch in '{}': {} vs {}", eq, size, dim);
    }
    plan.inputs.push_back(std::move(t));
  }
  if (arrow != std::string::npos) {
    std::vector<int> raw;
    bool hasEllipsis;
    if (!parseTerm(eq.substr(arrow + 2), raw, hasEllipsis))
      return ctx.fail("cannot parse einsum output '{}'", eq.substr(arrow + 2));
    plan.output = expandEllipsis(raw, maxEllipsis, maxEllipsis);
    for (int id : plan.output)
      if (plan.sizes[static_cast<size_t>(id)] == -1)
        return ctx.fail("output label of '{}' does not appear in the inputs", eq);
  } else {
    for (int64_t j = 0; j < maxEllipsis; ++j)
      plan.output.push_back(kEllipsisBase + static_cast<int>(j));
    std::vector<int> once;
    for (int id = 0; id < kEllipsisBase; ++id)
      if (counts[static_cast<size_t>(id)] == 1) once.push_back(id);
    std::sort(once.begin(), once.end(), [](int a, int b) { return asciiRank(a) < asciiRank(b); });
    plan.output.insert(plan.output.end(), once.begin(), once.end());
  }
  return Status::ok();
}

template <typename T>
Tensor einsumTyped(const EinsumPlan& plan, const std::vector<Tensor>& operands, DType dtype) {
  using Acc = std::conditional_t<isFloatT<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
  // Loop labels: output labels outermost, then the summed ones.
  std::vector<int> loop = plan.output;
  for (size_t id = 0; id < plan.sizes.size(); ++id)
    if (plan.sizes[id] != -1 && std::find(plan.output.begin(), plan.output.end(),
                                          static_cast<int>(id)) == plan.output.end())
      loop.push_back(static_cast<int>(id));
  std::vector<int64_t> loopSizes;
  for (int id : loop)
    loopSizes.push_back(plan.sizes[static_cast<size_t>(id)]);
  // Per operand and loop label: the summed strides of its dimensions with that label (repeated
  // labels walk a diagonal); size-1 dimensions broadcast with stride 0.
  const size_t nOps = operands.size();
  std::vector<std::vector<int64_t>> strides(nOps, std::vector<int64_t>(loop.size(), 0));
  for (size_t n = 0; n < nOps; ++n) {
    std::vector<int64_t> own = stridesOf(operands[n].dims());
    for (size_t d = 0; d < plan.inputs[n].labels.size(); ++d) {
      if (operands[n].dims()[d] == 1) continue;
      const size_t at = static_cast<size_t>(
          std::find(loop.begin(), loop.end(), plan.inputs[n].labels[d]) - loop.begin());
      strides[n][at] += own[d];
    }
  }
  std::vector<int64_t> outDims;
  for (int id : plan.output)
    outDims.push_back(plan.sizes[static_cast<size_t>(id)]);
  OutTensor out(dtype, outDims);
  T* po = out.data<T>();
  const uint64_t outCount = countOf(outDims);
  uint64_t sumCount = 1;
  for (size_t l = plan.output.size(); l < loop.size(); ++l)
    sumCount *= static_cast<uint64_t>(loopSizes[l]);
  std::vector<const T*> data(nOps);
  for (size_t n = 0; n < nOps; ++n)
    data[n] = reinterpret_cast<const T*>(operands[n].data());
  if (sumCount == 0) {
    for (uint64_t o = 0; o < outCount; ++o)
      po[o] = T(0);
    return std::move(out).finish();
  }
  std::vector<int64_t> idx(loop.size(), 0), offsets(nOps, 0);
  for (uint64_t o = 0; o < outCount; ++o) {
    Acc acc{};
    for (uint64_t s = 0; s < sumCount; ++s) {
      Acc term = Acc(1);
      for (size_t n = 0; n < nOps; ++n)
        term *= static_cast<Acc>(data[n][offsets[n]]);
      acc += term;
      // Odometer step over all loop labels (innermost last).
      for (size_t l = loop.size(); l-- > 0;) {
        ++idx[l];
        for (size_t n = 0; n < nOps; ++n)
          offsets[n] += strides[n][l];
        if (idx[l] < loopSizes[l]) break;
        for (size_t n = 0; n < nOps; ++n)
          offsets[n] -= strides[n][l] * loopSizes[l];
        idx[l] = 0;
      }
    }
    po[o] = static_cast<T>(acc);
  }
  return std::move(out).finish();
}

Status einsumKernel(KernelContext& ctx) {
  std::vector<Tensor> operands;
  for (size_t i = 0; i < ctx.inputCount(); ++i) {
    if (!ctx.hasInput(i)) return ctx.fail("input {} is missing", i);
    operands.push_back(asComputeTensor(ctx.input(i)));
    if (operands.back().dtype() != operands.front().dtype())
      return ctx.fail("operands have different dtypes");
  }
  if (operands.empty()) return ctx.fail("needs at least one operand");
  EinsumPlan plan;
  if (Status s = planEinsum(ctx, operands, plan); !s) return s;
  const DType dt = ctx.input(0).dtype();
  Tensor r;
  if (!dispatchArith(operands[0].dtype(), [&](auto tag) {
        r = einsumTyped<decltype(tag)>(plan, operands, operands[0].dtype());
      }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  ctx.setOutput(0, narrowFromFloat(r, dt));
  return Status::ok();
}

KILN_REGISTER_KERNEL("TopK", topKKernel);
KILN_REGISTER_KERNEL("Einsum", einsumKernel);

} // namespace
} // namespace kiln::rt
