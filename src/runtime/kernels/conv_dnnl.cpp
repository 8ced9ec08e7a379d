// oneDNN convolution (conv_dnnl.h). oneDNN lays the tensors out in its own blocked formats; the
// NCHW input and output are reordered around the primitive, constant float weights once per node
// (the caller keeps them in the node's state, PackedWeights), other weights on every call. The
// primitive descriptor and the primitives are made once per convolution geometry (and thread
// count) and kept per thread. The integer convolution (prepareInt8 / runInt8) is made per node
// instead, its constant weights reordered once and kept in the node's state for the executor's
// lifetime.
#include "conv_dnnl.h"

#ifdef KILN_HAVE_DNNL
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "thread_pool.h"

// oneDNN's CPU runtime here is OpenMP; the thread count of its parallel regions follows the
// executor's --threads where the work pays for waking the OpenMP workers (pool::threadsFor).
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#endif

namespace kiln::rt::dnnl_conv {

#ifdef KILN_HAVE_DNNL

bool available() { return true; }

namespace {

using namespace dnnl;

void setOmpThreads(int threads) {
  if (omp_set_num_threads) omp_set_num_threads(threads < 1 ? 1 : threads);
}

// Threads for one convolution: its multiply-adds against one fork-join of the OpenMP team. A
// small convolution (all of openWakeWord's embedding model) runs on the calling thread alone:
// waking a sleeping worker costs as much as it would take over. The primitive is made for the
// count chosen here, so the same shapes and --threads always run the same primitive.
int convThreads(int threads, const Conv2d& c) {
  const double macs = static_cast<double>(c.batch * c.filters * c.outHeight * c.outWidth) *
                      static_cast<double>(c.channels * c.kernel[0] * c.kernel[1]);
  return pool::threadsFor(threads, macs * pool::kNsPerMac);
}

// Threads for a layout reorder of `bytes` (a blocked copy: about two streamed elements per float).
int reorderThreads(int threads, size_t bytes) {
  return pool::threadsFor(threads,
                          static_cast<double>(bytes / sizeof(float)) * 2.0 * pool::kNsPerElement);
}

// What one convolution geometry needs, made on its first call and reused by later ones on this
// thread: the primitive descriptor (choosing the implementation is the expensive part of a small
// convolution's call) and the conv and reorder primitives. Only the memory objects that wrap this
// call's pointers are made per call (the weights are reordered per call unless the caller keeps
// them packed).
struct Prepared {
  memory::desc userSrc, userWei, userDst, bias;
  memory::desc userSrcLast, userDstLast; // the same tensors channels-last (NHWC)
  convolution_forward::primitive_desc pd;
  convolution_forward conv;
  reorder srcReorder, weiReorder, dstReorder; // empty when the layouts already agree
  reorder srcLastReorder;                     // from a channels-last source
  bool reorderSrc = false, reorderWei = false, reorderDst = false, reorderSrcLast = false;
  bool dstIsLast = false; // the primitive writes plain NHWC
};

using Key = std::array<int64_t, 20>;
static_assert(std::is_same_v<Key, decltype(PackedWeights::key)>);

Key keyOf(int threads, const Conv2d& c, bool hasBias) {
  return {c.batch,        c.channels,     c.height,       c.width,     c.filters,
          c.outHeight,    c.outWidth,     c.kernel[0],    c.kernel[1], c.strides[0],
          c.strides[1],   c.dilations[0], c.dilations[1], c.padBegin[0], c.padBegin[1],
          c.padEnd[0],    c.padEnd[1],    hasBias ? 1 : 0, threads,   0};
}

const engine& cpuEngine() {
  static engine eng(engine::kind::cpu, 0);
  return eng;
}

// The convolution window of c in oneDNN's terms (its dilations count the gaps: ONNX's minus 1).
struct WindowDims {
  memory::dims strides, dilates, padL, padR;
  explicit WindowDims(const Conv2d& c)
      : strides{c.strides[0], c.strides[1]}, dilates{c.dilations[0] - 1, c.dilations[1] - 1},
        padL{c.padBegin[0], c.padBegin[1]}, padR{c.padEnd[0], c.padEnd[1]} {}
};

const Prepared& prepare(int threads, const Conv2d& c, bool hasBias) {
  using tag = memory::format_tag;
  using dt = memory::data_type;
  thread_local std::map<Key, Prepared> cache;
  const Key key = keyOf(threads, c, hasBias);
  auto found = cache.find(key);
  if (found != cache.end()) return found->second;
  // Inputs whose shapes change on every run would grow the cache without bound: start over.
  if (cache.size() >= 512) cache.clear();
  // oneDNN sizes its work split for the OpenMP thread count current when the primitive is made.
  setOmpThreads(threads);
  const engine& eng = cpuEngine();
  const memory::dims src = {c.batch, c.channels, c.height, c.width};
  const memory::dims dst = {c.batch, c.filters, c.outHeight, c.outWidth};
  const memory::dims wei = {c.filters, c.channels, c.kernel[0], c.kernel[1]};
  const WindowDims win(c);
  Prepared p;
  p.userSrc = memory::desc(src, dt::f32, tag::nchw);
  p.userWei = memory::desc(wei, dt::f32, tag::oihw);
  p.userDst = memory::desc(dst, dt::f32, tag::nchw);
  p.bias = hasBias ? memory::desc({c.filters}, dt::f32, tag::x) : memory::desc();
  auto desc = hasBias ? convolution_forward::desc(
                            prop_kind::forward_inference, algorithm::convolution_direct,
                            {src, dt::f32, tag::any}, {wei, dt::f32, tag::any}, p.bias,
                            {dst, dt::f32, tag::any}, win.strides, win.dilates, win.padL,
                            win.padR)
                      : convolution_forward::desc(
                            prop_kind::forward_inference, algorithm::convolution_direct,
                            {src, dt::f32, tag::any}, {wei, dt::f32, tag::any},
                            {dst, dt::f32, tag::any}, win.strides, win.dilates, win.padL,
                            win.padR);
  p.pd = convolution_forward::primitive_desc(desc, eng);
  p.conv = convolution_forward(p.pd);
  p.reorderSrc = p.pd.src_desc() != p.userSrc;
  p.reorderWei = p.pd.weights_desc() != p.userWei;
  p.reorderDst = p.pd.dst_desc() != p.userDst;
  if (p.reorderSrc) p.srcReorder = reorder(reorder::primitive_desc(eng, p.userSrc, eng, p.pd.src_desc()));
  if (p.reorderWei)
    p.weiReorder = reorder(reorder::primitive_desc(eng, p.userWei, eng, p.pd.weights_desc()));
  if (p.reorderDst) p.dstReorder = reorder(reorder::primitive_desc(eng, p.pd.dst_desc(), eng, p.userDst));
  p.userSrcLast = memory::desc(src, dt::f32, tag::nhwc);
  p.userDstLast = memory::desc(dst, dt::f32, tag::nhwc);
  p.reorderSrcLast = p.pd.src_desc() != p.userSrcLast;
  if (p.reorderSrcLast)
    p.srcLastReorder = reorder(reorder::primitive_desc(eng, p.userSrcLast, eng, p.pd.src_desc()));
  p.dstIsLast = p.pd.dst_desc() == p.userDstLast;
  return cache.emplace(key, std::move(p)).first->second;
}

} // namespace

bool packedFor(const PackedWeights& packed, int threads, const Conv2d& c, bool hasBias,
               const void* weightsId) {
  if (!packed.source || packed.source != weightsId) return false;
  threads = convThreads(threads, c);
  try {
    const Prepared& p = prepare(threads, c, hasBias);
    return p.reorderWei && packed.key == keyOf(threads, c, hasBias) &&
           packed.size == p.pd.weights_desc().get_size();
  } catch (const dnnl::error&) {
    return false;
  }
}

bool writesChannelsLast(int threads, const Conv2d& c, bool hasBias) {
  try {
    // The primitive is built for the thread count run() gives it, so ask about that one.
    return prepare(convThreads(threads, c), c, hasBias).dstIsLast;
  } catch (const dnnl::error&) {
    return false;
  }
}

bool run(int threads, const Conv2d& c, const float* x, const float* w, const float* bias, float* y,
         PackedWeights* packed, const void* weightsId, bool xChannelsLast, bool yChannelsLast) {
  const int requested = threads;
  threads = convThreads(threads, c);
  try {
    const Prepared& p = prepare(threads, c, bias != nullptr);
    if (yChannelsLast && !p.dstIsLast) return false;
    const engine& eng = cpuEngine();
    stream strm(eng);
    auto userSrc = memory(xChannelsLast ? p.userSrcLast : p.userSrc, eng, const_cast<float*>(x));
    auto userWei = memory(p.userWei, eng, const_cast<float*>(w));
    auto userDst = memory(yChannelsLast ? p.userDstLast : p.userDst, eng, y);
    const bool reorderSrc = xChannelsLast ? p.reorderSrcLast : p.reorderSrc;
    const bool reorderDst = !yChannelsLast && p.reorderDst;
    // Blocked copies in the executor's scratch memory (the run's planned arena: no fresh pages
    // each run, and their bytes are shared with tensors whose lifetimes do not overlap).
    Scratch<uint8_t> srcBuf, weiBuf, dstBuf;
    auto scratch = [&](Scratch<uint8_t>& buf, const memory::desc& md) {
      buf.reset(md.get_size());
      return memory(md, eng, buf.data());
    };
    memory convSrc = userSrc, convWei = userWei, convDst = userDst;
    if (reorderSrc) {
      convSrc = scratch(srcBuf, p.pd.src_desc());
      setOmpThreads(reorderThreads(requested, p.userSrc.get_size()));
      (xChannelsLast ? p.srcLastReorder : p.srcReorder).execute(strm, userSrc, convSrc);
    }
    if (p.reorderWei && packed) {
      // Constant weights: rearranged on the first call for this geometry, then reused.
      const memory::desc md = p.pd.weights_desc();
      const Key key = keyOf(threads, c, bias != nullptr);
      const void* id = weightsId ? weightsId : static_cast<const void*>(w);
      const bool fresh =
          packed->source == id && packed->key == key && packed->size == md.get_size();
      if (!fresh) {
        packed->source = nullptr;
        packed->bytes.assign(md.get_size() + 64, 0);
        packed->size = md.get_size();
      }
      uint8_t* base = packed->bytes.data();
      base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
      convWei = memory(md, eng, base);
      if (!fresh) {
        setOmpThreads(reorderThreads(requested, md.get_size()));
        p.weiReorder.execute(strm, userWei, convWei);
        packed->source = id;
        packed->key = key;
      }
    } else if (p.reorderWei) {
      convWei = scratch(weiBuf, p.pd.weights_desc());
      setOmpThreads(reorderThreads(requested, p.userWei.get_size()));
      p.weiReorder.execute(strm, userWei, convWei);
    }
    if (reorderDst) convDst = scratch(dstBuf, p.pd.dst_desc());
    std::unordered_map<int, memory> args = {
        {DNNL_ARG_SRC, convSrc}, {DNNL_ARG_WEIGHTS, convWei}, {DNNL_ARG_DST, convDst}};
    if (bias) args.emplace(DNNL_ARG_BIAS, memory(p.bias, eng, const_cast<float*>(bias)));
    setOmpThreads(threads);
    p.conv.execute(strm, args);
    if (reorderDst) {
      setOmpThreads(reorderThreads(requested, p.userDst.get_size()));
      p.dstReorder.execute(strm, convDst, userDst);
    }
    strm.wait();
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

// ---- integer convolution ----

// oneDNN sums int8 products exactly in int32 but passes the sums through float32 on the way
// out, which holds every integer only below 2^24. The input channels are therefore cut into
// chunks whose every output stays below 2^24 in magnitude whatever x is (255 * the sum of
// |w - base| over the chunk, per filter, and 255 * the chunk's taps for the all-ones filter); each
// chunk is its own convolution and the int32 sums of the chunks are added.
constexpr int64_t kExactLimit = ((int64_t{1} << 24) - 1) / 255; // largest exact sum of |w| per filter

struct Int8Chunk {
  int64_t c0 = 0, c1 = 0; // input channels [c0, c1)
  memory::desc userSrc;   // the slice of the NCHW input
  convolution_forward::primitive_desc pd;
  convolution_forward conv;
  reorder srcReorder, dstReorder;
  bool reorderSrc = false, reorderDst = false;
  std::vector<uint8_t> weights; // in pd.weights_desc()'s layout
};

class Int8Conv {
 public:
  int threads = 1;           // OpenMP threads of the chunks' convolutions (convThreads)
  int64_t channels = 0;      // filters, plus the all-ones filter when corr is used
  std::vector<int32_t> corr; // base - wz[m]; empty when all are 0
  memory::desc userDst;
  std::vector<Int8Chunk> chunks;
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
    p->threads = threads = convThreads(threads, c);
    const int32_t base = wSigned ? 0 : 128;
    const int64_t taps = c.kernel[0] * c.kernel[1], perFilter = c.channels * taps;
    bool needCorr = false;
    for (int64_t m = 0; m < c.filters; ++m)
      needCorr |= wz[m] != base;
    p->channels = c.filters + (needCorr ? 1 : 0);
    if (needCorr) {
      p->corr.resize(static_cast<size_t>(c.filters));
      for (int64_t m = 0; m < c.filters; ++m)
        p->corr[static_cast<size_t>(m)] = base - wz[m];
    }
    // w - base as int8 (exact: uint8 - 128 and int8 both lie in [-128, 127]).
    std::vector<int8_t> shifted(static_cast<size_t>(c.filters * perFilter));
    for (size_t i = 0; i < shifted.size(); ++i) {
      const int32_t v = wSigned ? static_cast<int32_t>(static_cast<int8_t>(w[i])) : w[i];
      shifted[i] = static_cast<int8_t>(v - base);
    }
    // Chunks of input channels, greedily as long as every filter's sum of |w| stays exact.
    if (taps * 128 > kExactLimit) return nullptr; // one channel alone could exceed 2^24
    std::vector<int64_t> bounds = {0};
    std::vector<int64_t> running(static_cast<size_t>(c.filters), 0);
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      bool fits = (ch - bounds.back() + 1) * taps <= kExactLimit;
      std::vector<int64_t> add(static_cast<size_t>(c.filters), 0);
      for (int64_t m = 0; m < c.filters; ++m) {
        const int8_t* wm = shifted.data() + m * perFilter + ch * taps;
        for (int64_t t = 0; t < taps; ++t)
          add[static_cast<size_t>(m)] += wm[t] < 0 ? -wm[t] : wm[t];
        fits = fits && running[static_cast<size_t>(m)] + add[static_cast<size_t>(m)] <= kExactLimit;
      }
      if (!fits) {
        bounds.push_back(ch);
        std::fill(running.begin(), running.end(), 0);
      }
      for (size_t m = 0; m < running.size(); ++m)
        running[m] += add[m];
    }
    bounds.push_back(c.channels);
    if (bounds.size() > 9) return nullptr; // too many passes over the output to pay off

    const engine& eng = cpuEngine();
    stream strm(eng);
    const memory::dims dst = {c.batch, p->channels, c.outHeight, c.outWidth};
    const WindowDims win(c);
    const dt srcType = xSigned ? dt::s8 : dt::u8;
    p->userDst = memory::desc(dst, dt::s32, tag::nchw);
    setOmpThreads(threads);
    const bool debug = std::getenv("KILN_DEBUG_DNNL_INT8") != nullptr;
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      Int8Chunk ck;
      ck.c0 = bounds[k];
      ck.c1 = bounds[k + 1];
      const int64_t cc = ck.c1 - ck.c0;
      const memory::dims src = {c.batch, cc, c.height, c.width};
      const memory::dims wei = {p->channels, cc, c.kernel[0], c.kernel[1]};
      ck.userSrc = memory::desc(src, srcType,
                                memory::dims{c.channels * c.height * c.width, c.height * c.width,
                                             c.width, 1});
      // This chunk's weights, the all-ones filter last.
      std::vector<int8_t> part(static_cast<size_t>(p->channels * cc * taps), 1);
      for (int64_t m = 0; m < c.filters; ++m)
        std::copy(shifted.begin() + m * perFilter + ck.c0 * taps,
                  shifted.begin() + m * perFilter + ck.c1 * taps,
                  part.begin() + m * cc * taps);
      convolution_forward::desc desc(prop_kind::forward_inference, algorithm::convolution_direct,
                                     {src, srcType, tag::any}, {wei, dt::s8, tag::any},
                                     {dst, dt::s32, tag::any}, win.strides, win.dilates,
                                     win.padL, win.padR);
      primitive_attr attr;
      attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
      ck.pd = convolution_forward::primitive_desc(desc, attr, eng);
      // A reference implementation would be far slower than the caller's own loops.
      const std::string impl = ck.pd.impl_info_str();
      if (debug)
        std::fprintf(stderr, "dnnl int8 conv: %s, channels [%ld, %ld) of %ld\n", impl.c_str(),
                     static_cast<long>(ck.c0), static_cast<long>(ck.c1),
                     static_cast<long>(c.channels));
      if (impl.find("ref") != std::string::npos) return nullptr;
      ck.conv = convolution_forward(ck.pd);
      ck.reorderSrc = ck.pd.src_desc() != ck.userSrc;
      ck.reorderDst = ck.pd.dst_desc() != p->userDst;
      if (ck.reorderSrc)
        ck.srcReorder = reorder(reorder::primitive_desc(eng, ck.userSrc, eng, ck.pd.src_desc()));
      if (ck.reorderDst)
        ck.dstReorder = reorder(reorder::primitive_desc(eng, ck.pd.dst_desc(), eng, p->userDst));
      // The weights are reordered once, into the layout the primitive wants.
      ck.weights.resize(ck.pd.weights_desc().get_size());
      auto userW = memory(memory::desc(wei, dt::s8, tag::oihw), eng, part.data());
      auto convW = memory(ck.pd.weights_desc(), eng, ck.weights.data());
      reorder(userW, convW).execute(strm, userW, convW);
      p->chunks.push_back(std::move(ck));
    }
    strm.wait();
    return p;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

bool runInt8(const Int8Conv& p, const uint8_t* x, int32_t xz, int threads, Int8Result& out) {
  try {
    const engine& eng = cpuEngine();
    stream strm(eng);
    // Blocked copies and chunk sums in the executor's scratch memory (the run's planned arena), as
    // the float path does; the sums outlive this call in `out`.
    Scratch<uint8_t>& dstBuf = out.accBytes;
    Scratch<uint8_t> srcBuf, convDstBuf, partBuf;
    auto scratch = [&](Scratch<uint8_t>& buf, const memory::desc& md) {
      if (buf.size() < md.get_size()) buf.reset(md.get_size());
      return memory(md, eng, buf.data());
    };
    int32_t zp = xz;
    auto zpMem = memory(memory::desc({1}, memory::data_type::s32, memory::format_tag::x), eng, &zp);
    const size_t count = p.userDst.get_size() / sizeof(int32_t);
    memory userDst = scratch(dstBuf, p.userDst);
    for (size_t k = 0; k < p.chunks.size(); ++k) {
      const Int8Chunk& ck = p.chunks[k];
      const auto& srcDims = ck.userSrc.dims();
      const uint8_t* slice = x + ck.c0 * srcDims[2] * srcDims[3];
      auto userSrc = memory(ck.userSrc, eng, const_cast<uint8_t*>(slice));
      memory convSrc = userSrc;
      if (ck.reorderSrc) {
        convSrc = scratch(srcBuf, ck.pd.src_desc());
        setOmpThreads(reorderThreads(threads, ck.pd.src_desc().get_size() * 4));
        ck.srcReorder.execute(strm, userSrc, convSrc);
      }
      // The first chunk lands in the result; later ones in partBuf, then added.
      memory target = k == 0 ? userDst : scratch(partBuf, p.userDst);
      memory convDst = ck.reorderDst ? scratch(convDstBuf, ck.pd.dst_desc()) : target;
      auto convWei = memory(ck.pd.weights_desc(), eng, const_cast<uint8_t*>(ck.weights.data()));
      setOmpThreads(p.threads);
      ck.conv.execute(strm, {{DNNL_ARG_SRC, convSrc},
                             {DNNL_ARG_WEIGHTS, convWei},
                             {DNNL_ARG_DST, convDst},
                             {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zpMem}});
      if (ck.reorderDst) {
        setOmpThreads(reorderThreads(threads, p.userDst.get_size()));
        ck.dstReorder.execute(strm, convDst, target);
      }
      strm.wait();
      if (k > 0) {
        // Wrap-around int32 sums (exact whenever the total fits, as ONNX's output must).
        auto* sum = reinterpret_cast<uint32_t*>(dstBuf.data());
        const auto* part = reinterpret_cast<const uint32_t*>(partBuf.data());
        for (size_t i = 0; i < count; ++i)
          sum[i] += part[i];
      }
    }
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

bool run(int, const Conv2d&, const float*, const float*, const float*, float*, PackedWeights*,
         const void*, bool, bool) {
  return false;
}

bool writesChannelsLast(int, const Conv2d&, bool) { return false; }

bool packedFor(const PackedWeights&, int, const Conv2d&, bool, const void*) { return false; }

class Int8Conv {};
std::shared_ptr<Int8Conv> prepareInt8(int, const Conv2d&, bool, const uint8_t*, bool,
                                      const int32_t*) {
  return nullptr;
}
bool runInt8(const Int8Conv&, const uint8_t*, int32_t, int, Int8Result&) { return false; }

#endif

} // namespace kiln::rt::dnnl_conv
