// Real-valued tensor access through double for the loss, signal, grid-sample and linalg kernels.
#pragma once

#include <vector>

#include "kiln/runtime/kernel.h"

namespace kiln::rt {

// True for the floating dtypes these kernels compute in double (fp16/bf16 widen through float).
inline bool miscIsReal(DType d) {
  return d == DType::Float32 || d == DType::Float64 || d == DType::Float16 || d == DType::BFloat16;
}

// Values of a floating tensor widened to double; the kernels here are small and precision matters
// more than speed (the reference results come from double-precision numpy).
inline std::vector<double> miscReadReal(const Tensor& t) {
  const uint64_t n = t.elementCount();
  std::vector<double> out(n);
  const uint8_t* raw = t.data();
  switch (t.dtype()) {
  case DType::Float32: {
    const float* p = reinterpret_cast<const float*>(raw);
    for (uint64_t i = 0; i < n; ++i)
      out[i] = p[i];
    break;
  }
  case DType::Float64: {
    const double* p = reinterpret_cast<const double*>(raw);
    for (uint64_t i = 0; i < n; ++i)
      out[i] = p[i];
    break;
  }
  case DType::Float16: {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(raw);
    for (uint64_t i = 0; i < n; ++i)
      out[i] = halfToFloat(p[i]);
    break;
  }
  case DType::BFloat16: {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(raw);
    for (uint64_t i = 0; i < n; ++i)
      out[i] = bfloat16ToFloat(p[i]);
    break;
  }
  default:
    for (uint64_t i = 0; i < n; ++i)
      out[i] = elementAsDouble(t, i);
    break;
  }
  return out;
}

// A floating tensor of `dtype` narrowed from double values.
inline Tensor miscMakeReal(DType dtype, std::vector<int64_t> dims, const std::vector<double>& v) {
  OutTensor out(dtype, std::move(dims));
  const size_t n = v.size();
  switch (dtype) {
  case DType::Float64: {
    double* p = out.data<double>();
    for (size_t i = 0; i < n; ++i)
      p[i] = v[i];
    break;
  }
  case DType::Float16: {
    uint16_t* p = out.data<uint16_t>();
    for (size_t i = 0; i < n; ++i)
      p[i] = floatToHalf(static_cast<float>(v[i]));
    break;
  }
  case DType::BFloat16: {
    uint16_t* p = out.data<uint16_t>();
    for (size_t i = 0; i < n; ++i)
      p[i] = floatToBfloat16(static_cast<float>(v[i]));
    break;
  }
  default: {
    float* p = out.data<float>();
    for (size_t i = 0; i < n; ++i)
      p[i] = static_cast<float>(v[i]);
    break;
  }
  }
  return std::move(out).finish();
}

} // namespace kiln::rt
