// Float samples for the float16 conversion tests: every 40009th float bit pattern, so NaNs (runs
// of them, whose ends fall inside groups of 8), infinities, subnormals and overflow all occur.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace kiln::test {

inline std::vector<float> sampledFloatBitPatterns() {
  std::vector<float> values;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 40009) {
    float f;
    const auto bits = static_cast<uint32_t>(b);
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  return values;
}

} // namespace kiln::test
