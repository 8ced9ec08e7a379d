// Gemm and MatMul kernels (floats through BLAS, integer types through plain loops) and the
// quantized MatMulInteger and QLinearMatMul.
#include "kiln/runtime/half_block.h"
#include "ms_fixed_point.h"
#include "nn_util.h"
#include "thread_pool.h"
#include "vec_loops.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;

// Integer dtypes MatMul/Gemm accept (ONNX lists 32/64-bit ints); calls fn(T{}).
template <typename Fn> bool dispatchMatMulInteger(DType dtype, Fn&& fn) {
  switch (dtype) {
  case DType::Int32:
    fn(int32_t{});
    return true;
  case DType::Int64:
    fn(int64_t{});
    return true;
  case DType::UInt32:
    fn(uint32_t{});
    return true;
  case DType::UInt64:
    fn(uint64_t{});
    return true;
  default:
    return false;
  }
}

// Fills y [m, n] with c broadcast (unidirectionally) to it, scaled by beta.
template <typename T, typename S>
void fillBias(const Tensor& c, const S& cData, int64_t m, int64_t n, T beta, T* y) {
  std::vector<int64_t> cd = c.dims();
  while (cd.size() < 2)
    cd.insert(cd.begin(), 1);
  const int64_t rs = cd[0] == 1 ? 0 : cd[1], cs = cd[1] == 1 ? 0 : 1;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = beta * static_cast<T>(cData[static_cast<uint64_t>(i * rs + j * cs)]);
}

bool biasBroadcasts(const std::vector<int64_t>& cd, int64_t m, int64_t n) {
  if (cd.size() > 2) return false;
  std::vector<int64_t> d = cd;
  while (d.size() < 2)
    d.insert(d.begin(), 1);
  return (d[0] == 1 || d[0] == m) && (d[1] == 1 || d[1] == n);
}

Status gemmOp(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dims().size() != 2 || b.dims().size() != 2)
    return ctx.fail("Gemm needs 2-D A and B, got rank {} and {}", a.dims().size(), b.dims().size());
  if (a.dtype() != b.dtype()) return ctx.fail("A and B dtypes differ");
  const bool transA = ctx.attrInt("transA", 0) != 0, transB = ctx.attrInt("transB", 0) != 0;
  const double alpha = ctx.attrFloat("alpha", 1.0f), beta = ctx.attrFloat("beta", 1.0f);
  const int64_t m = transA ? a.dims()[1] : a.dims()[0], k = transA ? a.dims()[0] : a.dims()[1];
  const int64_t kb = transB ? b.dims()[1] : b.dims()[0], n = transB ? b.dims()[0] : b.dims()[1];
  if (k != kb) return ctx.fail("inner dims differ: {} vs {}", k, kb);
  const bool hasC = ctx.hasInput(2) && ctx.input(2).elementCount() > 0 && beta != 0.0;
  if (hasC && !biasBroadcasts(ctx.inputDims(2), m, n))
    return ctx.fail("C does not broadcast to [{}, {}]", m, n);

  bool done = nn::dispatchFloat(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> av(a), bv(b);
    StagedOut<T> y(a.dtype(), {m, n});
    if (hasC) fillBias(ctx.input(2), Staged<T>(ctx.input(2)), m, n, static_cast<T>(beta), y.data());
    nn::gemm(ctx.threads(), transA, transB, m, n, k, static_cast<T>(alpha), av.data(), a.dims()[1],
             bv.data(), b.dims()[1], hasC ? T{1} : T{0}, y.data(), n);
    ctx.setOutput(0, std::move(y).finish());
  });
  if (done) return Status::ok();
  done = dispatchMatMulInteger(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    OutTensor y(a.dtype(), {m, n});
    T* yd = y.data<T>();
    nn::gemmLoops<T>(transA, transB, m, n, k, ctx.inputData<T>(0), a.dims()[1], ctx.inputData<T>(1),
                     b.dims()[1], yd, n, false);
    std::vector<T> bias(static_cast<size_t>(m * n), T{});
    if (hasC) fillBias(ctx.input(2), Staged<T>(ctx.input(2)), m, n, T{1}, bias.data());
    for (int64_t i = 0; i < m * n; ++i)
      yd[i] = static_cast<T>(alpha * static_cast<double>(yd[i]) +
                             (hasC ? beta * static_cast<double>(bias[i]) : 0.0));
    ctx.setOutput(0, std::move(y).finish());
  });
  if (done) return Status::ok();
  return ctx.unsupported("dtype {}", dtypeName(a.dtype()));
}

// numpy.matmul shape rules: 1-D operands are promoted and their unit dim dropped afterwards.
struct MatMulShape {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> batch, outDims;
  std::vector<int64_t> aBatchStride, bBatchStride; // per batch axis, in matrices (0 = broadcast)
  int64_t batchCount = 1;
};

Status matmulShape(const KernelContext& ctx, std::vector<int64_t> ad, std::vector<int64_t> bd,
                   MatMulShape& s) {
  if (ad.empty() || bd.empty()) return ctx.fail("MatMul operands must have rank >= 1");
  const bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  if (aVec) ad.insert(ad.begin(), 1);
  if (bVec) bd.push_back(1);
  s.m = ad[ad.size() - 2];
  s.k = ad.back();
  s.n = bd.back();
  if (bd[bd.size() - 2] != s.k)
    return ctx.fail("inner dims differ: {} vs {}", s.k, bd[bd.size() - 2]);
  std::vector<int64_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  auto batch = broadcastShapes(ab, bb);
  if (!batch) return ctx.fail("batch dims do not broadcast");
  s.batch = *batch;
  s.aBatchStride = broadcastStrides(ab, s.batch);
  s.bBatchStride = broadcastStrides(bb, s.batch);
  s.batchCount = nn::product(s.batch);
  s.outDims = s.batch;
  if (!aVec) s.outDims.push_back(s.m);
  if (!bVec) s.outDims.push_back(s.n);
  return Status::ok();
}

// Calls fn(batchIndex, aMatrix, bMatrix) for every output matrix.
template <typename Fn> void forEachBatch(const MatMulShape& s, Fn&& fn) {
  const size_t r = s.batch.size();
  std::vector<int64_t> idx(r, 0);
  int64_t ao = 0, bo = 0;
  for (int64_t i = 0; i < s.batchCount; ++i) {
    fn(i, ao, bo);
    for (size_t d = r; d-- > 0;) {
      ++idx[d];
      ao += s.aBatchStride[d];
      bo += s.bBatchStride[d];
      if (idx[d] < s.batch[d]) break;
      ao -= s.aBatchStride[d] * s.batch[d];
      bo -= s.bBatchStride[d] * s.batch[d];
      idx[d] = 0;
    }
  }
}

bool allZero(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
}

Status matmulOp(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (a.dtype() != b.dtype()) return ctx.fail("A and B dtypes differ");
  MatMulShape s;
  KILN_TRY(matmulShape(ctx, a.dims(), b.dims(), s));
  const int64_t aMat = s.m * s.k, bMat = s.k * s.n, yMat = s.m * s.n;
  bool done = nn::dispatchFloat(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> av(a), bv(b);
    // B shared by every batch and A laid out batch-contiguous: one tall GEMM does it all.
    bool aContiguous = true;
    {
      int64_t expect = 1;
      for (size_t d = s.batch.size(); d-- > 0;) {
        if (s.batch[d] != 1 && s.aBatchStride[d] != expect) aContiguous = false;
        expect *= s.batch[d];
      }
    }
    auto multiply = [&](T* y) {
      if (allZero(s.bBatchStride) && aContiguous) {
        nn::gemm(ctx.threads(), false, false, s.batchCount * s.m, s.n, s.k, T{1}, av.data(), s.k,
                 bv.data(), s.n, T{0}, y, s.n);
      } else {
        forEachBatch(s, [&](int64_t i, int64_t ao, int64_t bo) {
          nn::gemm(ctx.threads(), false, false, s.m, s.n, s.k, T{1}, av.data() + ao * aMat, s.k,
                   bv.data() + bo * bMat, s.n, T{0}, y + i * yMat, s.n);
        });
      }
    };
    if constexpr (std::is_same_v<T, float>) {
      if (a.dtype() == DType::Float16) {
        // The float products narrowed split over the pool (as StagedOut narrows them, in one
        // pass): PP-OCR rec's [40, 6625] classifier output.
        OutTensor y(DType::Float16, s.outDims);
        Scratch<float> wide(static_cast<size_t>(y.elementCount()));
        multiply(wide.data());
        const auto n = static_cast<int64_t>(wide.size());
        uint16_t* dst = y.data<uint16_t>();
        pool::parallelFor(
            pool::threadsFor(ctx.threads(), static_cast<double>(n) * pool::kNsPerElement), n,
            vec::kParallelGrain, [&](int64_t i0, int64_t i1) {
              floatsToHalves(wide.data() + i0, dst + i0, static_cast<size_t>(i1 - i0));
            });
        ctx.setOutput(0, std::move(y).finish());
        return;
      }
    }
    StagedOut<T> y(a.dtype(), s.outDims);
    multiply(y.data());
    ctx.setOutput(0, std::move(y).finish());
  });
  if (done) return Status::ok();
  done = dispatchMatMulInteger(a.dtype(), [&](auto tag) {
    using T = decltype(tag);
    OutTensor y(a.dtype(), s.outDims);
    const T* ad = ctx.inputData<T>(0);
    const T* bd = ctx.inputData<T>(1);
    T* yd = y.data<T>();
    forEachBatch(s, [&](int64_t i, int64_t ao, int64_t bo) {
      nn::gemmLoops<T>(false, false, s.m, s.n, s.k, ad + ao * aMat, s.k, bd + bo * bMat, s.n,
                       yd + i * yMat, s.n, false);
    });
    ctx.setOutput(0, std::move(y).finish());
  });
  if (done) return Status::ok();
  return ctx.unsupported("dtype {}", dtypeName(a.dtype()));
}

bool isInt8Like(DType d) { return d == DType::UInt8 || d == DType::Int8; }

// Values of int8/uint8 operand i minus its zero point (input zpIndex: absent, a scalar, or one per
// row / column of each matrix) as int32.
Status shiftedOperand(const KernelContext& ctx, size_t i, size_t zpIndex, int64_t rows,
                      int64_t cols, bool perRow, std::vector<int32_t>& out) {
  std::vector<int64_t> v = toInt64Vector(ctx.input(i));
  std::vector<int64_t> zp =
      ctx.hasInput(zpIndex) ? ctx.inputInts(zpIndex) : std::vector<int64_t>{0};
  const int64_t perCount = perRow ? rows : cols;
  if (zp.size() != 1 && static_cast<int64_t>(zp.size()) != perCount)
    return ctx.fail("zero point has {} values, expected 1 or {}", zp.size(), perCount);
  out.resize(v.size());
  for (size_t e = 0; e < v.size(); ++e) {
    int64_t z = zp[0];
    if (zp.size() > 1) {
      const int64_t inMatrix = static_cast<int64_t>(e) % (rows * cols);
      z = zp[static_cast<size_t>(perRow ? inMatrix / cols : inMatrix % cols)];
    }
    out[e] = static_cast<int32_t>(v[e] - z);
  }
  return Status::ok();
}

// int32 products of (A - a_zero_point) and (B - b_zero_point), batched like MatMul; A, B and
// their zero points are inputs aIndex, aZp, bIndex, bZp.
Status integerMatMul(KernelContext& ctx, size_t aIndex, size_t aZp, size_t bIndex, size_t bZp,
                     MatMulShape& s, std::vector<int32_t>& acc) {
  const Tensor& a = ctx.input(aIndex);
  const Tensor& b = ctx.input(bIndex);
  if (!isInt8Like(a.dtype()) || !isInt8Like(b.dtype()))
    return ctx.unsupported("dtypes {} x {}", dtypeName(a.dtype()), dtypeName(b.dtype()));
  KILN_TRY(matmulShape(ctx, a.dims(), b.dims(), s));
  std::vector<int32_t> av, bv;
  KILN_TRY(shiftedOperand(ctx, aIndex, aZp, s.m, s.k, true, av));
  KILN_TRY(shiftedOperand(ctx, bIndex, bZp, s.k, s.n, false, bv));
  const int64_t aMat = s.m * s.k, bMat = s.k * s.n, yMat = s.m * s.n;
  acc.assign(static_cast<size_t>(s.batchCount * yMat), 0);
  forEachBatch(s, [&](int64_t i, int64_t ao, int64_t bo) {
    nn::gemmLoops<int32_t>(false, false, s.m, s.n, s.k, av.data() + ao * aMat, s.k,
                           bv.data() + bo * bMat, s.n, acc.data() + i * yMat, s.n, false);
  });
  return Status::ok();
}

Status matmulIntegerOp(KernelContext& ctx) {
  MatMulShape s;
  std::vector<int32_t> acc;
  KILN_TRY(integerMatMul(ctx, 0, 2, 1, 3, s, acc));
  ctx.setOutput(0, makeTensor<int32_t>(DType::Int32, s.outDims, acc));
  return Status::ok();
}

Status qlinearMatMulOp(KernelContext& ctx) {
  // Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
  MatMulShape s;
  std::vector<int32_t> acc;
  KILN_TRY(integerMatMul(ctx, 0, 2, 3, 5, s, acc));
  std::vector<float> as = toFloatVector(ctx.input(1)), bs = toFloatVector(ctx.input(4));
  std::vector<float> ys = toFloatVector(ctx.input(6));
  if ((as.size() != 1 && static_cast<int64_t>(as.size()) != s.m) ||
      (bs.size() != 1 && static_cast<int64_t>(bs.size()) != s.n) || ys.size() != 1)
    return ctx.fail("scales must be scalars, or one per row of A / column of B");
  const DType yType = ctx.hasInput(7) ? ctx.input(7).dtype() : DType::UInt8;
  if (!isInt8Like(yType)) return ctx.unsupported("output dtype {}", dtypeName(yType));
  const int64_t yz = ctx.hasInput(7) ? ctx.inputInts(7).at(0) : 0;
  const int64_t lo = yType == DType::UInt8 ? 0 : -128, hi = yType == DType::UInt8 ? 255 : 127;
  OutTensor y(yType, s.outDims);
  if (ms_int8::requested(ctx)) {
    // Raised from a .ms: the runtime's fixed-point requantization, one multiplier per column.
    if (as.size() != 1) return ctx.unsupported("fixed-point requantization with per-row A scales");
    std::vector<ms_int8::Multiplier> multipliers;
    for (int64_t c = 0; c < s.n; ++c)
      multipliers.push_back(
          ms_int8::multiplierOf(as[0], bs.size() == 1 ? bs[0] : bs[static_cast<size_t>(c)], ys[0]));
    for (size_t e = 0; e < acc.size(); ++e) {
      const auto& mul = multipliers[static_cast<size_t>(static_cast<int64_t>(e) % s.n)];
      y.bytes()[e] = static_cast<uint8_t>(ms_int8::outputCode(acc[e], mul, yz, lo, hi) & 0xff);
    }
    ctx.setOutput(0, std::move(y).finish());
    return Status::ok();
  }
  for (size_t e = 0; e < acc.size(); ++e) {
    const int64_t inMatrix = static_cast<int64_t>(e) % (s.m * s.n);
    const float sa = as.size() == 1 ? as[0] : as[static_cast<size_t>(inMatrix / s.n)];
    const float sb = bs.size() == 1 ? bs[0] : bs[static_cast<size_t>(inMatrix % s.n)];
    const float v = static_cast<float>(acc[e]) * (sa * sb / ys[0]);
    y.bytes()[e] = static_cast<uint8_t>(
        std::clamp(static_cast<int64_t>(std::nearbyint(v)) + yz, lo, hi) & 0xff);
  }
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

KILN_REGISTER_KERNEL("Gemm", gemmOp);
KILN_REGISTER_KERNEL("MatMul", matmulOp);
KILN_REGISTER_KERNEL("MatMulInteger", matmulIntegerOp);
KILN_REGISTER_KERNEL("QLinearMatMul", qlinearMatMulOp);

} // namespace
} // namespace kiln::rt
