// Signal-processing kernels: DFT, STFT, Hann/Hamming/Blackman windows and MelWeightMatrix.
#include <cmath>
#include <numbers>

#include "misc_util.h"

namespace kiln::rt {
namespace {

// Iterative radix-2 FFT for power-of-two n (audio frames are usually 256..2048 long, where the
// naive transform would dominate run time). `in` and `out` must not alias.
void fftPow2(const double* in, int64_t n, double sign, const std::vector<double>& cosT,
             const std::vector<double>& sinT, double* out) {
  int bits = 0;
  while ((int64_t{1} << bits) < n)
    ++bits;
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = 0;
    for (int b = 0; b < bits; ++b)
      if (i & (int64_t{1} << b)) r |= int64_t{1} << (bits - 1 - b);
    out[2 * r] = in[2 * i];
    out[2 * r + 1] = in[2 * i + 1];
  }
  for (int64_t len = 2; len <= n; len <<= 1) {
    const int64_t half = len / 2, step = n / len;
    for (int64_t start = 0; start < n; start += len) {
      for (int64_t j = 0; j < half; ++j) {
        const double c = cosT[static_cast<size_t>(j * step)];
        const double s = sign * sinT[static_cast<size_t>(j * step)];
        double* a = out + 2 * (start + j);
        double* b = out + 2 * (start + j + half);
        const double br = b[0] * c - b[1] * s, bi = b[0] * s + b[1] * c;
        b[0] = a[0] - br;
        b[1] = a[1] - bi;
        a[0] += br;
        a[1] += bi;
      }
    }
  }
  if (sign > 0) {
    for (int64_t i = 0; i < 2 * n; ++i)
      out[i] /= static_cast<double>(n);
  }
}

// Naive DFT of one length-n complex sequence (re/im interleaved) into `out` (n complex values),
// through a twiddle table indexed by (j*k) mod n so large products keep full precision.
void dftOne(const double* in, int64_t n, bool inverse, const std::vector<double>& cosT,
            const std::vector<double>& sinT, double* out) {
  const double sign = inverse ? 1.0 : -1.0;
  if (n >= 8 && (n & (n - 1)) == 0) {
    fftPow2(in, n, sign, cosT, sinT, out);
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    double re = 0, im = 0;
    int64_t m = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double c = cosT[static_cast<size_t>(m)], s = sign * sinT[static_cast<size_t>(m)];
      const double xr = in[2 * j], xi = in[2 * j + 1];
      re += xr * c - xi * s;
      im += xr * s + xi * c;
      m += k;
      if (m >= n) m -= n;
    }
    if (inverse) {
      re /= static_cast<double>(n);
      im /= static_cast<double>(n);
    }
    out[2 * k] = re;
    out[2 * k + 1] = im;
  }
}

void twiddles(int64_t n, std::vector<double>& cosT, std::vector<double>& sinT) {
  cosT.resize(static_cast<size_t>(n));
  sinT.resize(static_cast<size_t>(n));
  for (int64_t m = 0; m < n; ++m) {
    const double a = 2 * std::numbers::pi * static_cast<double>(m) / static_cast<double>(n);
    cosT[static_cast<size_t>(m)] = std::cos(a);
    sinT[static_cast<size_t>(m)] = std::sin(a);
  }
}

Status dft(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!miscIsReal(x.dtype())) return ctx.unsupported("input dtype is not floating point");
  const auto& dims = x.dims();
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (rank < 2 || (dims.back() != 1 && dims.back() != 2))
    return ctx.fail("input must end in a dimension of 1 (real) or 2 (complex)");
  int64_t axis = ctx.opset() >= 20 ? -2 : ctx.attrInt("axis", 1);
  if (ctx.opset() >= 20 && ctx.hasInput(2)) axis = ctx.inputInts(2).at(0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank - 1) return ctx.fail("axis out of range");
  const bool inverse = ctx.attrInt("inverse", 0) != 0;
  const bool onesided = ctx.attrInt("onesided", 0) != 0;
  const int64_t len = dims[static_cast<size_t>(axis)];
  // inverse with onesided is the inverse of a one-sided (real-input) transform, numpy's irfft:
  // the input holds bins 0..n/2 of a Hermitian spectrum, the output is the real signal of length
  // n (dft_length, else 2 * (bins - 1)).
  const bool realInverse = inverse && onesided;
  int64_t n = realInverse ? 2 * (len - 1) : len;
  if (ctx.hasInput(1)) n = ctx.inputInts(1).at(0);
  if (n <= 0) return ctx.fail("dft_length must be positive");
  const bool complexIn = dims.back() == 2;

  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i)
    outer *= dims[static_cast<size_t>(i)];
  for (int64_t i = axis + 1; i < rank - 1; ++i)
    inner *= dims[static_cast<size_t>(i)];
  const int64_t outLen = onesided && !realInverse ? n / 2 + 1 : n;
  const int64_t parts = realInverse ? 1 : 2; // the real inverse gives real values only
  std::vector<int64_t> outDims = dims;
  outDims[static_cast<size_t>(axis)] = outLen;
  outDims.back() = parts;

  std::vector<double> v = miscReadReal(x);
  std::vector<double> out(static_cast<size_t>(outer * outLen * inner * parts));
  std::vector<double> cosT, sinT, seq(static_cast<size_t>(2 * n)), res(static_cast<size_t>(2 * n));
  twiddles(n, cosT, sinT);
  const int64_t cw = complexIn ? 2 : 1;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t in = 0; in < inner; ++in) {
      std::fill(seq.begin(), seq.end(), 0.0);
      for (int64_t j = 0; j < n; ++j) {
        // The real inverse completes the spectrum by symmetry: bin j > n/2 is bin n - j conjugated.
        const int64_t from = realInverse && j > n / 2 ? n - j : j;
        if (from >= len || (!realInverse && j >= len)) continue;
        const size_t src = static_cast<size_t>(((o * len + from) * inner + in) * cw);
        const double conj = realInverse && j > n / 2 ? -1.0 : 1.0;
        seq[static_cast<size_t>(2 * j)] = v[src];
        if (complexIn) seq[static_cast<size_t>(2 * j + 1)] = conj * v[src + 1];
      }
      dftOne(seq.data(), n, inverse, cosT, sinT, res.data());
      for (int64_t k = 0; k < outLen; ++k) {
        const size_t dst = static_cast<size_t>(((o * outLen + k) * inner + in) * parts);
        out[dst] = res[static_cast<size_t>(2 * k)];
        if (parts == 2) out[dst + 1] = res[static_cast<size_t>(2 * k + 1)];
      }
    }
  }
  ctx.setOutput(0, miscMakeReal(x.dtype(), outDims, out));
  return Status::ok();
}

Status stft(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!miscIsReal(x.dtype())) return ctx.unsupported("signal dtype is not floating point");
  const auto& dims = x.dims();
  if (dims.size() != 3 || (dims[2] != 1 && dims[2] != 2))
    return ctx.fail("signal must be (batch, length, 1 or 2)");
  const int64_t batch = dims[0], len = dims[1];
  const bool complexIn = dims[2] == 2;
  const int64_t step = ctx.inputInts(1).at(0);
  std::vector<double> window;
  if (ctx.hasInput(2)) window = miscReadReal(ctx.input(2));
  int64_t frameLen = static_cast<int64_t>(window.size());
  if (ctx.hasInput(3)) frameLen = ctx.inputInts(3).at(0);
  if (frameLen <= 0) return ctx.fail("frame length is unknown: give a window or frame_length");
  if (window.empty()) window.assign(static_cast<size_t>(frameLen), 1.0);
  if (static_cast<int64_t>(window.size()) != frameLen)
    return ctx.fail("window length differs from frame_length");
  if (step <= 0) return ctx.fail("frame_step must be positive");
  if (len < frameLen) return ctx.fail("signal is shorter than one frame");
  const bool onesided = ctx.attrInt("onesided", 1) != 0;
  const int64_t frames = (len - frameLen) / step + 1;
  const int64_t bins = onesided ? frameLen / 2 + 1 : frameLen;

  std::vector<double> v = miscReadReal(x);
  std::vector<double> out(static_cast<size_t>(batch * frames * bins * 2));
  std::vector<double> cosT, sinT, seq(static_cast<size_t>(2 * frameLen)),
      res(static_cast<size_t>(2 * frameLen));
  twiddles(frameLen, cosT, sinT);
  const int64_t cw = complexIn ? 2 : 1;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t f = 0; f < frames; ++f) {
      for (int64_t j = 0; j < frameLen; ++j) {
        const size_t src = static_cast<size_t>((b * len + f * step + j) * cw);
        const double w = window[static_cast<size_t>(j)];
        seq[static_cast<size_t>(2 * j)] = v[src] * w;
        seq[static_cast<size_t>(2 * j + 1)] = complexIn ? v[src + 1] * w : 0.0;
      }
      dftOne(seq.data(), frameLen, false, cosT, sinT, res.data());
      std::copy(res.begin(), res.begin() + 2 * bins,
                out.begin() + static_cast<std::ptrdiff_t>((b * frames + f) * bins * 2));
    }
  }
  ctx.setOutput(0, miscMakeReal(x.dtype(), {batch, frames, bins, 2}, out));
  return Status::ok();
}

// Writes output 0 in the dtype named by the output_datatype attribute from double values.
Status setTypedOutput(KernelContext& ctx, const std::vector<int64_t>& dims,
                      const std::vector<double>& v) {
  auto dtype = dtypeFromOnnx(static_cast<int32_t>(ctx.attrInt("output_datatype", 1)));
  if (!dtype) return ctx.fail("unknown output_datatype");
  if (miscIsReal(*dtype)) {
    ctx.setOutput(0, miscMakeReal(*dtype, dims, v));
    return Status::ok();
  }
  auto t = castTensor(miscMakeReal(DType::Float64, dims, v), *dtype);
  if (!t) return ctx.unsupported("output_datatype is not supported");
  ctx.setOutput(0, std::move(*t));
  return Status::ok();
}

// Generalised cosine window a0 - a1 cos(2πk/N) + a2 cos(4πk/N), N = size (periodic) or size-1.
Status cosineWindow(KernelContext& ctx, double a0, double a1, double a2) {
  const int64_t size = ctx.inputInts(0).at(0);
  if (size < 0) return ctx.fail("size must be non-negative");
  const bool periodic = ctx.attrInt("periodic", 1) != 0;
  const double denom = static_cast<double>(periodic ? size : size - 1);
  std::vector<double> v(static_cast<size_t>(size));
  for (int64_t k = 0; k < size; ++k) {
    const double a = 2 * std::numbers::pi * static_cast<double>(k) / denom;
    v[static_cast<size_t>(k)] = a0 - a1 * std::cos(a) + a2 * std::cos(2 * a);
  }
  if (size == 1) v[0] = 1.0;
  return setTypedOutput(ctx, {size}, v);
}

Status hannWindow(KernelContext& ctx) { return cosineWindow(ctx, 0.5, 0.5, 0.0); }
Status hammingWindow(KernelContext& ctx) {
  return cosineWindow(ctx, 25.0 / 46.0, 1.0 - 25.0 / 46.0, 0.0);
}
Status blackmanWindow(KernelContext& ctx) { return cosineWindow(ctx, 0.42, 0.5, 0.08); }

Status melWeightMatrix(KernelContext& ctx) {
  const int64_t mels = ctx.inputInts(0).at(0);
  const int64_t dftLen = ctx.inputInts(1).at(0);
  const int64_t rate = ctx.inputInts(2).at(0);
  const double lowHz = elementAsDouble(ctx.input(3), 0);
  const double highHz = elementAsDouble(ctx.input(4), 0);
  if (mels <= 0 || dftLen <= 0 || rate <= 0) return ctx.fail("sizes must be positive");
  const int64_t specBins = dftLen / 2 + 1;
  auto toMel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double lowMel = toMel(lowHz), highMel = toMel(highHz);
  // Mel band edges spaced evenly in mel over mels+2 points, mapped back to spectrogram bins.
  const double melStep = (highMel - lowMel) / static_cast<double>(mels + 2);
  std::vector<int64_t> edges(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double mel = static_cast<double>(i) * melStep + lowMel;
    const double hz = 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
    edges[static_cast<size_t>(i)] = static_cast<int64_t>(
        std::floor(static_cast<double>(dftLen + 1) * hz / static_cast<double>(rate)));
  }
  std::vector<double> out(static_cast<size_t>(specBins * mels), 0.0);
  auto set = [&](int64_t bin, int64_t mel, double value) {
    if (bin >= 0 && bin < specBins) out[static_cast<size_t>(bin * mels + mel)] = value;
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t lo = edges[static_cast<size_t>(i)], mid = edges[static_cast<size_t>(i + 1)],
                  hi = edges[static_cast<size_t>(i + 2)];
    if (mid == lo) {
      set(mid, i, 1.0);
    } else {
      for (int64_t j = lo; j <= mid; ++j)
        set(j, i, static_cast<double>(j - lo) / static_cast<double>(mid - lo));
    }
    if (hi > mid) {
      for (int64_t j = mid; j < hi; ++j)
        set(j, i, static_cast<double>(hi - j) / static_cast<double>(hi - mid));
    }
  }
  return setTypedOutput(ctx, {specBins, mels}, out);
}

KILN_REGISTER_KERNEL("DFT", dft);
KILN_REGISTER_KERNEL("STFT", stft);
KILN_REGISTER_KERNEL("HannWindow", hannWindow);
KILN_REGISTER_KERNEL("HammingWindow", hammingWindow);
KILN_REGISTER_KERNEL("BlackmanWindow", blackmanWindow);
KILN_REGISTER_KERNEL("MelWeightMatrix", melWeightMatrix);

} // namespace
} // namespace kiln::rt
