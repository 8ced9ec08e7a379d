// Quantization kernels: QuantizeLinear, DequantizeLinear (per tensor and per axis; 4-, 8- and
// 16-bit codes) and DynamicQuantizeLinear.
#include <cmath>
#include <limits>

#include "nn_util.h"
#include "ops/quant.h"

namespace kiln::rt {
namespace {

void storeInt(uint8_t* bytes, DType d, uint64_t i, int64_t v) {
  switch (d) {
  case DType::UInt8:
  case DType::Int8:
    bytes[i] = static_cast<uint8_t>(v & 0xff);
    break;
  case DType::UInt4:
  case DType::Int4: { // two per byte, low nibble first
    const unsigned shift = static_cast<unsigned>(i % 2) * 4;
    bytes[i / 2] = static_cast<uint8_t>((bytes[i / 2] & ~(0xfu << shift)) | ((v & 0xf) << shift));
    break;
  }
  default: {
    uint16_t u = static_cast<uint16_t>(v & 0xffff);
    std::memcpy(bytes + 2 * i, &u, 2);
  }
  }
}

// How an element maps to its scale / zero point: per tensor, or per slice along `axis`.
struct QuantParams {
  int64_t inner = 1, channels = 1; // element i uses (i / inner) % channels
  bool perAxis = false;
  size_t at(uint64_t i) const {
    return perAxis ? static_cast<size_t>((static_cast<int64_t>(i) / inner) % channels) : 0;
  }
};

Status quantParams(const KernelContext& ctx, const Tensor& x, const Tensor& scale, QuantParams& q) {
  if (ctx.attrInt("block_size", 0) > 0) return ctx.unsupported("blocked quantization");
  const uint64_t n = scale.elementCount();
  if (n == 1) return Status::ok();
  if (scale.dims().size() != 1) return ctx.fail("scale must be a scalar or 1-D");
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  auto axis = normalizeAxis(ctx.attrInt("axis", 1), rank);
  if (!axis) return ctx.fail("axis {} out of range for rank {}", ctx.attrInt("axis", 1), rank);
  q.channels = x.dims()[static_cast<size_t>(*axis)];
  if (static_cast<int64_t>(n) != q.channels)
    return ctx.fail("scale has {} values, axis {} has {}", n, *axis, q.channels);
  q.inner = nn::product(x.dims(), static_cast<size_t>(*axis) + 1);
  q.perAxis = true;
  return Status::ok();
}

Status quantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  const DType yType = ctx.hasInput(2) ? ctx.input(2).dtype() : DType::UInt8;
  int64_t lo = 0, hi = 0;
  if (!ops::quantCodeRange(yType, lo, hi)) return ctx.unsupported("output dtype {}", dtypeName(yType));
  QuantParams q;
  KILN_TRY(quantParams(ctx, x, scale, q));
  std::vector<int64_t> zp(scale.elementCount(), 0);
  if (ctx.hasInput(2)) {
    zp = ctx.inputInts(2);
    if (zp.size() != scale.elementCount()) return ctx.fail("zero point and scale sizes differ");
  }
  OutTensor y(yType, x.dims());
  const uint64_t n = x.elementCount();
  if (x.dtype() == DType::Float64) {
    std::vector<double> sv(scale.elementCount());
    for (size_t i = 0; i < sv.size(); ++i)
      sv[i] = elementAsDouble(scale, i);
    const double* xd = ctx.inputData<double>(0);
    for (uint64_t i = 0; i < n; ++i) {
      const size_t c = q.at(i);
      storeInt(y.bytes(), yType, i,
               nn::roundSaturate(xd[i] / sv[c], lo - zp[c], hi - zp[c]) + zp[c]);
    }
  } else {
    // Float arithmetic, as the reference computes x / y_scale in the input's precision.
    std::vector<float> xv = toFloatVector(x), sv = toFloatVector(scale);
    for (uint64_t i = 0; i < n; ++i) {
      const size_t c = q.at(i);
      const float v = xv[i] / sv[c];
      storeInt(y.bytes(), yType, i, nn::roundSaturate(v, lo - zp[c], hi - zp[c]) + zp[c]);
    }
  }
  ctx.setOutput(0, std::move(y).finish());
  return Status::ok();
}

Status dequantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& scale = ctx.input(1);
  if (!isInteger(x.dtype())) return ctx.unsupported("input dtype {}", dtypeName(x.dtype()));
  QuantParams q;
  KILN_TRY(quantParams(ctx, x, scale, q));
  std::vector<int64_t> zp(scale.elementCount(), 0);
  if (ctx.hasInput(2)) {
    zp = ctx.inputInts(2);
    if (zp.size() != scale.elementCount()) return ctx.fail("zero point and scale sizes differ");
  }
  std::vector<int64_t> xv = toInt64Vector(x);
  bool done = nn::dispatchFloat(scale.dtype(), [&](auto tag) {
    using T = decltype(tag);
    nn::Staged<T> sv(scale);
    nn::StagedOut<T> y(scale.dtype(), x.dims());
    for (size_t i = 0; i < xv.size(); ++i) {
      const size_t c = q.at(i);
      y.data()[i] = static_cast<T>(xv[i] - zp[c]) * sv[c];
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("scale dtype {}", dtypeName(scale.dtype()));
  return Status::ok();
}

Status dynamicQuantizeLinearOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (!nn::isFloatLike(x.dtype())) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  std::vector<float> xv = toFloatVector(x);
  // The range always includes 0 so that 0 is exactly representable.
  float mn = 0.0f, mx = 0.0f;
  for (float v : xv) {
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  const float scale = (mx - mn) / 255.0f;
  const int64_t zp = scale == 0.0f ? 0 : nn::roundSaturate((0.0f - mn) / scale, 0, 255);
  OutTensor y(DType::UInt8, x.dims());
  for (size_t i = 0; i < xv.size(); ++i) {
    const int64_t v = scale == 0.0f ? zp : nn::roundSaturate(xv[i] / scale, -zp, 255 - zp) + zp;
    y.bytes()[i] = static_cast<uint8_t>(v);
  }
  ctx.setOutput(0, std::move(y).finish());
  ctx.setOutput(1, makeTensor<float>(DType::Float32, {}, {scale}));
  ctx.setOutput(2, makeTensor<uint8_t>(DType::UInt8, {}, {static_cast<uint8_t>(zp)}));
  return Status::ok();
}

KILN_REGISTER_KERNEL("QuantizeLinear", quantizeLinearOp);
KILN_REGISTER_KERNEL("DequantizeLinear", dequantizeLinearOp);
KILN_REGISTER_KERNEL("DynamicQuantizeLinear", dynamicQuantizeLinearOp);

} // namespace
} // namespace kiln::rt
