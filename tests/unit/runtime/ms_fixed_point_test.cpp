// Ops raised from a .ms compute int8 as MindSpore Lite does (runtime/kernels/ms_fixed_point.h):
// Q31 multipliers with shifts, fixed-point requantization whose ties differ from ONNX's
// round-half-to-even, QuantDTypeCast rounding half away from zero, QLinearMatMul marked
// kiln_requantize="ms_fixed_point" against the same node unmarked.
#include <gtest/gtest.h>

#include "../run_model.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/tensor_util.h"
#include "runtime/kernels/ms_fixed_point.h"

using namespace kiln;
namespace msi = kiln::rt::ms_int8;

namespace {

TEST(MsFixedPoint, MultiplierAndShifts) {
  // 0.75 = 0.75 · 2^0; 3 = 0.75 · 2^2 (left shift 2); 0.1 = 0.8 · 2^-3 (right shift 3).
  msi::Multiplier m = msi::multiplierOf(0.75f, 1.0f, 1.0f);
  EXPECT_EQ(m.multiplier, 1610612736);
  EXPECT_EQ(m.leftShift, 0);
  EXPECT_EQ(m.rightShift, 0);
  m = msi::multiplierOf(1.5f, 2.0f, 1.0f);
  EXPECT_EQ(m.multiplier, 1610612736);
  EXPECT_EQ(m.leftShift, 2);
  m = msi::multiplierOf(0.1f, 1.0f, 1.0f);
  EXPECT_EQ(m.rightShift, 3);
  EXPECT_EQ(m.leftShift, 0);
  // The scale product is rounded to float before the division in double.
  const float a = 0.1f, b = 0.3f, c = 0.7f;
  int exponent = 0;
  const double fraction = std::frexp(static_cast<double>(a * b) / c, &exponent);
  m = msi::multiplierOf(a, b, c);
  EXPECT_EQ(m.multiplier, static_cast<int32_t>(std::floor(std::ldexp(fraction, 31) + 0.5)));
  EXPECT_EQ(m.rightShift, -exponent);
}

TEST(MsFixedPoint, RequantizeTiesAwayFromZero) {
  const msi::Multiplier quarter = msi::multiplierOf(0.25f, 1.0f, 1.0f);
  // 2 · 0.25 = 0.5 → 1 and -2 · 0.25 = -0.5 → -1 (ONNX's nearbyint gives 0 for both);
  // 6 · 0.25 = 1.5 → 2, -6 · 0.25 = -1.5 → -2.
  EXPECT_EQ(msi::requantize(2, quarter), 1);
  EXPECT_EQ(msi::requantize(-2, quarter), -1);
  EXPECT_EQ(msi::requantize(6, quarter), 2);
  EXPECT_EQ(msi::requantize(-6, quarter), -2);
  // Rounded twice: 5 · 0.5 = 2.5 → 3 in the high multiply, then 3 / 2 = 1.5 → 2 in the shift,
  // where 5 · 0.25 = 1.25 rounds to 1 in one step.
  EXPECT_EQ(msi::requantize(5, quarter), 2);
  // With a multiplier above 1 the sum is shifted left first: 100 · 3 = 300.
  EXPECT_EQ(msi::requantize(100, msi::multiplierOf(1.5f, 2.0f, 1.0f)), 300);
  EXPECT_EQ(msi::outputCode(1000, quarter, 10, -128, 127), 127);
}

TEST(MsFixedPoint, QuantizeCodeRoundsHalfAwayFromZero) {
  EXPECT_EQ(msi::quantizeCode(2.5f, 1.0f, 0, -128, 127), 3);   // ONNX: 2
  EXPECT_EQ(msi::quantizeCode(-2.5f, 1.0f, 0, -128, 127), -3); // ONNX: -2
  // The zero point is added before rounding: 0.5 - 1 = -0.5 → -1.
  EXPECT_EQ(msi::quantizeCode(0.5f, 1.0f, -1, -128, 127), -1);
}

// QLinearMatMul of codes [2, -2, 6] by 1 with scale 0.25: marked, the runtime's codes; unmarked,
// ONNX's (ties to even).
std::vector<int8_t> runQLinearMatMul(bool marked) {
  Model model;
  Value* a = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  auto scalar = [&](const std::string& name, float v) {
    return g.addInitializer(name, rt::makeTensor<float>(DType::Float32, {}, {v}));
  };
  auto zero = [&](const std::string& name) {
    return g.addInitializer(name, rt::makeTensor<int8_t>(DType::Int8, {}, {0}));
  };
  Value* b = g.addInitializer("b", rt::makeTensor<int8_t>(DType::Int8, {1, 1}, {1}));
  Node* n = g.appendNode("QLinearMatMul",
                         {a, scalar("as", 0.25f), zero("az"), b, scalar("bs", 1.0f), zero("bz"),
                          scalar("ys", 1.0f), zero("yz")},
                         {"y"});
  if (marked) n->setAttribute(msi::kAttribute, Attribute::ofString(msi::kFixedPoint));
  g.addOutput(n->outputs()[0]);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(rt::makeTensor<int8_t>(DType::Int8, {3, 1}, {2, -2, 6}));
  auto out = kiln::testing::runModel(model, feeds);
  return out.at(0).copyValues<int8_t>();
}

TEST(MsFixedPoint, MarkedQLinearMatMulUsesTheRuntimesRounding) {
  EXPECT_EQ(runQLinearMatMul(true), (std::vector<int8_t>{1, -1, 2}));
  EXPECT_EQ(runQLinearMatMul(false), (std::vector<int8_t>{0, 0, 2}));
}

} // namespace
