// Pieces the NN kernels share: BLAS entry points, float staging of fp16/bf16 tensors and the
// window geometry (kernel, strides, dilations, pads, auto_pad) of Conv and the pooling ops.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <type_traits>
#include <vector>

#include "kiln/runtime/kernel.h"
#include "kiln/runtime/half_block.h"

namespace kiln::rt::nn {

// Row-major C = alpha * op(A) * op(B) + beta * C through OpenBLAS, run on `threads` threads so
// that results depend only on the thread count the caller asked for.
// `blockDone(j0, cols)`, when given, runs on the thread that computed columns [j0, j0 + cols) of C
// right after them (while they are in cache).
using GemmBlockDone = std::function<void(int64_t j0, int64_t cols)>;
void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n, int64_t k, float alpha,
          const float* a, int64_t lda, const float* b, int64_t ldb, float beta, float* c,
          int64_t ldc, const GemmBlockDone* blockDone = nullptr);
void gemm(int threads, bool transA, bool transB, int64_t m, int64_t n, int64_t k, double alpha,
          const double* a, int64_t lda, const double* b, int64_t ldb, double beta, double* c,
          int64_t ldc);

// Plain-loop GEMM for integer types (no BLAS has them); C = A * B (+ C when accumulate).
template <typename T>
void gemmLoops(bool transA, bool transB, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
               const T* b, int64_t ldb, T* c, int64_t ldc, bool accumulate) {
  for (int64_t i = 0; i < m; ++i) {
    T* crow = c + i * ldc;
    if (!accumulate)
      for (int64_t j = 0; j < n; ++j)
        crow[j] = T{};
    for (int64_t p = 0; p < k; ++p) {
      T av = transA ? a[p * lda + i] : a[i * lda + p];
      if (av == T{}) continue;
      if (!transB) {
        const T* brow = b + p * ldb;
        for (int64_t j = 0; j < n; ++j)
          crow[j] += av * brow[j];
      } else {
        for (int64_t j = 0; j < n; ++j)
          crow[j] += av * b[j * ldb + p];
      }
    }
  }
}

template <typename T> constexpr DType dtypeOf() {
  if constexpr (std::is_same_v<T, float>)
    return DType::Float32;
  else if constexpr (std::is_same_v<T, double>)
    return DType::Float64;
  else if constexpr (std::is_same_v<T, int8_t>)
    return DType::Int8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return DType::UInt8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return DType::Int16;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return DType::UInt16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return DType::Int32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return DType::UInt32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return DType::Int64;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return DType::UInt64;
  else
    return DType::Undefined;
}

// BatchNormalization (inference) as y = x * mul + add per channel; the Conv epilogue (fusion.h)
// computes its factors with these too.
template <typename T> T batchNormMul(float scale, double var, double epsilon) {
  return static_cast<T>(scale / std::sqrt(var + epsilon));
}
template <typename T> T batchNormAdd(float bias, double mean, T mul) {
  return static_cast<T>(bias - mean * static_cast<double>(mul));
}

inline bool isHalfLike(DType d) { return d == DType::Float16 || d == DType::BFloat16; }
inline bool isFloatLike(DType d) {
  return d == DType::Float32 || d == DType::Float64 || isHalfLike(d);
}

// Calls fn(T{}) with double for Float64 and float for Float32/Float16/BFloat16 (halves compute in
// float); false for every other dtype.
template <typename Fn> bool dispatchFloat(DType dtype, Fn&& fn) {
  if (dtype == DType::Float64) {
    fn(double{});
    return true;
  }
  if (dtype == DType::Float32 || isHalfLike(dtype)) {
    fn(float{});
    return true;
  }
  return false;
}

// A tensor's elements as T: a view when the dtype already is T, otherwise a converted copy (for
// fp16/bf16 weights the executor's float32 copy, made once).
template <typename T> class Staged {
 public:
  explicit Staged(const Tensor& t) {
    if (t.dtype() == dtypeOf<T>()) {
      ptr_ = reinterpret_cast<const T*>(t.data());
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      if ((cached_ = cachedWidening(t))) {
        ptr_ = reinterpret_cast<const float*>(cached_->data());
        return;
      }
    }
    const uint64_t n = t.elementCount();
    copy_.reset(n);
    if (t.dtype() == DType::Float16) {
      const auto* src = reinterpret_cast<const uint16_t*>(t.data());
      if constexpr (std::is_same_v<T, float>) {
        halvesToFloats(src, copy_.data(), n);
      } else {
        for (uint64_t i = 0; i < n; ++i)
          copy_[i] = static_cast<T>(halfToFloat(src[i]));
      }
    } else if (t.dtype() == DType::BFloat16) {
      const auto* src = reinterpret_cast<const uint16_t*>(t.data());
      for (uint64_t i = 0; i < n; ++i)
        copy_[i] = static_cast<T>(bfloat16ToFloat(src[i]));
    } else {
      for (uint64_t i = 0; i < n; ++i)
        copy_[i] = static_cast<T>(elementAsDouble(t, i));
    }
    ptr_ = copy_.data();
  }
  const T* data() const { return ptr_; }
  T operator[](uint64_t i) const { return ptr_[i]; }

 private:
  Scratch<T> copy_;
  std::shared_ptr<const Buffer> cached_;
  const T* ptr_ = nullptr;
};

// An output of `dtype` filled as T; halves are written into a float scratch and rounded at
// finish(). Uninitialised unless `init` asks for zeros (see OutTensor).
template <typename T> class StagedOut {
 public:
  StagedOut(DType dtype, std::vector<int64_t> dims, Init init = Init::Uninitialised)
      : out_(dtype, std::move(dims), dtype == dtypeOf<T>() ? init : Init::Uninitialised) {
    if (dtype == dtypeOf<T>()) {
      ptr_ = out_.template data<T>();
    } else {
      scratch_.reset(out_.elementCount(), init);
      ptr_ = scratch_.data();
    }
  }
  T* data() { return ptr_; }
  uint64_t elementCount() const { return out_.elementCount(); }
  Tensor finish() && {
    if (!scratch_.empty()) {
      auto* dst = out_.template data<uint16_t>();
      const bool half = out_.dtype() == DType::Float16;
      if constexpr (std::is_same_v<T, float>) {
        if (half) {
          floatsToHalves(scratch_.data(), dst, scratch_.size());
          return std::move(out_).finish();
        }
      }
      for (size_t i = 0; i < scratch_.size(); ++i) {
        float v = static_cast<float>(scratch_[i]);
        dst[i] = half ? floatToHalf(v) : floatToBfloat16(v);
      }
    }
    return std::move(out_).finish();
  }

 private:
  OutTensor out_;
  Scratch<T> scratch_;
  T* ptr_ = nullptr;
};

inline int64_t product(const std::vector<int64_t>& v, size_t from = 0) {
  int64_t p = 1;
  for (size_t i = from; i < v.size(); ++i)
    p *= v[i];
  return p;
}

// Sliding-window geometry over the spatial axes of an [N, C, spatial...] tensor.
struct Window {
  std::vector<int64_t> in, kernel, strides, dilations, padBegin, padEnd, out;
  size_t rank() const { return in.size(); }
  int64_t effectiveKernel(size_t d) const { return (kernel[d] - 1) * dilations[d] + 1; }
};

// in + padBegin + padEnd - effectiveKernel on spatial axis d, or nullopt when computing the
// window geometry of that axis would overflow int64 (huge kernel, dilation, pads or stride).
std::optional<int64_t> checkedWindowSpan(const Window& w, size_t d);
// K5002 unless product(in), product(kernel), product(out) and product(kernel) * product(out)
// all fit (checked_math.h): kernels index planes and column matrices with them.
Status checkWindowProducts(const KernelContext& ctx, const Window& w);

// Reads strides, dilations, pads and auto_pad for input spatial dims `in` and `kernel`, and
// computes the output dims (ceil_mode rounds up, as pooling allows).
Status resolveWindow(const KernelContext& ctx, const std::vector<int64_t>& in,
                     const std::vector<int64_t>& kernel, bool ceilMode, Window& w);

// Unfolds one [C, in...] image into a [C * prod(kernel), prod(out)] column matrix; positions that
// fall into padding read `padValue`.
template <typename T>
void im2col(const T* image, int64_t channels, const Window& w, T padValue, T* cols) {
  const size_t r = w.rank();
  const int64_t inSize = product(w.in), outSize = product(w.out), kernelSize = product(w.kernel);
  const int64_t inLast = w.in[r - 1], outLast = w.out[r - 1];
  const int64_t sLast = w.strides[r - 1];
  std::vector<int64_t> inStride(r, 1);
  for (size_t d = r - 1; d-- > 0;)
    inStride[d] = inStride[d + 1] * w.in[d + 1];
  std::vector<int64_t> kpos(r), opos(r);
  T* dst = cols;
  for (int64_t c = 0; c < channels; ++c) {
    const T* src = image + c * inSize;
    std::fill(kpos.begin(), kpos.end(), 0);
    for (int64_t kidx = 0; kidx < kernelSize; ++kidx) {
      const int64_t baseLast = kpos[r - 1] * w.dilations[r - 1] - w.padBegin[r - 1];
      std::fill(opos.begin(), opos.end(), 0);
      for (int64_t o = 0; o < outSize; o += outLast, dst += outLast) {
        bool valid = true;
        int64_t off = 0;
        for (size_t d = 0; d + 1 < r; ++d) {
          int64_t ip = opos[d] * w.strides[d] + kpos[d] * w.dilations[d] - w.padBegin[d];
          if (ip < 0 || ip >= w.in[d]) {
            valid = false;
            break;
          }
          off += ip * inStride[d];
        }
        if (!valid) {
          for (int64_t ox = 0; ox < outLast; ++ox)
            dst[ox] = padValue;
        } else {
          const T* row = src + off;
          for (int64_t ox = 0; ox < outLast; ++ox) {
            int64_t ix = ox * sLast + baseLast;
            dst[ox] = (ix >= 0 && ix < inLast) ? row[ix] : padValue;
          }
        }
        for (size_t d = r - 1; d-- > 0;) {
          if (++opos[d] < w.out[d]) break;
          opos[d] = 0;
        }
      }
      for (size_t d = r; d-- > 0;) {
        if (++kpos[d] < w.kernel[d]) break;
        kpos[d] = 0;
      }
    }
  }
}

// The inverse scatter of im2col: adds a [C * prod(kernel), prod(out)] column matrix back into a
// [C, in...] image (ConvTranspose, where `in` is the transposed conv's output).
template <typename T> void col2imAdd(const T* cols, int64_t channels, const Window& w, T* image) {
  const size_t r = w.rank();
  const int64_t inSize = product(w.in), outSize = product(w.out), kernelSize = product(w.kernel);
  const int64_t inLast = w.in[r - 1], outLast = w.out[r - 1];
  const int64_t sLast = w.strides[r - 1];
  std::vector<int64_t> inStride(r, 1);
  for (size_t d = r - 1; d-- > 0;)
    inStride[d] = inStride[d + 1] * w.in[d + 1];
  std::vector<int64_t> kpos(r), opos(r);
  const T* src = cols;
  for (int64_t c = 0; c < channels; ++c) {
    T* img = image + c * inSize;
    std::fill(kpos.begin(), kpos.end(), 0);
    for (int64_t kidx = 0; kidx < kernelSize; ++kidx) {
      const int64_t baseLast = kpos[r - 1] * w.dilations[r - 1] - w.padBegin[r - 1];
      std::fill(opos.begin(), opos.end(), 0);
      for (int64_t o = 0; o < outSize; o += outLast, src += outLast) {
        bool valid = true;
        int64_t off = 0;
        for (size_t d = 0; d + 1 < r; ++d) {
          int64_t ip = opos[d] * w.strides[d] + kpos[d] * w.dilations[d] - w.padBegin[d];
          if (ip < 0 || ip >= w.in[d]) {
            valid = false;
            break;
          }
          off += ip * inStride[d];
        }
        if (valid) {
          T* row = img + off;
          for (int64_t ox = 0; ox < outLast; ++ox) {
            int64_t ix = ox * sLast + baseLast;
            if (ix >= 0 && ix < inLast) row[ix] += src[ox];
          }
        }
        for (size_t d = r - 1; d-- > 0;) {
          if (++opos[d] < w.out[d]) break;
          opos[d] = 0;
        }
      }
      for (size_t d = r; d-- > 0;) {
        if (++kpos[d] < w.kernel[d]) break;
        kpos[d] = 0;
      }
    }
  }
}

// Round half to even then clamp into [lo, hi]: the saturation every quantizing op uses.
inline int64_t roundSaturate(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  double r = std::nearbyint(v);
  if (r < static_cast<double>(lo)) return lo;
  if (r > static_cast<double>(hi)) return hi;
  return static_cast<int64_t>(r);
}

} // namespace kiln::rt::nn
