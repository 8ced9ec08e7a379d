// decompose-quant: every quantized op it rewrites gives the executor's numbers bit for bit (the
// original integer kernels against the float ops that replace them), on inputs that land on
// rounding ties and saturate; the target predicate keeps the nodes a target takes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>

#include "kiln/passes/pass.h"
#include "kiln/runtime/executor.h"
#include "onnx_text.h"

using namespace kiln;

namespace {

// Every quantized op the pass knows, chained as exporters chain them.
const char* kQuantGraph = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[1,2,5,5] x, float[2,3] a) => (float[1,3,5,5] conv, uint8[1,3,5,5] qconv, float[2,2] mm,
                                         uint8[2,2] qmm, int8[2,3] q, float[2,3] dq, float[2,3] dqa,
                                         uint8[1,2,5,5] xq, float xs)
  <uint8[3,2,3,3] w = {
     130, 120, 128, 0, 255, 7, 99, 128, 140, 128, 128, 127, 1, 2, 3, 250, 251, 252,
     128, 128, 128, 129, 127, 200, 60, 61, 62, 128, 90, 80, 70, 128, 128, 111, 222, 33,
     5, 128, 255, 254, 0, 128, 64, 192, 32, 160, 96, 224, 128, 17, 34, 51, 68, 85},
   uint8[3] wz = {128, 127, 129}, float ws = {0.01}, float[3] wsc = {0.01, 0.02, 0.005},
   float ys = {0.05}, uint8 yz = {100}, int32[3] bias = {100, -200, 0},
   uint8[3,2] b = {1, 200, 128, 3, 255, 0}, uint8 bz = {128}, float bsc = {0.03},
   float mys = {0.7}, uint8 myz = {3},
   float s = {0.5}, int8 z = {1}, float[3] sa = {0.5, 0.25, 2}, int8[3] za = {0, -3, 5}> {
    xq, xs, xz = DynamicQuantizeLinear (x)
    acc = ConvInteger <pads = [1, 1, 1, 1]> (xq, w, xz, wz)
    accf = Cast <to = 1> (acc)
    m = Mul (xs, ws)
    conv = Mul (accf, m)
    qconv = QLinearConv <pads = [1, 1, 1, 1]> (xq, xs, xz, w, wsc, wz, ys, yz, bias)
    aq, as, az = DynamicQuantizeLinear (a)
    macc = MatMulInteger (aq, b, az, bz)
    maccf = Cast <to = 1> (macc)
    mm = Mul (maccf, as)
    qmm = QLinearMatMul (aq, as, az, b, bsc, bz, mys, myz)
    q = QuantizeLinear (a, s, z)
    dq = DequantizeLinear (q, s, z)
    qa = QuantizeLinear <axis = 1> (a, sa, za)
    dqa = DequantizeLinear <axis = 1> (qa, sa, za)
  })";

std::map<std::string, rt::RtValue> inputs() {
  std::vector<float> x(50);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f + (i % 7 == 0 ? -2.5f : 0.25f);
  // a / 0.5 lands on ties (2.5 → 2, -1.5 → -2, 0.5 → 0) and on int8's limits (300, -300).
  std::vector<float> a = {1.25f, -0.75f, 0.25f, 150.0f, -150.0f, 3.1f};
  return {{"x", rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {1, 2, 5, 5}, x))},
          {"a", rt::RtValue::ofTensor(Tensor::fromValues<float>(DType::Float32, {2, 3}, a))}};
}

std::vector<Tensor> run(const Model& model) {
  rt::Executor executor(model);
  auto result = executor.run(inputs());
  EXPECT_TRUE(result) << result.status().toString();
  std::vector<Tensor> out;
  if (result)
    for (auto& v : result->outputs)
      out.push_back(v.tensor);
  return out;
}

size_t countOps(const Graph& g, const std::string& op) {
  size_t n = 0;
  for (const auto& node : g.nodes())
    n += node->opType() == op;
  return n;
}

TEST(DecomposeQuant, FloatOpsGiveTheKernelsNumbers) {
  Model reference = kiln::testing::modelFromOnnxText(kQuantGraph);
  Model model = kiln::testing::modelFromOnnxText(kQuantGraph);
  auto ran = runPipeline(model, {"infer-shapes", "decompose-quant"});
  ASSERT_TRUE(ran) << ran.status().toString();
  for (const char* op : {"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger", "QLinearConv",
                         "QLinearMatMul", "QuantizeLinear", "DequantizeLinear"})
    EXPECT_EQ(countOps(*model.graph, op), 0u) << op << " left";
  // The Casts back to float of ConvInteger / MatMulInteger read the float products directly;
  // what remains are the Casts to the integer outputs the graph returns.
  EXPECT_EQ(countOps(*model.graph, "Cast"), 4u); // qconv, qmm, q, xq
  const std::vector<Tensor> want = run(reference), got = run(model);
  ASSERT_EQ(want.size(), 9u);
  ASSERT_EQ(got.size(), want.size());
  const char* names[] = {"conv", "qconv", "mm", "qmm", "q", "dq", "dqa", "xq", "xs"};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype()) << names[i];
    EXPECT_EQ(got[i].dims(), want[i].dims()) << names[i];
    ASSERT_EQ(got[i].byteSize(), want[i].byteSize()) << names[i];
    EXPECT_EQ(std::memcmp(got[i].data(), want[i].data(), want[i].byteSize()), 0)
        << names[i] << " differs";
  }
  // Ties round to even, then the zero point 1 is added and int8 saturates:
  // a / 0.5 = {2.5, -1.5, 0.5, 300, -300, 6.2} → {2, -2, 0, 300, -300, 6} + 1.
  EXPECT_EQ(got[4].copyValues<int8_t>(), (std::vector<int8_t>{3, -1, 1, 127, -128, 7}));
}

TEST(DecomposeQuant, NodesTheTargetTakesStay) {
  Model model = kiln::testing::modelFromOnnxText(kQuantGraph);
  PipelineOptions options;
  options.targetTakes = [](const Node& n) { return n.opType() != "QuantizeLinear"; };
  auto ran = runPipeline(model, {"infer-shapes", "decompose-quant"}, options);
  ASSERT_TRUE(ran) << ran.status().toString();
  EXPECT_EQ(countOps(*model.graph, "QuantizeLinear"), 0u);
  EXPECT_EQ(countOps(*model.graph, "DequantizeLinear"), 2u);
  EXPECT_EQ(countOps(*model.graph, "ConvInteger"), 1u);
  EXPECT_EQ(countOps(*model.graph, "DynamicQuantizeLinear"), 2u);
}

// What the float form cannot carry exactly stays for the target to refuse: int32 values to
// quantize, blocked scales.
TEST(DecomposeQuant, InexactFormsAreLeftAlone) {
  Model model = kiln::testing::modelFromOnnxText(R"(
    <ir_version: 10, opset_import: ["" : 21]>
    g (int32[4] x, int8[1,4] c) => (int8[4] y, float[1,4] d)
    <float s = {0.5}, int8 z = {0}, float[1,2] bs = {0.5, 0.25}, int8[1,2] bz = {0, 1}> {
      y = QuantizeLinear (x, s, z)
      d = DequantizeLinear <axis = 1, block_size = 2> (c, bs, bz)
    })");
  auto ran = runPipeline(model, {"infer-shapes", "decompose-quant"});
  ASSERT_TRUE(ran) << ran.status().toString();
  EXPECT_FALSE(ran->stats.back().changed);
  EXPECT_EQ(countOps(*model.graph, "QuantizeLinear"), 1u);
  EXPECT_EQ(countOps(*model.graph, "DequantizeLinear"), 1u);
}

} // namespace
