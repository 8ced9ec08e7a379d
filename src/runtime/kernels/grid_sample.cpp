// GridSample over 4-D (N, C, H, W) images: nearest, bilinear and bicubic with zeros, border and
// reflection padding.
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

struct Plane {
  const double* data;
  int64_t h, w;
  PadMode pad;
  double xMin, xMax, yMin, yMax;

  // Pixel (r, c) with the padding rule applied to out-of-image indices.
  double at(int64_t r, int64_t c) const {
    if (r >= 0 && r < h && c >= 0 && c < w) return data[r * w + c];
    switch (pad) {
    case PadMode::Zeros:
      return 0;
    case PadMode::Border:
      r = std::clamp<int64_t>(r, 0, h - 1);
      c = std::clamp<int64_t>(c, 0, w - 1);
      break;
    case PadMode::Reflection:
      r = static_cast<int64_t>(reflectInto(static_cast<double>(r), yMin, yMax));
      c = static_cast<int64_t>(reflectInto(static_cast<double>(c), xMin, xMax));
      r = std::clamp<int64_t>(r, 0, h - 1);
      c = std::clamp<int64_t>(c, 0, w - 1);
      break;
    }
    return data[r * w + c];
  }
};

// Cubic convolution weights (A = -0.75) for the four taps around a point at fraction t.
void cubicCoeffs(double t, double coeffs[4]) {
  constexpr double a = -0.75;
  const double x = std::fabs(t);
  coeffs[0] = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a;
  coeffs[1] = ((a + 2) * x - (a + 3)) * x * x + 1;
  coeffs[2] = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1;
  coeffs[3] = ((a * (2 - x) - 5 * a) * (2 - x) + 8 * a) * (2 - x) - 4 * a;
}

double denormalize(double v, int64_t len, bool alignCorners) {
  return alignCorners ? (v + 1) / 2.0 * static_cast<double>(len - 1)
                      : ((v + 1) * static_cast<double>(len) - 1) / 2.0;
}

Status gridSample(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  if (!miscIsReal(x.dtype()) || !miscIsReal(grid.dtype()))
    return ctx.unsupported("only floating-point inputs are supported");
  if (x.dims().size() != 4) return ctx.unsupported("only 4-D (N, C, H, W) input is supported");
  const int64_t n = x.dims()[0], c = x.dims()[1], h = x.dims()[2], w = x.dims()[3];
  const auto& gd = grid.dims();
  if (gd.size() != 4 || gd[0] != n || gd[3] != 2)
    return ctx.fail("grid must be (N, H_out, W_out, 2)");
  const int64_t ho = gd[1], wo = gd[2];

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

  std::vector<double> img = miscReadReal(x), g = miscReadReal(grid);
  std::vector<double> out(static_cast<size_t>(n * c * ho * wo));
  // Sampling bounds: pixel centres with align_corners, pixel edges without.
  const double xMin = alignCorners ? 0 : -0.5, yMin = alignCorners ? 0 : -0.5;
  const double xMax = alignCorners ? static_cast<double>(w - 1) : static_cast<double>(w) - 0.5;
  const double yMax = alignCorners ? static_cast<double>(h - 1) : static_cast<double>(h) - 0.5;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t oy = 0; oy < ho; ++oy) {
      for (int64_t ox = 0; ox < wo; ++ox) {
        const size_t gi = static_cast<size_t>(((b * ho + oy) * wo + ox) * 2);
        double px = denormalize(g[gi], w, alignCorners);
        double py = denormalize(g[gi + 1], h, alignCorners);
        if (mode == SampleMode::Nearest) {
          px = std::nearbyint(px);
          py = std::nearbyint(py);
        }
        if (px < xMin || px > xMax || py < yMin || py > yMax) {
          if (pad == PadMode::Border) {
            px = std::clamp(px, 0.0, static_cast<double>(w - 1));
            py = std::clamp(py, 0.0, static_cast<double>(h - 1));
          } else if (pad == PadMode::Reflection) {
            px = reflectInto(px, xMin, xMax);
            py = reflectInto(py, yMin, yMax);
          }
        }
        for (int64_t ch = 0; ch < c; ++ch) {
          const Plane plane{img.data() + (b * c + ch) * h * w, h, w, pad, xMin, xMax, yMin, yMax};
          double v;
          if (mode == SampleMode::Nearest) {
            v = plane.at(static_cast<int64_t>(std::nearbyint(py)),
                         static_cast<int64_t>(std::nearbyint(px)));
          } else if (mode == SampleMode::Linear) {
            const double fx = std::floor(px), fy = std::floor(py);
            const int64_t x1 = static_cast<int64_t>(fx), y1 = static_cast<int64_t>(fy);
            const double dx1 = px - fx, dx2 = 1 - dx1, dy1 = py - fy, dy2 = 1 - dy1;
            v = dy2 * (dx2 * plane.at(y1, x1) + dx1 * plane.at(y1, x1 + 1)) +
                dy1 * (dx2 * plane.at(y1 + 1, x1) + dx1 * plane.at(y1 + 1, x1 + 1));
          } else {
            const double fx = std::floor(px), fy = std::floor(py);
            const int64_t x0 = static_cast<int64_t>(fx) - 1, y0 = static_cast<int64_t>(fy) - 1;
            double cx[4], cy[4];
            cubicCoeffs(px - fx, cx);
            cubicCoeffs(py - fy, cy);
            v = 0;
            for (int64_t i = 0; i < 4; ++i) {
              double row = 0;
              for (int64_t j = 0; j < 4; ++j)
                row += cx[j] * plane.at(y0 + i, x0 + j);
              v += cy[i] * row;
            }
          }
          out[static_cast<size_t>(((b * c + ch) * ho + oy) * wo + ox)] = v;
        }
      }
    }
  }
  ctx.setOutput(0, miscMakeReal(x.dtype(), {n, c, ho, wo}, out));
  return Status::ok();
}

KILN_REGISTER_KERNEL("GridSample", gridSample);

} // namespace
} // namespace kiln::rt
