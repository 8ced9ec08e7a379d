// Reduction kernels (ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/SumSquare), ArgMax/ArgMin
// and CumSum. Every reduction visits its inputs in row-major order, so sums are deterministic.
#include <cmath>
#include <limits>
#include <vector>

#include "kiln/runtime/kernel.h"
#include "math_util.h"

namespace kiln::rt {
namespace {

using namespace math;

enum class Red { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// Accumulator: doubles for floats, 64-bit for integers (wrap-around then matches the narrow type).
template <typename T>
using AccOf = std::conditional_t<isFloatT<T>, double,
                                 std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

// Which axes a reduction covers, and the shapes around it.
struct ReducePlan {
  std::vector<int64_t> inDims;
  std::vector<bool> reduced;
  std::vector<int64_t> keptDims; // reduced axes set to 1
  std::vector<int64_t> outDims;  // keptDims, or with reduced axes dropped
  uint64_t groupSize = 1;        // input elements per output element
};

// Axes come from input 1 when it is given (ReduceSum from opset 13, the others from 18) and
// from the `axes` attribute otherwise.
Status planReduction(KernelContext& ctx, const std::vector<int64_t>& dims, ReducePlan& plan) {
  std::vector<int64_t> axes;
  if (ctx.inputCount() > 1 && ctx.hasInput(1))
    axes = ctx.inputInts(1);
  else
    axes = ctx.attrInts("axes", {});
  const bool keepDims = ctx.attrInt("keepdims", 1) != 0;
  const bool noop = ctx.attrInt("noop_with_empty_axes", 0) != 0;
  const int64_t rank = static_cast<int64_t>(dims.size());
  plan.inDims = dims;
  plan.reduced.assign(dims.size(), axes.empty() && !noop);
  for (int64_t a : axes) {
    auto n = normalizeAxis(a, rank);
    if (!n) return ctx.fail("axis {} out of range for rank {}", a, rank);
    plan.reduced[static_cast<size_t>(*n)] = true;
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    plan.keptDims.push_back(plan.reduced[i] ? 1 : dims[i]);
    if (plan.reduced[i])
      plan.groupSize *= static_cast<uint64_t>(dims[i]);
    else
      plan.outDims.push_back(dims[i]);
  }
  if (keepDims) plan.outDims = plan.keptDims;
  return Status::ok();
}

// Calls fn(inIndex, outIndex) for every input element in row-major order.
template <typename Fn> void walkReduction(const ReducePlan& plan, Fn&& fn) {
  const size_t rank = plan.inDims.size();
  const uint64_t total = countOf(plan.inDims);
  if (total == 0) return;
  if (rank == 0) {
    fn(uint64_t{0}, uint64_t{0});
    return;
  }
  std::vector<int64_t> outStrides = stridesOf(plan.keptDims);
  for (size_t i = 0; i < rank; ++i)
    if (plan.reduced[i]) outStrides[i] = 0;
  std::vector<int64_t> idx(rank, 0);
  const int64_t inner = plan.inDims[rank - 1];
  const int64_t os = outStrides[rank - 1];
  int64_t outOff = 0;
  for (uint64_t base = 0; base < total; base += static_cast<uint64_t>(inner)) {
    for (int64_t k = 0; k < inner; ++k)
      fn(base + static_cast<uint64_t>(k), static_cast<uint64_t>(outOff + k * os));
    for (size_t axis = rank - 1; axis-- > 0;) {
      ++idx[axis];
      outOff += outStrides[axis];
      if (idx[axis] < plan.inDims[axis]) break;
      outOff -= outStrides[axis] * plan.inDims[axis];
      idx[axis] = 0;
    }
  }
}

template <Red kind, typename T> Tensor reduceTyped(const Tensor& x, const ReducePlan& plan) {
  using Acc = AccOf<T>;
  const T* in = reinterpret_cast<const T*>(x.data());
  const uint64_t outCount = countOf(plan.keptDims);
  Acc init{};
  if constexpr (kind == Red::Prod) init = Acc(1);
  if constexpr (kind == Red::Max)
    init = isFloatT<T> ? static_cast<Acc>(-std::numeric_limits<double>::infinity())
                       : static_cast<Acc>(std::numeric_limits<T>::lowest());
  if constexpr (kind == Red::Min)
    init = isFloatT<T> ? static_cast<Acc>(std::numeric_limits<double>::infinity())
                       : static_cast<Acc>(std::numeric_limits<T>::max());
  std::vector<Acc> acc(outCount, init);
  std::vector<double> shift; // LogSumExp: per-output maximum, subtracted before exp
  if constexpr (kind == Red::LogSumExp) {
    shift.assign(outCount, -std::numeric_limits<double>::infinity());
    walkReduction(plan, [&](uint64_t i, uint64_t o) {
      const double v = static_cast<double>(in[i]);
      if (v > shift[o] || std::isnan(v)) shift[o] = v;
    });
    for (double& s : shift)
      if (std::isinf(s)) s = 0; // all -inf (or +inf) groups: nothing to stabilise
  }
  walkReduction(plan, [&](uint64_t i, uint64_t o) {
    const Acc v = static_cast<Acc>(in[i]);
    Acc& a = acc[o];
    if constexpr (kind == Red::Sum || kind == Red::Mean || kind == Red::LogSum)
      a += v;
    else if constexpr (kind == Red::Prod)
      a *= v;
    else if constexpr (kind == Red::SumSquare || kind == Red::L2)
      a += v * v;
    else if constexpr (kind == Red::L1)
      a += (v < Acc(0) ? Acc(0) - v : v);
    else if constexpr (kind == Red::LogSumExp)
      a += static_cast<Acc>(std::exp(static_cast<double>(in[i]) - shift[o]));
    else if constexpr (kind == Red::Max) {
      if (v > a) a = v;
      if constexpr (isFloatT<T>)
        if (std::isnan(v)) a = v;
    } else if constexpr (kind == Red::Min) {
      if (v < a) a = v;
      if constexpr (isFloatT<T>)
        if (std::isnan(v)) a = v;
    }
  });
  OutTensor out(x.dtype(), plan.outDims);
  T* po = out.data<T>();
  for (uint64_t o = 0; o < outCount; ++o) {
    const Acc a = acc[o];
    if constexpr (kind == Red::Mean)
      po[o] = static_cast<T>(static_cast<double>(a) / static_cast<double>(plan.groupSize));
    else if constexpr (kind == Red::L2)
      po[o] = static_cast<T>(std::sqrt(static_cast<double>(a)));
    else if constexpr (kind == Red::LogSum)
      po[o] = static_cast<T>(std::log(static_cast<double>(a)));
    else if constexpr (kind == Red::LogSumExp)
      po[o] = static_cast<T>(std::log(static_cast<double>(a)) + shift[o]);
    else
      po[o] = static_cast<T>(a);
  }
  return std::move(out).finish();
}

template <Red kind> Status reduceKernel(KernelContext& ctx) {
  const Tensor& raw = ctx.input(0);
  const DType dt = raw.dtype();
  Tensor x = asComputeTensor(raw);
  // Bool max/min (opset 20) are any/all: the same as uint8 max/min over 0/1 bytes.
  const bool boolMinMax = dt == DType::Bool && (kind == Red::Max || kind == Red::Min);
  if (boolMinMax) x = Tensor(DType::UInt8, raw.dims(), raw.buffer());
  ReducePlan plan;
  if (Status s = planReduction(ctx, x.dims(), plan); !s) return s;
  Tensor r;
  if (!dispatchArith(x.dtype(), [&](auto tag) { r = reduceTyped<kind, decltype(tag)>(x, plan); }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  if (boolMinMax) // an empty Min group starts at 255; bools must be 0/1
    r = mapUnary<uint8_t, uint8_t>(r, DType::Bool, [](uint8_t v) { return uint8_t(v != 0); });
  ctx.setOutput(0, narrowFromFloat(r, dt));
  return Status::ok();
}

// ---- ArgMax / ArgMin ----

template <bool isMax> Status argKernel(KernelContext& ctx) {
  Tensor x = asComputeTensor(ctx.input(0));
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  const int64_t axisAttr = ctx.attrInt("axis", 0);
  auto axis = normalizeAxis(axisAttr, std::max<int64_t>(rank, 1));
  if (!axis) return ctx.fail("axis {} out of range for rank {}", axisAttr, rank);
  const bool keepDims = ctx.attrInt("keepdims", 1) != 0;
  const bool last = ctx.attrInt("select_last_index", 0) != 0;
  AxisSplit s = rank == 0 ? AxisSplit{} : splitAtAxis(x.dims(), *axis);
  if (s.extent == 0) return ctx.fail("cannot take ArgMax/ArgMin over an empty axis");
  std::vector<int64_t> outDims;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != *axis)
      outDims.push_back(x.dims()[static_cast<size_t>(i)]);
    else if (keepDims)
      outDims.push_back(1);
  }
  OutTensor out(DType::Int64, outDims);
  int64_t* po = out.data<int64_t>();
  if (!dispatchAll(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        const T* in = reinterpret_cast<const T*>(x.data());
        for (int64_t o = 0; o < s.outer; ++o)
          for (int64_t i = 0; i < s.inner; ++i) {
            const T* base = in + o * s.extent * s.inner + i;
            T best = base[0];
            int64_t at = 0;
            for (int64_t k = 1; k < s.extent; ++k) {
              const T v = base[k * s.inner];
              const bool better =
                  isMax ? (last ? !(v < best) : v > best) : (last ? !(v > best) : v < best);
              if (better) {
                best = v;
                at = k;
              }
            }
            po[o * s.inner + i] = at;
          }
      }))
    return ctx.unsupported("dtype {}", dtypeName(ctx.input(0).dtype()));
  ctx.setOutput(0, std::move(out).finish());
  return Status::ok();
}

// ---- CumSum ----

Status cumSumKernel(KernelContext& ctx) {
  const Tensor& raw = ctx.input(0);
  const DType dt = raw.dtype();
  Tensor x = asComputeTensor(raw);
  std::vector<int64_t> axisValues = ctx.inputInts(1);
  if (axisValues.size() != 1) return ctx.fail("axis must be a single value");
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  auto axis = normalizeAxis(axisValues[0], rank);
  if (!axis) return ctx.fail("axis {} out of range for rank {}", axisValues[0], rank);
  const bool exclusive = ctx.attrInt("exclusive", 0) != 0;
  const bool reverse = ctx.attrInt("reverse", 0) != 0;
  const AxisSplit s = splitAtAxis(x.dims(), *axis);
  Tensor r;
  if (!dispatchArith(x.dtype(), [&](auto tag) {
        using T = decltype(tag);
        using Acc = AccOf<T>;
        OutTensor out(x.dtype(), x.dims());
        const T* in = reinterpret_cast<const T*>(x.data());
        T* po = out.data<T>();
        for (int64_t o = 0; o < s.outer; ++o)
          for (int64_t i = 0; i < s.inner; ++i) {
            const int64_t base = o * s.extent * s.inner + i;
            Acc running{};
            for (int64_t step = 0; step < s.extent; ++step) {
              const int64_t k = reverse ? s.extent - 1 - step : step;
              const int64_t at = base + k * s.inner;
              if (exclusive) {
                po[at] = static_cast<T>(running);
                running += static_cast<Acc>(in[at]);
              } else {
                running += static_cast<Acc>(in[at]);
                po[at] = static_cast<T>(running);
              }
            }
          }
        r = std::move(out).finish();
      }))
    return ctx.unsupported("dtype {}", dtypeName(dt));
  ctx.setOutput(0, narrowFromFloat(r, dt));
  return Status::ok();
}

KILN_REGISTER_KERNEL("ReduceSum", reduceKernel<Red::Sum>);
KILN_REGISTER_KERNEL("ReduceMean", reduceKernel<Red::Mean>);
KILN_REGISTER_KERNEL("ReduceMax", reduceKernel<Red::Max>);
KILN_REGISTER_KERNEL("ReduceMin", reduceKernel<Red::Min>);
KILN_REGISTER_KERNEL("ReduceProd", reduceKernel<Red::Prod>);
KILN_REGISTER_KERNEL("ReduceL1", reduceKernel<Red::L1>);
KILN_REGISTER_KERNEL("ReduceL2", reduceKernel<Red::L2>);
KILN_REGISTER_KERNEL("ReduceLogSum", reduceKernel<Red::LogSum>);
KILN_REGISTER_KERNEL("ReduceLogSumExp", reduceKernel<Red::LogSumExp>);
KILN_REGISTER_KERNEL("ReduceSumSquare", reduceKernel<Red::SumSquare>);
KILN_REGISTER_KERNEL("ArgMax", argKernel<true>);
KILN_REGISTER_KERNEL("ArgMin", argKernel<false>);
KILN_REGISTER_KERNEL("CumSum", cumSumKernel);

} // namespace
} // namespace kiln::rt
