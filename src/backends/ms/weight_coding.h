// converter_lite's lossless codings of quantized weight codes (ms.md §3.3–3.4): INDEXING and
// SPARSE, MSB-first bit streams the runtime decodes at load time. The writer keeps whichever of
// plain / bit-packed / indexing / sparse is smallest, as converter_lite's encoder does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln::ms {

// INDEXING: [unique count: bits][unique values biased by 2^(bits-1): bits each]
// [per element: index into the values, ceil(log2(count)) bits]. A count of 2^bits is written 0.
std::vector<uint8_t> encodeIndexing(const std::vector<int32_t>& codes, int bits);

// SPARSE: [gap width: 8][entry count: 32][unique count: bits][unique values][per entry: index]
// [per entry: gap]. An entry is a value preceded by `gap` elements equal to their channel's zero
// point; elements after the last entry are zero points too. Channels are the runtime's: element
// k belongs to channel k / (count / zeroPoints.size()). The best gap width is chosen.
std::vector<uint8_t> encodeSparse(const std::vector<int32_t>& codes, int bits,
                                  const std::vector<int32_t>& zeroPoints);

// The exact byte sizes encodeIndexing / encodeSparse would return, without writing the streams
// (the writer keeps a coding only when it is smaller than the plain or packed codes).
size_t indexingSize(const std::vector<int32_t>& codes, int bits);
size_t sparseSize(const std::vector<int32_t>& codes, int bits,
                  const std::vector<int32_t>& zeroPoints);

// The codes back; `where` ("model.ms: tensor 'w'") starts each error (K7001).
Expected<std::vector<int32_t>> decodeIndexing(const uint8_t* data, size_t size, int bits,
                                              uint64_t count, const std::string& where);
Expected<std::vector<int32_t>> decodeSparse(const uint8_t* data, size_t size, int bits,
                                            uint64_t count, const std::vector<int32_t>& zeroPoints,
                                            const std::string& where);

} // namespace kiln::ms
