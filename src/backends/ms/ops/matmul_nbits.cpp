// .ms rule of com.microsoft MatMulNBits: MatMulFusion (transpose_b) over the model's packed codes
// kept as a weight-quant tensor, never widened to float32.
//
//   Y = MatMulNBits<K, N, bits, block_size>(A, B u8[N, blocks, blob], scales, zero_points, -, bias)
//     → w: i8[N·blocks, block_size] BITPACKING, one QuantParam per block (row)
//       Gather(w, 0..N·blocks-1) QUANT_WEIGHT → Reshape [N, K] → MatMulFusion<transpose_b>(A, ·,
//       bias)
//     (one block per column: w is i8[N, K] with N per-channel params, read by the MatMulFusion)
//
// MindSpore Lite's weight decoder dequantizes a QUANT_WEIGHT node's constant input per channel of
// its preferred dim (a Gather's axis), so storing the codes as [N·blocks, block_size] rows makes
// each block a channel: the block-wise scales and zero points are taken exactly. The bytes are the
// model's own: ONNX packs codes low bits first, which is the BITPACKING stream of codes biased by
// 2^(bits-1) (ms.md §3.3), so the stored weight aliases the mapped model file.
#include <fmt/format.h>

#include "backends/ms/ops/matmul_nbits.h"

#include <algorithm>
#include <cstring>

#include "backends/ms/ms_context.h"
#include "ops/matmul_nbits.h"

namespace kiln::ms {
namespace {

bool isConstant(const Value* v) {
  if (!v) return false;
  if (v->isInitializer()) return true;
  const Node* p = v->producer();
  return p && p->opType() == "Constant";
}

std::string checkMatMulNBits(const Node& n, const lowering::OpContext&) {
  auto s = ops::matMulNBitsShape(n);
  if (!s) return s.status().message();
  if (s->k % s->blockSize != 0)
    return fmt::format("K = {} is not a multiple of block_size {} (.ms quant params cover whole "
                       "blocks; the last one would be padded)",
                       s->k, s->blockSize);
  if (!isConstant(n.input(1)) || !isConstant(n.input(2)))
    return "MatMulNBits with B or scales computed at run time (.ms keeps constant weights only)";
  if (n.input(1)->dtype() != DType::UInt8) return "MatMulNBits with B not uint8";
  const DType scaleType = n.input(2)->dtype();
  if (scaleType != DType::Float32 && scaleType != DType::Float16)
    return fmt::format("MatMulNBits scales of dtype {} (float32 or float16)", dtypeName(scaleType));
  if (const Value* zp = n.input(3))
    if (!isConstant(zp) || zp->dtype() != DType::UInt8)
      return "MatMulNBits zero points that are not constant packed uint8 (.ms quant params hold "
             "integer zero points)";
  if (n.input(4)) return "MatMulNBits with g_idx (act-order block indices)";
  if (declaredRank(n.input(0)) >= 0 && declaredRank(n.input(0)) < 2)
    return "MatMulNBits with A of rank < 2";
  return {};
}

// The stored codes: the model's packed bytes for 2 and 4 bits (bit packing, ms.md §3.3); 8-bit
// codes are stored as int8 (code - 128), which is a copy.
std::shared_ptr<const Buffer> storedCodes(const Tensor& b, int64_t bits) {
  if (bits < 8) return b.buffer();
  std::vector<uint8_t> flipped(b.data(), b.data() + b.byteSize());
  for (uint8_t& c : flipped)
    c ^= 0x80u;
  return Buffer::owned(std::move(flipped));
}

Status lowerMatMulNBits(LoweringContext& ctx, const Node& n) {
  KILN_ASSIGN_OR_RETURN(const ops::MatMulNBitsShape s, ops::matMulNBitsShape(n));
  auto codes = ctx.constOf(n.input(1));
  auto scales = ctx.constOf(n.input(2));
  if (!codes || !scales || codes->quantized || scales->quantized)
    return bad("MatMulNBits with B or scales computed at run time");
  if (codes->tensor.elementCount() != static_cast<uint64_t>(s.n * s.blocks * s.blobBytes) ||
      scales->tensor.elementCount() != static_cast<uint64_t>(s.n * s.blocks))
    return bad("MatMulNBits B holds {} bytes and scales {} values; N={}, K={}, block_size={} "
               "need {} and {}",
               codes->tensor.elementCount(), scales->tensor.elementCount(), s.n, s.k, s.blockSize,
               s.n * s.blocks * s.blobBytes, s.n * s.blocks);
  auto row = std::make_shared<MsRowQuant>();
  row->scales = scales->tensor.buffer();
  row->scaleIsHalf = scales->tensor.dtype() == DType::Float16;
  row->rows = s.n * s.blocks;
  row->blocks = s.blocks;
  row->bits = static_cast<int>(s.bits);
  row->zeroPointRowBytes = s.zeroPointRowBytes();
  if (const Value* zpValue = n.input(3)) {
    auto zp = ctx.constOf(zpValue);
    if (!zp || zp->tensor.elementCount() != static_cast<uint64_t>(s.n * s.zeroPointRowBytes()))
      return bad("MatMulNBits zero points must be {} packed bytes", s.n * s.zeroPointRowBytes());
    row->zeroPoints = zp->tensor.buffer();
  }
  MsTensor w;
  w.name = codes->name;
  w.data = storedCodes(codes->tensor, s.bits);
  w.compressType = s.bits < 8 ? fb::WeightQuantCompressType_BITPACKING : 0;
  bool perColumn = false;
  const uint32_t weight =
      rowQuantizedWeight(ctx, std::move(w), row, s.n, s.k, s.blockSize, &perColumn);
  KILN_ASSIGN_OR_RETURN(const uint32_t a, ctx.input(n.input(0), Layout::Onnx));
  std::vector<uint32_t> ins = {a, weight};
  std::optional<uint32_t> addend;
  if (const Value* biasValue = n.input(5)) {
    auto bias = ctx.constOf(biasValue);
    if (bias && !bias->quantized && bias->tensor.dtype() == DType::Float32 &&
        bias->tensor.elementCount() == static_cast<uint64_t>(s.n)) {
      KILN_ASSIGN_OR_RETURN(const uint32_t b, ctx.constTensor(bias->tensor, bias->name));
      ins.push_back(b);
    } else {
      KILN_ASSIGN_OR_RETURN(addend, ctx.input(biasValue, Layout::Onnx));
    }
  }
  const int act = ctx.activationFor(n);
  const Value* finalOut = ctx.fusedOutput(n);
  uint32_t y;
  if (addend) {
    MsTensor mid;
    mid.name = n.output(0)->name() + "_matmul";
    mid.dataType = kTypeFloat32;
    mid.dims = ctx.dimsOf(n.output(0));
    y = ctx.addTensor(std::move(mid));
  } else {
    KILN_ASSIGN_OR_RETURN(y, ctx.output(finalOut, Layout::Onnx));
  }
  ctx.emit(
      fb::PrimitiveType_MatMulFusion,
      [=](FBB& b) {
        return fb::CreateMatMulFusion(b, false, true,
                                      static_cast<fb::ActivationType>(addend ? 0 : act))
            .Union();
      },
      ins, {y}, perColumn);
  if (addend) {
    KILN_ASSIGN_OR_RETURN(const uint32_t z, ctx.output(finalOut, Layout::Onnx));
    ctx.emit(fb::PrimitiveType_AddFusion,
             [=](FBB& b) {
               return fb::CreateAddFusion(b, static_cast<fb::ActivationType>(act)).Union();
             },
             {y, *addend}, {z});
  }
  return Status::ok();
}

KILN_MS_LOWERING("com.microsoft::MatMulNBits", checkMatMulNBits, lowerMatMulNBits);

} // namespace

uint32_t rowQuantizedWeight(LoweringContext& ctx, MsTensor w, std::shared_ptr<const MsRowQuant> row,
                            int64_t n, int64_t k, int64_t blockSize, bool* quantized) {
  // One block per column: [N, K] read per channel by the MatMulFusion itself.
  *quantized = row->blocks == 1;
  const std::string name = w.name;
  w.nodeType = kNodeValue;
  w.dataType = kTypeInt8;
  w.dims = {static_cast<int32_t>(row->rows), static_cast<int32_t>(*quantized ? k : blockSize)};
  w.rowQuant = row;
  uint32_t weight = ctx.addTensor(std::move(w));
  if (*quantized) return weight;
  // Gather(w, 0..rows-1, axis 0) as the QUANT_WEIGHT node: the runtime dequantizes its data per
  // row (a Gather's preferred dim is its axis) and the gather copies the float rows out; a
  // Reshape carrying the weight does not run there (it shares its input's int8 buffer).
  const std::string rowsName = fmt::format("matmul_nbits_rows_{}", row->rows);
  std::optional<uint32_t> rows;
  for (uint32_t id = 0; id < ctx.tensorCount() && !rows; ++id)
    if (ctx.tensor(id).name == rowsName) rows = id;
  if (!rows) {
    std::vector<int64_t> all(static_cast<size_t>(row->rows));
    for (size_t r = 0; r < all.size(); ++r)
      all[r] = static_cast<int64_t>(r);
    rows = ctx.intConst(all, rowsName);
  }
  const uint32_t axis = ctx.intConst({0}, name + "_axis");
  MsTensor gathered;
  gathered.name = name + "_dequantized";
  gathered.dataType = kTypeFloat32;
  gathered.dims = {static_cast<int32_t>(row->rows), static_cast<int32_t>(blockSize)};
  const uint32_t dequantized = ctx.addTensor(std::move(gathered));
  ctx.emit(fb::PrimitiveType_Gather, emptyTable<fb::Gather>(), {weight, *rows, axis}, {dequantized},
           /*quantized=*/true);
  return ctx.reshapeTensor(dequantized, {n, k}, name + "_nk");
}

std::optional<uint32_t> blockedDequantizeWeight(LoweringContext& ctx, const Const& b,
                                                bool* quantized) {
  const auto& dims = b.tensor.dims();
  if (!b.quantized || !b.blockSize || dims.size() != 2 || b.axis != 0 ||
      b.tensor.dtype() != DType::Int8 || dims[0] % b.blockSize != 0)
    return std::nullopt;
  const int64_t k = dims[0], n = dims[1], blocks = k / b.blockSize;
  const auto* codes = reinterpret_cast<const int8_t*>(b.tensor.data());
  // Codes and zero points moved by `offset` into a 4-bit range when they fit one (uint4 codes by
  // 8): (q - z) is unchanged.
  int32_t lo = 127, hi = -128;
  for (int64_t i = 0; i < k * n; ++i) {
    lo = std::min<int32_t>(lo, codes[i]);
    hi = std::max<int32_t>(hi, codes[i]);
  }
  for (int64_t z : b.zeros) {
    lo = std::min<int32_t>(lo, static_cast<int32_t>(z));
    hi = std::max<int32_t>(hi, static_cast<int32_t>(z));
  }
  const int bits = lo >= -8 && hi <= 7 ? 4 : lo >= 0 && hi <= 15 ? 4 : 8;
  const int32_t offset = bits == 4 && lo >= 0 && hi > 7 ? 8 : 0;
  const int32_t bias = 1 << (bits - 1);
  auto row = std::make_shared<MsRowQuant>();
  row->rows = n * blocks;
  row->blocks = blocks;
  row->bits = bits;
  row->zeroPointRowBytes = (blocks * bits + 7) / 8;
  // Per row r = column·blocks + block: the scale of scale[block, column]; zero points packed per
  // column, biased as the writer reads them (stored - 2^(bits-1)).
  std::vector<uint8_t> scales(static_cast<size_t>(row->rows) * 4);
  std::vector<uint8_t> zeroPoints(static_cast<size_t>(n * row->zeroPointRowBytes), 0);
  for (int64_t col = 0; col < n; ++col)
    for (int64_t blk = 0; blk < blocks; ++blk) {
      const size_t at = static_cast<size_t>(blk * n + col),
                   r = static_cast<size_t>(col * blocks + blk);
      std::memcpy(scales.data() + 4 * r, &b.scales[at], 4);
      const int64_t z =
          (b.zeros.empty() ? 0 : b.zeros[b.zeros.size() == 1 ? 0 : at]) - offset + bias;
      const int64_t bit = blk * bits;
      zeroPoints[static_cast<size_t>(col * row->zeroPointRowBytes + bit / 8)] |=
          static_cast<uint8_t>((z & ((1 << bits) - 1)) << (bit % 8));
    }
  row->scales = Buffer::owned(std::move(scales));
  row->zeroPoints = Buffer::owned(std::move(zeroPoints));
  // The codes transposed to [N, K] (4-bit: packed low first, biased by 8, as bit packing stores
  // them) — the one copy, at the codes' own width.
  std::vector<uint8_t> stored(static_cast<size_t>(bits == 4 ? (n * k + 1) / 2 : n * k), 0);
  for (int64_t col = 0; col < n; ++col)
    for (int64_t i = 0; i < k; ++i) {
      const int32_t v = codes[i * n + col] - offset;
      const int64_t j = col * k + i;
      if (bits == 8)
        stored[static_cast<size_t>(j)] = static_cast<uint8_t>(static_cast<int8_t>(v));
      else
        stored[static_cast<size_t>(j / 2)] |= static_cast<uint8_t>((v + bias) << ((j % 2) * 4));
    }
  MsTensor w;
  w.name = b.name;
  w.data = Buffer::owned(std::move(stored));
  w.compressType = bits < 8 ? fb::WeightQuantCompressType_BITPACKING : 0;
  return rowQuantizedWeight(ctx, std::move(w), row, n, k, b.blockSize, quantized);
}

} // namespace kiln::ms
