// com.microsoft MatMulNBits (ONNX Runtime's block-quantized weight MatMul): its attributes decoded
// once for the executor's kernel and the .ms lowering, and its ONNX schema for shape inference.
#pragma once

#include <cstdint>

#include "kiln/ir/graph.h"
#include "kiln/support/status.h"

namespace kiln::ops {

inline constexpr const char* kMicrosoftDomain = "com.microsoft";

// Y[..., N] = A[..., K] · dequantize(B)ᵀ (+ bias). B is uint8 [N, blocks, blobBytes]: per output
// column, `blocks` blocks of `blockSize` codes along K, `bits` bits each, packed low bits first.
// A code q of block b in column n is worth (q - zp[n, b]) · scale[n, b]; zp defaults to
// 2^(bits-1).
struct MatMulNBitsShape {
  int64_t k = 0, n = 0, bits = 4, blockSize = 0;
  int64_t blocks = 0;    // ceil(K / blockSize)
  int64_t blobBytes = 0; // blockSize * bits / 8
  // Bytes of one column's packed uint8 zero points: ceil(blocks * bits / 8).
  int64_t zeroPointRowBytes() const { return (blocks * bits + 7) / 8; }
};

// The attributes (K, N, bits, block_size), checked: bits in {2, 4, 8}, block_size a power of two
// of at least 16 (ONNX Runtime's rule), K and N positive. K2013 naming the node otherwise.
Expected<MatMulNBitsShape> matMulNBitsShape(const Node& node);

// Registers kiln's ONNX schemas of com.microsoft ops (MatMulNBits) with the onnx library's
// registry, so its shape inference and attribute checks see them. Idempotent.
void registerMicrosoftSchemas();

} // namespace kiln::ops
