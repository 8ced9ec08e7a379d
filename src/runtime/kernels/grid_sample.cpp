// GridSample over (N, C, D1..Dr) images for any spatial rank r: nearest, (bi/tri)linear and cubic
// interpolation with zeros, border and reflection padding.
#include <cmath>
#include <string>

#include "misc_util.h"

namespace kiln::rt {
namespace {

enum class SampleMode { Nearest, Linear, Cubic };
enum class PadMode { Zeros, Border, Reflection };

// Folds x back into [lo, hi] by repeated mirroring at the bounds.
double reflectInto(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const int64_t k = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(k) * range;
    return k % 2 == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const int64_t k = static_cast<int64_t>(dx / range);
    const double r = dx - static_cast<double>(k) * range;
    return k % 2 == 0 ? hi - r : lo + r;
  }
  return x;
}

// Cubic convolution weights (A = -0.75) for the four taps around a point at fraction t.
void cubicCoeffs(double t, double coeffs[4]) {
  constexpr double a = -0.75;
  const double x = std::fabs(t);
  coeffs[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  coeffs[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  coeffs[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  coeffs[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

// The sampling taps along one spatial axis: input indices (-1 when a zero-padded tap falls
// outside) and their weights.
struct AxisTaps {
  int64_t index[4];
  double weight[4];
};

Status gridSample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (!miscIsReal(x.dtype()) || !miscIsReal(grid.dtype()))
    return ctx.unsupported("only floating-point inputs are supported");
  const auto& xd = x.dims();
  const auto& gd = grid.dims();
  if (xd.size() < 3) return ctx.fail("input must be (N, C, D1, ..., Dr)");
  const size_t r = xd.size() - 2;
  if (gd.size() != r + 2 || gd[0] != xd[0] || gd.back() != static_cast<int64_t>(r))
    return ctx.fail("grid must be (N, D1_out, ..., Dr_out, {})", r);
  if (r != 2 && ctx.opset() < 20)
    return ctx.fail("opset {} GridSample takes 4-D input", ctx.opset());
  const int64_t n = xd[0], c = xd[1];
  std::vector<int64_t> inSize(xd.begin() + 2, xd.end());
  std::vector<int64_t> outSize(gd.begin() + 1, gd.end() - 1);
  int64_t inPlane = 1, outPlane = 1;
  for (size_t d = 0; d < r; ++d) {
    inPlane *= inSize[d];
    outPlane *= outSize[d];
  }

  const std::string modeName = ctx.attrString("mode", ctx.opset() >= 20 ? "linear" : "bilinear");
  SampleMode mode;
  if (modeName == "bilinear" || modeName == "linear")
    mode = SampleMode::Linear;
  else if (modeName == "nearest")
    mode = SampleMode::Nearest;
  else if (modeName == "bicubic" || modeName == "cubic")
    mode = SampleMode::Cubic;
  else
    return ctx.fail("unknown mode '{}'", modeName);
  const std::string padName = ctx.attrString("padding_mode", "zeros");
  PadMode pad;
  if (padName == "zeros")
    pad = PadMode::Zeros;
  else if (padName == "border")
    pad = PadMode::Border;
  else if (padName == "reflection")
    pad = PadMode::Reflection;
  else
    return ctx.fail("unknown padding_mode '{}'", padName);
  const bool alignCorners = ctx.attrInt("align_corners", 0) != 0;
  const int tapsPerAxis = mode == SampleMode::Nearest ? 1 : mode == SampleMode::Linear ? 2 : 4;
  int64_t tapCount = 1;
  for (size_t d = 0; d < r; ++d)
    tapCount *= tapsPerAxis;

  std::vector<double> img = miscReadReal(x), g = miscReadReal(grid);
  std::vector<double> out(static_cast<size_t>(n * c * outPlane), 0.0);
  std::vector<AxisTaps> taps(r);
  std::vector<int64_t> inStride(r);
  for (size_t d = r; d-- > 0;)
    inStride[d] = d + 1 == r ? 1 : inStride[d + 1] * inSize[d + 1];
  std::vector<int> tapIdx(r);

  for (int64_t b = 0; b < n; ++b) {
    for (int64_t p = 0; p < outPlane; ++p) {
      const double* coord = g.data() + (b * outPlane + p) * static_cast<int64_t>(r);
      for (size_t d = 0; d < r; ++d) {
        // The grid's last axis lists coordinates innermost-first (x, then y, then z).
        const double len = static_cast<double>(inSize[d]);
        const double v = coord[r - 1 - d];
        double pos = alignCorners ? (v + 1) / 2.0 * (len - 1) : ((v + 1) * len - 1) / 2.0;
        // Sampling bounds: pixel centres with align_corners, pixel edges without.
        const double lo = alignCorners ? 0.0 : -0.5, hi = alignCorners ? len - 1 : len - 0.5;
        if (mode == SampleMode::Nearest) pos = std::nearbyint(pos);
        if (pos < lo || pos > hi) {
          if (pad == PadMode::Border)
            pos = std::clamp(pos, 0.0, len - 1);
          else if (pad == PadMode::Reflection)
            pos = reflectInto(pos, lo, hi);
        }
        AxisTaps& t = taps[d];
        int64_t first;
        if (mode == SampleMode::Nearest) {
          first = static_cast<int64_t>(std::nearbyint(pos));
          t.weight[0] = 1;
        } else {
          const double fl = std::floor(pos);
          const double f = pos - fl;
          if (mode == SampleMode::Linear) {
            first = static_cast<int64_t>(fl);
            t.weight[0] = 1 - f;
            t.weight[1] = f;
          } else {
            first = static_cast<int64_t>(fl) - 1;
            cubicCoeffs(f, t.weight);
          }
        }
        for (int k = 0; k < tapsPerAxis; ++k) {
          int64_t idx = first + k;
          if (idx < 0 || idx >= inSize[d]) {
            if (pad == PadMode::Zeros) {
              idx = -1;
            } else {
              if (pad == PadMode::Reflection)
                idx = static_cast<int64_t>(reflectInto(static_cast<double>(idx), lo, hi));
              idx = std::clamp<int64_t>(idx, 0, inSize[d] - 1);
            }
          }
          t.index[k] = idx;
        }
      }
      // Sum over the tensor product of the per-axis taps.
      std::fill(tapIdx.begin(), tapIdx.end(), 0);
      for (int64_t tap = 0; tap < tapCount; ++tap) {
        double w = 1;
        int64_t off = 0;
        bool inside = true;
        for (size_t d = 0; d < r; ++d) {
          const int64_t idx = taps[d].index[tapIdx[d]];
          if (idx < 0) {
            inside = false;
            break;
          }
          w *= taps[d].weight[tapIdx[d]];
          off += idx * inStride[d];
        }
        if (inside) {
          const double* src = img.data() + b * c * inPlane + off;
          double* dst = out.data() + b * c * outPlane + p;
          for (int64_t ch = 0; ch < c; ++ch)
            dst[ch * outPlane] += w * src[ch * inPlane];
        }
        for (size_t d = r; d-- > 0;) {
          if (++tapIdx[d] < tapsPerAxis) break;
          tapIdx[d] = 0;
        }
      }
    }
  }
  std::vector<int64_t> outDims{n, c};
  outDims.insert(outDims.end(), outSize.begin(), outSize.end());
  ctx.setOutput(0, miscMakeReal(x.dtype(), outDims, out));
  return Status::ok();
}

KILN_REGISTER_KERNEL("GridSample", gridSample);

} // namespace
} // namespace kiln::rt
