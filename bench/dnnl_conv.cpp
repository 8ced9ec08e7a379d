// Convolution on PP-OCR det/rec layer shapes: kiln's Conv kernel (im2col + OpenBLAS GEMM, direct
// depthwise loops) against oneDNN (Debian libdnnl-dev), both on NCHW float tensors, one thread.
// oneDNN picks its own blocked layouts; the reorders of input and output to and from NCHW are
// timed with it (kiln's tensors are NCHW), the weight reorder is done once outside the timing.
// `dnnl_conv [--iters N]`; run with OMP_NUM_THREADS=1. Built only with -DKILN_BENCH=ON when
// libdnnl-dev is installed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/ir/graph.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"

using namespace kiln;

namespace {

struct ConvCase {
  const char* name;
  int64_t c, h, w, m, k, stride, group;
};

std::vector<float> randomValues(int64_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v)
    x = dist(gen);
  return v;
}

template <typename Fn> double bestOf(int iters, Fn fn) {
  fn();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    auto start = std::chrono::steady_clock::now();
    fn();
    auto end = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::milli>(end - start).count());
  }
  return best;
}

double kilnConv(const ConvCase& s, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& b, int iters) {
  Model model;
  model.opsets = {{"", 17}};
  model.graph = std::make_shared<Graph>("bench");
  Graph& g = *model.graph;
  const int64_t pad = s.k / 2;
  Value* vx = g.addInitializer("x", rt::makeTensor<float>(DType::Float32, {1, s.c, s.h, s.w}, x));
  Value* vw = g.addInitializer(
      "w", rt::makeTensor<float>(DType::Float32, {s.m, s.c / s.group, s.k, s.k}, w));
  Value* vb = g.addInitializer("b", rt::makeTensor<float>(DType::Float32, {s.m}, b));
  Node* node = g.appendNode("Conv", {vx, vw, vb}, {"y"});
  node->setAttribute("pads", Attribute::ofInts({pad, pad, pad, pad}));
  node->setAttribute("strides", Attribute::ofInts({s.stride, s.stride}));
  node->setAttribute("group", Attribute::ofInt(s.group));
  g.addOutput(node->output(0));
  rt::ExecutorOptions options;
  options.threads = 1;
  rt::Executor exec(model, options);
  bool ok = true;
  double ms = bestOf(iters, [&] { ok &= static_cast<bool>(exec.run({})); });
  return ok ? ms : -1;
}

double dnnlConv(const ConvCase& s, std::vector<float>& x, std::vector<float>& w, std::vector<float>& b,
                int iters) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  engine eng(engine::kind::cpu, 0);
  stream strm(eng);
  const int64_t pad = s.k / 2;
  const int64_t oh = (s.h + 2 * pad - s.k) / s.stride + 1, ow = (s.w + 2 * pad - s.k) / s.stride + 1;
  memory::dims src = {1, s.c, s.h, s.w}, dst = {1, s.m, oh, ow}, bias = {s.m};
  memory::dims wei = s.group == 1 ? memory::dims{s.m, s.c, s.k, s.k}
                                  : memory::dims{s.group, s.m / s.group, s.c / s.group, s.k, s.k};
  memory::dims strides = {s.stride, s.stride}, padding = {pad, pad};
  auto userSrc = memory({src, dt::f32, tag::nchw}, eng, x.data());
  auto userWei = memory({wei, dt::f32, s.group == 1 ? tag::oihw : tag::goihw}, eng, w.data());
  auto userBias = memory({bias, dt::f32, tag::x}, eng, b.data());
  std::vector<float> y(static_cast<size_t>(s.m * oh * ow));
  auto userDst = memory({dst, dt::f32, tag::nchw}, eng, y.data());
  auto desc = convolution_forward::desc(
      prop_kind::forward_inference, algorithm::convolution_direct, {src, dt::f32, tag::any},
      {wei, dt::f32, tag::any}, {bias, dt::f32, tag::x}, {dst, dt::f32, tag::any}, strides,
      padding, padding);
  auto pd = convolution_forward::primitive_desc(desc, eng);
  auto conv = convolution_forward(pd);
  memory convSrc = userSrc, convWei = userWei, convDst = userDst;
  if (pd.src_desc() != userSrc.get_desc()) convSrc = memory(pd.src_desc(), eng);
  if (pd.weights_desc() != userWei.get_desc()) {
    convWei = memory(pd.weights_desc(), eng);
    reorder(userWei, convWei).execute(strm, userWei, convWei);
  }
  if (pd.dst_desc() != userDst.get_desc()) convDst = memory(pd.dst_desc(), eng);
  double ms = bestOf(iters, [&] {
    if (convSrc != userSrc) reorder(userSrc, convSrc).execute(strm, userSrc, convSrc);
    conv.execute(strm, {{DNNL_ARG_SRC, convSrc},
                        {DNNL_ARG_WEIGHTS, convWei},
                        {DNNL_ARG_BIAS, userBias},
                        {DNNL_ARG_DST, convDst}});
    if (convDst != userDst) reorder(convDst, userDst).execute(strm, convDst, userDst);
    strm.wait();
  });
  std::printf("  (oneDNN implementation: %s)\n", pd.impl_info_str());
  return ms;
}

} // namespace

int main(int argc, char** argv) {
  int iters = 10;
  if (argc == 3 && !std::strcmp(argv[1], "--iters")) iters = std::atoi(argv[2]);
  // Layer shapes of PP-OCRv4 det (640x640 input) and rec (48x320 input).
  const ConvCase shapes[] = {
      {"det stem 3x3/2 3x640x640 -> 32", 3, 640, 640, 32, 3, 2, 1},
      {"det 1x1 64x160x160 -> 64", 64, 160, 160, 64, 1, 1, 1},
      {"det 3x3 96x160x160 -> 24", 96, 160, 160, 24, 3, 1, 1},
      {"det dw3x3 128x80x80", 128, 80, 80, 128, 3, 1, 128},
      {"det 3x3 256x40x40 -> 96", 256, 40, 40, 96, 3, 1, 1},
      {"rec 1x1 128x12x160 -> 256", 128, 12, 160, 256, 1, 1, 1},
      {"rec dw3x3 64x24x160", 64, 24, 160, 64, 3, 1, 64},
      {"rec 3x3 480x6x80 -> 60", 480, 6, 80, 60, 3, 1, 1},
  };
  std::printf("| conv (N=1, one thread) | kiln ms | oneDNN ms | oneDNN / kiln |\n|---|---|---|---|\n");
  for (const ConvCase& s : shapes) {
    std::mt19937 gen(7);
    auto x = randomValues(s.c * s.h * s.w, gen);
    auto w = randomValues(s.m * (s.c / s.group) * s.k * s.k, gen);
    auto b = randomValues(s.m, gen);
    const double k = kilnConv(s, x, w, b, iters);
    const double d = dnnlConv(s, x, w, b, iters);
    std::printf("| %s | %.3f | %.3f | %.2f |\n", s.name, k, d, d / k);
    std::fflush(stdout);
  }
  return 0;
}
