// Elementwise chains fused into Conv and into ConvInteger with its Cast (src/runtime/fusion.h): the
// fused run gives the same bytes as the nodes run one by one, on every Conv path, at one and two
// threads (two with every kernel split whatever its size: these inputs are below the pool's work
// threshold); chains stop where an intermediate is read elsewhere, is a graph output or is
// captured.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "runtime/fusion.h"
#include "runtime/kernels/thread_pool.h"

using namespace kiln;

namespace {

// Uniform in [-2, 2); `edit` may change the values before they become a tensor.
Tensor floats(std::vector<int64_t> dims, uint32_t seed,
              const std::function<void(std::vector<float>&)>& edit = nullptr) {
  int64_t n = 1;
  for (int64_t d : dims)
    n *= d;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = dist(gen);
  if (edit) edit(v);
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

// Declares `v` float16 (the graph's own type, as an importer would have set it); returns it.
Value* asHalf(Value* v) {
  v->setDType(DType::Float16);
  return v;
}

// Appends a float16 Conv (k x k, "same" padding, `group` groups) reading `in`, with weights
// scaled by the fan-in (so values stay well inside float16's range through a deep stack) and a
// bias; returns its output.
Value* appendHalfConv(Graph& g, Value* in, int64_t channels, int64_t filters, uint32_t seed,
                      const std::string& out, int64_t k, int64_t group) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(channels / group * k * k));
  Value* wv = g.addInitializer(out + "_w",
                               toHalf(floats({filters, channels / group, k, k}, seed, [&](auto& v) {
                                 for (float& f : v)
                                   f *= scale;
                               })));
  Value* bv = g.addInitializer(out + "_b", toHalf(floats({filters}, seed + 1)));
  Node* n = g.appendNode("Conv", {in, wv, bv}, {out});
  const int64_t pad = k / 2;
  n->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
  n->setAttribute("group", Attribute::ofInt(group));
  return n->output(0);
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
  // More than one thread: split every kernel, so the split paths are the ones compared.
  struct SplitAlways {
    explicit SplitAlways(bool on) { rt::pool::setSplitAlways(on); }
    ~SplitAlways() { rt::pool::setSplitAlways(false); }
  } split(threads > 1);
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

// A fusion plan's entries keyed by each node's first output name: its hand-off target, its chain
// and the node's own index.
struct PlanEntries {
  std::map<std::string, int32_t> handoff, chain, index;
};
PlanEntries byOutputName(const Graph& g, const rt::FusionPlan& plan) {
  PlanEntries e;
  int32_t i = 0;
  for (const auto& n : g.nodes()) {
    const std::string& name = n->output(0)->name();
    e.handoff[name] = plan.handoffTo[static_cast<size_t>(i)];
    e.chain[name] = plan.chainAt[static_cast<size_t>(i)];
    e.index[name] = i++;
  }
  return e;
}

// Runs a one-output float16 model node by node and fused: the fused float16 output must have the
// same bytes, and (with `finite`) hold only finite values, so a hand-off that moved or changed
// values would show. Returns the fused run for the caller's own checks.
rt::RunResult fusedHalfEqualsPlain(const ChainModel& m, int threads, const std::string& what,
                                   bool finite, rt::RunResult* plainOut = nullptr) {
  rt::RunResult plain = run(m, false, threads);
  rt::RunResult fused = run(m, true, threads);
  EXPECT_EQ(plain.outputs.size(), 1u) << what;
  EXPECT_EQ(fused.outputs.size(), 1u) << what;
  if (plain.outputs.size() != 1 || fused.outputs.size() != 1) return fused;
  EXPECT_EQ(fused.outputs[0].tensor.dtype(), DType::Float16) << what;
  expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, what);
  if (finite) {
    const Tensor& y = fused.outputs[0].tensor;
    const uint16_t* yh = reinterpret_cast<const uint16_t*>(y.data());
    for (size_t i = 0; i < y.elementCount(); ++i)
      if (!std::isfinite(rt::halfToFloat(yh[i]))) {
        ADD_FAILURE() << what << ": not finite at " << i;
        break;
      }
  }
  if (plainOut) *plainOut = std::move(plain);
  return fused;
}

const ConvCase kCases[] = {
    {"1x1 (GEMM blocks)", 24, 40, 1, 1, 1},
    {"1x1 (GEMM row blocks: one column block, 192 filters)", 256, 192, 1, 1, 1},
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

// x (uint8) -> ConvInteger(constant w, per-filter zero points) -> Cast(float) -> Mul(scale) ->
// Add(per-channel bias) -> Relu, as dynamically quantized models write each convolution; with
// `castIsOutput` the Cast's output is also a graph output (only the Cast fuses then). With
// `halfStretch` the bias, a second scale and the Relu run in float16 between Casts, as fp16 .om
// files write it: Mul(Cast(f16 scale)) -> Cast(f16) -> Add(f16 bias) -> Mul(f16 scalar) -> Relu ->
// Cast(f32); with `halfEnd` too the Relu's float16 output is the graph output (no Cast back).
ChainModel integerChainModel(int64_t group, bool castIsOutput, bool halfStretch = false,
                             bool halfEnd = false) {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  const int64_t c = 8, f = 12, h = 17, w = 13;
  std::mt19937 gen(9);
  std::uniform_int_distribution<int> byte(0, 255);
  auto bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (uint8_t& b : v)
      b = static_cast<uint8_t>(byte(gen));
    return v;
  };
  Value* x = g.addValue("x");
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(
      rt::makeTensor<uint8_t>(DType::UInt8, {1, c, h, w}, bytes(static_cast<size_t>(c * h * w))));
  Value* wv = g.addInitializer(
      "w", rt::makeTensor<uint8_t>(DType::UInt8, {f, c / group, 3, 3},
                                   bytes(static_cast<size_t>(f * (c / group) * 9))));
  Value* xz = g.addInitializer("xz", rt::makeTensor<uint8_t>(DType::UInt8, {}, {131}));
  Value* wz = g.addInitializer(
      "wz", rt::makeTensor<uint8_t>(DType::UInt8, {f}, bytes(static_cast<size_t>(f))));
  Node* conv = g.appendNode("ConvInteger", {x, wv, xz, wz}, {"acc"});
  conv->setAttribute("pads", Attribute::ofInts({1, 1, 1, 1}));
  conv->setAttribute("group", Attribute::ofInt(group));
  Node* cast = g.appendNode("Cast", {conv->output(0)}, {"accf"});
  cast->setAttribute("to", Attribute::ofInt(1));
  // The float16 form's scale is a float16 value cast to float32 after the ConvInteger runs.
  Value* scale = g.addInitializer("s", scalar(0.0037f));
  if (halfStretch) {
    // A graph input, so the Cast runs each time (an initializer's would be computed once).
    Value* s16 = g.addValue("s16");
    g.addInput(s16);
    m.feeds["s16"] = rt::RtValue::ofTensor(toHalf(scalar(0.0037f)));
    Node* wide = g.appendNode("Cast", {s16}, {"s32"});
    wide->setAttribute("to", Attribute::ofInt(1));
    scale = wide->output(0);
  }
  Value* scaled = g.appendNode("Mul", {cast->output(0), scale}, {"scaled"})->output(0);
  if (halfStretch) {
    Node* toHalf16 = g.appendNode("Cast", {scaled}, {"scaledh"});
    toHalf16->setAttribute("to", Attribute::ofInt(10));
    Value* biased =
        g.appendNode("Add",
                     {toHalf16->output(0), g.addInitializer("bh", toHalf(floats({1, f, 1, 1}, 6)))},
                     {"biasedh"})
            ->output(0);
    Value* again =
        g.appendNode("Mul", {biased, g.addInitializer("sh", toHalf(scalar(1.37f)))}, {"againh"})
            ->output(0);
    Value* relu = g.appendNode("Relu", {again}, {"reluh"})->output(0);
    if (halfEnd) {
      g.addOutput(relu);
    } else {
      Node* back = g.appendNode("Cast", {relu}, {"y"});
      back->setAttribute("to", Attribute::ofInt(1));
      g.addOutput(back->output(0));
    }
    if (castIsOutput) g.addOutput(cast->output(0));
    return m;
  }
  Value* biased =
      g.appendNode("Add", {scaled, g.addInitializer("b", floats({1, f, 1, 1}, 6))}, {"biased"})
          ->output(0);
  Node* relu = g.appendNode("Relu", {biased}, {"y"});
  g.addOutput(relu->output(0));
  if (castIsOutput) g.addOutput(cast->output(0));
  return m;
}

TEST(ConvFusion, ConvIntegerCastAndChainEqualNodesOneByOne) {
  for (int64_t group : {1, 2}) // oneDNN int8 path (VNNI CPUs) and the int16 loops
    for (bool castIsOutput : {false, true}) {
      const std::string what =
          "group " + std::to_string(group) + (castIsOutput ? ", Cast output kept" : "");
      ChainModel m = integerChainModel(group, castIsOutput);
      rt::RunResult plain = run(m, false, 1);
      rt::RunResult fused = run(m, true, 1);
      rt::RunResult fusedTwo = run(m, true, 2);
      ASSERT_EQ(plain.outputs.size(), fused.outputs.size()) << what;
      for (size_t i = 0; i < plain.outputs.size(); ++i) {
        expectSameBytes(plain.outputs[i].tensor, fused.outputs[i].tensor, what);
        expectSameBytes(fused.outputs[i].tensor, fusedTwo.outputs[i].tensor, what + ", 2 threads");
      }
      EXPECT_EQ(calls(plain, "Cast"), 1u) << what;
      EXPECT_EQ(calls(fused, "Cast"), 0u) << what;
      EXPECT_EQ(calls(fused, "Relu"), castIsOutput ? 1u : 0u) << what;
      EXPECT_EQ(calls(fused, "ConvInteger"), 1u) << what;
    }
}

// A float16 stretch inside a ConvInteger's chain (Cast to float16, float16 steps, Cast back):
// fused, each step rounds as the float16 kernels do, so the bytes are those of the nodes.
TEST(ConvFusion, ConvIntegerChainThroughFloat16EqualsNodesOneByOne) {
  for (int64_t group : {1, 2})
    for (bool castIsOutput : {false, true})
      for (bool halfEnd : {false, true}) {
        const std::string what = "group " + std::to_string(group) +
                                 (castIsOutput ? ", Cast output kept" : "") +
                                 (halfEnd ? ", float16 result" : "");
        ChainModel m = integerChainModel(group, castIsOutput, true, halfEnd);
        rt::RunResult plain = run(m, false, 1);
        rt::RunResult fused = run(m, true, 1);
        rt::RunResult fusedTwo = run(m, true, 2);
        ASSERT_EQ(plain.outputs.size(), fused.outputs.size()) << what;
        EXPECT_EQ(fused.outputs[0].tensor.dtype(), halfEnd ? DType::Float16 : DType::Float32)
            << what;
        for (size_t i = 0; i < plain.outputs.size(); ++i) {
          expectSameBytes(plain.outputs[i].tensor, fused.outputs[i].tensor, what);
          expectSameBytes(fused.outputs[i].tensor, fusedTwo.outputs[i].tensor,
                          what + ", 2 threads");
        }
        EXPECT_EQ(calls(plain, "Cast"), halfEnd ? 3u : 4u) << what;
        // Fused, the chain's Casts, Add, Muls and Relu all ran inside the ConvInteger (the scale's
        // Cast still runs on its own).
        EXPECT_EQ(calls(fused, "Cast"),
                  (castIsOutput ? 3u : 1u) - (castIsOutput && halfEnd ? 1u : 0u))
            << what;
        EXPECT_EQ(calls(fused, "Mul"), castIsOutput ? 2u : 0u) << what;
        EXPECT_EQ(calls(fused, "Add"), castIsOutput ? 1u : 0u) << what;
        EXPECT_EQ(calls(fused, "Relu"), castIsOutput ? 1u : 0u) << what;
        EXPECT_EQ(calls(fused, "ConvInteger"), 1u) << what;
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

// x -> Conv -> BatchNormalization (parameters from Constant nodes, one placed after the Conv)
// -> [Add 3 -> Clip 0..6 -> Mul (BN output read twice) -> Div 6] -> Max(-0.4) -> Min(per-channel)
// -> LeakyRelu. `nanInput` puts NaNs into x (Max / Min must pass them through alike).
ChainModel normChainModel(const ConvCase& c, bool nanInput = false, int64_t trainingMode = -1) {
  ChainModel m;
  m.model.opsets = {{"", 15}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  const int64_t h = 13, w = 37, pad = c.k / 2;
  Value* x = g.addValue("x");
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(floats({1, c.channels, h, w}, 11, [&](auto& v) {
    for (size_t i = 0; nanInput && i < v.size(); i += 29)
      v[i] = std::numeric_limits<float>::quiet_NaN();
  }));
  Value* wv = g.addInitializer("w", floats({c.filters, c.channels / c.group, c.k, c.k}, 12));
  Node* conv = g.appendNode("Conv", {x, wv}, {"conv"});
  conv->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
  conv->setAttribute("strides", Attribute::ofInts({c.stride, c.stride}));
  conv->setAttribute("group", Attribute::ofInt(c.group));
  auto constant = [&](const std::string& name, Tensor t) {
    Node* n = g.appendNode("Constant", {}, {name});
    n->setAttribute("value", Attribute::ofTensor(std::move(t)));
    return n->output(0);
  };
  Tensor var = floats({c.filters}, 14, [](auto& v) {
    for (float& x : v)
      x = std::fabs(x) + 0.01f;
  });
  Value* scale = constant("scale", floats({c.filters}, 13));
  Value* bias = g.addInitializer("bias", floats({c.filters}, 15));
  Value* mean = g.addInitializer("mean", floats({c.filters}, 16));
  Value* varv = g.addInitializer("var", var);
  auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& out) {
    return g.appendNode(op, ins, {out});
  };
  Node* bn = node("BatchNormalization", {conv->output(0), scale, bias, mean, varv}, "bn");
  bn->setAttribute("epsilon", Attribute::ofFloat(1e-3f));
  if (trainingMode >= 0) bn->setAttribute("training_mode", Attribute::ofInt(trainingMode));
  Value* a = node("Add", {bn->output(0), g.addInitializer("three", scalar(3.0f))}, "a")->output(0);
  Node* clip =
      node("Clip", {a, g.addInitializer("lo", scalar(0.0f)), g.addInitializer("hi", scalar(6.0f))},
           "clip");
  Value* mu = node("Mul", {bn->output(0), clip->output(0)}, "mu")->output(0);
  Value* d = node("Div", {mu, g.addInitializer("six", scalar(6.0f))}, "d")->output(0);
  Value* mx = node("Max", {d, constant("floor", scalar(-0.4f, {1, 1, 1, 1}))}, "mx")->output(0);
  Value* mn =
      node("Min", {g.addInitializer("cap", floats({c.filters, 1, 1}, 17)), mx}, "mn")->output(0);
  Node* lrelu = node("LeakyRelu", {mn}, "y");
  g.addOutput(lrelu->output(0));
  return m;
}

TEST(ConvFusion, BatchNormAndMaxMinChainEqualsNodesOneByOne) {
  for (const ConvCase& c : kCases) {
    for (bool nan : {false, true}) {
      const std::string what = std::string(c.what) + (nan ? ", NaN input" : "");
      ChainModel m = normChainModel(c, nan);
      rt::RunResult plain = run(m, false, 1);
      rt::RunResult fused = run(m, true, 1);
      rt::RunResult fusedTwo = run(m, true, 2);
      ASSERT_EQ(fused.outputs.size(), 1u) << what;
      expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor, what);
      expectSameBytes(fused.outputs[0].tensor, fusedTwo.outputs[0].tensor, what + ", 2 threads");
      EXPECT_EQ(calls(plain, "BatchNormalization"), 1u) << what;
      EXPECT_EQ(calls(plain, "Max"), 1u) << what;
      EXPECT_EQ(calls(fused, "BatchNormalization"), 0u) << what;
      EXPECT_EQ(calls(fused, "Max"), 0u) << what;
      EXPECT_EQ(calls(fused, "Min"), 0u) << what;
      EXPECT_EQ(calls(fused, "LeakyRelu"), 0u) << what;
    }
  }
}

TEST(ConvFusion, TrainingModeBatchNormStaysOnItsOwn) {
  ChainModel m = normChainModel(kCases[1], false, 1);
  rt::ExecutorOptions options;
  options.profile = true;
  rt::Executor executor(m.model, options);
  auto result = executor.run(m.feeds);
  ASSERT_TRUE(result) << result.status().toString();
  // The BatchNormalization (batch statistics) runs as a node; the chain stops before it.
  EXPECT_EQ(calls(*result, "BatchNormalization"), 1u);
  EXPECT_EQ(calls(*result, "Max"), 1u);
}

// Float16 Conv -> Relu -> Conv -> MaxPool -> Conv, 3x3 group-1 convolutions (oneDNN, when built
// in), then 1x1 Conv -> depthwise 3x3 Conv -> 1x1 Conv -> Mul: fused, each Conv may hand its
// output to the next (FusionPlan::handoffTo): channels-last from oneDNN, through the MaxPool too,
// as float16, or, where the graph declares the values float16, as widened float32 (planar from
// the 1x1 and depthwise ones); the bytes must be those of the nodes run one by one.
ChainModel halfHandOffModel(bool declared) {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  Value* x = g.addValue("x");
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(toHalf(floats({1, 16, 21, 26}, 31)));
  auto typed = [&](Value* v) {
    if (declared) v->setDType(DType::Float16);
    return v;
  };
  typed(x);
  auto conv = [&](Value* in, int64_t channels, int64_t filters, uint32_t seed,
                  const std::string& out, int64_t k = 3, int64_t group = 1) {
    return typed(appendHalfConv(g, in, channels, filters, seed, out, k, group));
  };
  Value* c1 = conv(x, 16, 32, 32, "c1");
  Value* r1 = typed(g.appendNode("Relu", {c1}, {"r1"})->output(0));
  Value* c2 = conv(r1, 32, 32, 34, "c2");
  Node* pool = g.appendNode("MaxPool", {c2}, {"p"});
  pool->setAttribute("kernel_shape", Attribute::ofInts({2, 2}));
  pool->setAttribute("strides", Attribute::ofInts({2, 2}));
  Value* c3 = conv(typed(pool->output(0)), 32, 48, 36, "c3");
  Value* p1 = conv(c3, 48, 32, 38, "p1", 1);
  Value* r2 = typed(g.appendNode("Relu", {p1}, {"r2"})->output(0));
  Value* dw = conv(r2, 32, 32, 40, "dw", 3, 32);
  Value* p2 = conv(dw, 32, 24, 42, "p2", 1);
  Value* half = g.addInitializer("half", toHalf(scalar(0.5f)));
  g.addOutput(typed(g.appendNode("Mul", {p2, half}, {"y"})->output(0)));
  return m;
}

TEST(ConvFusion, HalfConvHandOffEqualsNodesOneByOne) {
  for (bool declared : {false, true}) {
    ChainModel m = halfHandOffModel(declared);
    for (int threads : {1, 2}) {
      const std::string what = std::string(declared ? "declared float16, " : "untyped, ") +
                               "threads " + std::to_string(threads);
      rt::RunResult fused = fusedHalfEqualsPlain(m, threads, what, true);
      EXPECT_EQ(calls(fused, "Relu"), 0u) << what;
      EXPECT_EQ(calls(fused, "Mul"), 0u) << what;
    }
  }
}

// Float16 nodes other than Conv handing their output widened to the one float16 Conv that reads
// it (FusionPlan::handoffTo): x (float32) -> Cast to float16 -> 3x3 Conv c1; c1 -> Add and Mul
// (two readers: no chain) -> Concat -> 3x3 Conv c2 -> Add(c2, Relu(Mul)) -> depthwise Conv c3 ->
// 3x3 Convs c4 and c5 -> Add -> output. The Cast, the Concat and the Add before c3 hand off, and
// c3 (planar) to both its readers; the Add and the Mul before the Concat do not (the Add's reader
// is no Conv, the Mul has two readers). The bytes must be those of the
// nodes run one by one, whose Conv widens each float16 input itself.
ChainModel widenedHandOffModel() {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  Value* x = g.addValue("x");
  x->setDType(DType::Float32);
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(floats({1, 8, 19, 23}, 51));
  auto conv = [&](Value* in, int64_t channels, int64_t filters, uint32_t seed,
                  const std::string& out, int64_t group = 1) {
    return asHalf(appendHalfConv(g, in, channels, filters, seed, out, 3, group));
  };
  Node* cast = g.appendNode("Cast", {x}, {"xh"});
  cast->setAttribute("to", Attribute::ofInt(10));
  Value* c1 = conv(asHalf(cast->output(0)), 8, 16, 52, "c1");
  Value* shift = g.addInitializer("shift", toHalf(floats({1, 16, 1, 1}, 54)));
  Value* a = asHalf(g.appendNode("Add", {c1, shift}, {"a"})->output(0));
  Value* b = asHalf(g.appendNode("Mul", {c1, c1}, {"b"})->output(0));
  Node* cat = g.appendNode("Concat", {a, b}, {"cat"});
  cat->setAttribute("axis", Attribute::ofInt(1));
  Value* c2 = conv(asHalf(cat->output(0)), 32, 16, 56, "c2");
  // Made after c2, so the Add below is no part of c2's chain (its operand does not exist yet).
  Value* u = asHalf(g.appendNode("Relu", {b}, {"u"})->output(0));
  Value* f = asHalf(g.appendNode("Add", {c2, u}, {"f"})->output(0));
  Value* c3 = conv(f, 16, 16, 58, "c3", 16);
  Value* c4 = conv(c3, 16, 8, 60, "c4");
  Value* c5 = conv(c3, 16, 8, 62, "c5");
  g.addOutput(asHalf(g.appendNode("Add", {c4, c5}, {"y"})->output(0)));
  return m;
}

TEST(ConvFusion, WidenedHandOffToHalfConvEqualsNodesOneByOne) {
  ChainModel m = widenedHandOffModel();
  const Graph& g = *m.model.graph;
  auto plan = rt::planFusion(g, 17, {});
  ASSERT_TRUE(plan);
  auto [handoff, chain, index] = byOutputName(g, *plan);
  EXPECT_EQ(handoff["xh"], index["c1"]);
  EXPECT_EQ(handoff["cat"], index["c2"]);
  EXPECT_EQ(handoff["f"], index["c3"]);
  EXPECT_EQ(handoff["c3"], index["c4"]);
  EXPECT_EQ(handoff["a"], -1);
  EXPECT_EQ(handoff["b"], -1);
  for (int threads : {1, 2}) {
    const std::string what = "threads " + std::to_string(threads);
    fusedHalfEqualsPlain(m, threads, what, true);
  }
}

// Float16 Add/Sub/Mul/Div handing their output widened to the one Cast to float32 that reads it
// (FusionPlan::handoffTo), which passes it on: x (float16, with NaN, infinities, -0 and values
// that overflow or round to subnormals) -> Add(bias row) -> Cast to float32 -> Softmax (output y);
// x -> Mul(x, x) -> Div(scalar) -> Sub -> Cast -> output z. The Add and the Sub hand off; the Mul
// and the Div do not (their readers are no Cast), nor does an Add whose output is also a graph
// output, nor one whose Cast a DynamicQuantizeLinear reads. The bytes must be those of the nodes
// run one by one.
ChainModel castHandOffModel() {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  Value* x = asHalf(g.addValue("x"));
  g.addInput(x);
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            -0.0f,
                            60000.0f,
                            1e-7f};
  m.feeds["x"] = rt::RtValue::ofTensor(toHalf(floats({2, 5, 333}, 71, [&](auto& v) {
    for (size_t i = 0; i < v.size(); i += 37)
      v[i] = specials[(i / 37) % std::size(specials)];
  })));
  Value* bias = g.addInitializer("bias", toHalf(floats({333}, 72)));
  Value* a = asHalf(g.appendNode("Add", {x, bias}, {"a"})->output(0));
  Node* ca = g.appendNode("Cast", {a}, {"ca"});
  ca->setAttribute("to", Attribute::ofInt(1));
  Node* sm = g.appendNode("Softmax", {ca->output(0)}, {"y"});
  sm->setAttribute("axis", Attribute::ofInt(2));
  g.addOutput(sm->output(0));
  Value* sq = asHalf(g.appendNode("Mul", {x, x}, {"sq"})->output(0));
  Value* d = asHalf(
      g.appendNode("Div", {sq, g.addInitializer("k", toHalf(scalar(3.0f)))}, {"d"})->output(0));
  Value* e = asHalf(g.appendNode("Sub", {d, x}, {"e"})->output(0));
  Node* ce = g.appendNode("Cast", {e}, {"z"});
  ce->setAttribute("to", Attribute::ofInt(1));
  g.addOutput(ce->output(0));
  // Also a graph output: no hand-off.
  Value* o = asHalf(g.appendNode("Add", {d, x}, {"o"})->output(0));
  Node* co = g.appendNode("Cast", {o}, {"co"});
  co->setAttribute("to", Attribute::ofInt(1));
  g.addOutput(o);
  g.addOutput(co->output(0));
  // A Cast that a DynamicQuantizeLinear reads passes float16 data on (FusionPlan::passHalf): the
  // Add before it keeps its float16 output.
  Value* q = asHalf(g.appendNode("Add", {x, x}, {"q"})->output(0));
  Node* cq = g.appendNode("Cast", {q}, {"cq"});
  cq->setAttribute("to", Attribute::ofInt(1));
  Node* dq = g.appendNode("DynamicQuantizeLinear", {cq->output(0)}, {"dq", "dq_scale", "dq_zero"});
  for (size_t i = 0; i < 3; ++i)
    g.addOutput(dq->output(i));
  return m;
}

TEST(ConvFusion, WidenedHandOffToCastEqualsNodesOneByOne) {
  ChainModel m = castHandOffModel();
  const Graph& g = *m.model.graph;
  auto plan = rt::planFusion(g, 17, {});
  ASSERT_TRUE(plan);
  auto [handoff, chain, index] = byOutputName(g, *plan);
  EXPECT_EQ(handoff["a"], index["ca"]);
  EXPECT_EQ(handoff["e"], index["z"]);
  EXPECT_EQ(handoff["sq"], -1);
  EXPECT_EQ(handoff["d"], -1);
  EXPECT_EQ(handoff["o"], -1);
  EXPECT_EQ(handoff["q"], -1);
  EXPECT_EQ(plan->passHalf[static_cast<size_t>(index["cq"])], 1);
  for (int threads : {1, 2}) {
    const std::string what = "threads " + std::to_string(threads);
    rt::RunResult plain = run(m, false, threads);
    rt::RunResult fused = run(m, true, threads);
    ASSERT_EQ(plain.outputs.size(), 7u) << what;
    ASSERT_EQ(fused.outputs.size(), 7u) << what;
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(fused.outputs[i].tensor.dtype(), plain.outputs[i].tensor.dtype()) << what;
      expectSameBytes(plain.outputs[i].tensor, fused.outputs[i].tensor,
                      what + ", output " + std::to_string(i));
    }
    EXPECT_EQ(fused.outputs[1].tensor.dtype(), DType::Float32) << what;
  }
}

// Float16 ConvTranspose with a chain and widened hand-offs: x -> ConvTranspose t1 (2x2 stride 2)
// -> Relu -> ConvTranspose t2 (3x3 stride 2) -> Add(per-channel) -> 3x3 Conv -> GlobalAveragePool
// and Mul: t1 and t2 run their chains (Relu, Add), t1 hands its result widened to t2 and t2 to the
// Conv. The bytes must be those of the nodes run one by one.
ChainModel halfTransposeModel() {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  Value* x = asHalf(g.addValue("x"));
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(toHalf(floats({1, 8, 9, 11}, 61)));
  auto weights = [&](const std::string& name, std::vector<int64_t> dims, uint32_t seed) {
    const float scale = 1.0f / std::sqrt(static_cast<float>(dims[0] * dims[2] * dims[3]));
    return g.addInitializer(name, toHalf(floats(std::move(dims), seed, [&](auto& v) {
                              for (float& f : v)
                                f *= scale;
                            })));
  };
  Node* t1 = g.appendNode(
      "ConvTranspose",
      {x, weights("t1_w", {8, 12, 2, 2}, 62), g.addInitializer("t1_b", toHalf(floats({12}, 63)))},
      {"t1"});
  t1->setAttribute("strides", Attribute::ofInts({2, 2}));
  Value* r = asHalf(g.appendNode("Relu", {asHalf(t1->output(0))}, {"r"})->output(0));
  Node* t2 = g.appendNode("ConvTranspose", {r, weights("t2_w", {12, 6, 3, 3}, 64)}, {"t2"});
  t2->setAttribute("strides", Attribute::ofInts({2, 2}));
  t2->setAttribute("pads", Attribute::ofInts({1, 1, 1, 1}));
  Value* bias = g.addInitializer("bias", toHalf(floats({1, 6, 1, 1}, 65)));
  Value* a = asHalf(g.appendNode("Add", {asHalf(t2->output(0)), bias}, {"a"})->output(0));
  Node* c = g.appendNode("Conv", {a, weights("c_w", {4, 6, 3, 3}, 66)}, {"c"});
  c->setAttribute("pads", Attribute::ofInts({1, 1, 1, 1}));
  Value* cv = asHalf(c->output(0));
  Value* p = asHalf(g.appendNode("GlobalAveragePool", {cv}, {"p"})->output(0));
  g.addOutput(asHalf(g.appendNode("Mul", {cv, p}, {"y"})->output(0)));
  return m;
}

TEST(ConvFusion, HalfConvTransposeChainAndHandOffEqualNodesOneByOne) {
  ChainModel m = halfTransposeModel();
  const Graph& g = *m.model.graph;
  auto plan = rt::planFusion(g, 17, {});
  ASSERT_TRUE(plan);
  auto [handoff, chain, index] = byOutputName(g, *plan);
  EXPECT_GE(chain["t1"], 0);
  EXPECT_GE(chain["t2"], 0);
  EXPECT_EQ(handoff["t1"], index["t2"]);
  EXPECT_EQ(handoff["t2"], index["c"]);
  for (int threads : {1, 2}) {
    const std::string what = "threads " + std::to_string(threads);
    rt::RunResult plain;
    rt::RunResult fused = fusedHalfEqualsPlain(m, threads, what, false, &plain);
    EXPECT_EQ(calls(fused, "Relu"), 0u) << what;
    EXPECT_EQ(calls(fused, "Add"), 0u) << what;
    EXPECT_EQ(calls(plain, "Relu"), 1u) << what;
  }
}

// x -> Conv (with or without bias) -> [Add 3 -> Clip 0..6 -> Mul -> Div 6], PP-OCR cls's
// HardSwish straight on the Conv's values, whose pass then adds the bias and rounds them itself;
// with `readAgain` an Add of the Conv's values follows, which keeps that work in its own pass.
// Planes of 19x23 leave a vector tail; NaNs and values around the clamp's edges come through.
ChainModel hardSwishFirstModel(const ConvCase& c, bool withBias, bool readAgain, bool half) {
  auto values = [half](std::vector<int64_t> dims, uint32_t seed, float scale = 1.0f) {
    Tensor t = floats(std::move(dims), seed, [&](std::vector<float>& v) {
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = i % 97 == 5 ? std::numeric_limits<float>::quiet_NaN() : v[i] * scale;
    });
    return half ? toHalf(t) : t;
  };
  auto constant = [half](float v) {
    Tensor t = scalar(v);
    return half ? toHalf(t) : t;
  };
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  const int64_t h = 19, w = 23, pad = c.k / 2;
  Value* x = g.addValue("x");
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(values({1, c.channels, h, w}, 31, 2.0f));
  std::vector<Value*> convIns = {
      x, g.addInitializer("w", values({c.filters, c.channels / c.group, c.k, c.k}, 32))};
  if (withBias) convIns.push_back(g.addInitializer("b", values({c.filters}, 33, 3.0f)));
  Node* conv = g.appendNode("Conv", convIns, {"conv"});
  conv->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
  conv->setAttribute("strides", Attribute::ofInts({c.stride, c.stride}));
  conv->setAttribute("group", Attribute::ofInt(c.group));
  auto node = [&](const std::string& op, std::vector<Value*> ins, const std::string& out) {
    return g.appendNode(op, ins, {out})->output(0);
  };
  Value* a = node("Add", {conv->output(0), g.addInitializer("three", constant(3.0f))}, "a");
  Value* cl = node(
      "Clip", {a, g.addInitializer("lo", constant(0.0f)), g.addInitializer("hi", constant(6.0f))},
      "clip");
  Value* mu = node("Mul", {conv->output(0), cl}, "mu");
  Value* y = node("Div", {mu, g.addInitializer("six", constant(6.0f))}, readAgain ? "d" : "y");
  if (readAgain) y = node("Add", {y, conv->output(0)}, "y");
  g.addOutput(y);
  return m;
}

// The fused chain gives the nodes' bytes whether the HardSwish pass prepares the Conv's values
// (bias, float16 rounding) itself or they are prepared first, in float32 and float16, at one and
// two threads.
TEST(ConvFusion, HardSwishFirstOnTheConvEqualsNodesOneByOne) {
  for (const ConvCase& c : kCases)
    for (bool half : {false, true})
      for (bool withBias : {false, true})
        for (bool readAgain : {false, true}) {
          const std::string what = std::string(c.what) + (half ? " f16" : " f32") +
                                   (withBias ? " bias" : "") + (readAgain ? " read again" : "");
          ChainModel m = hardSwishFirstModel(c, withBias, readAgain, half);
          for (int threads : {1, 2}) {
            rt::RunResult plain = run(m, false, threads);
            rt::RunResult fused = run(m, true, threads);
            ASSERT_EQ(fused.outputs.size(), 1u) << what;
            ASSERT_EQ(plain.outputs.size(), 1u) << what;
            expectSameBytes(plain.outputs[0].tensor, fused.outputs[0].tensor,
                            what + ", threads " + std::to_string(threads));
            EXPECT_EQ(calls(fused, "Clip"), 0u) << what;
          }
        }
}

// Float16 global pooling widens the planes a stretch at a time and spreads plane groups over the
// pool: the same bits as pooling the widened float32 tensor and narrowing the result (the float
// path's sums in its order), at one and two threads, for plane counts around the eight planes
// pooled side by side and planes longer than a stretch.
TEST(ConvFusion, HalfGlobalPoolEqualsFloatPoolNarrowed) {
  // With `specials`: NaNs of both signs in two planes, zeros of both signs and infinities
  // scattered, a plane whose maximum is zero of either sign (a max must keep the first of equal
  // values and never a NaN).
  auto withSpecials = [](std::vector<float>& v, int64_t size) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    for (size_t i = 0; i < v.size(); ++i) {
      const int64_t plane = static_cast<int64_t>(i) / size;
      if ((plane == 2 || plane == 9) && i % 29 == 3) v[i] = i % 2 ? -nan : nan;
      if (i % 7 == 1) v[i] = -0.0f;
      if (i % 11 == 2) v[i] = 0.0f;
      if (i % 97 == 5) v[i] = i % 3 ? INFINITY : -INFINITY;
      // A plane whose maximum is zero, of both signs.
      if (plane == 4) v[i] = i % 5 == 0 ? (i % 10 ? -0.0f : 0.0f) : -std::fabs(v[i]) - 1.0f;
    }
  };
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    for (bool specials : {false, true}) {
      for (std::vector<int64_t> dims : std::vector<std::vector<int64_t>>{
               {1, 3, 7, 5}, {2, 9, 40, 33}, {1, 17, 1, 1300}, {1, 16, 1, 5}, {1, 24, 3, 96}}) {
        const std::string what = std::string(op) + " " + std::to_string(dims[1]) + " planes of " +
                                 std::to_string(dims[2] * dims[3]) + (specials ? ", specials" : "");
        Tensor xf = floats(dims, 71, [&](std::vector<float>& v) {
          if (specials) withSpecials(v, dims[2] * dims[3]);
        });
        Tensor xh = toHalf(xf);
        auto pool = [&](const Tensor& in, int threads) {
          ChainModel m;
          m.model.opsets = {{"", 17}};
          m.model.graph = std::make_shared<Graph>("g");
          Graph& g = *m.model.graph;
          Value* x = g.addValue("x");
          g.addInput(x);
          g.addOutput(g.appendNode(op, {x}, {"y"})->output(0));
          m.feeds["x"] = rt::RtValue::ofTensor(in);
          rt::RunResult r = run(m, true, threads);
          return r.outputs.empty() ? Tensor() : r.outputs[0].tensor;
        };
        // The float path on the float16 values widened.
        const uint16_t* hp = reinterpret_cast<const uint16_t*>(xh.data());
        std::vector<float> wide(xh.elementCount());
        for (size_t k = 0; k < wide.size(); ++k)
          wide[k] = rt::halfToFloat(hp[k]);
        Tensor floatPooled = pool(rt::makeTensor<float>(DType::Float32, dims, wide), 1);
        Tensor expected = toHalf(floatPooled);
        // The float path itself against each plane pooled from its first value to its last.
        const int64_t planes = dims[0] * dims[1], size = dims[2] * dims[3];
        ASSERT_EQ(static_cast<int64_t>(floatPooled.elementCount()), planes) << what;
        const float* fp = reinterpret_cast<const float*>(floatPooled.data());
        const bool max = std::string(op) == "GlobalMaxPool";
        for (int64_t pl = 0; pl < planes; ++pl) {
          float acc = max ? -std::numeric_limits<float>::infinity() : 0.0f;
          // A sum keeps the first NaN it meets or makes.
          for (int64_t i = 0; i < size; ++i) {
            const float v = wide[static_cast<size_t>(pl * size + i)];
            acc = max ? std::max(acc, v) : std::isnan(acc) ? acc : acc + v;
          }
          if (!max) acc /= static_cast<float>(size);
          ASSERT_EQ(std::memcmp(&acc, &fp[pl], 4), 0) << what << " plane " << pl;
        }
        for (int threads : {1, 2}) {
          Tensor got = pool(xh, threads);
          ASSERT_EQ(got.dtype(), DType::Float16) << what;
          expectSameBytes(expected, got, what + ", threads " + std::to_string(threads));
        }
      }
    }
}

// A float16 SE block as PP-OCR's LCNet has it: x -> depthwise 3x3 Conv -> Relu "r" ->
// GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv -> HardSigmoid "hs" -> Mul(r, hs) -> 1x1 Conv.
// The Mul (one scale per channel) hands its result widened to the last Conv, which rounds in the
// same pass (binaryScalarHalves); the bytes must be those of the nodes run one by one, where the
// Mul writes float16 and the Conv widens it. With `scaleFirst` the Mul reads Mul(hs, r).
ChainModel halfSeModel(bool scaleFirst) {
  ChainModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  Value* x = asHalf(g.addValue("x"));
  g.addInput(x);
  m.feeds["x"] = rt::RtValue::ofTensor(toHalf(floats({1, 24, 6, 37}, 81)));
  auto conv = [&](Value* in, int64_t channels, int64_t filters, uint32_t seed,
                  const std::string& out, int64_t k, int64_t group) {
    return asHalf(appendHalfConv(g, in, channels, filters, seed, out, k, group));
  };
  Value* dw = conv(x, 24, 24, 82, "dw", 3, 24);
  Value* r = asHalf(g.appendNode("Relu", {dw}, {"r"})->output(0));
  Value* p = asHalf(g.appendNode("GlobalAveragePool", {r}, {"p"})->output(0));
  Value* s1 = conv(p, 24, 6, 84, "s1", 1, 1);
  Value* r1 = asHalf(g.appendNode("Relu", {s1}, {"r1"})->output(0));
  Value* s2 = conv(r1, 6, 24, 86, "s2", 1, 1);
  Node* hsNode = g.appendNode("HardSigmoid", {s2}, {"hs"});
  hsNode->setAttribute("alpha", Attribute::ofFloat(0.2f));
  hsNode->setAttribute("beta", Attribute::ofFloat(0.5f));
  Value* hs = asHalf(hsNode->output(0));
  Value* mul =
      asHalf(g.appendNode("Mul", {scaleFirst ? hs : r, scaleFirst ? r : hs}, {"m"})->output(0));
  g.addOutput(conv(mul, 24, 16, 88, "pw", 1, 1));
  return m;
}

TEST(ConvFusion, HalfSeBlockHandOffEqualsNodesOneByOne) {
  for (bool scaleFirst : {false, true}) {
    ChainModel m = halfSeModel(scaleFirst);
    const Graph& g = *m.model.graph;
    auto plan = rt::planFusion(g, 17, {});
    ASSERT_TRUE(plan);
    auto [handoff, chain, index] = byOutputName(g, *plan);
    EXPECT_EQ(handoff["m"], index["pw"]);
    for (int threads : {1, 2}) {
      const std::string what = std::string(scaleFirst ? "Mul(hs, r)" : "Mul(r, hs)") +
                               ", threads " + std::to_string(threads);
      rt::RunResult fused = fusedHalfEqualsPlain(m, threads, what, true);
      EXPECT_EQ(calls(fused, "Mul"), 1u) << what;
    }
  }
}

} // namespace
