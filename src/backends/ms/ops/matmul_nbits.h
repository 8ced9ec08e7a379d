// Block-quantized MatMul weights kept as .ms weight-quant codes, shared by the MatMulNBits rule and
// MatMul over a blocked DequantizeLinear constant (src/backends/ms/ops/matmul_nbits.cpp).
#pragma once

#include <memory>
#include <string>

#include "backends/ms/ms_context.h"

namespace kiln::ms {

// A [N, K] weight for MatMulFusion(transpose_b) from `codes` holding its blocks as rows ([N·blocks,
// blockSize] int8 codes, bit-packed below 8 bits) with `row`'s per-block params: the codes
// tensor itself, read per channel by the MatMulFusion (`*quantized` set), when each column is one
// block; otherwise a QUANT_WEIGHT Gather of the rows (the runtime's weight decoder dequantizes a
// Gather's data per row) reshaped to [N, K].
uint32_t rowQuantizedWeight(LoweringContext& ctx, MsTensor codes,
                            std::shared_ptr<const MsRowQuant> row, int64_t n, int64_t k,
                            int64_t blockSize, bool* quantized);

// The [N, K] weight of MatMul(A, B) for a blocked DequantizeLinear constant B [K, N] (blocks along
// K), its codes repacked to 4 bits when codes and zero points fit (8 otherwise); nullopt when the
// layout is not that one (the caller dequantizes).
std::optional<uint32_t> blockedDequantizeWeight(LoweringContext& ctx, const Const& b,
                                                bool* quantized);

} // namespace kiln::ms
