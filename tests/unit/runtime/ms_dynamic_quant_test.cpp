// kiln.ms::DynamicQuant (MindSpore Lite's DynamicQuant as the .ms reader raises it) gives the
// runtime's codes: an asymmetric range that need not hold 0 (so the zero point leaves int8, which
// ONNX's DynamicQuantizeLinear cannot express), and symmetric ranges per row of a matrix.
#include <gtest/gtest.h>

#include "../run_model.h"
#include "kiln/ir/graph.h"
#include "kiln/runtime/tensor_util.h"
#include "ops/quant.h"

using namespace kiln;

namespace {

std::vector<Tensor> runDynamicQuant(const std::vector<int64_t>& dims, const std::vector<float>& x,
                                    bool symmetric, const std::vector<int64_t>& preferAxes) {
  Model model;
  Value* in = kiln::testing::startModelWithInput(model);
  Graph& g = *model.graph;
  Node* n = g.appendNode(ops::kMsDynamicQuantOp, {in}, {"y", "scale", "zero_point"});
  n->setDomain(ops::kMsDomain);
  n->setAttribute("symmetric", Attribute::ofInt(symmetric ? 1 : 0));
  if (!preferAxes.empty()) n->setAttribute("prefer_axes", Attribute::ofInts(preferAxes));
  for (Value* v : n->outputs())
    g.addOutput(v);
  std::map<std::string, rt::RtValue> feeds;
  feeds["x"] = rt::RtValue::ofTensor(rt::makeTensor<float>(DType::Float32, dims, x));
  return kiln::testing::runModel(model, feeds);
}

TEST(MsDynamicQuant, AsymmetricRangeWithoutZero) {
  // min 0.5, max 2: scale 1.5 / 255, zero point round(-128 - 0.5 / scale) = -213.
  auto out = runDynamicQuant({4}, {0.5f, 1.0f, 1.5f, 2.0f}, false, {});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].dtype(), DType::Int8);
  EXPECT_EQ(out[0].copyValues<int8_t>(), (std::vector<int8_t>{-128, -43, 42, 127}));
  EXPECT_TRUE(out[1].dims().empty());
  EXPECT_FLOAT_EQ(out[1].copyValues<float>()[0], 1.5f / 255);
  EXPECT_EQ(out[2].copyValues<int32_t>(), (std::vector<int32_t>{-213}));
}

TEST(MsDynamicQuant, SymmetricPerRow) {
  // Row 0: max |x| 1, scale 2 / 254; row 1: max |x| 4, scale 8 / 254.
  auto out = runDynamicQuant({2, 3}, {-1.0f, 0.3f, 0.25f, 3.0f, -4.0f, 1.0f}, true, {-2});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].copyValues<int8_t>(), (std::vector<int8_t>{-127, 38, 32, 95, -127, 32}));
  EXPECT_EQ(out[1].dims(), (std::vector<int64_t>{2, 1}));
  const std::vector<float> scales = out[1].copyValues<float>();
  EXPECT_FLOAT_EQ(scales[0], 2.0f / 254);
  EXPECT_FLOAT_EQ(scales[1], 8.0f / 254);
  EXPECT_EQ(out[2].copyValues<int32_t>(), (std::vector<int32_t>{0, 0}));
}

} // namespace
