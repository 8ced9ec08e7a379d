// com.microsoft MatMulNBits: float activations times a block-quantized (2/4/8-bit) weight. The
// weight stays packed: each worker dequantizes one column of B at a time into a K-float scratch and
// takes its dot products with every row of A, so no fp32 copy of the weight is ever made.
#include <algorithm>
#include <cstring>
#include <optional>

#include "nn_util.h"
#include "ops/matmul_nbits.h"
#include "thread_pool.h"

namespace kiln::rt {
namespace {

// Σ a[i]·w[i] with eight running sums combined in a fixed order: the same bits for any thread
// count and on every x86-64 (no contraction: vectorized or not, each lane rounds alike).
float dot(const float* a, const float* w, int64_t k) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8)
    for (int l = 0; l < 8; ++l)
      s[l] += a[i + l] * w[i + l];
  for (int l = 0; i < k; ++i, ++l)
    s[l] += a[i] * w[i];
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

// Code j of a bit-packed run (low bits first), `bits` in {2, 4, 8}.
inline int32_t codeAt(const uint8_t* packed, int64_t j, int64_t bits) {
  const int64_t bit = j * bits;
  return (packed[bit / 8] >> (bit % 8)) & ((1 << bits) - 1);
}

Status matMulNBitsOp(KernelContext& ctx) {
  auto attrs = ops::matMulNBitsShape(ctx.node());
  if (!attrs) return attrs.status();
  const ops::MatMulNBitsShape s = *attrs;
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const Tensor& scales = ctx.input(2);
  if (!nn::isFloatLike(a.dtype()) || a.dtype() == DType::Float64)
    return ctx.unsupported("A of dtype {}", dtypeName(a.dtype()));
  if (a.dims().empty() || a.dims().back() != s.k)
    return ctx.fail("A's last dim must be K = {}", s.k);
  if (b.dtype() != DType::UInt8) return ctx.unsupported("B of dtype {}", dtypeName(b.dtype()));
  if (b.elementCount() != static_cast<uint64_t>(s.n * s.blocks * s.blobBytes))
    return ctx.fail("B holds {} bytes; [N={}, blocks={}, blob={}] needs {}", b.elementCount(), s.n,
                    s.blocks, s.blobBytes, s.n * s.blocks * s.blobBytes);
  if (scales.elementCount() != static_cast<uint64_t>(s.n * s.blocks))
    return ctx.fail("scales hold {} values, N x blocks = {}", scales.elementCount(),
                    s.n * s.blocks);
  if (ctx.hasInput(4) && ctx.input(4).elementCount() > 0)
    return ctx.unsupported("g_idx (act-order block indices)");
  // Zero points: packed uint8 codes, or float values of A's type, or 2^(bits-1).
  const bool hasZp = ctx.hasInput(3);
  const bool packedZp = hasZp && ctx.input(3).dtype() == DType::UInt8;
  if (hasZp) {
    const uint64_t want = packedZp ? static_cast<uint64_t>(s.n * s.zeroPointRowBytes())
                                   : static_cast<uint64_t>(s.n * s.blocks);
    if (!packedZp && !nn::isFloatLike(ctx.input(3).dtype()))
      return ctx.unsupported("zero points of dtype {}", dtypeName(ctx.input(3).dtype()));
    if (ctx.input(3).elementCount() != want)
      return ctx.fail("zero_points hold {} values, {} expected", ctx.input(3).elementCount(), want);
  }
  const bool hasBias = ctx.hasInput(5);
  if (hasBias && ctx.input(5).elementCount() != static_cast<uint64_t>(s.n))
    return ctx.fail("bias holds {} values, N = {}", ctx.input(5).elementCount(), s.n);

  nn::Staged<float> av(a), sv(scales);
  std::optional<nn::Staged<float>> zpFloat, bias;
  if (hasZp && !packedZp) zpFloat.emplace(ctx.input(3));
  if (hasBias) bias.emplace(ctx.input(5));
  const uint8_t* codes = b.data();
  const uint8_t* zpCodes = packedZp ? ctx.input(3).data() : nullptr;
  const int64_t m = static_cast<int64_t>(a.elementCount() / static_cast<uint64_t>(s.k));
  std::vector<int64_t> yDims = a.dims();
  yDims.back() = s.n;
  nn::StagedOut<float> y(a.dtype(), yDims);
  float* yd = y.data();
  const float defaultZp = static_cast<float>(1 << (s.bits - 1));
  // Each weight is decoded and multiplied into m rows: ranges of columns when it pays.
  const int threads =
      pool::threadsFor(ctx.threads(), static_cast<double>(s.n * s.k) * static_cast<double>(m + 1) *
                                          pool::kNsPerElement);
  pool::parallelFor(threads, s.n, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> w(static_cast<size_t>(s.k));
    for (int64_t col = begin; col < end; ++col) {
      for (int64_t blk = 0; blk < s.blocks; ++blk) {
        const int64_t at = col * s.blocks + blk;
        const float scale = sv[static_cast<uint64_t>(at)];
        const float zp =
            zpCodes ? static_cast<float>(codeAt(zpCodes + col * s.zeroPointRowBytes(), blk, s.bits))
            : zpFloat ? (*zpFloat)[static_cast<uint64_t>(at)]
                      : defaultZp;
        const uint8_t* blob = codes + at * s.blobBytes;
        const int64_t first = blk * s.blockSize, count = std::min(s.blockSize, s.k - first);
        for (int64_t j = 0; j < count; ++j)
          w[static_cast<size_t>(first + j)] =
              (static_cast<float>(codeAt(blob, j, s.bits)) - zp) * scale;
      }
      const float add = bias ? (*bias)[static_cast<uint64_t>(col)] : 0.0f;
      for (int64_t row = 0; row < m; ++row)
        yd[row * s.n + col] = dot(av.data() + row * s.k, w.data(), s.k) + add;
    }
  });
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

[[maybe_unused]] const bool kMatMulNBitsRegistered =
    registerKernel(ops::kMicrosoftDomain, "MatMulNBits", matMulNBitsOp, __FILE__);

} // namespace
} // namespace kiln::rt
