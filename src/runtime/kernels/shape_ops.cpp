// Shape and layout kernels: reshape/transpose/concat/split/slice/pad families and index-producing
// ops (NonZero, Unique, OneHot ...). Data is moved as raw elements so every dtype works.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "half_steps.h"
#include "kiln/runtime/kernel.h"
#include "shape_util.h"

namespace kiln::rt {
namespace {

using shape::countOf;
using shape::dispatchElement;
using shape::elements;
using shape::ElemOut;
using shape::setMoved;
using shape::withElements;

int64_t rankOf(const Tensor& t) { return static_cast<int64_t>(t.dims().size()); }

// Integer list from input `index` when given, else from attribute `name` (ONNX moved many of these
// from attributes to inputs; accepting both keeps every opset working).
std::optional<std::vector<int64_t>> intsFromInputOrAttr(const KernelContext& ctx, size_t index,
                                                        const std::string& name) {
  if (ctx.hasInput(index)) return ctx.inputInts(index);
  if (ctx.hasAttr(name)) return ctx.attrInts(name);
  return std::nullopt;
}

// Per-element truth of any tensor: nonzero numbers, non-empty strings.
std::optional<std::vector<uint8_t>> truthFlags(const Tensor& t) {
  const uint64_t n = t.elementCount();
  std::vector<uint8_t> flags(n);
  if (t.dtype() == DType::String) {
    for (uint64_t i = 0; i < n; ++i)
      flags[i] = !t.stringValues()[i].empty();
    return flags;
  }
  if (t.dtype() == DType::Float16 || t.dtype() == DType::BFloat16) {
    const auto* p = reinterpret_cast<const uint16_t*>(t.data());
    for (uint64_t i = 0; i < n; ++i)
      flags[i] = (p[i] & 0x7fff) != 0;
    return flags;
  }
  bool ok = dispatchNumeric(t.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* p = reinterpret_cast<const T*>(t.data());
    for (uint64_t i = 0; i < n; ++i)
      flags[i] = p[i] != T{};
  });
  if (!ok) return std::nullopt;
  return flags;
}

Status reshape(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto target = intsFromInputOrAttr(ctx, 1, "shape");
  if (!target) return ctx.fail("no target shape");
  std::vector<int64_t> dims = *target;
  const bool allowZero = ctx.attrInt("allowzero", 0) != 0;
  int64_t inferAt = -1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 0 && !allowZero) {
      if (i >= x.dims().size()) return ctx.fail("shape entry {} is 0 but input rank is lower", i);
      dims[i] = x.dims()[i];
    } else if (dims[i] == -1) {
      if (inferAt >= 0) return ctx.fail("more than one -1 in shape");
      inferAt = static_cast<int64_t>(i);
    } else if (dims[i] < 0) {
      return ctx.fail("negative shape entry {}", dims[i]);
    }
  }
  // Checked: a product that wraps could otherwise match the input's count (4 elements into
  // [4611686018427387905,4]) and give later kernels a shape far larger than the data.
  std::vector<int64_t> givenDims = dims;
  if (inferAt >= 0) givenDims[static_cast<size_t>(inferAt)] = 1;
  auto known = checkedElementCount(givenDims);
  if (!known)
    return ctx.fail("cannot reshape [{}] to [{}]: the element count overflows",
                    fmt::join(x.dims(), ","), fmt::join(*target, ","));
  const uint64_t total = x.elementCount();
  if (inferAt >= 0) {
    if (*known == 0 || total % *known != 0)
      return ctx.fail("cannot infer -1: {} elements into [{}]", total, fmt::join(*target, ","));
    dims[static_cast<size_t>(inferAt)] = static_cast<int64_t>(total / *known);
  }
  if (checkedElementCount(dims) != total)
    return ctx.fail("cannot reshape [{}] to [{}]", fmt::join(x.dims(), ","), fmt::join(dims, ","));
  ctx.setOutput(0, shape::reshaped(x, std::move(dims)));
  return Status::ok();
}

Status flatten(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  int64_t axis = ctx.attrInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return ctx.fail("axis {} out of range", ctx.attrInt("axis", 1));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; ++i)
    (i < axis ? outer : inner) *= x.dims()[static_cast<size_t>(i)];
  ctx.setOutput(0, shape::reshaped(x, {outer, inner}));
  return Status::ok();
}

Status squeeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  auto axes = intsFromInputOrAttr(ctx, 1, "axes");
  if (!axes || axes->empty()) {
    for (int64_t i = 0; i < rank; ++i)
      drop[static_cast<size_t>(i)] = x.dims()[static_cast<size_t>(i)] == 1;
  } else {
    for (int64_t a : *axes) {
      auto axis = normalizeAxis(a, rank);
      if (!axis) return ctx.fail("axis {} out of range for rank {}", a, rank);
      if (x.dims()[static_cast<size_t>(*axis)] != 1)
        return ctx.fail("cannot squeeze axis {} of size {}", a,
                        x.dims()[static_cast<size_t>(*axis)]);
      drop[static_cast<size_t>(*axis)] = true;
    }
  }
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < rank; ++i)
    if (!drop[static_cast<size_t>(i)]) dims.push_back(x.dims()[static_cast<size_t>(i)]);
  ctx.setOutput(0, shape::reshaped(x, std::move(dims)));
  return Status::ok();
}

Status unsqueeze(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto axes = intsFromInputOrAttr(ctx, 1, "axes");
  if (!axes) return ctx.fail("no axes");
  const int64_t outRank = rankOf(x) + static_cast<int64_t>(axes->size());
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : *axes) {
    auto axis = normalizeAxis(a, outRank);
    if (!axis) return ctx.fail("axis {} out of range for output rank {}", a, outRank);
    if (inserted[static_cast<size_t>(*axis)]) return ctx.fail("axis {} repeated", a);
    inserted[static_cast<size_t>(*axis)] = true;
  }
  std::vector<int64_t> dims;
  size_t next = 0;
  for (int64_t i = 0; i < outRank; ++i)
    dims.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.dims()[next++]);
  ctx.setOutput(0, shape::reshaped(x, std::move(dims)));
  return Status::ok();
}

Status transpose(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  std::vector<int64_t> perm = ctx.attrInts("perm");
  if (!ctx.hasAttr("perm")) {
    perm.resize(static_cast<size_t>(rank));
    for (int64_t i = 0; i < rank; ++i)
      perm[static_cast<size_t>(i)] = rank - 1 - i;
  }
  if (static_cast<int64_t>(perm.size()) != rank) return ctx.fail("perm size != rank {}", rank);
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& p : perm) {
    auto axis = normalizeAxis(p, rank);
    if (!axis || seen[static_cast<size_t>(*axis)])
      return ctx.fail("perm [{}] is not a permutation", fmt::join(perm, ","));
    p = *axis;
    seen[static_cast<size_t>(p)] = true;
  }
  return setMoved(ctx, 0, shape::transposed(x, perm), x.dtype());
}

// Float16 parts joined into a float32 output, each part's stretch widened as it is copied: a
// Concat whose output only a float16 Conv reads hands it over so (FusionPlan::handoffTo), the
// values the Conv would widen from the float16 output, without that whole-tensor pass.
Status concatWidened(KernelContext& ctx, const std::vector<const Tensor*>& parts, int64_t axis) {
  std::vector<int64_t> dims = parts[0]->dims();
  const auto a = static_cast<size_t>(axis);
  dims[a] = 0;
  for (const Tensor* p : parts)
    dims[a] += p->dims()[a];
  int64_t outer = 1;
  for (size_t d = 0; d < a; ++d)
    outer *= dims[d];
  int64_t rowLength = 0; // output elements per outer index
  std::vector<int64_t> lengths;
  for (const Tensor* p : parts) {
    int64_t len = 1;
    for (size_t d = a; d < p->dims().size(); ++d)
      len *= p->dims()[d];
    lengths.push_back(len);
    rowLength += len;
  }
  OutTensor out(DType::Float32, dims);
  float* dst = out.data<float>();
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = o * rowLength;
    for (size_t i = 0; i < parts.size(); ++i) {
      const auto* src = reinterpret_cast<const uint16_t*>(parts[i]->data()) + o * lengths[i];
      const int64_t n = lengths[i];
      vec::widenHalvesOnPool(ctx.threads(), src, dst + at, n);
      at += n;
    }
  }
  ctx.setOutput(0, std::move(out).finish());
  return Status::ok();
}

Status concat(KernelContext& ctx) {
  std::vector<const Tensor*> parts;
  for (size_t i = 0; i < ctx.inputCount(); ++i)
    if (ctx.hasInput(i)) parts.push_back(&ctx.input(i));
  if (parts.empty()) return ctx.fail("no inputs");
  const int64_t rank = rankOf(*parts[0]);
  auto axis = normalizeAxis(ctx.attrInt("axis", 1), rank);
  if (!axis) return ctx.fail("axis {} out of range for rank {}", ctx.attrInt("axis", 1), rank);
  for (const Tensor* p : parts) {
    bool same = rankOf(*p) == rank && p->dtype() == parts[0]->dtype();
    for (int64_t d = 0; same && d < rank; ++d)
      same = d == *axis ||
             p->dims()[static_cast<size_t>(d)] == parts[0]->dims()[static_cast<size_t>(d)];
    if (!same)
      return ctx.fail("input [{}] does not match [{}] off axis {}", fmt::join(p->dims(), ","),
                      fmt::join(parts[0]->dims(), ","), *axis);
  }
  if (parts[0]->dtype() == DType::Float16 && ctx.channelsLastOutputAllowed())
    return concatWidened(ctx, parts, *axis);
  return setMoved(ctx, 0, shape::concatenated(parts, *axis), parts[0]->dtype());
}

Status split(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  auto axis = normalizeAxis(ctx.attrInt("axis", 0), rank);
  if (!axis) return ctx.fail("axis out of range");
  const int64_t dim = x.dims()[static_cast<size_t>(*axis)];
  const auto outputs = static_cast<int64_t>(ctx.outputCount());
  std::vector<int64_t> sizes;
  if (auto given = intsFromInputOrAttr(ctx, 1, "split"); given && !given->empty()) {
    sizes = *given;
    if (static_cast<int64_t>(sizes.size()) != outputs)
      return ctx.fail("{} split sizes for {} outputs", sizes.size(), outputs);
    if (std::accumulate(sizes.begin(), sizes.end(), int64_t{0}) != dim)
      return ctx.fail("split sizes [{}] do not sum to {}", fmt::join(sizes, ","), dim);
  } else if (ctx.hasAttr("num_outputs")) {
    // Uneven splits give every part ceil(dim / n) and the last one the rest.
    const int64_t n = ctx.attrInt("num_outputs", outputs);
    if (n != outputs || n <= 0) return ctx.fail("num_outputs {} != {} outputs", n, outputs);
    const int64_t chunk = (dim + n - 1) / n;
    for (int64_t i = 0, left = dim; i < n; ++i) {
      sizes.push_back(std::min(chunk, left));
      left -= sizes.back();
    }
  } else {
    if (outputs <= 0 || dim % outputs != 0)
      return ctx.fail("dim {} does not split evenly into {} outputs", dim, outputs);
    sizes.assign(static_cast<size_t>(outputs), dim / outputs);
  }
  int64_t start = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    const int64_t len = sizes[static_cast<size_t>(i)];
    if (len < 0) return ctx.fail("negative split size {}", len);
    KILN_TRY(
        setMoved(ctx, static_cast<size_t>(i), shape::sliceAxis(x, *axis, start, len), x.dtype()));
    start += len;
  }
  return Status::ok();
}

Status slice(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.opset() < 10 || !ctx.hasInput(1)) {
    starts = ctx.attrInts("starts");
    ends = ctx.attrInts("ends");
    axes = ctx.attrInts("axes");
  } else {
    starts = ctx.inputInts(1);
    ends = ctx.inputInts(2);
    if (ctx.hasInput(3)) axes = ctx.inputInts(3);
    if (ctx.hasInput(4)) steps = ctx.inputInts(4);
  }
  if (starts.size() != ends.size()) return ctx.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i)
      axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    return ctx.fail("starts/ends/axes/steps lengths differ");
  std::vector<int64_t> dims = x.dims();
  const std::vector<int64_t> inStrides = stridesOf(dims);
  std::vector<int64_t> strides = inStrides;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  int64_t offset = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    auto axis = normalizeAxis(axes[i], rank);
    if (!axis || seen[static_cast<size_t>(*axis)])
      return ctx.fail("bad or repeated axis {}", axes[i]);
    const auto a = static_cast<size_t>(*axis);
    seen[a] = true;
    const int64_t step = steps[i], d = dims[a];
    if (step == 0) return ctx.fail("step 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0) start += d;
    if (end < 0) end += d;
    int64_t len = 0;
    if (d > 0 && step > 0) {
      start = std::clamp(start, int64_t{0}, d);
      end = std::clamp(end, int64_t{0}, d);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else if (d > 0) {
      start = std::clamp(start, int64_t{0}, d - 1);
      end = std::clamp(end, int64_t{-1}, d - 1);
      len = start > end ? (start - end - step - 1) / -step : 0;
    }
    dims[a] = len;
    strides[a] = inStrides[a] * step;
    if (len > 0) offset += start * inStrides[a];
  }
  return setMoved(ctx, 0, shape::stridedView(x, dims, strides, offset), x.dtype());
}

Status expand(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto out = broadcastShapes(x.dims(), ctx.inputInts(1));
  if (!out)
    return ctx.fail("cannot broadcast [{}] to [{}]", fmt::join(x.dims(), ","),
                    fmt::join(ctx.inputInts(1), ","));
  return setMoved(ctx, 0, shape::stridedView(x, *out, broadcastStrides(x.dims(), *out), 0),
                  x.dtype());
}

Status tile(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  std::vector<int64_t> repeats = ctx.inputInts(1);
  const size_t rank = x.dims().size();
  if (repeats.size() != rank) return ctx.fail("{} repeats for rank {}", repeats.size(), rank);
  // Tiling is a broadcast over interleaved repeat axes: [r0, d0, r1, d1, ...] with stride 0 on r.
  std::vector<int64_t> inStrides = stridesOf(x.dims());
  std::vector<int64_t> viewDims, viewStrides, outDims;
  for (size_t i = 0; i < rank; ++i) {
    if (repeats[i] < 0) return ctx.fail("negative repeat {}", repeats[i]);
    viewDims.insert(viewDims.end(), {repeats[i], x.dims()[i]});
    viewStrides.insert(viewStrides.end(), {0, inStrides[i]});
  }
  auto view = shape::stridedView(x, viewDims, viewStrides, 0);
  if (!view) return setMoved(ctx, 0, std::nullopt, x.dtype());
  // Only now: the view's allocation has checked that these products fit.
  for (size_t i = 0; i < rank; ++i)
    outDims.push_back(repeats[i] * x.dims()[i]);
  ctx.setOutput(0, shape::reshaped(*view, outDims));
  return Status::ok();
}

template <typename T>
void padCopy(T* dst, const T* src, const std::vector<int64_t>& outDims,
             const std::vector<std::vector<int64_t>>& maps, const std::vector<int64_t>& strides,
             const T& value) {
  const size_t rank = outDims.size();
  const uint64_t total = countOf(outDims);
  if (total == 0) return;
  if (rank == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = outDims[rank - 1];
  const std::vector<int64_t>& innerMap = maps[rank - 1];
  const int64_t innerStride = strides[rank - 1];
  std::vector<int64_t> idx(rank, 0);
  for (uint64_t out = 0; out < total; out += static_cast<uint64_t>(inner)) {
    int64_t base = 0;
    bool padded = false;
    for (size_t a = 0; a + 1 < rank; ++a) {
      const int64_t m = maps[a][static_cast<size_t>(idx[a])];
      padded |= m < 0;
      base += m * strides[a];
    }
    T* d = dst + out;
    if (padded) {
      std::fill(d, d + inner, value);
    } else {
      for (int64_t k = 0; k < inner; ++k) {
        const int64_t m = innerMap[static_cast<size_t>(k)];
        d[k] = m < 0 ? value : src[base + m * innerStride];
      }
    }
    for (size_t a = rank - 1; a-- > 0;) {
      if (++idx[a] < outDims[a]) break;
      idx[a] = 0;
    }
  }
}

Status pad(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  const std::string mode = ctx.attrString("mode", "constant");
  std::vector<int64_t> pads;
  std::optional<Tensor> constant;
  if (ctx.opset() < 11) {
    pads = ctx.hasAttr("pads") ? ctx.attrInts("pads") : ctx.attrInts("paddings");
    auto cast = castTensor(makeTensor<float>(DType::Float32, {}, {ctx.attrFloat("value", 0.0f)}),
                           x.dtype());
    if (cast) constant = *cast;
  } else {
    pads = ctx.inputInts(1);
    if (ctx.hasInput(2) && ctx.input(2).elementCount() > 0) constant = ctx.input(2);
  }
  std::vector<int64_t> full(static_cast<size_t>(2 * rank), 0);
  if (ctx.hasInput(3)) {
    std::vector<int64_t> axes = ctx.inputInts(3);
    if (pads.size() != 2 * axes.size())
      return ctx.fail("{} pads for {} axes", pads.size(), axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      auto axis = normalizeAxis(axes[i], rank);
      if (!axis) return ctx.fail("axis {} out of range", axes[i]);
      full[static_cast<size_t>(*axis)] = pads[i];
      full[static_cast<size_t>(*axis + rank)] = pads[i + axes.size()];
    }
  } else {
    if (static_cast<int64_t>(pads.size()) != 2 * rank)
      return ctx.fail("{} pads for rank {}", pads.size(), rank);
    full = pads;
  }
  if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
    return ctx.unsupported("mode '{}'", mode);
  std::vector<int64_t> outDims(static_cast<size_t>(rank));
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    const int64_t d = x.dims()[a], before = full[a], after = full[a + static_cast<size_t>(rank)];
    auto padded = checkedAdd<int64_t>(d, before);
    if (padded) padded = checkedAdd<int64_t>(*padded, after);
    if (!padded) return ctx.fail("pads {}+{} on axis {} of size {} overflow", before, after, a, d);
    outDims[a] = *padded;
    if (outDims[a] < 0) return ctx.fail("pads crop axis {} below zero", a);
    if (mode != "constant" && d == 0 && outDims[a] > 0)
      return ctx.fail("mode '{}' cannot pad an empty axis", mode);
  }
  // The index maps below are as long as the output's axes: refuse an output that cannot exist
  // before building them.
  checkOutputFits(x.dtype(), outDims);
  std::vector<std::vector<int64_t>> maps(static_cast<size_t>(rank));
  for (size_t a = 0; a < static_cast<size_t>(rank); ++a) {
    const int64_t d = x.dims()[a], before = full[a];
    maps[a].resize(static_cast<size_t>(outDims[a]));
    for (int64_t o = 0; o < outDims[a]; ++o) {
      int64_t s = o - before;
      if (s < 0 || s >= d) {
        if (mode == "constant") {
          s = -1;
        } else if (mode == "edge") {
          s = std::clamp(s, int64_t{0}, d - 1);
        } else if (mode == "wrap") {
          s = ((s % d) + d) % d;
        } else if (d == 1) {
          s = 0;
        } else { // reflect about the edges without repeating them
          const int64_t period = 2 * (d - 1);
          s = ((s % period) + period) % period;
          if (s >= d) s = period - s;
        }
      }
      maps[a][static_cast<size_t>(o)] = s;
    }
  }
  return withElements(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    T value{};
    if (constant && constant->dtype() == x.dtype()) value = elements<T>(*constant)[0];
    ElemOut<T> out(x.dtype(), outDims);
    padCopy(out.data(), elements<T>(x), outDims, maps, stridesOf(x.dims()), value);
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status constantOfShape(KernelContext& ctx) {
  std::vector<int64_t> dims = ctx.inputInts(0);
  for (int64_t d : dims)
    if (d < 0) return ctx.fail("negative dim {}", d);
  Tensor value = makeTensor<float>(DType::Float32, {1}, {0.0f});
  if (const Attribute* a = ctx.attr("value"); a && a->kind() == AttrKind::Tensor)
    value = a->asTensor();
  if (value.elementCount() != 1) return ctx.fail("value must hold one element");
  return withElements(ctx, value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(value.dtype(), dims);
    std::fill(out.data(), out.data() + out.size(), elements<T>(value)[0]);
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status range(KernelContext& ctx) {
  const DType dtype = ctx.input(0).dtype();
  Status status = Status::ok();
  bool ok = dispatchNumeric(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      status = ctx.unsupported("bool range");
    } else {
      const T start = ctx.inputData<T>(0)[0], limit = ctx.inputData<T>(1)[0],
              delta = ctx.inputData<T>(2)[0];
      if (delta == T{}) {
        status = ctx.fail("delta is zero");
        return;
      }
      // The element count in a wider type first: a NaN or infinite bound, or a span past int64
      // (uint64 / int64 extremes), has no count to convert.
      int64_t n;
      if constexpr (std::is_floating_point_v<T>) {
        const double steps = std::ceil(
            (static_cast<double>(limit) - static_cast<double>(start)) / static_cast<double>(delta));
        if (!(steps < 9.2e18)) {
          status = ctx.fail("start, limit and delta give {} elements", steps);
          return;
        }
        n = steps > 0 ? static_cast<int64_t>(steps) : 0;
      } else {
        const __int128 span = static_cast<__int128>(limit) - static_cast<__int128>(start);
        const __int128 step = static_cast<__int128>(delta);
        const __int128 count = step > 0 ? (span > 0 ? (span + step - 1) / step : 0)
                                        : (span < 0 ? (span + step + 1) / step : 0);
        if (count > std::numeric_limits<int64_t>::max()) {
          status = ctx.fail("start, limit and delta give more elements than int64 counts");
          return;
        }
        n = static_cast<int64_t>(count);
      }
      OutTensor out(dtype, {n});
      T* dst = out.data<T>();
      for (int64_t i = 0; i < n; ++i)
        dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
      ctx.setOutput(0, std::move(out).finish());
    }
  });
  if (!ok) return ctx.unsupported("dtype {}", dtypeName(dtype));
  return status;
}

Status depthToSpace(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dims().size() != 4) return ctx.fail("input must be 4-D");
  const int64_t b = ctx.attrInt("blocksize", 0);
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
  if (b <= 0 || c % (b * b) != 0) return ctx.fail("channels {} not divisible by blocksize² ", c);
  const bool crd = ctx.attrString("mode", "DCR") == "CRD";
  Tensor view = crd ? shape::reshaped(x, {n, c / (b * b), b, b, h, w})
                    : shape::reshaped(x, {n, b, b, c / (b * b), h, w});
  auto moved = crd ? shape::transposed(view, {0, 1, 4, 2, 5, 3})
                   : shape::transposed(view, {0, 3, 4, 1, 5, 2});
  if (!moved) return setMoved(ctx, 0, std::nullopt, x.dtype());
  ctx.setOutput(0, shape::reshaped(*moved, {n, c / (b * b), h * b, w * b}));
  return Status::ok();
}

Status spaceToDepth(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dims().size() != 4) return ctx.fail("input must be 4-D");
  const int64_t b = ctx.attrInt("blocksize", 0);
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
  if (b <= 0 || h % b != 0 || w % b != 0)
    return ctx.fail("spatial dims not divisible by blocksize");
  Tensor view = shape::reshaped(x, {n, c, h / b, b, w / b, b});
  auto moved = shape::transposed(view, {0, 3, 5, 1, 2, 4});
  if (!moved) return setMoved(ctx, 0, std::nullopt, x.dtype());
  ctx.setOutput(0, shape::reshaped(*moved, {n, c * b * b, h / b, w / b}));
  return Status::ok();
}

Status eyeLike(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dims().size() != 2) return ctx.fail("input must be 2-D");
  DType dtype = x.dtype();
  if (ctx.hasAttr("dtype")) {
    auto d = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("dtype", 1)));
    if (!d) return ctx.fail("unknown dtype {}", ctx.attrInt("dtype", 1));
    dtype = *d;
  }
  auto one = castTensor(makeTensor<float>(DType::Float32, {}, {1.0f}), dtype);
  if (!one || dtype == DType::String) return ctx.unsupported("dtype {}", dtypeName(dtype));
  const int64_t rows = x.dims()[0], cols = x.dims()[1], k = ctx.attrInt("k", 0);
  return withElements(ctx, dtype, [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(dtype, {rows, cols}, Init::Zeroed); // off-diagonal elements stay zero
    for (int64_t i = 0; i < rows; ++i)
      if (i + k >= 0 && i + k < cols) out.data()[i * cols + i + k] = elements<T>(*one)[0];
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status trilu(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.dims().size() < 2) return ctx.fail("input rank must be >= 2");
  const int64_t k = ctx.hasInput(1) ? ctx.inputInts(1).at(0) : 0;
  const bool upper = ctx.attrInt("upper", 1) != 0;
  const int64_t rows = x.dims()[x.dims().size() - 2], cols = x.dims().back();
  const uint64_t matrices =
      rows * cols == 0 ? 0 : x.elementCount() / static_cast<uint64_t>(rows * cols);
  return withElements(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(x.dtype(), x.dims(), Init::Zeroed); // elements not kept stay zero
    const T* src = elements<T>(x);
    T* dst = out.data();
    for (uint64_t m = 0; m < matrices; ++m)
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          const int64_t at = static_cast<int64_t>(m) * rows * cols + i * cols + j;
          const bool keep = upper ? j - i >= k : j - i <= k;
          if (keep) dst[at] = src[at];
        }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status oneHot(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const Tensor& values = ctx.input(2);
  if (values.elementCount() != 2) return ctx.fail("values must hold [off, on]");
  const auto depth = static_cast<int64_t>(elementAsDouble(ctx.input(1), 0));
  if (depth <= 0) return ctx.fail("depth {} must be positive", depth);
  const int64_t outRank = rankOf(indices) + 1;
  auto axis = normalizeAxis(ctx.attrInt("axis", -1), outRank);
  if (!axis) return ctx.fail("axis out of range");
  std::vector<int64_t> ids(indices.elementCount());
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>(elementAsDouble(indices, i));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rankOf(indices); ++i)
    (i < *axis ? outer : inner) *= indices.dims()[static_cast<size_t>(i)];
  std::vector<int64_t> outDims = indices.dims();
  outDims.insert(outDims.begin() + *axis, depth);
  return withElements(ctx, values.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T off = elements<T>(values)[0], on = elements<T>(values)[1];
    ElemOut<T> out(values.dtype(), outDims);
    T* dst = out.data();
    std::fill(dst, dst + out.size(), off);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t id = ids[static_cast<size_t>(o * inner + i)];
        if (id < 0) id += depth;
        if (id >= 0 && id < depth) dst[(o * depth + id) * inner + i] = on;
      }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status nonZero(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto flags = truthFlags(x);
  if (!flags) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  // A scalar counts as a one-element vector, as numpy does.
  std::vector<int64_t> dims = x.dims().empty() ? std::vector<int64_t>{1} : x.dims();
  const auto rank = static_cast<int64_t>(dims.size());
  const auto nnz = static_cast<int64_t>(std::count(flags->begin(), flags->end(), 1));
  OutTensor out(DType::Int64, {rank, nnz});
  int64_t* dst = out.data<int64_t>();
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t column = 0;
  for (size_t i = 0; i < flags->size(); ++i) {
    if ((*flags)[i]) {
      for (int64_t a = 0; a < rank; ++a)
        dst[a * nnz + column] = idx[static_cast<size_t>(a)];
      ++column;
    }
    for (size_t a = dims.size(); a-- > 0;) {
      if (++idx[a] < dims[a]) break;
      idx[a] = 0;
    }
  }
  ctx.setOutput(0, std::move(out).finish());
  return Status::ok();
}

Status compress(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  auto flags = truthFlags(ctx.input(1));
  if (!flags) return ctx.unsupported("condition dtype {}", dtypeName(ctx.input(1).dtype()));
  std::vector<int64_t> dims = x.dims();
  int64_t axis = 0;
  if (ctx.hasAttr("axis")) {
    auto a = normalizeAxis(ctx.attrInt("axis", 0), rankOf(x));
    if (!a) return ctx.fail("axis out of range");
    axis = *a;
  } else {
    dims = {static_cast<int64_t>(x.elementCount())};
  }
  const int64_t dim = dims[static_cast<size_t>(axis)];
  if (static_cast<int64_t>(flags->size()) > dim)
    return ctx.fail("condition longer ({}) than axis ({})", flags->size(), dim);
  std::vector<int64_t> selected;
  for (size_t i = 0; i < flags->size(); ++i)
    if ((*flags)[i]) selected.push_back(static_cast<int64_t>(i));
  int64_t outer = 1, inner = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= dims[i];
    if (static_cast<int64_t>(i) > axis) inner *= dims[i];
  }
  std::vector<int64_t> outDims = dims;
  outDims[static_cast<size_t>(axis)] = static_cast<int64_t>(selected.size());
  return withElements(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(x.dtype(), outDims);
    const T* src = elements<T>(x);
    T* dst = out.data();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t s : selected) {
        const T* from = src + (o * dim + s) * inner;
        dst = std::copy(from, from + inner, dst);
      }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

Status reverseSequence(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = rankOf(x);
  auto batchAxis = normalizeAxis(ctx.attrInt("batch_axis", 1), rank);
  auto timeAxis = normalizeAxis(ctx.attrInt("time_axis", 0), rank);
  if (rank < 2 || !batchAxis || !timeAxis || *batchAxis == *timeAxis)
    return ctx.fail("bad batch_axis/time_axis for rank {}", rank);
  std::vector<int64_t> lens = ctx.inputInts(1);
  const auto b = static_cast<size_t>(*batchAxis), t = static_cast<size_t>(*timeAxis);
  if (static_cast<int64_t>(lens.size()) != x.dims()[b])
    return ctx.fail("{} sequence lengths for batch {}", lens.size(), x.dims()[b]);
  for (int64_t& len : lens)
    len = std::clamp(len, int64_t{0}, x.dims()[t]);
  const std::vector<int64_t> strides = stridesOf(x.dims());
  return withElements(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(x.dtype(), x.dims());
    const T* src = elements<T>(x);
    T* dst = out.data();
    std::vector<int64_t> idx(static_cast<size_t>(rank), 0);
    for (uint64_t i = 0; i < out.size(); ++i) {
      const int64_t len = lens[static_cast<size_t>(idx[b])], time = idx[t];
      const int64_t from = time < len ? len - 1 - time : time;
      dst[i] = src[static_cast<int64_t>(i) + (from - time) * strides[t]];
      for (size_t a = static_cast<size_t>(rank); a-- > 0;) {
        if (++idx[a] < x.dims()[a]) break;
        idx[a] = 0;
      }
    }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  });
}

// Groups the rows of a [rows, rowLen] key matrix: group of each row, first row of each group, in
// sorted or first-occurrence order.
template <typename V>
void groupRows(const std::vector<V>& keys, int64_t rows, int64_t rowLen, bool sorted,
               std::vector<int64_t>& firstRow, std::vector<int64_t>& groupOf) {
  auto row = [&](int64_t r) { return keys.begin() + r * rowLen; };
  auto less = [&](int64_t a, int64_t b) {
    return std::lexicographical_compare(row(a), row(a) + rowLen, row(b), row(b) + rowLen);
  };
  std::vector<int64_t> order(static_cast<size_t>(rows));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), less);
  std::vector<int64_t> sortedGroup(static_cast<size_t>(rows));
  std::vector<int64_t> firstSorted;
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || less(order[i - 1], order[i])) firstSorted.push_back(order[i]);
    sortedGroup[static_cast<size_t>(order[i])] = static_cast<int64_t>(firstSorted.size()) - 1;
  }
  std::vector<int64_t> rank(firstSorted.size());
  std::iota(rank.begin(), rank.end(), 0);
  if (!sorted) {
    // Renumber groups by where they first occur.
    std::vector<int64_t> byFirst(firstSorted.size());
    std::iota(byFirst.begin(), byFirst.end(), 0);
    std::sort(byFirst.begin(), byFirst.end(), [&](int64_t a, int64_t b) {
      return firstSorted[static_cast<size_t>(a)] < firstSorted[static_cast<size_t>(b)];
    });
    for (size_t i = 0; i < byFirst.size(); ++i)
      rank[static_cast<size_t>(byFirst[i])] = static_cast<int64_t>(i);
  }
  firstRow.assign(firstSorted.size(), 0);
  for (size_t g = 0; g < firstSorted.size(); ++g)
    firstRow[static_cast<size_t>(rank[g])] = firstSorted[g];
  groupOf.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    groupOf[static_cast<size_t>(r)] =
        rank[static_cast<size_t>(sortedGroup[static_cast<size_t>(r)])];
}

// Key matrix of x viewed as [outer, rows, inner]: row r holds x[:, r, :] in order.
template <typename V, typename Src>
std::vector<V> rowKeys(const Src* src, int64_t outer, int64_t rows, int64_t inner) {
  std::vector<V> keys(static_cast<size_t>(outer * rows * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < inner; ++i)
        keys[static_cast<size_t>((r * outer + o) * inner + i)] =
            static_cast<V>(src[(o * rows + r) * inner + i]);
  return keys;
}

Status unique(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool sorted = ctx.attrInt("sorted", 1) != 0;
  std::vector<int64_t> dims = x.dims();
  int64_t axis = 0;
  if (ctx.hasAttr("axis")) {
    auto a = normalizeAxis(ctx.attrInt("axis", 0), rankOf(x));
    if (!a) return ctx.fail("axis out of range");
    axis = *a;
  } else {
    dims = {static_cast<int64_t>(x.elementCount())};
  }
  int64_t outer = 1, inner = 1;
  const int64_t rows = dims[static_cast<size_t>(axis)];
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int64_t>(i) < axis) outer *= dims[i];
    if (static_cast<int64_t>(i) > axis) inner *= dims[i];
  }
  const int64_t rowLen = outer * inner;
  std::vector<int64_t> firstRow, groupOf;
  if (x.dtype() == DType::String) {
    groupRows(rowKeys<std::string>(x.stringValues().data(), outer, rows, inner), rows, rowLen,
              sorted, firstRow, groupOf);
  } else if (x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16) {
    std::vector<float> values = toFloatVector(x);
    groupRows(rowKeys<float>(values.data(), outer, rows, inner), rows, rowLen, sorted, firstRow,
              groupOf);
  } else {
    bool ok = dispatchNumeric(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      groupRows(rowKeys<T>(reinterpret_cast<const T*>(x.data()), outer, rows, inner), rows, rowLen,
                sorted, firstRow, groupOf);
    });
    if (!ok) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  }
  const auto groups = static_cast<int64_t>(firstRow.size());
  std::vector<int64_t> outDims = dims;
  outDims[static_cast<size_t>(axis)] = groups;
  KILN_TRY(withElements(ctx, x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    ElemOut<T> out(x.dtype(), outDims);
    const T* src = elements<T>(x);
    T* dst = out.data();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g = 0; g < groups; ++g) {
        const T* from = src + (o * rows + firstRow[static_cast<size_t>(g)]) * inner;
        dst = std::copy(from, from + inner, dst);
      }
    ctx.setOutput(0, std::move(out).finish());
    return Status::ok();
  }));
  std::vector<int64_t> counts(static_cast<size_t>(groups), 0);
  for (int64_t g : groupOf)
    ++counts[static_cast<size_t>(g)];
  ctx.setOutput(1, makeTensor<int64_t>(DType::Int64, {groups}, firstRow));
  ctx.setOutput(2, makeTensor<int64_t>(DType::Int64, {rows}, groupOf));
  ctx.setOutput(3, makeTensor<int64_t>(DType::Int64, {groups}, counts));
  return Status::ok();
}

KILN_REGISTER_KERNEL("Reshape", reshape);
KILN_REGISTER_KERNEL("Flatten", flatten);
KILN_REGISTER_KERNEL("Squeeze", squeeze);
KILN_REGISTER_KERNEL("Unsqueeze", unsqueeze);
KILN_REGISTER_KERNEL("Transpose", transpose);
KILN_REGISTER_KERNEL("Concat", concat);
KILN_REGISTER_KERNEL("Split", split);
KILN_REGISTER_KERNEL("Slice", slice);
KILN_REGISTER_KERNEL("Expand", expand);
KILN_REGISTER_KERNEL("Tile", tile);
KILN_REGISTER_KERNEL("Pad", pad);
KILN_REGISTER_KERNEL("ConstantOfShape", constantOfShape);
KILN_REGISTER_KERNEL("Range", range);
KILN_REGISTER_KERNEL("DepthToSpace", depthToSpace);
KILN_REGISTER_KERNEL("SpaceToDepth", spaceToDepth);
KILN_REGISTER_KERNEL("EyeLike", eyeLike);
KILN_REGISTER_KERNEL("Trilu", trilu);
KILN_REGISTER_KERNEL("OneHot", oneHot);
KILN_REGISTER_KERNEL("NonZero", nonZero);
KILN_REGISTER_KERNEL("Compress", compress);
KILN_REGISTER_KERNEL("ReverseSequence", reverseSequence);
KILN_REGISTER_KERNEL("Unique", unique);

} // namespace
} // namespace kiln::rt
