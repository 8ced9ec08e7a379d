// Float16 data kept float16 on its way to float kernels: MaxPool and AveragePool pool float16
// plane by plane, MatMul narrows its products over the pool, DynamicQuantizeLinear widens float16
// a block at a time, and a Cast to float32 that only a DynamicQuantizeLinear reads hands its
// float16 input on (FusionPlan::passHalf). Each gives the bytes of the whole-tensor float32 path,
// at one and two threads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "run_model.h"
#include "runtime/kernels/thread_pool.h"

using namespace kiln;

namespace {

using Attrs = std::vector<std::pair<std::string, Attribute>>;

// Runs one node on `x` (an initializer) and returns its outputs; more than one thread splits
// every kernel whatever its size.
std::vector<Tensor> runNode(const std::string& op, const Tensor& x, const Attrs& attrs,
                            size_t outputs, int threads) {
  rt::pool::setSplitAlways(threads > 1);
  std::vector<Tensor> out = kiln::testing::runNode(op, {{"x", x}}, attrs, outputs, 17, threads);
  rt::pool::setSplitAlways(false);
  return out;
}

void expectSameBytes(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  ASSERT_EQ(a.dims(), b.dims()) << what;
  ASSERT_EQ(a.byteSize(), b.byteSize()) << what;
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.byteSize())) << what;
}

// `count` float16 values in [-6, 6) with -0, ±65504 and (with `nan`) NaN scattered in.
std::vector<uint16_t> halves(int64_t count, uint32_t seed, bool nan = false) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> value(-6.0f, 6.0f);
  const float specials[] = {-0.0f, 65504.0f, -65504.0f, 0x1p-24f,
                            nan ? std::numeric_limits<float>::quiet_NaN() : 0.0f};
  std::vector<uint16_t> h(static_cast<size_t>(count));
  for (uint16_t& v : h)
    v = rt::floatToHalf(rng() % 11 == 0 ? specials[rng() % std::size(specials)] : value(rng));
  return h;
}

Tensor widened(const std::vector<uint16_t>& h, std::vector<int64_t> dims) {
  std::vector<float> f(h.size());
  for (size_t i = 0; i < h.size(); ++i)
    f[i] = rt::halfToFloat(h[i]);
  return rt::makeTensor<float>(DType::Float32, std::move(dims), f);
}

// `op` on float16 planes `h` (dims) at 1 and 2 threads against the same op on the widened values
// at 1 thread, narrowed: the same bytes.
void expectHalfPoolIsWidenedNarrowed(const std::string& op, const std::string& what,
                                     const std::vector<int64_t>& dims,
                                     const std::vector<uint16_t>& h, const Attrs& attrs) {
  auto wide = runNode(op, widened(h, dims), attrs, 1, 1);
  ASSERT_EQ(wide.size(), 1u) << what;
  std::vector<uint16_t> want(wide[0].elementCount());
  const float* w = reinterpret_cast<const float*>(wide[0].data());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = rt::floatToHalf(w[i]);
  const Tensor expected = rt::makeTensor<uint16_t>(DType::Float16, wide[0].dims(), want);
  for (int threads : {1, 2}) {
    auto narrow = runNode(op, rt::makeTensor<uint16_t>(DType::Float16, dims, h), attrs, 1, threads);
    ASSERT_EQ(narrow.size(), 1u) << what;
    expectSameBytes(expected, narrow[0], what + ", threads " + std::to_string(threads));
  }
}

// Float16 MaxPool (pooled plane by plane) against float32 MaxPool on the widened values, narrowed.
TEST(HalfPass, MaxPoolFloat16PlanesMatchFloat32) {
  struct Case {
    const char* what;
    int64_t planes, h, w;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil;
  };
  const Case cases[] = {
      {"2x2 stride 2", 6, 16, 20, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0},
      {"2x2 stride 2 ceil, odd sides", 5, 15, 17, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      {"3x3 stride 1 padded", 4, 9, 13, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0},
      {"3x3 stride 2 padded dilated", 3, 21, 18, {3, 3}, {2, 2}, {2, 1, 2, 1}, {2, 2}, 1},
      {"1x5 one plane", 1, 7, 30, {1, 5}, {1, 3}, {0, 2, 0, 2}, {1, 1}, 0},
      // Wide rows (a plane bigger than a cache).
      {"2x2 wide rows", 3, 51, 600, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1},
      {"3x3 dilated wide rows", 2, 40, 500, {3, 3}, {1, 2}, {2, 1, 2, 1}, {2, 2}, 0},
      {"3x3 very wide rows", 2, 9, 1500, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1},
      // Many small planes, pooled a group at a time, the last group short (PP-OCR cls's 2x96).
      {"2x2 stride 2, 203 small planes", 203, 2, 96, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0},
      {"3x3 padded, 77 tiny planes", 77, 5, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1},
  };
  for (const Case& c : cases) {
    const std::vector<int64_t> dims = {1, c.planes, c.h, c.w};
    const std::vector<uint16_t> h = halves(c.planes * c.h * c.w, 31);
    const Attrs attrs = {{"kernel_shape", Attribute::ofInts(c.kernel)},
                         {"strides", Attribute::ofInts(c.strides)},
                         {"pads", Attribute::ofInts(c.pads)},
                         {"dilations", Attribute::ofInts(c.dilations)},
                         {"ceil_mode", Attribute::ofInt(c.ceil)}};
    expectHalfPoolIsWidenedNarrowed("MaxPool", c.what, dims, h, attrs);
  }
}

// Float16 AveragePool (2-D, pooled plane by plane) against float32 AveragePool on the widened
// values, narrowed: padding counted and not, ceil mode, dilations, sums past 65504.
TEST(HalfPass, AveragePoolFloat16PlanesMatchFloat32) {
  struct Case {
    const char* what;
    int64_t planes, h, w;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil, countPad;
  };
  const Case cases[] = {
      // PP-OCR rec's neck: [480, 3, 80] pooled 3x2 by 3x2.
      {"3x2 stride 3x2", 24, 3, 80, {3, 2}, {3, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
      {"2x2 stride 2 ceil, odd sides", 5, 15, 17, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0},
      {"3x3 stride 1 padded", 4, 9, 13, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 0},
      {"3x3 stride 1 padded, pads counted", 4, 9, 13, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1},
      {"3x3 stride 2 padded dilated ceil", 3, 21, 18, {3, 3}, {2, 2}, {2, 1, 2, 1}, {2, 2}, 1, 1},
      {"1x5 one plane", 1, 7, 30, {1, 5}, {1, 3}, {0, 2, 0, 2}, {1, 1}, 0, 0},
      {"3x3 very wide rows", 2, 9, 1500, {3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, 1, 0},
      {"2x2 stride 2, 203 small planes", 203, 2, 96, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
      {"3x3 padded, 77 tiny planes", 77, 5, 3, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1, 1},
  };
  for (const Case& c : cases) {
    const std::vector<int64_t> dims = {1, c.planes, c.h, c.w};
    const std::vector<uint16_t> h = halves(c.planes * c.h * c.w, 37);
    const Attrs attrs = {{"kernel_shape", Attribute::ofInts(c.kernel)},
                         {"strides", Attribute::ofInts(c.strides)},
                         {"pads", Attribute::ofInts(c.pads)},
                         {"dilations", Attribute::ofInts(c.dilations)},
                         {"ceil_mode", Attribute::ofInt(c.ceil)},
                         {"count_include_pad", Attribute::ofInt(c.countPad)}};
    expectHalfPoolIsWidenedNarrowed("AveragePool", c.what, dims, h, attrs);
  }
}

// Float16 MatMul (products narrowed split over the pool) against float32 MatMul on the widened
// values, narrowed: one tall GEMM, batched with a broadcast B, and a vector times a matrix.
TEST(HalfPass, MatMulFloat16EqualsFloat32Narrowed) {
  struct Case {
    const char* what;
    std::vector<int64_t> a, b;
  };
  const Case cases[] = {
      {"[1, 40, 120] x [120, 333]", {1, 40, 120}, {120, 333}},
      {"[2, 3, 5, 7] x [3, 7, 9]", {2, 3, 5, 7}, {3, 7, 9}},
      {"[64] x [64, 4099]", {64}, {64, 4099}},
  };
  for (const Case& c : cases) {
    auto count = [](const std::vector<int64_t>& d) {
      int64_t n = 1;
      for (int64_t v : d)
        n *= v;
      return n;
    };
    // Values in [-6, 6) with specials; sums of 64 to 120 products reach past 65504.
    const std::vector<uint16_t> ha = halves(count(c.a), 43, true), hb = halves(count(c.b), 47);
    auto wide = kiln::testing::runNode("MatMul", {{"a", widened(ha, c.a)}, {"b", widened(hb, c.b)}},
                                       {}, 1, 17, 1);
    ASSERT_EQ(wide.size(), 1u) << c.what;
    std::vector<uint16_t> want(wide[0].elementCount());
    const float* w = reinterpret_cast<const float*>(wide[0].data());
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = rt::floatToHalf(w[i]);
    const Tensor expected = rt::makeTensor<uint16_t>(DType::Float16, wide[0].dims(), want);
    for (int threads : {1, 2}) {
      rt::pool::setSplitAlways(threads > 1);
      auto narrow =
          kiln::testing::runNode("MatMul",
                                 {{"a", rt::makeTensor<uint16_t>(DType::Float16, c.a, ha)},
                                  {"b", rt::makeTensor<uint16_t>(DType::Float16, c.b, hb)}},
                                 {}, 1, 17, threads);
      rt::pool::setSplitAlways(false);
      ASSERT_EQ(narrow.size(), 1u) << c.what;
      expectSameBytes(expected, narrow[0],
                      std::string(c.what) + ", threads " + std::to_string(threads));
    }
  }
}

// DynamicQuantizeLinear on float16 (widened block by block) against float32 on the widened
// values: scale, zero point and codes, across block and split boundaries.
TEST(HalfPass, DynamicQuantizeFloat16EqualsWidened) {
  for (int64_t n : {int64_t{1}, int64_t{9}, int64_t{2048}, int64_t{2049}, int64_t{40001}})
    for (bool nan : {false, true}) {
      const std::vector<uint16_t> h = halves(n, static_cast<uint32_t>(n), nan);
      std::vector<uint16_t> positive = h;
      for (uint16_t& v : positive)
        v &= 0x7fff; // all >= 0: zero point 0
      for (const auto& data : {h, positive}) {
        auto wide = runNode("DynamicQuantizeLinear", widened(data, {n}), {}, 3, 1);
        ASSERT_EQ(wide.size(), 3u);
        for (int threads : {1, 2}) {
          const std::string what = "n " + std::to_string(n) + (nan ? " with NaN" : "") +
                                   ", threads " + std::to_string(threads);
          auto narrow =
              runNode("DynamicQuantizeLinear", rt::makeTensor<uint16_t>(DType::Float16, {n}, data),
                      {}, 3, threads);
          ASSERT_EQ(narrow.size(), 3u) << what;
          for (size_t i = 0; i < 3; ++i)
            expectSameBytes(wide[i], narrow[i], what + ", output " + std::to_string(i));
        }
      }
    }
}

// x (float16 input) -> Cast(float32) "xf" -> DynamicQuantizeLinear -> q, s, z. With `alsoRelu`
// xf is read by a Relu too; with `xfOutput` it is a graph output.
struct CastModel {
  Model model;
  std::map<std::string, rt::RtValue> feeds;
};

CastModel castModel(bool alsoRelu, bool xfOutput) {
  CastModel m;
  m.model.opsets = {{"", 17}};
  m.model.graph = std::make_shared<Graph>("g");
  Graph& g = *m.model.graph;
  const std::vector<int64_t> dims = {1, 3, 41, 37};
  Value* x = g.addValue("x");
  g.addInput(x);
  m.feeds["x"] =
      rt::RtValue::ofTensor(rt::makeTensor<uint16_t>(DType::Float16, dims, halves(3 * 41 * 37, 5)));
  Node* cast = g.appendNode("Cast", {x}, {"xf"});
  cast->setAttribute("to", Attribute::ofInt(1));
  Node* dq = g.appendNode("DynamicQuantizeLinear", {cast->output(0)}, {"q", "s", "z"});
  for (size_t i = 0; i < 3; ++i)
    g.addOutput(dq->output(i));
  if (alsoRelu) g.addOutput(g.appendNode("Relu", {cast->output(0)}, {"r"})->output(0));
  if (xfOutput) g.addOutput(cast->output(0));
  return m;
}

rt::RunResult runModel(const CastModel& m, bool fuse, int threads,
                       std::vector<std::string> capture = {}) {
  rt::ExecutorOptions options;
  options.fuse = fuse;
  options.threads = threads;
  options.profile = true;
  options.captureNames = std::move(capture);
  rt::pool::setSplitAlways(threads > 1);
  rt::Executor executor(m.model, options);
  auto result = executor.run(m.feeds);
  EXPECT_TRUE(result) << result.status().toString();
  // A second run reuses the plan and the pooled buffers.
  result = executor.run(m.feeds);
  EXPECT_TRUE(result) << result.status().toString();
  rt::pool::setSplitAlways(false);
  return result ? result.take() : rt::RunResult{};
}

uint64_t calls(const rt::RunResult& r, const std::string& op) {
  auto it = r.profile.find(op);
  return it == r.profile.end() ? 0 : it->second.calls;
}

TEST(HalfPass, CastReadOnlyByDynamicQuantizeHandsOnFloat16) {
  for (bool alsoRelu : {false, true})
    for (bool xfOutput : {false, true})
      for (bool captured : {false, true}) {
        const std::string what = std::string(alsoRelu ? "xf also read by Relu" : "xf read once") +
                                 (xfOutput ? ", xf an output" : "") +
                                 (captured ? ", xf captured" : "");
        const CastModel m = castModel(alsoRelu, xfOutput);
        std::vector<std::string> capture;
        if (captured) capture.push_back("xf");
        const rt::RunResult plain = runModel(m, false, 1, capture);
        const bool passes = !alsoRelu && !xfOutput && !captured;
        for (int threads : {1, 2}) {
          const rt::RunResult fused = runModel(m, true, threads, capture);
          ASSERT_EQ(plain.outputs.size(), fused.outputs.size()) << what;
          for (size_t i = 0; i < plain.outputs.size(); ++i)
            expectSameBytes(plain.outputs[i].tensor, fused.outputs[i].tensor,
                            what + ", output " + std::to_string(i));
          // The profile is the second run's.
          EXPECT_EQ(calls(plain, "Cast"), 1u) << what;
          EXPECT_EQ(calls(fused, "Cast"), passes ? 0u : 1u) << what;
          EXPECT_EQ(calls(fused, "DynamicQuantizeLinear"), 1u) << what;
          if (captured) {
            auto it = fused.captured.find("xf");
            ASSERT_NE(it, fused.captured.end()) << what;
            EXPECT_EQ(it->second.tensor.dtype(), DType::Float32) << what;
          }
        }
      }
}

// Float16 Add/Sub/Mul/Div of a tensor by one value per run of it (an SE block's per-channel scale,
// a scalar), the small operand on either side: widened, computed and narrowed in one pass
// (binaryScalarHalves), the bytes of the float32 op on the widened values, narrowed, at one and two
// threads, for runs the vector loop leaves a tail of and NaNs among the values.
TEST(HalfPass, BinaryByOneValuePerRunMatchesFloat32) {
  struct Case {
    std::vector<int64_t> wide, small;
  };
  const Case cases[] = {{{1, 5, 1, 37}, {1, 5, 1, 1}},
                        {{1, 8, 12, 96}, {1, 8, 1, 1}},
                        {{2, 3, 4, 5}, {2, 3, 1, 1}},
                        {{1, 6, 3, 96}, {6, 1, 1}},
                        {{1, 4, 7, 9}, {1}}};
  for (const char* op : {"Mul", "Div", "Sub", "Add"}) {
    for (const Case& c : cases) {
      int64_t n = 1, ns = 1;
      for (int64_t d : c.wide)
        n *= d;
      for (int64_t d : c.small)
        ns *= d;
      const std::vector<uint16_t> w = halves(n, static_cast<uint32_t>(n), true);
      const std::vector<uint16_t> sm = halves(ns, static_cast<uint32_t>(ns) + 7, true);
      for (bool smallFirst : {false, true}) {
        const std::string what = std::string(op) + " " + std::to_string(n) + " by " +
                                 std::to_string(ns) + (smallFirst ? ", small first" : "");
        auto run = [&](const Tensor& a, const Tensor& b, int threads) {
          rt::pool::setSplitAlways(threads > 1);
          auto out = kiln::testing::runNode(
              op, {{"a", smallFirst ? b : a}, {"b", smallFirst ? a : b}}, {}, 1, 17, threads);
          rt::pool::setSplitAlways(false);
          return out;
        };
        auto wide = run(widened(w, c.wide), widened(sm, c.small), 1);
        ASSERT_EQ(wide.size(), 1u) << what;
        std::vector<uint16_t> want(wide[0].elementCount());
        const float* wf = reinterpret_cast<const float*>(wide[0].data());
        for (size_t i = 0; i < want.size(); ++i)
          want[i] = rt::floatToHalf(wf[i]);
        const Tensor expected = rt::makeTensor<uint16_t>(DType::Float16, wide[0].dims(), want);
        for (int threads : {1, 2}) {
          auto narrow = run(rt::makeTensor<uint16_t>(DType::Float16, c.wide, w),
                            rt::makeTensor<uint16_t>(DType::Float16, c.small, sm), threads);
          ASSERT_EQ(narrow.size(), 1u) << what;
          expectSameBytes(expected, narrow[0], what + ", threads " + std::to_string(threads));
        }
      }
    }
  }
}

} // namespace
