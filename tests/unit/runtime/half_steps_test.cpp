// Float16 chain steps rounded in registers against the float loops followed by a rounding pass.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "float_bit_samples.h"

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"
#include "runtime/kernels/half_steps.h"

namespace kiln {
namespace {

using rt::vec::BinOp;
using rt::vec::UnOp;

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Float16 values (every 61st pattern, so NaNs with payloads, infinities, subnormals and zeros of
// both signs), widened; 1000 of them, so the vector loops leave a tail.
std::vector<float> halfValues(uint32_t shift) {
  std::vector<float> out;
  for (uint32_t i = 0; out.size() < 1000; ++i)
    out.push_back(rt::halfToFloat(static_cast<uint16_t>((i * 61 + shift) & 0xffff)));
  return out;
}

// The same value, or NaNs of the same sign (half_steps.h: payloads are the conversion's).
void expectSameValue(float got, float want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what;
    return;
  }
  EXPECT_EQ(bitsOf(got), bitsOf(want)) << what << " want " << want << " got " << got;
}

// `half` runs a half step into `out` (rounded) or `narrow`; `plain` the float loop into `out`.
template <typename Half, typename Plain>
void checkStep(const std::string& what, Half half, Plain plain) {
  const int64_t n = 1000;
  std::vector<float> want(n), got(n, -1.0f);
  std::vector<uint16_t> narrowed(n, 0x1234), wantNarrowed(n);
  plain(want.data());
  rt::floatsToHalves(want.data(), wantNarrowed.data(), n);
  rt::roundThroughHalves(want.data(), n);
  const int64_t done = half(got.data(), nullptr);
  if (done == 0) GTEST_SKIP() << "no AVX-512 or F16C on this machine: the steps run nothing";
  EXPECT_GT(done, n - 16) << what;
  for (int64_t i = 0; i < done; ++i)
    expectSameValue(got[i], want[i], what + " at " + std::to_string(i));
  EXPECT_EQ(half(got.data(), narrowed.data()), done) << what;
  for (int64_t i = 0; i < done; ++i)
    ASSERT_EQ(narrowed[i], wantNarrowed[i]) << what << " narrowed at " << i;
  EXPECT_EQ(narrowed[done], 0x1234) << what << ": wrote past what it did";
}

TEST(HalfSteps, BinaryStepsAreTheFloatLoopsRounded) {
  const std::vector<float> a = halfValues(0), b = halfValues(7777);
  const float scalars[] = {0.1667f, -3.0f, 6.0f, 0.0f};
  for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div}) {
    const std::string name = "op " + std::to_string(static_cast<int>(op));
    checkStep(
        name + " same",
        [&](float* out, uint16_t* narrow) {
          return rt::vec::binarySameHalf(op, a.data(), b.data(), out, 1000, narrow);
        },
        [&](float* out) { rt::vec::binarySame(op, a.data(), b.data(), out, 1000); });
    for (float s : scalars) {
      checkStep(
          name + " right " + std::to_string(s),
          [&](float* out, uint16_t* narrow) {
            return rt::vec::binaryScalarRightHalf(op, a.data(), s, out, 1000, narrow);
          },
          [&](float* out) { rt::vec::binaryScalarRight(op, a.data(), s, out, 1000); });
      checkStep(
          name + " left " + std::to_string(s),
          [&](float* out, uint16_t* narrow) {
            return rt::vec::binaryScalarLeftHalf(op, s, b.data(), out, 1000, narrow);
          },
          [&](float* out) { rt::vec::binaryScalarLeft(op, s, b.data(), out, 1000); });
    }
  }
}

TEST(HalfSteps, UnaryStepsAreTheFloatLoopsRounded) {
  const std::vector<float> x = halfValues(3);
  struct Case {
    UnOp op;
    float p0, p1;
  };
  const Case cases[] = {{UnOp::Relu, 0, 0},
                        {UnOp::LeakyRelu, 0.1f, 0},
                        {UnOp::Clip, -0.3f, 5.9f},
                        {UnOp::HardSigmoid, 0.2f, 0.5f},
                        {UnOp::HardSigmoid, 0.1666667f, 0.5f},
                        {UnOp::HardSwish, 0, 0}};
  for (const Case& c : cases)
    checkStep(
        "unary " + std::to_string(static_cast<int>(c.op)) + " " + std::to_string(c.p0),
        [&](float* out, uint16_t* narrow) {
          return rt::vec::unaryHalf(c.op, x.data(), out, 1000, c.p0, c.p1, narrow);
        },
        [&](float* out) { rt::vec::unary(c.op, x.data(), out, 1000, c.p0, c.p1); });
}

TEST(HalfSteps, RoundAndWidenAreTheBlockConversions) {
  // Every float16 value widened; every 40009th float bit pattern rounded.
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i)
    halves[i] = static_cast<uint16_t>(i);
  std::vector<float> wide(halves.size()), want(halves.size());
  const int64_t done = rt::vec::widenHalves(halves.data(), wide.data(), 65536);
  if (done == 0) GTEST_SKIP() << "no AVX-512 or F16C on this machine: the steps run nothing";
  EXPECT_EQ(done, 65536);
  rt::halvesToFloats(halves.data(), want.data(), halves.size());
  for (size_t i = 0; i < halves.size(); ++i)
    expectSameValue(wide[i], want[i], "half " + std::to_string(i));
  std::vector<float> values = test::sampledFloatBitPatterns();
  std::vector<float> rounded = values;
  const auto count = static_cast<int64_t>(values.size());
  const int64_t roundedCount = rt::vec::roundHalfInPlace(rounded.data(), count);
  EXPECT_GT(roundedCount, count - 16);
  rt::roundThroughHalves(values.data(), values.size());
  for (int64_t i = 0; i < roundedCount; ++i)
    expectSameValue(rounded[i], values[i], "pattern " + std::to_string(i));
}

// A decomposed HardSwish (x + 3, Clip 0..6, x * that, / 6) in one pass against its four float
// loops, each result rounded where a float16 chain rounds it (or, for a float32 chain, none).
TEST(HalfSteps, HardSwishPassIsItsFourSteps) {
  const std::vector<float> x = halfValues(11);
  const int64_t n = 1000;
  for (bool productOfInput : {true, false}) {
    for (bool roundClip : {false, true}) {
      auto fourSteps = [&](float* out, bool half) {
        std::vector<float> t(n), c(n);
        auto round = [&](std::vector<float>& v) {
          if (half) rt::roundThroughHalves(v.data(), v.size());
        };
        rt::vec::binaryScalarRight(BinOp::Add, x.data(), 3.0f, t.data(), n);
        round(t);
        rt::vec::unary(UnOp::Clip, t.data(), c.data(), n, 0.0f, 6.0f);
        if (roundClip) round(c);
        if (productOfInput)
          rt::vec::binarySame(BinOp::Mul, x.data(), c.data(), t.data(), n);
        else
          rt::vec::binarySame(BinOp::Mul, c.data(), x.data(), t.data(), n);
        round(t);
        rt::vec::binaryScalarRight(BinOp::Div, t.data(), 6.0f, out, n);
      };
      rt::vec::HardSwishSteps h;
      h.add = 3.0f, h.lo = 0.0f, h.hi = 6.0f, h.div = 6.0f;
      h.productOfInput = productOfInput;
      const std::string what = std::string("hardswish") + (productOfInput ? " x*c" : " c*x") +
                               (roundClip ? " clip rounded" : "");
      checkStep(
          what,
          [&](float* out, uint16_t* narrow) {
            rt::vec::HardSwishSteps half = h;
            half.roundAdd = half.roundProduct = true;
            half.roundClip = roundClip;
            half.roundLast = narrow == nullptr;
            half.narrow = narrow;
            // As the epilogue binds it: by the reciprocal where that was found exact.
            half.divideByReciprocal = rt::vec::hardSwishReciprocalExact(half);
            EXPECT_TRUE(half.divideByReciprocal) << what;
            return rt::vec::hardSwishSteps(half, x.data(), out, n);
          },
          [&](float* out) { fourSteps(out, true); });
      // Float32: nothing rounded.
      std::vector<float> want(n), got(n);
      fourSteps(want.data(), false);
      const int64_t done = rt::vec::hardSwishSteps(h, x.data(), got.data(), n);
      for (int64_t i = 0; i < done; ++i)
        expectSameValue(got[i], want[i], what + " float32 at " + std::to_string(i));
    }
  }
}

// The reciprocal is only taken where it gives every float16 input the division's float16 result:
// HardSwish's 6 with its results rounded, not 0.3 (where it would change some results), and never
// for a float32 chain.
TEST(HalfSteps, HardSwishMultipliesByTheReciprocalOnlyWhereExact) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = static_cast<uint16_t>(i);
  std::vector<float> x(bits.size());
  rt::halvesToFloats(bits.data(), x.data(), bits.size());
  const auto n = static_cast<int64_t>(x.size());
  rt::vec::HardSwishSteps h;
  h.add = 3.0f, h.lo = 0.0f, h.hi = 6.0f, h.div = 6.0f;
  h.roundAdd = h.roundProduct = h.roundLast = true;
  // Each way: the pass's float16 results, divided and by the reciprocal.
  auto bothWays = [&](const rt::vec::HardSwishSteps& steps, std::vector<float>& divided,
                      std::vector<float>& multiplied) {
    rt::vec::HardSwishSteps d = steps, m = steps;
    d.divideByReciprocal = false;
    m.divideByReciprocal = true;
    divided.assign(x.size(), 0.0f);
    multiplied.assign(x.size(), 0.0f);
    const int64_t done = rt::vec::hardSwishSteps(d, x.data(), divided.data(), n);
    EXPECT_EQ(rt::vec::hardSwishSteps(m, x.data(), multiplied.data(), n), done);
    return done;
  };
  std::vector<float> divided, multiplied;
  ASSERT_TRUE(rt::vec::hardSwishReciprocalExact(h));
  const int64_t done = bothWays(h, divided, multiplied);
  if (done == 0) GTEST_SKIP() << "no AVX-512 or F16C on this machine: the steps run nothing";
  ASSERT_EQ(done, n);
  for (int64_t i = 0; i < n; ++i)
    expectSameValue(multiplied[i], divided[i], "x " + std::to_string(x[i]));

  rt::vec::HardSwishSteps odd = h;
  odd.div = 0.3f;
  EXPECT_FALSE(rt::vec::hardSwishReciprocalExact(odd));
  bothWays(odd, divided, multiplied);
  int64_t differ = 0;
  for (int64_t i = 0; i < n; ++i)
    differ += bitsOf(multiplied[i]) != bitsOf(divided[i]) && !std::isnan(divided[i]);
  EXPECT_GT(differ, 0) << "the check would have nothing to refuse";

  rt::vec::HardSwishSteps plain;
  plain.add = 3.0f, plain.lo = 0.0f, plain.hi = 6.0f, plain.div = 6.0f;
  EXPECT_FALSE(rt::vec::hardSwishReciprocalExact(plain));
  rt::vec::HardSwishSteps unroundedProduct = h;
  unroundedProduct.roundProduct = false;
  EXPECT_FALSE(rt::vec::hardSwishReciprocalExact(unroundedProduct));
}

// A scalar step on float16 operands widened in registers against widening them (halvesToFloats),
// the float loop and narrowing (floatsToHalves): every float16 bit pattern (NaNs with payloads,
// signalling ones too, infinities, subnormals, zeros), the narrowed halves and the widened-back
// floats bit for bit (a NaN is the plain quiet NaN with its sign either way), scalar on either
// side; 65536 + 7 elements so the vector loop leaves a tail it must not write.
TEST(HalfSteps, ScalarStepOnHalvesIsWidenLoopNarrow) {
  const int64_t n = 65536 + 7;
  std::vector<uint16_t> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<uint16_t>((i * 40503) & 0xffff);
  std::vector<float> wide(n);
  rt::halvesToFloats(x.data(), wide.data(), x.size());
  const float scalars[] = {0.1667f, -3.0f, 0.0f, 65504.0f, 1e-7f};
  for (BinOp op : {BinOp::Add, BinOp::Sub, BinOp::Mul, BinOp::Div}) {
    for (float s : scalars) {
      for (bool left : {false, true}) {
        const std::string what = "op " + std::to_string(static_cast<int>(op)) + " scalar " +
                                 std::to_string(s) + (left ? " left" : " right");
        std::vector<float> loop(n);
        if (left)
          rt::vec::binaryScalarLeft(op, s, wide.data(), loop.data(), n);
        else
          rt::vec::binaryScalarRight(op, wide.data(), s, loop.data(), n);
        std::vector<uint16_t> want(n);
        rt::floatsToHalves(loop.data(), want.data(), want.size());
        std::vector<float> wantWide(n);
        rt::halvesToFloats(want.data(), wantWide.data(), want.size());
        std::vector<uint16_t> narrowed(n, 0x1234);
        std::vector<float> got(n, -1.0f);
        const int64_t done =
            rt::vec::binaryScalarHalves(op, x.data(), &s, 1, n, left, nullptr, narrowed.data());
        if (done == 0) GTEST_SKIP() << "no AVX-512 or F16C on this machine: the steps run nothing";
        EXPECT_GT(done, n - 16) << what;
        EXPECT_EQ(rt::vec::binaryScalarHalves(op, x.data(), &s, 1, n, left, got.data()), done)
            << what;
        for (int64_t i = 0; i < done; ++i) {
          ASSERT_EQ(narrowed[i], want[i]) << what << " narrowed at " << i << " from " << x[i];
          ASSERT_EQ(bitsOf(got[i]), bitsOf(wantWide[i])) << what << " widened at " << i;
        }
        EXPECT_EQ(narrowed[done], 0x1234) << what << ": wrote past what it did";
        EXPECT_EQ(got[done], -1.0f) << what << ": wrote past what it did";
      }
    }
  }
}

// Many runs in one call, each with its own scale: each run's leading values as one run alone
// gives them (the same count for every run), nothing written past them.
TEST(HalfSteps, ScalarStepOnHalvesRunsEachWithItsScale) {
  const int64_t inner = 37, runs = 9, n = inner * runs;
  std::vector<uint16_t> x(n);
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = rt::floatToHalf(0.37f * static_cast<float>(i % 23) - 3.1f);
  std::vector<float> scales(runs);
  for (int64_t r = 0; r < runs; ++r)
    scales[static_cast<size_t>(r)] = 0.25f + 0.6f * static_cast<float>(r);
  for (bool left : {false, true}) {
    std::vector<float> got(n, -1.0f), one(n, -1.0f);
    std::vector<uint16_t> narrowed(n, 0x1234), oneNarrowed(n, 0x1234);
    const int64_t done = rt::vec::binaryScalarHalves(BinOp::Div, x.data(), scales.data(), runs,
                                                     inner, left, got.data());
    if (done == 0) GTEST_SKIP() << "no AVX-512 or F16C on this machine: the steps run nothing";
    EXPECT_EQ(rt::vec::binaryScalarHalves(BinOp::Div, x.data(), scales.data(), runs, inner, left,
                                          nullptr, narrowed.data()),
              done);
    for (int64_t r = 0; r < runs; ++r) {
      const int64_t at = r * inner;
      EXPECT_EQ(rt::vec::binaryScalarHalves(BinOp::Div, x.data() + at, &scales[r], 1, inner, left,
                                            one.data() + at),
                done);
      rt::vec::binaryScalarHalves(BinOp::Div, x.data() + at, &scales[r], 1, inner, left, nullptr,
                                  oneNarrowed.data() + at);
    }
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(bitsOf(got[i]), bitsOf(one[i])) << "at " << i << (left ? " left" : "");
      ASSERT_EQ(narrowed[i], oneNarrowed[i]) << "at " << i << (left ? " left" : "");
      if (i % inner >= done) ASSERT_EQ(got[i], -1.0f) << "wrote past a run's part at " << i;
    }
  }
}

} // namespace
} // namespace kiln
