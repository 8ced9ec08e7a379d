// .ms dynamic quantization (converter_lite DYNAMIC_QUANT): the hooks the matmul family calls.
#pragma once

#include <cstdint>

#include "backends/ms/ms_context.h"
#include "backends/ms/ms_raise_context.h"

namespace kiln::ms {

// Lowering: when the options ask for DYNAMIC_QUANT and weight tensor `b` (already lowered) holds
// int8 codes with zero points 0, emits a DynamicQuant of `a` (the MatMul's A, `rank` its rank)
// and returns the int8 tensor to feed the MatMulFusion in place of `a`; the caller then marks the
// MatMulFusion QUANT_DYNAMIC (markDynamicQuantMatMul). nullopt: the product stays as it is.
std::optional<uint32_t> dynamicQuantInput(LoweringContext& ctx, const Node& n, uint32_t a,
                                          int64_t rank, uint32_t b, bool transA);
void markDynamicQuantMatMul(LoweringContext& ctx);

// Raising: a MatMulFusion of quantType QUANT_DYNAMIC (int8 A from a DynamicQuant, int8 weight
// with per-layer or per-column QuantParams) → MatMulInteger, the zero-point correction and the
// scale product, in the integers the runtime's dynamic int8 kernel uses.
Status raiseDynamicQuantMatMul(RaisingContext& ctx, const msfb::Primitive& p);

} // namespace kiln::ms
