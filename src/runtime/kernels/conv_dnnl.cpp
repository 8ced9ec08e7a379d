// oneDNN convolution (conv_dnnl.h). oneDNN lays the tensors out in its own blocked formats; the
// NCHW input and output are reordered around the primitive, the weights on every call (the
// executor holds no per-node state). The primitive descriptor and the primitives are made once per
// convolution geometry (and thread count) and kept per thread. The integer convolution
// (prepareInt8 / runInt8) is made per node instead, its constant weights reordered once and kept
// in the node's state for the executor's lifetime.
#include "conv_dnnl.h"

#ifdef KILN_HAVE_DNNL
#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

// oneDNN's CPU runtime here is OpenMP; the thread count of its parallel regions follows the
// executor's --threads.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

namespace kiln::rt::dnnl_conv {

#ifdef KILN_HAVE_DNNL

bool available() { return true; }

namespace {

using namespace dnnl;

// What one convolution geometry needs, made on its first call and reused by later ones on this
// thread: the primitive descriptor (choosing the implementation is the expensive part of a small
// convolution's call) and the conv and reorder primitives. Only the memory objects that wrap this
// call's pointers are made per call; the weights are still reordered on every call.
struct Prepared {
  memory::desc userSrc, userWei, userDst, bias;
  convolution_forward::primitive_desc pd;
  convolution_forward conv;
  reorder srcReorder, weiReorder, dstReorder; // empty when the layouts already agree
  bool reorderSrc = false, reorderWei = false, reorderDst = false;
};

using Key = std::array<int64_t, 20>;

const engine& cpuEngine() {
  static engine eng(engine::kind::cpu, 0);
  return eng;
}

const Prepared& prepare(int threads, const Conv2d& c, bool hasBias) {
  using tag = memory::format_tag;
  using dt = memory::data_type;
  thread_local std::map<Key, Prepared> cache;
  const Key key = {c.batch,        c.channels,     c.height,       c.width,     c.filters,
                   c.outHeight,    c.outWidth,     c.kernel[0],    c.kernel[1], c.strides[0],
                   c.strides[1],   c.dilations[0], c.dilations[1], c.padBegin[0], c.padBegin[1],
                   c.padEnd[0],    c.padEnd[1],    hasBias ? 1 : 0, threads,   0};
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  // Inputs whose shapes change on every run would grow the cache without bound: start over.
  if (cache.size() >= 512) cache.clear();
  const engine& eng = cpuEngine();
  const memory::dims src = {c.batch, c.channels, c.height, c.width};
  const memory::dims dst = {c.batch, c.filters, c.outHeight, c.outWidth};
  const memory::dims wei = {c.filters, c.channels, c.kernel[0], c.kernel[1]};
  const memory::dims strides = {c.strides[0], c.strides[1]};
  const memory::dims dilates = {c.dilations[0] - 1, c.dilations[1] - 1};
  const memory::dims padL = {c.padBegin[0], c.padBegin[1]}, padR = {c.padEnd[0], c.padEnd[1]};
  Prepared p;
  p.userSrc = memory::desc(src, dt::f32, tag::nchw);
  p.userWei = memory::desc(wei, dt::f32, tag::oihw);
  p.userDst = memory::desc(dst, dt::f32, tag::nchw);
  p.bias = hasBias ? memory::desc({c.filters}, dt::f32, tag::x) : memory::desc();
  auto desc = hasBias ? convolution_forward::desc(
                            prop_kind::forward_inference, algorithm::convolution_direct,
                            {src, dt::f32, tag::any}, {wei, dt::f32, tag::any}, p.bias,
                            {dst, dt::f32, tag::any}, strides, dilates, padL, padR)
                      : convolution_forward::desc(
                            prop_kind::forward_inference, algorithm::convolution_direct,
                            {src, dt::f32, tag::any}, {wei, dt::f32, tag::any},
                            {dst, dt::f32, tag::any}, strides, dilates, padL, padR);
  p.pd = convolution_forward::primitive_desc(desc, eng);
  p.conv = convolution_forward(p.pd);
  p.reorderSrc = p.pd.src_desc() != p.userSrc;
  p.reorderWei = p.pd.weights_desc() != p.userWei;
  p.reorderDst = p.pd.dst_desc() != p.userDst;
  if (p.reorderSrc) p.srcReorder = reorder(reorder::primitive_desc(eng, p.userSrc, eng, p.pd.src_desc()));
  if (p.reorderWei)
    p.weiReorder = reorder(reorder::primitive_desc(eng, p.userWei, eng, p.pd.weights_desc()));
  if (p.reorderDst) p.dstReorder = reorder(reorder::primitive_desc(eng, p.pd.dst_desc(), eng, p.userDst));
  return cache.emplace(key, std::move(p)).first->second;
}

} // namespace

bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias,
         float* y) {
  try {
    if (omp_set_num_threads) omp_set_num_threads(threads < 1 ? 1 : threads);
    const Prepared& p = prepare(threads, c, bias != nullptr);
    const engine& eng = cpuEngine();
    stream strm(eng);
    auto userSrc = memory(p.userSrc, eng, const_cast<float*>(x));
    auto userWei = memory(p.userWei, eng, const_cast<float*>(w));
    auto userDst = memory(p.userDst, eng, y);
    // Blocked copies live in per-thread buffers kept between calls (no fresh pages each run).
    thread_local std::vector<uint8_t> srcBuf, weiBuf, dstBuf;
    auto scratch = [&](std::vector<uint8_t>& buf, const memory::desc& md) {
      if (buf.size() < md.get_size()) buf.resize(md.get_size());
      return memory(md, eng, buf.data());
    };
    memory convSrc = userSrc, convWei = userWei, convDst = userDst;
    if (p.reorderSrc) {
      convSrc = scratch(srcBuf, p.pd.src_desc());
      p.srcReorder.execute(strm, userSrc, convSrc);
    }
    if (p.reorderWei) {
      convWei = scratch(weiBuf, p.pd.weights_desc());
      p.weiReorder.execute(strm, userWei, convWei);
    }
    if (p.reorderDst) convDst = scratch(dstBuf, p.pd.dst_desc());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, convSrc}, {DNNL_ARG_WEIGHTS, convWei}, {DNNL_ARG_DST, convDst}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, eng, const_cast<float*>(bias)));
    p.conv.execute(strm, args);
    if (p.reorderDst) p.dstReorder.execute(strm, convDst, userDst);
    strm.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- integer convolution ----

class Int8Conv {
 public:
  int64_t channels = 0; // filters, plus the all-ones filter when corr is used
  std::vector<int32_t> corr; // base - wz[m]; empty when all are 0
  memory::desc userSrc, userDst;
  convolution_forward::primitive_desc pd;
  convolution_forward conv;
  reorder srcReorder, dstReorder;
  bool reorderSrc = false, reorderDst = false;
  std::vector<uint8_t> weights; // in pd.weights_desc()'s layout
};

namespace {

bool hasVnni() {
  static const bool yes = __builtin_cpu_supports("avx512vnni")
#if defined(__GNUC__) && __GNUC__ >= 11
                          || __builtin_cpu_supports("avxvnni")
#endif
      ;
  return yes;
}

} // namespace

std::shared_ptr<Int8Conv> prepareInt8(int threads, const Conv2d& c, bool xSigned,
                                      const uint8_t* w, bool wSigned, const int32_t* wz) {
  if (!hasVnni() || std::getenv("KILN_NO_DNNL_INT8")) return nullptr;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  try {
    auto p = std::make_shared<Int8Conv>();
    const int32_t base = wSigned ? 0 : 128;
    const int64_t perFilter = c.channels * c.kernel[0] * c.kernel[1];
    bool needCorr = false;
    for (int64_t m = 0; m < c.filters; ++m)
      needCorr |= wz[m] != base;
    p->channels = c.filters + (needCorr ? 1 : 0);
    if (needCorr) {
      p->corr.resize(static_cast<size_t>(c.filters));
      for (int64_t m = 0; m < c.filters; ++m)
        p->corr[static_cast<size_t>(m)] = base - wz[m];
    }
    // w - base as int8 (exact: uint8 - 128 and int8 both lie in [-128, 127]); the extra filter
    // is all ones.
    std::vector<int8_t> shifted(static_cast<size_t>(p->channels * perFilter), 1);
    for (int64_t i = 0; i < c.filters * perFilter; ++i) {
      const int32_t v = wSigned ? static_cast<int32_t>(static_cast<int8_t>(w[i])) : w[i];
      shifted[static_cast<size_t>(i)] = static_cast<int8_t>(v - base);
    }
    const engine& eng = cpuEngine();
    const memory::dims src = {c.batch, c.channels, c.height, c.width};
    const memory::dims dst = {c.batch, p->channels, c.outHeight, c.outWidth};
    const memory::dims wei = {p->channels, c.channels, c.kernel[0], c.kernel[1]};
    const memory::dims strides = {c.strides[0], c.strides[1]};
    const memory::dims dilates = {c.dilations[0] - 1, c.dilations[1] - 1};
    const memory::dims padL = {c.padBegin[0], c.padBegin[1]}, padR = {c.padEnd[0], c.padEnd[1]};
    const dt srcType = xSigned ? dt::s8 : dt::u8;
    p->userSrc = memory::desc(src, srcType, tag::nchw);
    p->userDst = memory::desc(dst, dt::s32, tag::nchw);
    const memory::desc userWei(wei, dt::s8, tag::oihw);
    convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                   {src, srcType, tag::any}, {wei, dt::s8, tag::any},
                                   {dst, dt::s32, tag::any}, strides, dilates, padL, padR);
    primitive_attr attr;
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if (omp_set_num_threads) omp_set_num_threads(threads < 1 ? 1 : threads);
    p->pd = convolution_forward::primitive_desc(desc, attr, eng);
    // A reference implementation would be far slower than the caller's own loops.
    const std::string impl = p->pd.impl_info_str();
    if (std::getenv("KILN_DEBUG_DNNL_INT8")) std::fprintf(stderr, "dnnl int8 conv: %s\n", impl.c_str());
    if (impl.find("ref") != std::string::npos) return nullptr;
    p->conv = convolution_forward(p->pd);
    p->reorderSrc = p->pd.src_desc() != p->userSrc;
    p->reorderDst = p->pd.dst_desc() != p->userDst;
    if (p->reorderSrc)
      p->srcReorder = reorder(reorder::primitive_desc(eng, p->userSrc, eng, p->pd.src_desc()));
    if (p->reorderDst)
      p->dstReorder = reorder(reorder::primitive_desc(eng, p->pd.dst_desc(), eng, p->userDst));
    // The weights are reordered once, into the layout the primitive wants.
    p->weights.resize(p->pd.weights_desc().get_size());
    stream strm(eng);
    auto userW = memory(userWei, eng, shifted.data());
    auto convW = memory(p->pd.weights_desc(), eng, p->weights.data());
    reorder(userW, convW).execute(strm, userW, convW);
    strm.wait();
    return p;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

bool runInt8(const Int8Conv& p, const uint8_t* x, int32_t xz, int threads, Int8Result& out) {
  try {
    if (omp_set_num_threads) omp_set_num_threads(threads < 1 ? 1 : threads);
    const engine& eng = cpuEngine();
    stream strm(eng);
    thread_local std::vector<uint8_t> srcBuf, convDstBuf, dstBuf;
    auto scratch = [&](std::vector<uint8_t>& buf, const memory::desc& md) {
      if (buf.size() < md.get_size()) buf.resize(md.get_size());
      return memory(md, eng, buf.data());
    };
    auto userSrc = memory(p.userSrc, eng, const_cast<uint8_t*>(x));
    memory convSrc = userSrc;
    if (p.reorderSrc) {
      convSrc = scratch(srcBuf, p.pd.src_desc());
      p.srcReorder.execute(strm, userSrc, convSrc);
    }
    memory userDst = scratch(dstBuf, p.userDst);
    memory convDst = p.reorderDst ? scratch(convDstBuf, p.pd.dst_desc()) : userDst;
    int32_t zp = xz;
    auto zpMem = memory(memory::desc({1}, memory::data_type::s32, memory::format_tag::x), eng, &zp);
    auto convWei = memory(p.pd.weights_desc(), eng, const_cast<uint8_t*>(p.weights.data()));
    p.conv.execute(strm, {{DNNL_ARG_SRC, convSrc},
                          {DNNL_ARG_WEIGHTS, convWei},
                          {DNNL_ARG_DST, convDst},
                          {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zpMem}});
    if (p.reorderDst) p.dstReorder.execute(strm, convDst, userDst);
    strm.wait();
    out.acc = reinterpret_cast<const int32_t*>(dstBuf.data());
    out.channels = p.channels;
    out.corr = p.corr.empty() ? nullptr : p.corr.data();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

#else

bool available() { return false; }

bool run(int, const Conv2d&, const float*, const float*, const float*, float*) { return false; }

class Int8Conv {};
std::shared_ptr<Int8Conv> prepareInt8(int, const Conv2d&, bool, const uint8_t*, bool,
                                      const int32_t*) {
  return nullptr;
}
bool runInt8(const Int8Conv&, const uint8_t*, int32_t, int, Int8Result&) { return false; }

#endif

} // namespace kiln::rt::dnnl_conv
