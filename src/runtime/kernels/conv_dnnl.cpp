// oneDNN convolution (conv_dnnl.h). oneDNN lays the tensors out in its own blocked formats; the
// NCHW input and output are reordered around the primitive, the weights on every call (the
// executor holds no per-node state). Primitives come from oneDNN's own primitive cache, so the
// JIT code is generated once per shape.
#include "conv_dnnl.h"

#ifdef KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

// oneDNN's CPU runtime here is OpenMP; the thread count of its parallel regions follows the
// executor's --threads.
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

namespace kiln::rt::dnnl_conv {

#ifdef KILN_HAVE_DNNL

bool available() { return true; }

bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias,
         float* y) {
  using namespace dnnl;
  using tag = memory::format_tag;
  using dt = memory::data_type;
  try {
    static engine eng(engine::kind::cpu, 0);
    stream strm(eng);
    if (omp_set_num_threads) omp_set_num_threads(threads < 1 ? 1 : threads);
    const memory::dims src = {c.batch, c.channels, c.height, c.width};
    const memory::dims dst = {c.batch, c.filters, c.outHeight, c.outWidth};
    const memory::dims wei = {c.filters, c.channels, c.kernel[0], c.kernel[1]};
    const memory::dims strides = {c.strides[0], c.strides[1]};
    const memory::dims dilates = {c.dilations[0] - 1, c.dilations[1] - 1};
    const memory::dims padL = {c.padBegin[0], c.padBegin[1]}, padR = {c.padEnd[0], c.padEnd[1]};
    auto userSrc = memory({src, dt::f32, tag::nchw}, eng, const_cast<float*>(x));
    auto userWei = memory({wei, dt::f32, tag::oihw}, eng, const_cast<float*>(w));
    auto userDst = memory({dst, dt::f32, tag::nchw}, eng, y);
    const memory::desc biasMd = bias ? memory::desc({c.filters}, dt::f32, tag::x) : memory::desc();
    auto desc = bias ? convolution_forward::desc(
                           prop_kind::forward_inference, algorithm::convolution_direct,
                           {src, dt::f32, tag::any}, {wei, dt::f32, tag::any}, biasMd,
                           {dst, dt::f32, tag::any}, strides, dilates, padL, padR)
                     : convolution_forward::desc(
                           prop_kind::forward_inference, algorithm::convolution_direct,
                           {src, dt::f32, tag::any}, {wei, dt::f32, tag::any},
                           {dst, dt::f32, tag::any}, strides, dilates, padL, padR);
    auto pd = convolution_forward::primitive_desc(desc, eng);
    // Blocked copies live in per-thread buffers kept between calls (no fresh pages each run).
    thread_local std::vector<uint8_t> srcBuf, weiBuf, dstBuf;
    auto scratch = [&](std::vector<uint8_t>& buf, const memory::desc& md) {
      if (buf.size() < md.get_size()) buf.resize(md.get_size());
      return memory(md, eng, buf.data());
    };
    memory convSrc = userSrc, convWei = userWei, convDst = userDst;
    if (pd.src_desc() != userSrc.get_desc()) {
      convSrc = scratch(srcBuf, pd.src_desc());
      reorder(userSrc, convSrc).execute(strm, userSrc, convSrc);
    }
    if (pd.weights_desc() != userWei.get_desc()) {
      convWei = scratch(weiBuf, pd.weights_desc());
      reorder(userWei, convWei).execute(strm, userWei, convWei);
    }
    if (pd.dst_desc() != userDst.get_desc()) convDst = scratch(dstBuf, pd.dst_desc());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, convSrc}, {DNNL_ARG_WEIGHTS, convWei}, {DNNL_ARG_DST, convDst}};
    if (bias)
      args.emplace(DNNL_ARG_BIAS, memory(biasMd, eng, const_cast<float*>(bias)));
    convolution_forward(pd).execute(strm, args);
    if (convDst != userDst) reorder(convDst, userDst).execute(strm, convDst, userDst);
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
