// Elementwise chains fused into Conv (src/runtime/fusion.h): the fused run gives the same bytes as
// the nodes run one by one, on every Conv path, at one and two threads; chains stop where an
// intermediate is read elsewhere, is a graph output or is captured.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"

using namespace kiln;

namespace {

Tensor floats(std::vector<int64_t> dims, uint32_t seed) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = dist(gen);
  return rt::makeTensor<float>(DType::Float32, std::move(dims), v);
}

Tensor scalar(float v, std::vector<int64_t> dims = {}) {
  return rt::makeTensor<float>(DType::Float32, std::move(dims), {v});
}

struct ConvCase {
  const char* what;
  int64_t channels, filters, k, stride, group;
};

// x -> Conv -> Mul(s) -> Add(s) -> [Add 3 -> Clip 0..6 -> Mul -> Div 6] (hardswish as PP-OCR
// writes it) -> Add(per-channel) -> HardSwish -> Add(residual graph input) -> LeakyRelu.
// `extraOutput` also makes the named value a graph output.
struct ChainModel {
  Model model;
  std::map<std::string, rt::RtValue> feeds;
};

// Every float32 value of `t` rounded to float16.
Tensor toHalf(const Tensor& t) {
  const float* p = reinterpret_cast<const float*>(t.data());
  std::vector<uint16_t> h(t.elementCount());
  for (size_t i = 0; i < h.size(); ++i)
    h[i] = rt::floatToHalf(p[i]);
  return rt::makeTensor<uint16_t>(DType::Float16, t.dims(), h);
}

// With `half`, every tensor of the model and its feeds is float16.
ChainModel chainModel(const ConvCase& c, const std::string& extraOutput = "", bool half = false) {
  auto floats = [half](std::vector<int64_t> dims, uint32_t seed) {
    Tensor t = ::floats(std::move(dims), seed);
    return half ? toHalf(t) : t;
  };
  auto scalar = [half](float v, std::vector<int64_t> dims = {}) {
    Tensor t = ::scalar(v, std::move(dims));
    return half ? toHalf(t) : t;
  };
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  const int64_t h = 19, w = 23, pad = c.k / 2;
  const int64_t oh = (h + 2 * pad - c.k) / c.stride + 1, ow = (w + 2 * pad - c.k) / c.stride + 1;
  Value* x = g.addValue("x");
  g.addInput(x);
  Value* residual = g.addValue("residual");
  g.addInput(residual);
  m.feeds["x"] = rt::RtValue::ofTensor(floats({1, c.channels, h, w}, 1));
  m.feeds["residual"] = rt::RtValue::ofTensor(floats({1, c.filters, oh, ow}, 2));
  Value* wv = g.addInitializer("w", floats({c.filters, c.channels / c.group, c.k, c.k}, 3));
  Value* bv = g.addInitializer("b", floats({c.filters}, 4));
  Node* conv = g.appendNode("Conv", {x, wv, bv}, {"conv"});
  conv->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
  conv->setAttribute("strides", Attribute::ofInts({c.stride, c.stride}));
  conv->setAttribute("group", Attribute::ofInt(c.group));
  auto init = [&](const std::string& name, Tensor t) { return g.addInitializer(name, t); };
  // A Constant node after the Conv in graph order, as exported models place them.
  Node* three = g.appendNode("Constant", {}, {"three"});
  three->setAttribute("value", Attribute::ofTensor(scalar(3.0f)));
  auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& out) {
    return g.appendNode(op, ins, {out})->output(0);
  };
  Value* m1 = node("Mul", {init("s0", scalar(0.9f, {1})), conv->output(0)}, "m1");
  Value* a1 = node("Add", {m1, init("s1", scalar(0.25f, {1}))}, "a1");
  Value* a2 = node("Add", {a1, three->output(0)}, "a2");
  Value* cl = node("Clip", {a2, init("lo", scalar(0.0f)), init("hi", scalar(6.0f))}, "clip");
  Value* m2 = node("Mul", {a1, cl}, "m2");
  Value* d = node("Div", {m2, init("six", scalar(6.0f))}, "d");
  Value* a3 = node("Add", {d, init("pc", floats({1, c.filters, 1, 1}, 5))}, "a3");
  Value* hs = node("HardSwish", {a3}, "hs");
  Value* res = node("Add", {hs, residual}, "res");
  Node* lrelu = g.appendNode("LeakyRelu", {res}, {"y"});
  lrelu->setAttribute("alpha", Attribute::ofFloat(0.1f));
  g.addOutput(lrelu->output(0));
  if (!extraOutput.empty()) g.addOutput(g.findLocalValue(extraOutput));
  return m;
}

rt::RunResult run(const ChainModel& m, bool fuse, int threads,
                  std::vector<std::string> capture = {}, bool captureAll = false) {
  rt::ExecutorOptions options;
  options.fuse = fuse;
  options.threads = threads;
  options.profile = true;
  options.captureNames = std::move(capture);
  options.captureIntermediates = captureAll;
  rt::Executor executor(m.model, options);
  auto result = executor.run(m.feeds);
  EXPECT_TRUE(result) << result.status().toString();
  // A second run reuses the plan and the pooled buffers.
  result = executor.run(m.feeds);
  EXPECT_TRUE(result) << result.status().toString();
  return result ? result.take() : rt::RunResult{};
}

void expectSameBytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dims(), b.dims()) << what;
  ASSERT_EQ(a.byteSize(), b.byteSize()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.byteSize())) << what;
}

uint64_t calls(const rt::RunResult& r, const std::string& op) {
  auto it = r.profile.find(op);
  return it == r.profile.end() ? 0 : it->second.calls;
}

const ConvCase kCases[] = {
    {"1x1 (GEMM blocks)", 24, 40, 1, 1, 1},
    {"3x3 (full kernel)", 8, 16, 3, 1, 1},
    {"3x3 stride 2 grouped (im2col)", 8, 16, 3, 2, 2},
    {"depthwise 3x3", 16, 16, 3, 1, 16},
    {"depthwise 5x5 stride 2", 24, 24, 5, 2, 24},
};

TEST(ConvFusion, FusedChainEqualsNodesOneByOne) {
  for (const ConvCase& c : kCases) {
    ChainModel m = chainModel(c);
    rt::RunResult plain = run(m, false, 1);
    rt::RunResult fused = run(m, true, 1);
    rt::RunResult fusedTwo = run(m, true, 2);
    ASSERT_EQ(plain.outputs.size(), 1u) << c.what;
    ASSERT_EQ(fused.outputs.size(), 1u) << c.what;
    expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, c.what);
    expectSameBytes(fused.outputs[0].tensor, fusedTwo.outputs[0].tensor,
                    std::string(c.what) + ", 2 threads");
    // Unfused, every node runs; fused, the whole chain ran inside the Conv.
    EXPECT_EQ(calls(plain, "Clip"), 1u) << c.what;
    EXPECT_EQ(calls(plain, "LeakyRelu"), 1u) << c.what;
    EXPECT_EQ(calls(fused, "Clip"), 0u) << c.what;
    EXPECT_EQ(calls(fused, "Mul"), 0u) << c.what;
    EXPECT_EQ(calls(fused, "LeakyRelu"), 0u) << c.what;
    EXPECT_EQ(calls(fused, "Conv"), 1u) << c.what;
  }
}

// Float16 chains: the Conv computes in float and rounds; fused, the chain rounds each step's
// result to float16 as the nodes' own kernels do, so the bytes are again those of the nodes.
TEST(ConvFusion, HalfChainEqualsNodesOneByOne) {
  for (const ConvCase& c : kCases) {
    ChainModel m = chainModel(c, "", true);
    rt::RunResult plain = run(m, false, 1);
    rt::RunResult fused = run(m, true, 1);
    rt::RunResult fusedTwo = run(m, true, 2);
    ASSERT_EQ(fused.outputs.size(), 1u) << c.what;
    EXPECT_EQ(fused.outputs[0].tensor.dtype(), DType::Float16) << c.what;
    expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, c.what);
    expectSameBytes(fused.outputs[0].tensor, fusedTwo.outputs[0].tensor,
                    std::string(c.what) + ", 2 threads");
    EXPECT_EQ(calls(plain, "LeakyRelu"), 1u) << c.what;
    EXPECT_EQ(calls(fused, "Clip"), 0u) << c.what;
    EXPECT_EQ(calls(fused, "Mul"), 0u) << c.what;
    EXPECT_EQ(calls(fused, "LeakyRelu"), 0u) << c.what;
  }
}

TEST(ConvFusion, StopsAtAnIntermediateThatIsAGraphOutput) {
  const ConvCase& c = kCases[0];
  ChainModel m = chainModel(c, "a1");
  rt::RunResult plain = run(m, false, 1);
  rt::RunResult fused = run(m, true, 1);
  ASSERT_EQ(fused.outputs.size(), 2u);
  expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, "y");
  expectSameBytes(plain.outputs[1].tensor, fused.outputs[1].tensor, "a1");
  // Conv -> Mul -> Add (a1, the output) fuse; a1's other readers run on their own.
  EXPECT_EQ(calls(fused, "Clip"), 1u);
  EXPECT_EQ(calls(fused, "Mul"), 1u); // Mul(a1, clip); Mul(s0, conv) was fused
}

TEST(ConvFusion, NotAppliedWhenTheConvOutputHasAnotherReader) {
  const ConvCase& c = kCases[3];
  ChainModel m = chainModel(c);
  // A second reader of the Conv's output (here a graph output) keeps the chain out.
  m.model.graph->addOutput(m.model.graph->findLocalValue("conv"));
  rt::RunResult plain = run(m, false, 1);
  rt::RunResult fused = run(m, true, 1);
  ASSERT_EQ(fused.outputs.size(), 2u);
  expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, "y");
  expectSameBytes(plain.outputs[1].tensor, fused.outputs[1].tensor, "conv");
  EXPECT_EQ(calls(fused, "Mul"), 2u);
  EXPECT_EQ(calls(fused, "Clip"), 1u);
}

TEST(ConvFusion, CapturedIntermediatesAreStillComputed) {
  const ConvCase& c = kCases[1];
  ChainModel m = chainModel(c);
  rt::RunResult plain = run(m, false, 1, {"clip"});
  rt::RunResult named = run(m, true, 1, {"clip"});
  ASSERT_TRUE(named.captured.count("clip"));
  expectSameBytes(plain.captured.at("clip").tensor, named.captured.at("clip").tensor, "clip");
  expectSameBytes(plain.outputs[0].tensor, named.outputs[0].tensor, "y");
  // Every intermediate captured: nothing fuses.
  rt::RunResult all = run(m, true, 1, {}, true);
  for (const char* name : {"conv", "m1", "a1", "a2", "clip", "m2", "d", "a3", "hs", "res"})
    EXPECT_TRUE(all.captured.count(name)) << name;
  EXPECT_EQ(calls(all, "Clip"), 1u);
}

} // namespace
