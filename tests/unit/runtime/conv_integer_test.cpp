// ConvInteger against a direct integer reference over random uint8 / int8 inputs with zero
// points, pads, strides, groups and dilations, at 1 and 2 threads: integer sums are exact, so the
// blocked kernel and the oneDNN path (group 1, constant weights, VNNI CPUs) must match the
// reference bit for bit at any thread count, also for sums past float32's 2^24.
#include <gtest/gtest.h>

#include <random>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "runtime/kernels/thread_pool.h"

using namespace kiln;

namespace {

struct Conv2d {
  int64_t n, c, h, w, m, kh, kw, group, sh, sw, dh, dw, pt, pl, pb, pr;
  int64_t oh() const { return (h + pt + pb - ((kh - 1) * dh + 1)) / sh + 1; }
  int64_t ow() const { return (w + pl + pr - ((kw - 1) * dw + 1)) / sw + 1; }
};

template <typename T> std::vector<T> randomBytes(size_t n, uint32_t seed, int lo = -1000) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> dist(lo != -1000 ? lo : std::is_signed_v<T> ? -128 : 0,
                                          std::is_signed_v<T> ? 127 : 255);
  std::vector<T> v(n);
  for (T& x : v)
    x = static_cast<T>(dist(gen));
  return v;
}

template <typename TX, typename TW>
std::vector<int32_t> naive(const Conv2d& s, const std::vector<TX>& x, const std::vector<TW>& w,
                           int32_t xz, const std::vector<int32_t>& wz) {
  const int64_t oh = s.oh(), ow = s.ow(), cg = s.c / s.group, mg = s.m / s.group;
  std::vector<int32_t> y(static_cast<size_t>(s.n * s.m * oh * ow));
  for (int64_t b = 0; b < s.n; ++b)
    for (int64_t om = 0; om < s.m; ++om)
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t acc = 0;
          const int64_t g = om / mg;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t ky = 0; ky < s.kh; ++ky)
              for (int64_t kx = 0; kx < s.kw; ++kx) {
                const int64_t iy = oy * s.sh + ky * s.dh - s.pt, ix = ox * s.sw + kx * s.dw - s.pl;
                if (iy < 0 || iy >= s.h || ix < 0 || ix >= s.w) continue;
                const int64_t xv = x[static_cast<size_t>(((b * s.c + g * cg + ic) * s.h + iy) * s.w + ix)];
                const int64_t wv = w[static_cast<size_t>(((om * cg + ic) * s.kh + ky) * s.kw + kx)];
                acc += (xv - xz) * (wv - wz[static_cast<size_t>(om)]);
              }
          y[static_cast<size_t>(((b * s.m + om) * oh + oy) * ow + ox)] = static_cast<int32_t>(acc);
        }
  return y;
}

template <typename TX, typename TW>
void check(const Conv2d& s, DType xt, DType wt, uint32_t seed, bool perChannelZero,
           bool large = false) {
  // `large`: x and w near the top of their range with zero points at the bottom, so the sums
  // exceed 2^24 (where float32 stops holding every integer) with random low bits.
  const int lo = large ? (std::is_signed_v<TX> ? 100 : 224) : -1000;
  auto x = randomBytes<TX>(static_cast<size_t>(s.n * s.c * s.h * s.w), seed, lo);
  auto w = randomBytes<TW>(static_cast<size_t>(s.m * (s.c / s.group) * s.kh * s.kw), seed + 1,
                           large ? (std::is_signed_v<TW> ? 100 : 224) : -1000);
  TX xz = randomBytes<TX>(1, seed + 2)[0];
  std::vector<TW> wz = randomBytes<TW>(perChannelZero ? static_cast<size_t>(s.m) : 1, seed + 3);
  if (large) {
    xz = static_cast<TX>(std::is_signed_v<TX> ? -128 : 0);
    for (TW& z : wz)
      z = static_cast<TW>(std::is_signed_v<TW> ? -128 : 0);
  }
  std::vector<int32_t> wzAll(static_cast<size_t>(s.m));
  for (size_t i = 0; i < wzAll.size(); ++i)
    wzAll[i] = wz[perChannelZero ? i : 0];
  const std::vector<int32_t> expected = naive(s, x, w, static_cast<int32_t>(xz), wzAll);
  for (int threads : {1, 2}) {
    Model model;
    model.opsets = {{"", 17}};
    model.graph = std::make_shared<Graph>("g");
    Graph& g = *model.graph;
    Node* node = g.appendNode(
        "ConvInteger",
        {g.addInitializer("x", rt::makeTensor<TX>(xt, {s.n, s.c, s.h, s.w}, x)),
         g.addInitializer("w", rt::makeTensor<TW>(wt, {s.m, s.c / s.group, s.kh, s.kw}, w)),
         g.addInitializer("xz", rt::makeTensor<TX>(xt, {}, {xz})),
         g.addInitializer("wz", rt::makeTensor<TW>(wt, {static_cast<int64_t>(wz.size())}, wz))},
        {"y"});
    node->setAttribute("group", Attribute::ofInt(s.group));
    node->setAttribute("strides", Attribute::ofInts({s.sh, s.sw}));
    node->setAttribute("dilations", Attribute::ofInts({s.dh, s.dw}));
    node->setAttribute("pads", Attribute::ofInts({s.pt, s.pl, s.pb, s.pr}));
    g.addOutput(node->output(0));
    rt::ExecutorOptions options;
    options.threads = threads;
    rt::Executor exec(model, options);
    // These inputs are below the pool's work threshold: split them anyway at 2 threads.
    rt::pool::setSplitAlways(threads > 1);
    auto result = exec.run({});
    rt::pool::setSplitAlways(false);
    ASSERT_TRUE(result.hasValue()) << result.status().toString();
    const Tensor& y = result->outputs.at(0).tensor;
    EXPECT_EQ(y.dtype(), DType::Int32);
    EXPECT_EQ(y.dims(), (std::vector<int64_t>{s.n, s.m, s.oh(), s.ow()}));
    EXPECT_EQ(y.copyValues<int32_t>(), expected) << "threads " << threads;
  }
}

TEST(ConvInteger, GroupsDilationsStridesPadsUint8) {
  // 2 images, 2 groups, output 12 x 17 (several rows per column block).
  check<uint8_t, uint8_t>({2, 6, 24, 17, 10, 3, 2, 2, 2, 1, 2, 3, 1, 2, 0, 1}, DType::UInt8,
                          DType::UInt8, 7, true);
}

TEST(ConvInteger, Int8WeightsScalarZeroAndBlocksAcrossRows) {
  // Output 30 x 30 = 900 positions: several 256-column blocks split mid-row, 2 threads split them.
  check<uint8_t, int8_t>({1, 5, 30, 30, 7, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::UInt8,
                         DType::Int8, 21, false);
}

TEST(ConvInteger, Int8InputsPointwiseAndDepthwise) {
  check<int8_t, int8_t>({1, 9, 20, 20, 5, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0}, DType::Int8,
                        DType::Int8, 33, true);
  check<int8_t, uint8_t>({2, 4, 13, 11, 4, 3, 3, 4, 2, 2, 1, 1, 1, 1, 1, 1}, DType::Int8,
                         DType::UInt8, 44, true);
}

TEST(ConvInteger, SumsBeyondFloatPrecisionStayExact) {
  // 384 channels x 3 x 3 taps of ~240 x ~240: sums near 2e8, far past 2^24 (the oneDNN path cuts
  // the channels into chunks that each stay exact).
  check<uint8_t, uint8_t>({1, 384, 6, 7, 9, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::UInt8,
                          DType::UInt8, 55, true, true);
  check<int8_t, int8_t>({1, 384, 5, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1}, DType::Int8,
                        DType::Int8, 66, false, true);
}

TEST(ConvInteger, Uint8PerChannelZeroGroupOneStrided) {
  // Group 1 with constant weights: the oneDNN path where the CPU has VNNI.
  check<uint8_t, uint8_t>({1, 16, 9, 9, 8, 3, 3, 1, 2, 2, 1, 1, 1, 1, 1, 1}, DType::UInt8,
                          DType::UInt8, 77, true);
}

} // namespace
