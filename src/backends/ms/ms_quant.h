// Int8 activations in .ms (QuantizeLinear / DequantizeLinear / QLinearConv / QLinearMatMul): which
// quantized ONNX values the lowering keeps as int8 tensors with QuantParams, and the shared steps
// of lowering them (ops/quant.cpp). MindSpore Lite's kernels are int8: uint8 codes are stored as
// int8 (code - 128, zero point - 128, the same real values).
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ms_context.h"

namespace kiln::ms {

// Why 8-bit codes `v` cannot stay an int8 tensor ("" when they can): they must be made by a
// QuantizeLinear / QLinearConv / QLinearMatMul with per-tensor constant parameters, and read only
// by DequantizeLinear (per tensor) or as the data input of QLinearConv / QLinearMatMul — codes that
// cross the graph's boundary or meet another op are left to decompose-quant (float).
std::string int8CodesReason(const Value* v);
// Why a QLinearConv / QLinearMatMul cannot be an int8 .ms op ("" when it can): constant
// per-tensor activation parameters, constant 8-bit weights per tensor or per output channel, an
// int32 constant bias, and int8 codes in and out (int8CodesReason).
std::string qlinearCodesReason(const Node& n);
// Why a per-tensor (scale, zero point) pair of a quant node cannot be a QuantParam ("" when it
// can): a constant float32 scale and an absent or constant int8/uint8 zero point, one value each.
std::string perTensorReason(const Value* scale, const Value* zeroPoint);

// The QuantParam of codes with this per-tensor scale and zero point (uint8 shifted to int8);
// `codes` is the code type when the zero point is absent.
MsQuantParam activationParam(const LoweringContext& ctx, const Value* scale, const Value* zeroPoint,
                             DType codes);
// Marks .ms tensor `id` as int8 codes with `param`.
void setInt8(LoweringContext& ctx, uint32_t id, const MsQuantParam& param);
// Constant 8-bit weight codes as int8 (uint8 shifted) and their per-channel (or per-tensor)
// QuantParams from constant `scale` / `zeroPoint` (absent: 0).
struct Int8Weight {
  Tensor codes;
  std::vector<MsQuantParam> params;
};
Expected<Int8Weight> int8Weight(const LoweringContext& ctx, const Value* codes, const Value* scale,
                                const Value* zeroPoint);

class RaisingContext;
// Raising: the (scale, zero point) constants of an int8 .ms tensor's QuantParams (scalars for
// one, 1-D for one per channel); nullopt when it has none.
std::optional<std::pair<Value*, Value*>> quantConstants(RaisingContext& ctx, uint32_t t);
// Whether the .ms node being read runs int8 kernels: int8 data in with QuantParams.
bool int8Data(RaisingContext& ctx);

} // namespace kiln::ms
