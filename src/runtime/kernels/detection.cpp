// Detection kernels: NonMaxSuppression, RoiAlign and MaxRoiPool.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "nn_util.h"

namespace kiln::rt {
namespace {

using nn::Staged;
using nn::StagedOut;

struct Box {
  float y1, x1, y2, x2;
  float area() const { return (y2 - y1) * (x2 - x1); }
};

Box readBox(const float* p, bool centerPoint) {
  if (centerPoint) { // [x_center, y_center, width, height]
    const float hw = p[2] / 2, hh = p[3] / 2;
    return {p[1] - hh, p[0] - hw, p[1] + hh, p[0] + hw};
  }
  // [y1, x1, y2, x2] with either diagonal pair of corners
  return {std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]), std::max(p[1], p[3])};
}

float iou(const Box& a, const Box& b) {
  const float ih = std::min(a.y2, b.y2) - std::max(a.y1, b.y1);
  const float iw = std::min(a.x2, b.x2) - std::max(a.x1, b.x1);
  if (ih <= 0 || iw <= 0) return 0.0f;
  const float inter = ih * iw, uni = a.area() + b.area() - inter;
  return uni > 0 ? inter / uni : 0.0f;
}

Status nonMaxSuppressionOp(KernelContext& ctx) {
  const Tensor& boxesT = ctx.input(0);
  const Tensor& scoresT = ctx.input(1);
  if (boxesT.dims().size() != 3 || boxesT.dims()[2] != 4)
    return ctx.fail("boxes must be [batch, boxes, 4]");
  if (scoresT.dims().size() != 3 || scoresT.dims()[0] != boxesT.dims()[0] ||
      scoresT.dims()[2] != boxesT.dims()[1])
    return ctx.fail("scores must be [batch, classes, boxes]");
  const int64_t batches = boxesT.dims()[0], count = boxesT.dims()[1], classes = scoresT.dims()[1];
  int64_t maxOut = 0;
  if (ctx.hasInput(2) && ctx.input(2).elementCount() > 0) maxOut = ctx.inputInts(2)[0];
  float iouThreshold = 0.0f;
  if (ctx.hasInput(3) && ctx.input(3).elementCount() > 0)
    iouThreshold = toFloatVector(ctx.input(3))[0];
  std::optional<float> scoreThreshold;
  if (ctx.hasInput(4) && ctx.input(4).elementCount() > 0)
    scoreThreshold = toFloatVector(ctx.input(4))[0];
  const bool centerPoint = ctx.attrInt("center_point_box", 0) != 0;
  std::vector<float> boxes = toFloatVector(boxesT), scores = toFloatVector(scoresT);

  std::vector<int64_t> selected;
  std::vector<int64_t> order;
  std::vector<Box> kept;
  for (int64_t b = 0; b < batches && maxOut > 0; ++b) {
    std::vector<Box> all(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      all[static_cast<size_t>(i)] = readBox(boxes.data() + (b * count + i) * 4, centerPoint);
    for (int64_t c = 0; c < classes; ++c) {
      const float* sc = scores.data() + (b * classes + c) * count;
      order.clear();
      for (int64_t i = 0; i < count; ++i)
        if (!scoreThreshold || sc[i] > *scoreThreshold) order.push_back(i);
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t l, int64_t r) { return sc[l] > sc[r]; });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= maxOut) break;
        const Box& box = all[static_cast<size_t>(i)];
        bool suppressed = false;
        for (const Box& k : kept)
          if (iou(k, box) > iouThreshold) {
            suppressed = true;
            break;
          }
        if (suppressed) continue;
        kept.push_back(box);
        selected.insert(selected.end(), {b, c, i});
      }
    }
  }
  ctx.setOutput(0, makeTensor<int64_t>(DType::Int64, {static_cast<int64_t>(selected.size() / 3), 3},
                                       selected));
  return Status::ok();
}

// Bilinear sample of one [H, W] plane at (y, x); samples more than one pixel outside count as 0.
// With `maxMode` the result is the largest weighted corner term, as max-mode RoiAlign defines it.
template <typename T>
T bilinear(const T* plane, int64_t height, int64_t width, double y, double x, bool maxMode) {
  if (y < -1.0 || y > static_cast<double>(height) || x < -1.0 || x > static_cast<double>(width))
    return T{0};
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= height - 1) {
    y0 = y1 = height - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= width - 1) {
    x0 = x1 = width - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  const double v00 = static_cast<double>(plane[y0 * width + x0]);
  const double v01 = static_cast<double>(plane[y0 * width + x1]);
  const double v10 = static_cast<double>(plane[y1 * width + x0]);
  const double v11 = static_cast<double>(plane[y1 * width + x1]);
  if (maxMode)
    return static_cast<T>(std::max({hy * hx * v00, hy * lx * v01, ly * hx * v10, ly * lx * v11}));
  return static_cast<T>(hy * hx * v00 + hy * lx * v01 + ly * hx * v10 + ly * lx * v11);
}

Status roiAlignOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& roisT = ctx.input(1);
  if (x.dims().size() != 4) return ctx.fail("X must be [N, C, H, W]");
  if (roisT.dims().size() != 2 || roisT.dims()[1] != 4) return ctx.fail("rois must be [R, 4]");
  const int64_t n = x.dims()[0], c = x.dims()[1], height = x.dims()[2], width = x.dims()[3];
  const int64_t numRois = roisT.dims()[0];
  std::vector<int64_t> batchIdx = ctx.inputInts(2);
  if (static_cast<int64_t>(batchIdx.size()) != numRois)
    return ctx.fail("batch_indices has {} values for {} rois", batchIdx.size(), numRois);
  for (int64_t bi : batchIdx)
    if (bi < 0 || bi >= n) return ctx.fail("batch index {} out of range", bi);
  const std::string mode = ctx.attrString("mode", "avg");
  if (mode != "avg" && mode != "max") return ctx.fail("unknown mode '{}'", mode);
  const bool maxMode = mode == "max";
  const int64_t outH = ctx.attrInt("output_height", 1), outW = ctx.attrInt("output_width", 1);
  const int64_t sampling = ctx.attrInt("sampling_ratio", 0);
  const double spatialScale = ctx.attrFloat("spatial_scale", 1.0f);
  // Opset 16 added the attribute and made half_pixel the default; earlier opsets behave as
  // output_half_pixel.
  const std::string ctm = ctx.attrString("coordinate_transformation_mode",
                                         ctx.opset() >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return ctx.fail("unknown coordinate_transformation_mode '{}'", ctm);
  const double offset = ctm == "half_pixel" ? 0.5 : 0.0;
  std::vector<float> rois = toFloatVector(roisT);
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), {numRois, c, outH, outW});
    for (int64_t r = 0; r < numRois; ++r) {
      const float* roi = rois.data() + r * 4;
      const double x1 = roi[0] * spatialScale - offset, y1 = roi[1] * spatialScale - offset;
      const double x2 = roi[2] * spatialScale - offset, y2 = roi[3] * spatialScale - offset;
      double roiW = x2 - x1, roiH = y2 - y1;
      if (offset == 0.0) { // legacy mode forces at least one pixel
        roiW = std::max(roiW, 1.0);
        roiH = std::max(roiH, 1.0);
      }
      const double binH = roiH / static_cast<double>(outH), binW = roiW / static_cast<double>(outW);
      const int64_t gridH = sampling > 0
                                ? sampling
                                : static_cast<int64_t>(std::ceil(roiH / static_cast<double>(outH)));
      const int64_t gridW = sampling > 0
                                ? sampling
                                : static_cast<int64_t>(std::ceil(roiW / static_cast<double>(outW)));
      const double countAll = static_cast<double>(std::max<int64_t>(gridH * gridW, 1));
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* plane = xv.data() + (batchIdx[static_cast<size_t>(r)] * c + ch) * height * width;
        T* out = y.data() + (r * c + ch) * outH * outW;
        for (int64_t ph = 0; ph < outH; ++ph)
          for (int64_t pw = 0; pw < outW; ++pw) {
            double acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < gridH; ++iy) {
              const double yy = y1 + static_cast<double>(ph) * binH +
                                (static_cast<double>(iy) + 0.5) * binH / static_cast<double>(gridH);
              for (int64_t ix = 0; ix < gridW; ++ix) {
                const double xx =
                    x1 + static_cast<double>(pw) * binW +
                    (static_cast<double>(ix) + 0.5) * binW / static_cast<double>(gridW);
                const double v =
                    static_cast<double>(bilinear(plane, height, width, yy, xx, maxMode));
                if (maxMode)
                  acc = first ? v : std::max(acc, v);
                else
                  acc += v;
                first = false;
              }
            }
            out[ph * outW + pw] = static_cast<T>(maxMode ? acc : acc / countAll);
          }
      }
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return Status::ok();
}

Status maxRoiPoolOp(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& roisT = ctx.input(1);
  if (x.dims().size() != 4) return ctx.fail("X must be [N, C, H, W]");
  if (roisT.dims().size() != 2 || roisT.dims()[1] != 5) return ctx.fail("rois must be [R, 5]");
  std::vector<int64_t> pooled = ctx.attrInts("pooled_shape");
  if (pooled.size() != 2 || pooled[0] < 1 || pooled[1] < 1)
    return ctx.fail("pooled_shape must be two positive ints");
  const double spatialScale = ctx.attrFloat("spatial_scale", 1.0f);
  const int64_t n = x.dims()[0], c = x.dims()[1], height = x.dims()[2], width = x.dims()[3];
  const int64_t numRois = roisT.dims()[0], outH = pooled[0], outW = pooled[1];
  std::vector<float> rois = toFloatVector(roisT);
  Status status = Status::ok();
  bool done = nn::dispatchFloat(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    Staged<T> xv(x);
    StagedOut<T> y(x.dtype(), {numRois, c, outH, outW});
    for (int64_t r = 0; r < numRois; ++r) {
      const float* roi = rois.data() + r * 5;
      const int64_t b = static_cast<int64_t>(roi[0]);
      if (b < 0 || b >= n) {
        status = ctx.fail("roi batch index {} out of range", b);
        return;
      }
      const int64_t x1 = static_cast<int64_t>(std::round(roi[1] * spatialScale));
      const int64_t y1 = static_cast<int64_t>(std::round(roi[2] * spatialScale));
      const int64_t x2 = static_cast<int64_t>(std::round(roi[3] * spatialScale));
      const int64_t y2 = static_cast<int64_t>(std::round(roi[4] * spatialScale));
      const int64_t roiH = std::max<int64_t>(y2 - y1 + 1, 1),
                    roiW = std::max<int64_t>(x2 - x1 + 1, 1);
      const double binH = static_cast<double>(roiH) / static_cast<double>(outH);
      const double binW = static_cast<double>(roiW) / static_cast<double>(outW);
      for (int64_t ch = 0; ch < c; ++ch) {
        const T* plane = xv.data() + (b * c + ch) * height * width;
        T* out = y.data() + (r * c + ch) * outH * outW;
        for (int64_t ph = 0; ph < outH; ++ph) {
          int64_t hs = static_cast<int64_t>(std::floor(static_cast<double>(ph) * binH)) + y1;
          int64_t he = static_cast<int64_t>(std::ceil(static_cast<double>(ph + 1) * binH)) + y1;
          hs = std::clamp<int64_t>(hs, 0, height);
          he = std::clamp<int64_t>(he, 0, height);
          for (int64_t pw = 0; pw < outW; ++pw) {
            int64_t ws = static_cast<int64_t>(std::floor(static_cast<double>(pw) * binW)) + x1;
            int64_t we = static_cast<int64_t>(std::ceil(static_cast<double>(pw + 1) * binW)) + x1;
            ws = std::clamp<int64_t>(ws, 0, width);
            we = std::clamp<int64_t>(we, 0, width);
            T best = T{0};
            bool any = false;
            for (int64_t yy = hs; yy < he; ++yy)
              for (int64_t xx = ws; xx < we; ++xx) {
                const T v = plane[yy * width + xx];
                if (!any || v > best) best = v;
                any = true;
              }
            out[ph * outW + pw] = best;
          }
        }
      }
    }
    ctx.setOutput(0, std::move(y).finish());
  });
  if (!done) return ctx.unsupported("dtype {}", dtypeName(x.dtype()));
  return status;
}

KILN_REGISTER_KERNEL("NonMaxSuppression", nonMaxSuppressionOp);
KILN_REGISTER_KERNEL("RoiAlign", roiAlignOp);
KILN_REGISTER_KERNEL("MaxRoiPool", maxRoiPoolOp);

} // namespace
} // namespace kiln::rt
