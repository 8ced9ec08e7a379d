// BLAS wrappers and sliding-window geometry shared by the NN kernels.
#include "nn_util.h"

#include <algorithm>
#include <mutex>

#include <fmt/ranges.h>

#include <cblas.h>
#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
// oneDNN's CPU runtime here is OpenMP: each column block's sgemm runs on one OpenMP thread.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

#include "kiln/support/checked_math.h"
#include "ops/conv.h"
#include "thread_pool.h"

namespace kiln::rt::nn {
namespace {

// OpenBLAS always runs single-threaded: GEMMs are cut into fixed blocks of columns of C that the
// executor's pool (thread_pool.h) spreads over its threads, so OpenBLAS's own threads never spin
// against it. The blocks depend only on the sizes, never on the thread count, so every column is
// computed by the same call whatever the count (OpenBLAS's threaded GEMM, and even a different
// column split, does not give the same bits).
void singleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

constexpr int64_t kColumnBlock = 512;
// A product of one column block is cut into blocks of rows instead when it is large enough to be
// worth two threads (pool::threadsFor); a size-only test, so the blocks never depend on the count.
constexpr int64_t kRowBlock = 64;
constexpr double kRowSplitNs = 4.0 * pool::kHandOffNs;

template <typename T, typename Call>
void gemmColumns(int threads, bool transB, int64_t m, int64_t n, int64_t k, const T* b,
                 int64_t ldb, T* c, Call call, const GemmBlockDone* blockDone = nullptr) {
  singleThreadedBlas();
  if (n <= kColumnBlock) {
    call(n, b, c);
    if (blockDone) (*blockDone)(0, n);
    return;
  }
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  // Small products stay on the calling thread (waking workers would cost more than they save).
  const int useThreads = pool::threadsFor(
      threads, static_cast<double>(m) * static_cast<double>(n * k) * pool::kNsPerMac);
  pool::parallelFor(useThreads, blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t j0 = blk * kColumnBlock, cols = std::min(kColumnBlock, n - j0);
      call(cols, transB ? b + j0 * ldb : b + j0, c + j0);
      if (blockDone) (*blockDone)(j0, cols);
    }
  });
}

} // namespace

void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc, const GemmBlockDone* blockDone) {
  if (m == 0 || n == 0) return;
  if (k == 0) { // BLAS leaves C untouched by the product; scale it ourselves
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    if (blockDone) (*blockDone)(0, n);
    return;
  }
  // C[rows, cols] from rows of A and columns of B, on this thread.
  auto block = [&](int64_t rows, int64_t cols, const float* ai, const float* bj, float* cij) {
#ifdef KILN_HAVE_DNNL
    // oneDNN's sgemm (AVX-512 kernels where the CPU has them, about twice OpenBLAS 0.3.21's AVX2
    // ones there) on one OpenMP thread per block, so each block is computed alike whatever the
    // thread count. It only refuses malformed arguments; OpenBLAS then takes the block.
    if (omp_set_num_threads) omp_set_num_threads(1);
    if (dnnl_sgemm(transA ? 'T' : 'N', transB ? 'T' : 'N', rows, cols, k, alpha, ai, lda, bj, ldb,
                   beta, cij, ldc) == dnnl_success)
      return;
#endif
    cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(rows),
                static_cast<blasint>(cols), static_cast<blasint>(k), alpha, ai,
                static_cast<blasint>(lda), bj, static_cast<blasint>(ldb), beta, cij,
                static_cast<blasint>(ldc));
  };
  const double work = static_cast<double>(m) * static_cast<double>(n * k) * pool::kNsPerMac;
  if (n <= kColumnBlock && m >= 2 * kRowBlock && work >= kRowSplitNs) {
    // One column block of a large product (the 20x20 1x1 convolutions of PP-OCR det): fixed
    // blocks of kRowBlock rows of C over the pool instead, chosen by the sizes alone so the same
    // blocks run at any thread count. Measured on those shapes, dnnl_sgemm gives the same bytes
    // and the same single-thread time in row blocks as in one call (bench/results.md "Threads").
    singleThreadedBlas();
    const int64_t blocks = (m + kRowBlock - 1) / kRowBlock;
    pool::parallelFor(pool::threadsFor(threads, work), blocks, 1, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t i0 = r * kRowBlock, rows = std::min(kRowBlock, m - i0);
        block(rows, n, transA ? a + i0 : a + i0 * lda, b, c + i0 * ldc);
      }
    });
    if (blockDone) (*blockDone)(0, n);
    return;
  }
  gemmColumns(
      threads, transB, m, n, k, b, ldb, c,
      [&](int64_t cols, const float* bj, float* cj) { block(m, cols, a, bj, cj); }, blockDone);
}

void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == 0.0 ? 0.0 : beta * c[i * ldc + j];
    return;
  }
  gemmColumns(threads, transB, m, n, k, b, ldb, c, [&](int64_t cols, const double* bj, double* cj) {
    cblas_dgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
                transB ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(cols), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), bj, static_cast<blasint>(ldb), beta, cj,
                static_cast<blasint>(ldc));
  });
}

Status resolveWindow(const KernelContext& ctx, const std::vector<int64_t>& in,
                     const std::vector<int64_t>& kernel, bool ceilMode, Window& w) {
  const size_t r = in.size();
  if (kernel.size() != r)
    return ctx.fail("kernel has {} spatial dims, input has {}", kernel.size(), r);
  w.in = in;
  w.kernel = kernel;
  w.strides = ctx.attrInts("strides", std::vector<int64_t>(r, 1));
  w.dilations = ctx.attrInts("dilations", std::vector<int64_t>(r, 1));
  std::vector<int64_t> pads = ctx.attrInts("pads", std::vector<int64_t>(2 * r, 0));
  if (w.strides.size() != r || w.dilations.size() != r || pads.size() != 2 * r)
    return ctx.fail("strides/dilations/pads do not match {} spatial dims", r);
  w.padBegin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(r));
  w.padEnd.assign(pads.begin() + static_cast<std::ptrdiff_t>(r), pads.end());
  w.out.assign(r, 0);
  const std::string autoPad = ctx.attrString("auto_pad", "NOTSET");
  for (size_t d = 0; d < r; ++d) {
    if (w.strides[d] < 1 || w.dilations[d] < 1 || kernel[d] < 1)
      return ctx.fail("strides, dilations and kernel dims must be positive");
    if (!checkedWindowSpan(w, d))
      return ctx.fail("window arithmetic overflows on spatial axis {} (input {}, kernel {}, "
                      "stride {}, dilation {}, pads {}+{})",
                      d, in[d], kernel[d], w.strides[d], w.dilations[d], w.padBegin[d],
                      w.padEnd[d]);
    const int64_t ek = w.effectiveKernel(d), s = w.strides[d];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      w.out[d] = (in[d] + s - 1) / s;
      const ops::AxisPads same =
          ops::samePadding(in[d], kernel[d], s, w.dilations[d], autoPad == "SAME_UPPER");
      w.padBegin[d] = same.begin;
      w.padEnd[d] = same.end;
    } else {
      if (autoPad == "VALID")
        w.padBegin[d] = w.padEnd[d] = 0;
      else if (autoPad != "NOTSET" && !autoPad.empty())
        return ctx.fail("unknown auto_pad '{}'", autoPad);
      const int64_t span = in[d] + w.padBegin[d] + w.padEnd[d] - ek;
      if (span < 0) return ctx.fail("window {} exceeds padded input {} on axis {}", ek, in[d], d);
      w.out[d] = (ceilMode ? (span + s - 1) / s : span / s) + 1;
      // A last window that would start inside the end padding only is dropped.
      if (ceilMode && (w.out[d] - 1) * s >= in[d] + w.padBegin[d]) --w.out[d];
    }
  }
  return checkWindowProducts(ctx, w);
}

std::optional<int64_t> checkedWindowSpan(const Window& w, size_t d) {
  // (kernel - 1) * dilation + 1, then in + padBegin + padEnd: every later expression of the
  // geometry is bounded by these two.
  auto ek = checkedMul<int64_t>(w.kernel[d] - 1, w.dilations[d]);
  if (!ek || !(ek = checkedAdd<int64_t>(*ek, 1))) return std::nullopt;
  auto padded = checkedAdd<int64_t>(w.in[d], w.padBegin[d]);
  if (!padded || !(padded = checkedAdd<int64_t>(*padded, w.padEnd[d]))) return std::nullopt;
  // SAME padding computes in + stride - 1; ceil mode span + stride - 1.
  if (!checkedAdd<int64_t>(*padded, w.strides[d]) || !checkedAdd<int64_t>(w.in[d], w.strides[d]))
    return std::nullopt;
  return *padded - *ek;
}

Status checkWindowProducts(const KernelContext& ctx, const Window& w) {
  // Kernels index planes with product(in), product(kernel) and product(out), and column matrices
  // with product(kernel) * product(out); all must fit before anything is allocated.
  const auto in = checkedElementCount(w.in), kernel = checkedElementCount(w.kernel),
             out = checkedElementCount(w.out);
  std::optional<uint64_t> columns;
  if (kernel && out) columns = checkedMul<uint64_t>(*kernel, *out);
  if (in && columns && *columns <= kMaxTensorExtent) return Status::ok();
  return ctx.fail("window of input [{}], kernel [{}], output [{}]: the element count overflows",
                  fmt::join(w.in, ","), fmt::join(w.kernel, ","), fmt::join(w.out, ","));
}

} // namespace kiln::rt::nn
