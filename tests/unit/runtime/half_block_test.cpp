// Block float16 conversions against the scalar ones they stand for.
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "float_bit_samples.h"

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"

namespace kiln {
namespace {

TEST(HalfBlock, HalvesToFloatsMatchesScalarForEveryHalf) {
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i)
    halves[i] = static_cast<uint16_t>(i);
  std::vector<float> floats(halves.size());
  rt::halvesToFloats(halves.data(), floats.data(), halves.size());
  for (size_t i = 0; i < halves.size(); ++i) {
    const float want = rt::halfToFloat(halves[i]);
    uint32_t a, b;
    std::memcpy(&a, &floats[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << std::hex << i;
  }
}

// Every 40009th float bit pattern: NaNs (runs of them, whose ends fall inside groups of 8),
// infinities, subnormals, overflow.
TEST(HalfBlock, FloatsToHalvesMatchesScalar) {
  const std::vector<float> values = test::sampledFloatBitPatterns();
  std::vector<uint16_t> halves(values.size());
  rt::floatsToHalves(values.data(), halves.data(), values.size());
  for (size_t i = 0; i < values.size(); ++i)
    ASSERT_EQ(halves[i], rt::floatToHalf(values[i])) << i;
}

TEST(HalfBlock, RoundThroughHalvesMatchesScalar) {
  const std::vector<float> values = test::sampledFloatBitPatterns();
  std::vector<float> rounded = values;
  rt::roundThroughHalves(rounded.data(), rounded.size());
  for (size_t i = 0; i < values.size(); ++i) {
    const float want = rt::halfToFloat(rt::floatToHalf(values[i]));
    uint32_t a, b;
    std::memcpy(&a, &rounded[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << i;
  }
}

} // namespace
} // namespace kiln
