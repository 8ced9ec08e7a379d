// Resize coordinate rules in float32 (ops/resize.h).
#include "ops/resize.h"

#include <cmath>

namespace kiln::ops {

float resizeSourceCoordinate(const ResizeCoordinateRule& rule, int64_t o, float scale,
                             int64_t inLen, int64_t outLen, float roiStart, float roiEnd) {
  const auto x = static_cast<float>(o);
  const auto in = static_cast<float>(inLen);
  const float out = in * scale;
  const std::string& t = rule.transform;
  if (t == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (t == "half_pixel_symmetric") {
    const float adjustment = static_cast<float>(outLen) / out;
    return in / 2.0f * (1.0f - adjustment) + (x + 0.5f) / scale - 0.5f;
  }
  if (t == "pytorch_half_pixel") return out > 1.0f ? (x + 0.5f) / scale - 0.5f : 0.0f;
  if (t == "align_corners") return out == 1.0f ? 0.0f : x * (in - 1.0f) / (out - 1.0f);
  if (t == "tf_half_pixel_for_nn") return (x + 0.5f) / scale;
  if (t == "tf_crop_and_resize")
    return out > 1.0f
               ? roiStart * (in - 1.0f) + x * (roiEnd - roiStart) * (in - 1.0f) / (out - 1.0f)
               : 0.5f * (roiStart + roiEnd) * (in - 1.0f);
  return x / scale; // asymmetric
}

int64_t resizeNearestIndex(const ResizeCoordinateRule& rule, float x, float scale) {
  if (rule.opset10Nearest) return static_cast<int64_t>(scale < 1.0f ? std::ceil(x) : std::floor(x));
  const std::string& m = rule.nearestMode;
  if (m == "floor") return static_cast<int64_t>(std::floor(x));
  if (m == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (m == "round_prefer_ceil") return static_cast<int64_t>(std::floor(x + 0.5f));
  return static_cast<int64_t>(std::ceil(x - 0.5f)); // round_prefer_floor
}

} // namespace kiln::ops
