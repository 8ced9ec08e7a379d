// float32 → float16 over many values, for weight conversion.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kiln::rt {

// floatToHalf (tensor_util.h) over `count` values read from unaligned `src`: IEEE round to nearest
// even, overflow to ±inf, every NaN to the quiet NaN 0x7e00 with its sign. Written so the compiler
// vectorises it.
void floatsToHalves(const uint8_t* src, uint16_t* dst, size_t count);

} // namespace kiln::rt
