// oneDNN convolution (conv_dnnl.h). oneDNN lays the tensors out in its own blocked formats; the
// NCHW input and output are reordered around the primitive, the weights on every call (the
// executor holds no per-node state). The primitive descriptor and the primitives are made once per
// convolution geometry (and thread count) and kept per thread.
#include "conv_dnnl.h"

#ifdef KILN_HAVE_DNNL
#include <array>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>

#include "kiln/runtime/memory.h"
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
    // Blocked copies in the executor's scratch memory (the run's planned arena: no fresh pages
    // each run, and their bytes are shared with tensors whose lifetimes do not overlap).
    Scratch<uint8_t> srcBuf, weiBuf, dstBuf;
    auto scratch = [&](Scratch<uint8_t>& buf, const memory::desc& md) {
      buf.reset(md.get_size());
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

#else

bool available() { return false; }

bool run(int, const Conv2d&, const float*, const float*, const float*, float*) { return false; }

#endif

} // namespace kiln::rt::dnnl_conv
