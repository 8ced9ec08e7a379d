// NN kernels against naive references and against each other, on the paths the ONNX backend
// cases leave out: groups with dilations, ConvTranspose groups, batched MatMul broadcast, Gemm
// bias broadcast, recurrent directions, layouts and sequence lengths, fp16.
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

using Arg = kiln::testing::NodeArg;
using kiln::testing::runNode;

Tensor floats(std::vector<int64_t> dims, const std::vector<float>& v) {
  return rt::makeTensor<float>(DType::Float32, std::move(dims), v);
}

void expectNear(const Tensor& t, const std::vector<float>& expected, float tol = 1e-4f) {
  std::vector<float> got = rt::toFloatVector(t);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expected[i], tol * (1.0f + std::fabs(expected[i]))) << "element " << i;
}

// Direct 2-D convolution.
std::vector<float> naiveConv2d(const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>& b, int64_t n, int64_t c, int64_t h,
                               int64_t wd, int64_t m, int64_t kh, int64_t kw, int64_t group,
                               int64_t sh, int64_t sw, int64_t dh, int64_t dw, int64_t pt,
                               int64_t pl, int64_t oh, int64_t ow) {
  std::vector<float> y(static_cast<size_t>(n * m * oh * ow));
  const int64_t cg = c / group, mg = m / group;
  for (int64_t bn = 0; bn < n; ++bn)
    for (int64_t om = 0; om < m; ++om)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          double acc = b.empty() ? 0.0 : b[static_cast<size_t>(om)];
          const int64_t g = om / mg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < kh; ++ky)
              for (int64_t kx = 0; kx < kw; ++kx) {
                const int64_t iy = oy * sh + ky * dh - pt, ix = ox * sw + kx * dw - pl;
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += x[static_cast<size_t>(((bn * c + g * cg + ic) * h + iy) * wd + ix)] *
                       w[static_cast<size_t>(((om * cg + ic) * kh + ky) * kw + kx)];
              }
          y[static_cast<size_t>(((bn * m + om) * oh + oy) * ow + ox)] = static_cast<float>(acc);
        }
  return y;
}

TEST(NnKernels, ConvGroupsDilationsStridesPads) {
  const int64_t n = 2, c = 6, h = 9, wd = 8, m = 4, kh = 3, kw = 2, group = 2;
  auto x = kiln::testing::randomFloats(static_cast<size_t>(n * c * h * wd), 1);
  auto w = kiln::testing::randomFloats(static_cast<size_t>(m * (c / group) * kh * kw), 2);
  auto b = kiln::testing::randomFloats(static_cast<size_t>(m), 3);
  // pads [top, left, bottom, right] = [1, 2, 0, 1], strides [2, 1], dilations [2, 3]
  const int64_t oh = (h + 1 + 0 - ((kh - 1) * 2 + 1)) / 2 + 1;
  const int64_t ow = (wd + 2 + 1 - ((kw - 1) * 3 + 1)) / 1 + 1;
  auto out = runNode("Conv",
                     {{"x", floats({n, c, h, wd}, x)},
                      {"w", floats({m, c / group, kh, kw}, w)},
                      {"b", floats({m}, b)}},
                     {{"group", Attribute::ofInt(group)},
                      {"strides", Attribute::ofInts({2, 1})},
                      {"dilations", Attribute::ofInts({2, 3})},
                      {"pads", Attribute::ofInts({1, 2, 0, 1})}},
                     1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, m, oh, ow}));
  expectNear(out[0], naiveConv2d(x, w, b, n, c, h, wd, m, kh, kw, group, 2, 1, 2, 3, 1, 2, oh, ow));
}

// Group 1 takes the full-kernel path (oneDNN where built in) rather than per-group GEMMs:
// asymmetric pads, strides and dilations, with and without bias.
TEST(NnKernels, ConvGroupOneDilationsStridesPads) {
  const int64_t n = 2, c = 5, h = 11, wd = 9, m = 7, kh = 3, kw = 2;
  auto x = kiln::testing::randomFloats(static_cast<size_t>(n * c * h * wd), 11);
  auto w = kiln::testing::randomFloats(static_cast<size_t>(m * c * kh * kw), 12);
  auto b = kiln::testing::randomFloats(static_cast<size_t>(m), 13);
  const int64_t oh = (h + 1 + 0 - ((kh - 1) * 2 + 1)) / 2 + 1;
  const int64_t ow = (wd + 2 + 1 - ((kw - 1) * 3 + 1)) / 1 + 1;
  const std::vector<std::pair<std::string, Attribute>> attrs = {
      {"strides", Attribute::ofInts({2, 1})},
      {"dilations", Attribute::ofInts({2, 3})},
      {"pads", Attribute::ofInts({1, 2, 0, 1})}};
  auto out = runNode("Conv",
                     {{"x", floats({n, c, h, wd}, x)},
                      {"w", floats({m, c, kh, kw}, w)},
                      {"b", floats({m}, b)}},
                     attrs, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, m, oh, ow}));
  expectNear(out[0], naiveConv2d(x, w, b, n, c, h, wd, m, kh, kw, 1, 2, 1, 2, 3, 1, 2, oh, ow));
  auto noBias = runNode("Conv", {{"x", floats({n, c, h, wd}, x)}, {"w", floats({m, c, kh, kw}, w)}},
                        attrs, 1);
  ASSERT_EQ(noBias.size(), 1u);
  expectNear(noBias[0], naiveConv2d(x, w, std::vector<float>(static_cast<size_t>(m), 0.0f), n, c,
                                    h, wd, m, kh, kw, 1, 2, 1, 2, 3, 1, 2, oh, ow));
}

// Elementwise fast paths (same shape, scalar either side, per-channel either side) against the
// definition, on float32.
TEST(NnKernels, BinaryFloatBroadcastPaths) {
  const std::vector<int64_t> full = {2, 3, 4, 5};
  auto a = kiln::testing::randomFloats(120, 21);
  auto b = kiln::testing::randomFloats(120, 22);
  auto ch = kiln::testing::randomFloats(3, 23);
  const float s = 0.75f;
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    auto f = [op](float u, float v) {
      const std::string o = op;
      return o == "Add" ? u + v : o == "Sub" ? u - v : o == "Mul" ? u * v : u / v;
    };
    std::vector<float> same(120), right(120), left(120), chanR(120), chanL(120);
    for (size_t i = 0; i < 120; ++i) {
      const float c = ch[(i / 20) % 3];
      same[i] = f(a[i], b[i]);
      right[i] = f(a[i], s);
      left[i] = f(s, b[i]);
      chanR[i] = f(a[i], c);
      chanL[i] = f(c, b[i]);
    }
    auto run = [&](const Tensor& x, const Tensor& y) { return runNode(op, {{"a", x}, {"b", y}}, {}, 1); };
    expectNear(run(floats(full, a), floats(full, b))[0], same, 0.0f);
    expectNear(run(floats(full, a), floats({}, {s}))[0], right, 0.0f);
    expectNear(run(floats({1}, {s}), floats(full, b))[0], left, 0.0f);
    expectNear(run(floats(full, a), floats({3, 1, 1}, ch))[0], chanR, 0.0f);
    expectNear(run(floats({1, 3, 1, 1}, ch), floats(full, b))[0], chanL, 0.0f);
  }
}

// The float16 fast paths (same shape, scalar, per-channel block and trailing suffix, either side)
// round each element as the definition does: computed in float from the widened operands, rounded
// once. The sizes make the 1024-element blocks cross channel and suffix boundaries.
TEST(NnKernels, BinaryHalfBroadcastPaths) {
  const std::vector<int64_t> full = {2, 3, 40, 50};
  const size_t n = 2 * 3 * 40 * 50, plane = 40 * 50;
  auto halves = [](const std::vector<float>& v) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i)
      h[i] = rt::floatToHalf(4.0f * v[i]);
    return h;
  };
  auto half = [](std::vector<int64_t> dims, const std::vector<uint16_t>& v) {
    return rt::makeTensor<uint16_t>(DType::Float16, std::move(dims), v);
  };
  const auto a = halves(kiln::testing::randomFloats(n, 41));
  const auto b = halves(kiln::testing::randomFloats(n, 42));
  const auto ch = halves(kiln::testing::randomFloats(3, 43));
  const auto row = halves(kiln::testing::randomFloats(50, 44));
  const std::vector<uint16_t> s = {rt::floatToHalf(-0.625f)};
  for (const char* op : {"Add", "Sub", "Mul", "Div"}) {
    auto f = [op](uint16_t u, uint16_t v) {
      const std::string o = op;
      const float x = rt::halfToFloat(u), y = rt::halfToFloat(v);
      return rt::floatToHalf(o == "Add" ? x + y : o == "Sub" ? x - y : o == "Mul" ? x * y : x / y);
    };
    auto run = [&](const Tensor& x, const Tensor& y) {
      auto out = runNode(op, {{"a", x}, {"b", y}}, {}, 1);
      EXPECT_EQ(out.size(), 1u);
      EXPECT_EQ(out[0].dims(), full);
      return std::vector<uint16_t>(reinterpret_cast<const uint16_t*>(out[0].data()),
                                   reinterpret_cast<const uint16_t*>(out[0].data()) + n);
    };
    std::vector<uint16_t> want[8];
    for (size_t i = 0; i < n; ++i) {
      const uint16_t c = ch[(i / plane) % 3], r = row[i % 50];
      want[0].push_back(f(a[i], b[i]));
      want[1].push_back(f(a[i], s[0]));
      want[2].push_back(f(s[0], b[i]));
      want[3].push_back(f(a[i], c));
      want[4].push_back(f(c, b[i]));
      want[5].push_back(f(a[i], r));
      want[6].push_back(f(r, b[i]));
    }
    EXPECT_EQ(run(half(full, a), half(full, b)), want[0]) << op;
    EXPECT_EQ(run(half(full, a), half({}, s)), want[1]) << op;
    EXPECT_EQ(run(half({1, 1}, s), half(full, b)), want[2]) << op;
    EXPECT_EQ(run(half(full, a), half({3, 1, 1}, ch)), want[3]) << op;
    EXPECT_EQ(run(half({1, 3, 1, 1}, ch), half(full, b)), want[4]) << op;
    EXPECT_EQ(run(half(full, a), half({50}, row)), want[5]) << op;
    EXPECT_EQ(run(half({1, 1, 50}, row), half(full, b)), want[6]) << op;
  }
}

// Conv (GEMM and full-kernel paths), depthwise conv, elementwise and Resize give the same bytes
// with one thread and with two.
TEST(NnKernels, OutputsDoNotDependOnThreadCount) {
  auto x = kiln::testing::randomFloats(2 * 16 * 48 * 48, 31);
  auto w3 = kiln::testing::randomFloats(32 * 16 * 9, 32);
  auto w1 = kiln::testing::randomFloats(32 * 16, 33);
  auto wd = kiln::testing::randomFloats(16 * 9, 34);
  auto b = kiln::testing::randomFloats(32, 35);
  const Tensor tx = floats({2, 16, 48, 48}, x);
  auto both = [&](const std::string& op, const std::vector<Arg>& args,
                  const std::vector<std::pair<std::string, Attribute>>& attrs) {
    auto one = runNode(op, args, attrs, 1, 17, 1);
    auto two = runNode(op, args, attrs, 1, 17, 2);
    ASSERT_EQ(one.size(), 1u);
    ASSERT_EQ(two.size(), 1u);
    ASSERT_EQ(one[0].byteSize(), two[0].byteSize());
    EXPECT_EQ(0, std::memcmp(one[0].data(), two[0].data(), one[0].byteSize()))
        << op << " with " << args.size() << " inputs, " << attrs.size() << " attributes";
  };
  const Attribute pads = Attribute::ofInts({1, 1, 1, 1});
  both("Conv", {{"x", tx}, {"w", floats({32, 16, 3, 3}, w3)}, {"b", floats({32}, b)}},
       {{"pads", pads}});
  both("Conv", {{"x", tx}, {"w", floats({32, 16, 1, 1}, w1)}}, {});
  both("Conv", {{"x", tx}, {"w", floats({16, 1, 3, 3}, wd)}},
       {{"pads", pads}, {"group", Attribute::ofInt(16)}});
  // Depthwise 5x5 stride 2 (vector loops over a phase-split plane); fused chains: conv_fusion_test.
  auto wd5 = kiln::testing::randomFloats(16 * 25, 36);
  both("Conv", {{"x", tx}, {"w", floats({16, 1, 5, 5}, wd5)}, {"b", floats({16}, b)}},
       {{"pads", Attribute::ofInts({2, 2, 2, 2})}, {"group", Attribute::ofInt(16)},
        {"strides", Attribute::ofInts({2, 2})}});
  both("Add", {{"x", tx}, {"y", floats({16, 1, 1}, std::vector<float>(b.begin(), b.begin() + 16))}},
       {});
  both("HardSwish", {{"x", tx}}, {});
  both("Mul", {{"x", tx}, {"y", tx}}, {});
  both("Div", {{"x", tx}, {"y", floats({}, {3.0f})}}, {});
}

TEST(NnKernels, ConvDepthwiseSameLower) {
  const int64_t n = 1, c = 3, h = 5, wd = 6, m = 6, k = 4;
  auto x = kiln::testing::randomFloats(static_cast<size_t>(n * c * h * wd), 4);
  auto w = kiln::testing::randomFloats(static_cast<size_t>(m * k * k), 5);
  auto out = runNode("Conv", {{"x", floats({n, c, h, wd}, x)}, {"w", floats({m, 1, k, k}, w)}},
                     {{"group", Attribute::ofInt(c)},
                      {"auto_pad", Attribute::ofString("SAME_LOWER")},
                      {"strides", Attribute::ofInts({2, 2})}},
                     1);
  ASSERT_EQ(out.size(), 1u);
  // out = ceil(in / 2); total pad = (out-1)*2 + 4 - in, the odd unit at the beginning.
  const int64_t oh = 3, ow = 3, padH = (oh - 1) * 2 + k - h, padW = (ow - 1) * 2 + k - wd;
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, m, oh, ow}));
  expectNear(out[0], naiveConv2d(x, w, {}, n, c, h, wd, m, k, k, c, 2, 2, 1, 1, padH - padH / 2,
                                 padW - padW / 2, oh, ow));
}

TEST(NnKernels, Conv1dAnd3dMatchConv2d) {
  // A 1-D conv is a 2-D conv with a unit height; a 3-D conv with unit depth likewise.
  const int64_t n = 2, c = 4, len = 11, m = 3, k = 3;
  auto x = kiln::testing::randomFloats(static_cast<size_t>(n * c * len), 6);
  auto w = kiln::testing::randomFloats(static_cast<size_t>(m * c * k), 7);
  auto y1 =
      runNode("Conv", {{"x", floats({n, c, len}, x)}, {"w", floats({m, c, k}, w)}},
              {{"pads", Attribute::ofInts({2, 1})}, {"dilations", Attribute::ofInts({2})}}, 1);
  auto y2 = runNode(
      "Conv", {{"x", floats({n, c, 1, len}, x)}, {"w", floats({m, c, 1, k}, w)}},
      {{"pads", Attribute::ofInts({0, 2, 0, 1})}, {"dilations", Attribute::ofInts({1, 2})}}, 1);
  auto y3 =
      runNode("Conv", {{"x", floats({n, c, 1, 1, len}, x)}, {"w", floats({m, c, 1, 1, k}, w)}},
              {{"pads", Attribute::ofInts({0, 0, 2, 0, 0, 1})},
               {"dilations", Attribute::ofInts({1, 1, 2})}},
              1);
  ASSERT_EQ(y1.size(), 1u);
  ASSERT_EQ(y2.size(), 1u);
  ASSERT_EQ(y3.size(), 1u);
  expectNear(y1[0], rt::toFloatVector(y2[0]));
  expectNear(y3[0], rt::toFloatVector(y2[0]));
}

TEST(NnKernels, ConvTransposeGroupsDilations) {
  const int64_t n = 1, c = 4, h = 3, wd = 4, mg = 2, k = 3, group = 2, s = 2, d = 2, pad = 1;
  auto x = kiln::testing::randomFloats(static_cast<size_t>(n * c * h * wd), 8);
  auto w = kiln::testing::randomFloats(static_cast<size_t>(c * mg * k * k), 9);
  auto out =
      runNode("ConvTranspose", {{"x", floats({n, c, h, wd}, x)}, {"w", floats({c, mg, k, k}, w)}},
              {{"group", Attribute::ofInt(group)},
               {"strides", Attribute::ofInts({s, s})},
               {"dilations", Attribute::ofInts({d, d})},
               {"pads", Attribute::ofInts({pad, pad, pad, pad})},
               {"output_padding", Attribute::ofInts({1, 0})}},
              1);
  ASSERT_EQ(out.size(), 1u);
  const int64_t m = mg * group, ek = (k - 1) * d + 1;
  const int64_t oh = s * (h - 1) + 1 + ek - 2 * pad, ow = s * (wd - 1) + ek - 2 * pad;
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{n, m, oh, ow}));
  std::vector<float> y(static_cast<size_t>(n * m * oh * ow), 0.0f);
  const int64_t cg = c / group;
  for (int64_t ic = 0; ic < c; ++ic)
    for (int64_t iy = 0; iy < h; ++iy)
      for (int64_t ix = 0; ix < wd; ++ix)
        for (int64_t om = 0; om < mg; ++om)
          for (int64_t ky = 0; ky < k; ++ky)
            for (int64_t kx = 0; kx < k; ++kx) {
              const int64_t oy = iy * s + ky * d - pad, ox = ix * s + kx * d - pad;
              if (oy < 0 || oy >= oh || ox < 0 || ox >= ow) continue;
              const int64_t g = ic / cg;
              y[static_cast<size_t>(((g * mg + om) * oh + oy) * ow + ox)] +=
                  x[static_cast<size_t>((ic * h + iy) * wd + ix)] *
                  w[static_cast<size_t>(((ic * mg + om) * k + ky) * k + kx)];
            }
  expectNear(out[0], y);
}

TEST(NnKernels, MatMulBroadcastAndVectors) {
  auto a = kiln::testing::randomFloats(2 * 1 * 3 * 4, 10), b = kiln::testing::randomFloats(5 * 4 * 6, 11);
  auto out =
      runNode("MatMul", {{"a", floats({2, 1, 3, 4}, a)}, {"b", floats({5, 4, 6}, b)}}, {}, 1);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].dims(), (std::vector<int64_t>{2, 5, 3, 6}));
  std::vector<float> y;
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j)
      for (int r = 0; r < 3; ++r)
        for (int col = 0; col < 6; ++col) {
          double acc = 0;
          for (int p = 0; p < 4; ++p)
            acc += a[static_cast<size_t>((i * 3 + r) * 4 + p)] *
                   b[static_cast<size_t>((j * 4 + p) * 6 + col)];
          y.push_back(static_cast<float>(acc));
        }
  expectNear(out[0], y);

  auto v = kiln::testing::randomFloats(4, 12);
  auto mv = runNode("MatMul", {{"a", floats({5, 6, 4}, b)}, {"v", floats({4}, v)}}, {}, 1);
  auto vm = runNode("MatMul", {{"v", floats({4}, v)}, {"b", floats({5, 4, 6}, b)}}, {}, 1);
  ASSERT_EQ(mv.size(), 1u);
  ASSERT_EQ(vm.size(), 1u);
  EXPECT_EQ(mv[0].dims(), (std::vector<int64_t>{5, 6}));
  EXPECT_EQ(vm[0].dims(), (std::vector<int64_t>{5, 6}));
  std::vector<float> ymv, yvm;
  for (int j = 0; j < 5; ++j)
    for (int r = 0; r < 6; ++r) {
      double am = 0, ma = 0;
      for (int p = 0; p < 4; ++p) {
        am += b[static_cast<size_t>((j * 6 + r) * 4 + p)] * v[static_cast<size_t>(p)];
        ma += v[static_cast<size_t>(p)] * b[static_cast<size_t>((j * 4 + p) * 6 + r)];
      }
      ymv.push_back(static_cast<float>(am));
      yvm.push_back(static_cast<float>(ma));
    }
  expectNear(mv[0], ymv);
  expectNear(vm[0], yvm);
}

TEST(NnKernels, GemmBiasBroadcastTransposes) {
  auto a = kiln::testing::randomFloats(4 * 3, 13), b = kiln::testing::randomFloats(5 * 4, 14), c = kiln::testing::randomFloats(3, 15);
  auto out = runNode("Gemm",
                     {{"a", floats({4, 3}, a)}, {"b", floats({5, 4}, b)}, {"c", floats({3, 1}, c)}},
                     {{"transA", Attribute::ofInt(1)},
                      {"transB", Attribute::ofInt(1)},
                      {"alpha", Attribute::ofFloat(0.5f)},
                      {"beta", Attribute::ofFloat(2.0f)}},
                     1);
  ASSERT_EQ(out.size(), 1u);
  std::vector<float> y;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int p = 0; p < 4; ++p)
        acc += a[static_cast<size_t>(p * 3 + i)] * b[static_cast<size_t>(j * 4 + p)];
      y.push_back(static_cast<float>(0.5 * acc + 2.0 * c[static_cast<size_t>(i)]));
    }
  expectNear(out[0], y);
}

TEST(NnKernels, ConvFloat16MatchesFloat) {
  auto x = kiln::testing::randomFloats(1 * 2 * 5 * 5, 16), w = kiln::testing::randomFloats(3 * 2 * 3 * 3, 17);
  auto half = [](std::vector<int64_t> dims, const std::vector<float>& v) {
    std::vector<uint16_t> h;
    for (float f : v)
      h.push_back(rt::floatToHalf(f));
    return rt::makeTensor<uint16_t>(DType::Float16, std::move(dims), h);
  };
  auto y32 =
      runNode("Conv", {{"x", floats({1, 2, 5, 5}, x)}, {"w", floats({3, 2, 3, 3}, w)}}, {}, 1);
  auto y16 = runNode("Conv", {{"x", half({1, 2, 5, 5}, x)}, {"w", half({3, 2, 3, 3}, w)}}, {}, 1);
  ASSERT_EQ(y16.size(), 1u);
  EXPECT_EQ(y16[0].dtype(), DType::Float16);
  expectNear(y16[0], rt::toFloatVector(y32[0]), 1e-2f);
}

// A float16 Conv is the float32 Conv of the widened operands, rounded once: bit for bit on the
// depthwise (input widened plane by plane), 1x1 GEMM and full-kernel paths.
TEST(NnKernels, ConvFloat16IsTheFloatConvRounded) {
  struct Case {
    const char* what;
    int64_t channels, filters, k, stride, group;
  };
  const Case cases[] = {{"depthwise 3x3 stride 2", 8, 8, 3, 2, 8},
                        {"depthwise 5x5", 6, 6, 5, 1, 6},
                        {"1x1", 8, 12, 1, 1, 1},
                        {"3x3", 4, 6, 3, 1, 1}};
  for (const Case& c : cases) {
    const int64_t h = 13, wd = 17, pad = c.k / 2;
    const std::vector<int64_t> xd = {1, c.channels, h, wd},
                               wdims = {c.filters, c.channels / c.group, c.k, c.k};
    // Values a float16 holds exactly, so that both convolutions see the same operands.
    auto representable = [](std::vector<float> v) {
      for (float& f : v)
        f = rt::halfToFloat(rt::floatToHalf(f));
      return v;
    };
    auto x =
        representable(kiln::testing::randomFloats(static_cast<size_t>(h * wd * c.channels), 51));
    auto w = representable(kiln::testing::randomFloats(
        static_cast<size_t>(c.filters * c.channels / c.group * c.k * c.k), 52));
    auto b = representable(kiln::testing::randomFloats(static_cast<size_t>(c.filters), 53));
    auto half = [](std::vector<int64_t> dims, const std::vector<float>& v) {
      std::vector<uint16_t> h;
      for (float f : v)
        h.push_back(rt::floatToHalf(f));
      return rt::makeTensor<uint16_t>(DType::Float16, std::move(dims), h);
    };
    const std::vector<std::pair<std::string, Attribute>> attrs = {
        {"group", Attribute::ofInt(c.group)},
        {"strides", Attribute::ofInts({c.stride, c.stride})},
        {"pads", Attribute::ofInts({pad, pad, pad, pad})}};
    auto y32 = runNode(
        "Conv", {{"x", floats(xd, x)}, {"w", floats(wdims, w)}, {"b", floats({c.filters}, b)}},
        attrs, 1);
    auto y16 = runNode(
        "Conv", {{"x", half(xd, x)}, {"w", half(wdims, w)}, {"b", half({c.filters}, b)}}, attrs, 1);
    ASSERT_EQ(y16.size(), 1u) << c.what;
    ASSERT_EQ(y16[0].dtype(), DType::Float16) << c.what;
    ASSERT_EQ(y16[0].dims(), y32[0].dims()) << c.what;
    const float* f = reinterpret_cast<const float*>(y32[0].data());
    const uint16_t* g = reinterpret_cast<const uint16_t*>(y16[0].data());
    for (size_t i = 0; i < y16[0].elementCount(); ++i)
      ASSERT_EQ(g[i], rt::floatToHalf(f[i])) << c.what << ", element " << i;
  }
}

// A float16 Resize on the two innermost axes (computed plane by plane) gives the float16 rounding
// of the same resize computed in double on a float64 copy (the general path), bit for bit, with
// one thread and with two: linear and cubic, up and down, one axis only.
TEST(NnKernels, ResizeFloat16IsTheDoubleResizeRounded) {
  struct Case {
    const char* mode;
    const char* transform;
    std::vector<int64_t> sizes;
  };
  const Case cases[] = {{"linear", "half_pixel", {2, 3, 22, 30}},
                        {"linear", "align_corners", {2, 3, 5, 7}},
                        {"cubic", "asymmetric", {2, 3, 17, 13}},
                        {"linear", "pytorch_half_pixel", {2, 3, 9, 29}}};
  const std::vector<int64_t> xd = {2, 3, 9, 11};
  auto v = kiln::testing::randomFloats(2 * 3 * 9 * 11, 61);
  std::vector<uint16_t> h;
  std::vector<double> d;
  for (float f : v) {
    h.push_back(rt::floatToHalf(8.0f * f));
    d.push_back(static_cast<double>(rt::halfToFloat(h.back())));
  }
  for (const Case& c : cases) {
    const std::vector<std::pair<std::string, Attribute>> attrs = {
        {"mode", Attribute::ofString(c.mode)},
        {"coordinate_transformation_mode", Attribute::ofString(c.transform)}};
    const Tensor sizes = rt::makeTensor<int64_t>(DType::Int64, {4}, c.sizes);
    auto wide = runNode("Resize",
                        {{"x", rt::makeTensor<double>(DType::Float64, xd, d)},
                         {"roi", std::nullopt},
                         {"scales", std::nullopt},
                         {"sizes", sizes}},
                        attrs, 1);
    ASSERT_EQ(wide.size(), 1u) << c.mode;
    for (int threads : {1, 2}) {
      auto narrow = runNode("Resize",
                            {{"x", rt::makeTensor<uint16_t>(DType::Float16, xd, h)},
                             {"roi", std::nullopt},
                             {"scales", std::nullopt},
                             {"sizes", sizes}},
                            attrs, 1, 17, threads);
      ASSERT_EQ(narrow.size(), 1u) << c.mode;
      ASSERT_EQ(narrow[0].dims(), c.sizes) << c.mode;
      const double* want = reinterpret_cast<const double*>(wide[0].data());
      const uint16_t* got = reinterpret_cast<const uint16_t*>(narrow[0].data());
      for (size_t i = 0; i < narrow[0].elementCount(); ++i)
        ASSERT_EQ(got[i], rt::floatToHalf(static_cast<float>(want[i])))
            << c.mode << " " << c.transform << ", element " << i;
    }
  }
}

// The float16 Resize's two-tap (linear) loops against the general path in double on a float64
// copy, bit for bit: every linear coordinate transform, up, down, by non-dyadic ratios, to one
// pixel, from one pixel, one axis kept, and a plane split across threads. The data hold -0.0
// (which the general sum turns into +0.0), infinities on the edges (a one-tap coordinate must not
// multiply its unused tap by 0) and the largest float16 values.
TEST(NnKernels, ResizeFloat16TwoTapsMatchTheGeneralPath) {
  struct Case {
    const char* transform;
    int64_t inH, inW, outH, outW;
  };
  const Case cases[] = {
      {"half_pixel", 9, 11, 18, 22},         {"half_pixel", 9, 11, 4, 5},
      {"half_pixel", 40, 50, 160, 100},      {"align_corners", 9, 11, 17, 5},
      {"align_corners", 9, 11, 1, 1},        {"asymmetric", 9, 11, 20, 33},
      {"asymmetric", 9, 11, 9, 23},          {"pytorch_half_pixel", 9, 11, 1, 29},
      {"pytorch_half_pixel", 9, 11, 31, 11}, {"half_pixel", 1, 11, 4, 22},
      {"align_corners", 6, 1, 13, 3},        {"pytorch_half_pixel", 7, 13, 24, 40}};
  std::mt19937 rng(97);
  std::uniform_real_distribution<float> value(-8.0f, 8.0f);
  const float inf = std::numeric_limits<float>::infinity();
  const float specials[] = {-0.0f, inf, -inf, 65504.0f, -65504.0f, 0x1p-24f};
  for (const Case& c : cases) {
    const int64_t planes = 3, count = planes * c.inH * c.inW;
    std::vector<uint16_t> h;
    std::vector<double> d;
    for (int64_t i = 0; i < count; ++i) {
      float f = value(rng);
      const int64_t p = i / (c.inH * c.inW), k = i % (c.inH * c.inW);
      // Plane 0 stays finite; planes 1 and 2 hold specials at the corners and scattered.
      if (p > 0 && (k == 0 || k == c.inH * c.inW - 1 || rng() % 7 == 0))
        f = specials[rng() % std::size(specials)];
      if (p == 0 && rng() % 5 == 0) f = -0.0f;
      h.push_back(rt::floatToHalf(f));
      d.push_back(static_cast<double>(rt::halfToFloat(h.back())));
    }
    const std::vector<int64_t> xd = {1, planes, c.inH, c.inW}, sizes = {1, planes, c.outH, c.outW};
    const std::vector<std::pair<std::string, Attribute>> attrs = {
        {"mode", Attribute::ofString("linear")},
        {"coordinate_transformation_mode", Attribute::ofString(c.transform)}};
    const Tensor sizeTensor = rt::makeTensor<int64_t>(DType::Int64, {4}, sizes);
    auto wide = runNode("Resize",
                        {{"x", rt::makeTensor<double>(DType::Float64, xd, d)},
                         {"roi", std::nullopt},
                         {"scales", std::nullopt},
                         {"sizes", sizeTensor}},
                        attrs, 1);
    ASSERT_EQ(wide.size(), 1u) << c.transform;
    for (int threads : {1, 2}) {
      rt::pool::setSplitAlways(threads > 1);
      auto narrow = runNode("Resize",
                            {{"x", rt::makeTensor<uint16_t>(DType::Float16, xd, h)},
                             {"roi", std::nullopt},
                             {"scales", std::nullopt},
                             {"sizes", sizeTensor}},
                            attrs, 1, 17, threads);
      rt::pool::setSplitAlways(false);
      ASSERT_EQ(narrow.size(), 1u) << c.transform;
      ASSERT_EQ(narrow[0].dims(), sizes) << c.transform;
      const double* want = reinterpret_cast<const double*>(wide[0].data());
      const uint16_t* got = reinterpret_cast<const uint16_t*>(narrow[0].data());
      for (size_t i = 0; i < narrow[0].elementCount(); ++i) {
        const uint16_t expected = rt::floatToHalf(static_cast<float>(want[i]));
        // A NaN's sign follows operand order, which the compiler may swap: any NaN matches.
        if (std::isnan(want[i]) && (got[i] & 0x7c00) == 0x7c00 && (got[i] & 0x3ff) != 0) continue;
        ASSERT_EQ(got[i], expected)
            << c.transform << " " << c.inH << "x" << c.inW << " to " << c.outH << "x" << c.outW
            << ", " << threads << " thread(s), element " << i;
      }
    }
  }
}

// Round on float32 (the vector loop) against its definition, half to even with std::round and
// std::trunc: every 4099th bit pattern (NaNs, infinities, subnormals, large integers) and the
// ties around zero.
TEST(NnKernels, RoundFloat32IsHalfToEven) {
  std::vector<float> v = {0.5f, -0.5f, 1.5f, -1.5f, 2.5f, -2.5f, -0.4f, 0.49999997f, 8388607.5f};
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 4099) {
    float f;
    const auto bits = static_cast<uint32_t>(b);
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  auto out = runNode("Round", {{"x", floats({static_cast<int64_t>(v.size())}, v)}}, {}, 1);
  ASSERT_EQ(out.size(), 1u);
  const float* got = reinterpret_cast<const float*>(out[0].data());
  for (size_t i = 0; i < v.size(); ++i) {
    float want = std::round(v[i]);
    if (std::fabs(v[i] - std::trunc(v[i])) == 0.5f) want = 2.0f * std::round(v[i] / 2.0f);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got[i])) << i;
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want, 4);
    ASSERT_EQ(a, b) << "element " << i << " = " << v[i];
  }
}

TEST(NnKernels, MaxPoolColumnMajorIndices) {
  std::vector<float> x = {1, 9, 3, 4, 5, 6, 7, 8, 2}; // 3x3, max of the 2x2 top-left is 9 at (0,1)
  auto out = runNode(
      "MaxPool", {{"x", floats({1, 1, 3, 3}, x)}},
      {{"kernel_shape", Attribute::ofInts({2, 2})}, {"storage_order", Attribute::ofInt(1)}}, 2);
  ASSERT_EQ(out.size(), 2u);
  expectNear(out[0], {9, 9, 8, 8});
  // Column-major: (row, col) -> row + col * 3.
  EXPECT_EQ(rt::toInt64Vector(out[1]), (std::vector<int64_t>{3, 3, 5, 5}));
}

TEST(NnKernels, LpPoolAndGlobalLpPool) {
  std::vector<float> x = {1, -2, 3, 4, 0, -1, 2, 2, 5};
  auto lp = runNode("LpPool", {{"x", floats({1, 1, 3, 3}, x)}},
                    {{"kernel_shape", Attribute::ofInts({2, 2})}, {"p", Attribute::ofInt(3)}}, 1);
  ASSERT_EQ(lp.size(), 1u);
  auto root3 = [](double v) { return static_cast<float>(std::cbrt(v)); };
  expectNear(lp[0], {root3(1 + 8 + 64 + 0), root3(8 + 27 + 0 + 1), root3(64 + 0 + 8 + 8),
                     root3(0 + 1 + 8 + 125)});
  auto glp = runNode("GlobalLpPool", {{"x", floats({1, 1, 3, 3}, x)}}, {}, 1);
  ASSERT_EQ(glp.size(), 1u);
  EXPECT_EQ(glp[0].dims(), (std::vector<int64_t>{1, 1, 1, 1}));
  expectNear(glp[0], {static_cast<float>(std::sqrt(1 + 4 + 9 + 16 + 0 + 1 + 4 + 4 + 25))});
}

TEST(NnKernels, AveragePoolPadCounting) {
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  // 3x3 input, kernel 2, stride 2, pad 1 at the start: windows straddle the padding.
  std::vector<std::pair<std::string, Attribute>> attrs = {
      {"kernel_shape", Attribute::ofInts({2, 2})},
      {"strides", Attribute::ofInts({2, 2})},
      {"pads", Attribute::ofInts({1, 1, 0, 0})}};
  auto exclude = runNode("AveragePool", {{"x", floats({1, 1, 3, 3}, x)}}, attrs, 1);
  attrs.push_back({"count_include_pad", Attribute::ofInt(1)});
  auto include = runNode("AveragePool", {{"x", floats({1, 1, 3, 3}, x)}}, attrs, 1);
  ASSERT_EQ(exclude.size(), 1u);
  ASSERT_EQ(include.size(), 1u);
  expectNear(exclude[0], {1, 2.5f, 5.5f, 7});
  expectNear(include[0], {0.25f, 1.25f, 2.75f, 7});
}

// 2-D AveragePool (its own loop) against the same pooling as 3-D with a trailing axis of one (the
// generic window walk): the same bits, at one and two threads, with padding counted and not,
// ceil mode, dilations, -0, infinities and NaN in the input.
TEST(NnKernels, AveragePool2dMatchesGenericWindowWalk) {
  struct Case {
    const char* what;
    int64_t planes, h, w;
    std::vector<int64_t> kernel, strides, pads, dilations;
    int64_t ceil, countPad;
  };
  const Case cases[] = {
      {"3x2 stride 3x2", 6, 3, 80, {3, 2}, {3, 2}, {0, 0, 0, 0}, {1, 1}, 0, 0},
      {"2x2 stride 2 ceil, odd sides", 5, 15, 17, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 0},
      {"2x2 stride 2 ceil, pads counted", 5, 15, 17, {2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, 1, 1},
      {"3x3 stride 1 padded", 4, 9, 13, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 0},
      {"3x3 stride 1 padded, pads counted", 4, 9, 13, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 0, 1},
      {"3x3 stride 2 padded dilated ceil", 3, 21, 18, {3, 3}, {2, 2}, {2, 1, 2, 1}, {2, 2}, 1, 1},
      {"5x4 larger than the padded input", 2, 3, 3, {5, 4}, {1, 1}, {1, 2, 1, 0}, {1, 1}, 0, 1},
      {"1x5 one plane", 1, 7, 30, {1, 5}, {1, 3}, {0, 2, 0, 2}, {1, 1}, 0, 0},
  };
  for (const Case& c : cases) {
    std::mt19937 rng(41);
    std::uniform_real_distribution<float> value(-3.0f, 3.0f);
    const float specials[] = {-0.0f, std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(),
                              std::numeric_limits<float>::quiet_NaN(), 1e30f};
    std::vector<float> x(static_cast<size_t>(c.planes * c.h * c.w));
    for (float& v : x)
      v = rng() % 29 == 0 ? specials[rng() % std::size(specials)] : value(rng);
    auto attrs = [&](bool generic) {
      auto with1 = [&](std::vector<int64_t> v, int64_t one) {
        if (generic) v.push_back(one);
        return v;
      };
      std::vector<int64_t> pads = c.pads;
      if (generic) pads = {c.pads[0], c.pads[1], 0, c.pads[2], c.pads[3], 0};
      return std::vector<std::pair<std::string, Attribute>>{
          {"kernel_shape", Attribute::ofInts(with1(c.kernel, 1))},
          {"strides", Attribute::ofInts(with1(c.strides, 1))},
          {"pads", Attribute::ofInts(pads)},
          {"dilations", Attribute::ofInts(with1(c.dilations, 1))},
          {"ceil_mode", Attribute::ofInt(c.ceil)},
          {"count_include_pad", Attribute::ofInt(c.countPad)}};
    };
    auto generic =
        runNode("AveragePool", {{"x", floats({1, c.planes, c.h, c.w, 1}, x)}}, attrs(true), 1);
    ASSERT_EQ(generic.size(), 1u) << c.what;
    for (int threads : {1, 2}) {
      rt::pool::setSplitAlways(threads > 1);
      auto planar = runNode("AveragePool", {{"x", floats({1, c.planes, c.h, c.w}, x)}},
                            attrs(false), 1, 17, threads);
      rt::pool::setSplitAlways(false);
      ASSERT_EQ(planar.size(), 1u) << c.what;
      ASSERT_EQ(planar[0].byteSize(), generic[0].byteSize()) << c.what;
      EXPECT_EQ(0, std::memcmp(planar[0].data(), generic[0].data(), planar[0].byteSize()))
          << c.what << ", threads " << threads;
    }
  }
}

// Recurrent op fixture: weights for one direction, duplicated for bidirectional runs.
struct Recurrent {
  std::string op;
  int64_t gates, seq = 4, batch = 3, input = 2, hidden = 3;
  std::vector<float> x, w, r, b;
  Recurrent(std::string o, int64_t g, uint32_t seed) : op(std::move(o)), gates(g) {
    x = kiln::testing::randomFloats(static_cast<size_t>(seq * batch * input), seed);
    w = kiln::testing::randomFloats(static_cast<size_t>(gates * hidden * input), seed + 1);
    r = kiln::testing::randomFloats(static_cast<size_t>(gates * hidden * hidden), seed + 2);
    b = kiln::testing::randomFloats(static_cast<size_t>(2 * gates * hidden), seed + 3);
  }
  static std::vector<float> twice(const std::vector<float>& v) {
    std::vector<float> t = v;
    t.insert(t.end(), v.begin(), v.end());
    return t;
  }
  std::vector<Tensor> run(const std::string& direction, const std::vector<float>& xs,
                          bool batchFirst = false, std::optional<std::vector<int32_t>> lens = {}) {
    const int64_t dirs = direction == "bidirectional" ? 2 : 1;
    std::vector<Arg> args = {
        {"x", floats(batchFirst ? std::vector<int64_t>{batch, seq, input}
                                : std::vector<int64_t>{seq, batch, input},
                     xs)},
        {"w", floats({dirs, gates * hidden, input}, dirs == 2 ? twice(w) : w)},
        {"r", floats({dirs, gates * hidden, hidden}, dirs == 2 ? twice(r) : r)},
        {"b", floats({dirs, 2 * gates * hidden}, dirs == 2 ? twice(b) : b)}};
    if (lens) args.push_back({"lens", rt::makeTensor<int32_t>(DType::Int32, {batch}, *lens)});
    std::vector<std::pair<std::string, Attribute>> attrs = {
        {"hidden_size", Attribute::ofInt(hidden)},
        {"direction", Attribute::ofString(direction)},
        {"layout", Attribute::ofInt(batchFirst ? 1 : 0)}};
    if (op == "GRU") attrs.push_back({"linear_before_reset", Attribute::ofInt(0)});
    return runNode(op, args, attrs, op == "LSTM" ? 3 : 2);
  }
  // X with the time axis reversed (time-major).
  std::vector<float> reversedX() const {
    std::vector<float> rx(x.size());
    for (int64_t t = 0; t < seq; ++t)
      std::copy(x.begin() + (seq - 1 - t) * batch * input, x.begin() + (seq - t) * batch * input,
                rx.begin() + t * batch * input);
    return rx;
  }
};

class RecurrentTest : public ::testing::TestWithParam<std::pair<const char*, int>> {};

TEST_P(RecurrentTest, ReverseIsForwardOnReversedInput) {
  Recurrent rc(GetParam().first, GetParam().second, 20);
  auto rev = rc.run("reverse", rc.x);
  auto fwdOnRev = rc.run("forward", rc.reversedX());
  ASSERT_FALSE(rev.empty());
  ASSERT_FALSE(fwdOnRev.empty());
  expectNear(rev[1], rt::toFloatVector(fwdOnRev[1]));
  // Y at time t of the reverse run is Y at time seq-1-t of the forward run on reversed input.
  std::vector<float> y = rt::toFloatVector(fwdOnRev[0]), flipped(y.size());
  const int64_t step = rc.batch * rc.hidden;
  for (int64_t t = 0; t < rc.seq; ++t)
    std::copy(y.begin() + (rc.seq - 1 - t) * step, y.begin() + (rc.seq - t) * step,
              flipped.begin() + t * step);
  expectNear(rev[0], flipped);
}

TEST_P(RecurrentTest, BidirectionalStacksBothDirections) {
  Recurrent rc(GetParam().first, GetParam().second, 30);
  auto bi = rc.run("bidirectional", rc.x);
  auto fwd = rc.run("forward", rc.x);
  auto rev = rc.run("reverse", rc.x);
  ASSERT_FALSE(bi.empty());
  ASSERT_FALSE(fwd.empty());
  ASSERT_FALSE(rev.empty());
  std::vector<float> yh = rt::toFloatVector(fwd[1]), yhr = rt::toFloatVector(rev[1]);
  yh.insert(yh.end(), yhr.begin(), yhr.end());
  expectNear(bi[1], yh);
  std::vector<float> y, yf = rt::toFloatVector(fwd[0]), yr = rt::toFloatVector(rev[0]);
  const int64_t step = rc.batch * rc.hidden;
  for (int64_t t = 0; t < rc.seq; ++t) {
    y.insert(y.end(), yf.begin() + t * step, yf.begin() + (t + 1) * step);
    y.insert(y.end(), yr.begin() + t * step, yr.begin() + (t + 1) * step);
  }
  expectNear(bi[0], y);
}

TEST_P(RecurrentTest, BatchFirstLayoutTransposes) {
  Recurrent rc(GetParam().first, GetParam().second, 40);
  std::vector<float> xb(rc.x.size());
  for (int64_t t = 0; t < rc.seq; ++t)
    for (int64_t b = 0; b < rc.batch; ++b)
      std::copy(rc.x.begin() + (t * rc.batch + b) * rc.input,
                rc.x.begin() + (t * rc.batch + b + 1) * rc.input,
                xb.begin() + (b * rc.seq + t) * rc.input);
  auto tm = rc.run("bidirectional", rc.x);
  auto bf = rc.run("bidirectional", xb, true);
  ASSERT_FALSE(tm.empty());
  ASSERT_FALSE(bf.empty());
  EXPECT_EQ(bf[0].dims(), (std::vector<int64_t>{rc.batch, rc.seq, 2, rc.hidden}));
  EXPECT_EQ(bf[1].dims(), (std::vector<int64_t>{rc.batch, 2, rc.hidden}));
  std::vector<float> y = rt::toFloatVector(tm[0]), expect(y.size());
  for (int64_t t = 0; t < rc.seq; ++t)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t b = 0; b < rc.batch; ++b)
        for (int64_t k = 0; k < rc.hidden; ++k)
          expect[static_cast<size_t>(((b * rc.seq + t) * 2 + d) * rc.hidden + k)] =
              y[static_cast<size_t>(((t * 2 + d) * rc.batch + b) * rc.hidden + k)];
  expectNear(bf[0], expect);
}

TEST_P(RecurrentTest, SequenceLengthsStopEachBatchEarly) {
  Recurrent rc(GetParam().first, GetParam().second, 50);
  auto full = rc.run("bidirectional", rc.x, false, std::vector<int32_t>{4, 2, 3});
  ASSERT_FALSE(full.empty());
  // Batch 1 has length 2: the same as running its first two steps alone.
  Recurrent one = rc;
  one.seq = 2;
  one.batch = 1;
  one.x.clear();
  for (int64_t t = 0; t < 2; ++t)
    one.x.insert(one.x.end(), rc.x.begin() + (t * rc.batch + 1) * rc.input,
                 rc.x.begin() + (t * rc.batch + 2) * rc.input);
  auto alone = one.run("bidirectional", one.x);
  ASSERT_FALSE(alone.empty());
  std::vector<float> yh = rt::toFloatVector(full[1]), ya = rt::toFloatVector(alone[1]);
  for (int64_t d = 0; d < 2; ++d)
    for (int64_t k = 0; k < rc.hidden; ++k)
      EXPECT_NEAR(yh[static_cast<size_t>((d * rc.batch + 1) * rc.hidden + k)],
                  ya[static_cast<size_t>(d * rc.hidden + k)], 1e-5f);
  // Steps past the length are zero in Y.
  std::vector<float> y = rt::toFloatVector(full[0]);
  for (int64_t t = 2; t < rc.seq; ++t)
    for (int64_t d = 0; d < 2; ++d)
      for (int64_t k = 0; k < rc.hidden; ++k)
        EXPECT_EQ(y[static_cast<size_t>(((t * 2 + d) * rc.batch + 1) * rc.hidden + k)], 0.0f);
}

// One forward GRU direction, written straight from the ONNX equations.
std::vector<float> naiveGruYh(const Recurrent& rc, bool linearBeforeReset,
                              const std::vector<float>& h0) {
  const int64_t H = rc.hidden, I = rc.input;
  std::vector<double> h(h0.begin(), h0.end());
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  for (int64_t t = 0; t < rc.seq; ++t) {
    std::vector<double> next(h.size());
    for (int64_t b = 0; b < rc.batch; ++b) {
      auto xw = [&](int64_t row) {
        double acc = rc.b[static_cast<size_t>(row)];
        for (int64_t i = 0; i < I; ++i)
          acc += rc.x[static_cast<size_t>((t * rc.batch + b) * I + i)] *
                 rc.w[static_cast<size_t>(row * I + i)];
        return acc;
      };
      auto hr = [&](int64_t row, const std::vector<double>& v) {
        double acc = 0;
        for (int64_t k = 0; k < H; ++k)
          acc += v[static_cast<size_t>(k)] * rc.r[static_cast<size_t>(row * H + k)];
        return acc;
      };
      std::vector<double> hb(h.begin() + b * H, h.begin() + (b + 1) * H), z(H), r(H);
      for (int64_t j = 0; j < H; ++j) {
        z[j] = sig(xw(j) + hr(j, hb) + rc.b[static_cast<size_t>(3 * H + j)]);
        r[j] = sig(xw(H + j) + hr(H + j, hb) + rc.b[static_cast<size_t>(4 * H + j)]);
      }
      std::vector<double> rh(H);
      for (int64_t k = 0; k < H; ++k)
        rh[k] = r[k] * hb[k];
      for (int64_t j = 0; j < H; ++j) {
        const double rbh = rc.b[static_cast<size_t>(5 * H + j)];
        const double cand = linearBeforeReset
                                ? std::tanh(xw(2 * H + j) + r[j] * (hr(2 * H + j, hb) + rbh))
                                : std::tanh(xw(2 * H + j) + hr(2 * H + j, rh) + rbh);
        next[static_cast<size_t>(b * H + j)] = (1 - z[j]) * cand + z[j] * hb[j];
      }
    }
    h = next;
  }
  return std::vector<float>(h.begin(), h.end());
}

TEST(NnKernels, GruLinearBeforeResetBothWays) {
  Recurrent rc("GRU", 3, 60);
  auto h0 = kiln::testing::randomFloats(static_cast<size_t>(rc.batch * rc.hidden), 64);
  for (int lbr = 0; lbr < 2; ++lbr) {
    auto out = runNode("GRU",
                       {{"x", floats({rc.seq, rc.batch, rc.input}, rc.x)},
                        {"w", floats({1, 3 * rc.hidden, rc.input}, rc.w)},
                        {"r", floats({1, 3 * rc.hidden, rc.hidden}, rc.r)},
                        {"b", floats({1, 6 * rc.hidden}, rc.b)},
                        {"lens", std::nullopt},
                        {"h0", floats({1, rc.batch, rc.hidden}, h0)}},
                       {{"hidden_size", Attribute::ofInt(rc.hidden)},
                        {"linear_before_reset", Attribute::ofInt(lbr)}},
                       2);
    ASSERT_EQ(out.size(), 2u);
    expectNear(out[1], naiveGruYh(rc, lbr != 0, h0));
  }
}

INSTANTIATE_TEST_SUITE_P(Ops, RecurrentTest,
                         ::testing::Values(std::make_pair("RNN", 1), std::make_pair("GRU", 3),
                                           std::make_pair("LSTM", 4)),
                         [](const auto& info) { return std::string(info.param.first); });

// Gelu and LpNormalization: the .ms backend lowers them, so the executor runs them too (the op
// coverage test requires a kernel for every lowered op).
TEST(NnKernels, GeluExactAndTanh) {
  auto exact = runNode("Gelu", {{"x", floats({3}, {-1.0f, 0.0f, 1.0f})}}, {}, 1, 20);
  expectNear(exact[0], {-0.15865525f, 0.0f, 0.84134475f}, 1e-6f);
  auto tanh = runNode("Gelu", {{"x", floats({3}, {-1.0f, 0.0f, 1.0f})}},
                      {{"approximate", Attribute::ofString("tanh")}}, 1, 20);
  expectNear(tanh[0], {-0.15880801f, 0.0f, 0.84119199f}, 1e-6f);
}

TEST(NnKernels, LpNormalizationL1AndL2AlongAxis) {
  auto l2 = runNode("LpNormalization", {{"x", floats({2, 2}, {3, 4, 0, 0})}}, {}, 1);
  expectNear(l2[0], {0.6f, 0.8f, 0.0f, 0.0f}, 1e-6f);
  auto l1 = runNode("LpNormalization", {{"x", floats({2, 2}, {1, 2, 3, -6})}},
                    {{"axis", Attribute::ofInt(0)}, {"p", Attribute::ofInt(1)}}, 1);
  expectNear(l1[0], {0.25f, 0.25f, 0.75f, -0.75f}, 1e-6f);
}

// Max / Min of two float32 tensors (the vector loops a Conv epilogue shares): NaN from either
// side gives NaN, equal operands (+0 / -0) give the first, across the broadcast shapes.
TEST(NnKernels, MaxMinTwoFloatOperands) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> a = {1.0f, -2.0f, nan, 0.0f, -0.0f, 5.0f, -7.0f, 3.0f};
  const std::vector<float> b = {2.0f, -3.0f, 1.0f, -0.0f, 0.0f, nan, -7.0f, 3.5f};
  auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
  };
  auto check = [&](const Tensor& t, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(t.elementCount(), want.size()) << what;
    const float* p = reinterpret_cast<const float*>(t.data());
    for (size_t i = 0; i < want.size(); ++i)
      if (std::isnan(want[i]))
        EXPECT_TRUE(std::isnan(p[i])) << what << " " << i;
      else
        EXPECT_EQ(bits(p[i]), bits(want[i])) << what << " " << i;
  };
  auto max = runNode("Max", {{"a", floats({8}, a)}, {"b", floats({8}, b)}}, {}, 1);
  check(max[0], {2.0f, -2.0f, nan, 0.0f, -0.0f, nan, -7.0f, 3.5f}, "Max");
  auto min = runNode("Min", {{"a", floats({8}, a)}, {"b", floats({8}, b)}}, {}, 1);
  check(min[0], {1.0f, -3.0f, nan, 0.0f, -0.0f, nan, -7.0f, 3.0f}, "Min");
  // Scalar on either side, and a per-row operand.
  auto right = runNode("Max", {{"a", floats({2, 4}, a)}, {"s", floats({1}, {-0.0f})}}, {}, 1);
  check(right[0], {1.0f, -0.0f, nan, 0.0f, -0.0f, 5.0f, -0.0f, 3.0f}, "Max(a, -0)");
  auto left = runNode("Min", {{"s", floats({1, 1}, {0.0f})}, {"a", floats({2, 4}, a)}}, {}, 1);
  check(left[0], {0.0f, -2.0f, nan, 0.0f, 0.0f, 0.0f, -7.0f, 0.0f}, "Min(0, a)");
  auto rows = runNode("Max", {{"a", floats({2, 4}, a)}, {"r", floats({2, 1}, {0.5f, nan})}}, {},
                      1);
  check(rows[0], {1.0f, 0.5f, nan, 0.5f, nan, nan, nan, nan}, "Max(a, rows)");
}

} // namespace
