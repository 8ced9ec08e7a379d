// What ONNX Resize / Upsample mean, decided once: the coordinate transformation and the nearest
// rounding, both in float32 as ONNX Runtime computes them (doubles pick other pixels, e.g. scale
// 0.33333334 maps output 1 to 2.9999999 in double but 3.0f in float).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::ops {

struct ResizeCoordinateRule {
  std::string transform = "half_pixel"; // coordinate_transformation_mode
  std::string nearestMode = "round_prefer_floor";
  bool opset10Nearest = false; // Resize-10 / Upsample: floor when enlarging, ceil when shrinking
};

// Input coordinate of output coordinate `o` along an axis of `inLen` → `outLen` with `scale`.
// The resized length is inLen * scale before flooring (the ONNX reference's), so align_corners
// downscales by a fractional length.
float resizeSourceCoordinate(const ResizeCoordinateRule& rule, int64_t o, float scale,
                             int64_t inLen, int64_t outLen, float roiStart, float roiEnd);

// The input index nearest-mode picks for source coordinate `x`.
int64_t resizeNearestIndex(const ResizeCoordinateRule& rule, float x, float scale);

} // namespace kiln::ops
