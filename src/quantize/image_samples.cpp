// Calibration images (converter_lite's input_type=IMAGE): PNG / JPEG / BMP decoded with stb_image
// (Debian's libstb), then converter_lite's preprocessing — channel order, resize, center crop,
// (v - mean) / std — into the layout of the model input the folder feeds.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <limits>
#include <string_view>

#include <fmt/format.h>

#include <stb_image.h>

#include "kiln/quantize.h"
#include "kiln/support/display.h"

namespace kiln {
namespace {

// Images (and resize targets) past this many pixels are refused before decoding: a hostile header
// could ask for gigabytes. 32 Mpixels (an 8k x 4k photo) is far beyond any calibration input.
constexpr int64_t kMaxImagePixels = int64_t(1) << 25;

struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<float> pixels; // HWC, 0..255
};

// Resampling as OpenCV's resize does it (what converter_lite's preprocessing calls): pixel
// centers aligned (src = (dst + 0.5) * scale - 0.5), borders replicated; CUBIC with a = -0.75.
// Hand-written because stb's resizer filters differently (its linear filter averages areas when
// shrinking), and the calibration ranges should see the pixels the deployed pipeline sees.
float cubicWeight(float x) {
  constexpr float a = -0.75f;
  x = std::fabs(x);
  if (x <= 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
  return 0;
}

Image resize(const Image& in, int width, int height, const std::string& method) {
  Image out;
  out.width = width;
  out.height = height;
  out.channels = in.channels;
  out.pixels.resize(size_t(width) * size_t(height) * size_t(in.channels));
  const float sx = float(in.width) / float(width), sy = float(in.height) / float(height);
  auto at = [&](int y, int x, int c) {
    y = std::clamp(y, 0, in.height - 1);
    x = std::clamp(x, 0, in.width - 1);
    return in.pixels[(size_t(y) * size_t(in.width) + size_t(x)) * size_t(in.channels) + size_t(c)];
  };
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < in.channels; ++c) {
        float v = 0;
        if (method == "NEAREST") {
          v = at(std::min(int(std::floor(float(y) * sy)), in.height - 1),
                 std::min(int(std::floor(float(x) * sx)), in.width - 1), c);
        } else {
          const float fy = (float(y) + 0.5f) * sy - 0.5f, fx = (float(x) + 0.5f) * sx - 0.5f;
          const int y0 = int(std::floor(fy)), x0 = int(std::floor(fx));
          const float dy = fy - float(y0), dx = fx - float(x0);
          if (method == "CUBIC") {
            for (int j = -1; j <= 2; ++j)
              for (int i = -1; i <= 2; ++i)
                v +=
                    cubicWeight(float(j) - dy) * cubicWeight(float(i) - dx) * at(y0 + j, x0 + i, c);
            v = std::clamp(v, 0.0f, 255.0f);
          } else {
            v = (1 - dy) * ((1 - dx) * at(y0, x0, c) + dx * at(y0, x0 + 1, c)) +
                dy * ((1 - dx) * at(y0 + 1, x0, c) + dx * at(y0 + 1, x0 + 1, c));
          }
        }
        out.pixels[(size_t(y) * size_t(width) + size_t(x)) * size_t(in.channels) + size_t(c)] = v;
      }
  return out;
}

Image centerCrop(const Image& in, int width, int height) {
  Image out;
  out.width = width;
  out.height = height;
  out.channels = in.channels;
  const int top = (in.height - height) / 2, left = (in.width - width) / 2;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < in.channels; ++c)
        out.pixels.push_back(in.pixels[(size_t(y + top) * size_t(in.width) + size_t(x + left)) *
                                           size_t(in.channels) +
                                       size_t(c)]);
  return out;
}

} // namespace

Expected<Tensor> calibrationImageFromBytes(std::string_view data, const std::string& path,
                                           const ValueType& input, const ImagePreprocess& prep) {
  auto bad = [&](const std::string& what, const std::string& fix) {
    return Status(ErrorCode::BadFlag, fmt::format("calibration image '{}': {}", path, what), fix);
  };
  const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
  if (data.empty() || data.size() > size_t(std::numeric_limits<int>::max()))
    return bad("empty or larger than 2 GiB", "give PNG, JPEG or BMP files");
  int width = 0, height = 0, channels = 0;
  const int size = static_cast<int>(data.size());
  if (!stbi_info_from_memory(bytes, size, &width, &height, &channels))
    return bad(fmt::format("not a PNG, JPEG or BMP image ({})", stbi_failure_reason()),
               "give PNG, JPEG or BMP files, or raw tensors with input_type=BIN");
  if (width <= 0 || height <= 0 || int64_t(width) * int64_t(height) > kMaxImagePixels)
    return bad(
        fmt::format("{}x{} pixels is beyond the {} kiln decodes", width, height, kMaxImagePixels),
        "shrink the image first");
  const bool gray = prep.toFormat == "GRAY";
  const int wanted = gray ? 1 : 3;
  unsigned char* decoded = stbi_load_from_memory(bytes, size, &width, &height, &channels, wanted);
  if (!decoded)
    return bad(fmt::format("cannot decode it ({})", stbi_failure_reason()),
               "give intact PNG, JPEG or BMP files");
  Image image;
  image.width = width;
  image.height = height;
  image.channels = wanted;
  image.pixels.assign(decoded, decoded + size_t(width) * size_t(height) * size_t(wanted));
  stbi_image_free(decoded);
  // stb gives RGB; converter_lite's decoder gives BGR unless image_to_format asks for RGB.
  if (!gray && prep.toFormat != "RGB")
    for (size_t p = 0; p < image.pixels.size(); p += 3)
      std::swap(image.pixels[p], image.pixels[p + 2]);
  if (int64_t(prep.resizeWidth) * int64_t(prep.resizeHeight) > kMaxImagePixels)
    return bad(fmt::format("resizing to {}x{} is beyond the {} pixels kiln makes", prep.resizeWidth,
                           prep.resizeHeight, kMaxImagePixels),
               "set resize_width/resize_height to the model input's size");
  if (prep.resizeWidth > 0 && prep.resizeHeight > 0)
    image = resize(image, prep.resizeWidth, prep.resizeHeight, prep.resizeMethod);
  if (prep.cropWidth > 0 && prep.cropHeight > 0) {
    if (prep.cropWidth > image.width || prep.cropHeight > image.height)
      return bad(fmt::format("center crop {}x{} is larger than the {}x{} image", prep.cropWidth,
                             prep.cropHeight, image.width, image.height),
                 "set center_crop_width/height within resize_width/height");
    image = centerCrop(image, prep.cropWidth, prep.cropHeight);
  }
  for (size_t p = 0; p < image.pixels.size(); ++p) {
    const size_t c = p % size_t(image.channels);
    const float mean = prep.mean.empty() ? 0.0f : prep.mean[std::min(c, prep.mean.size() - 1)];
    const float stdDev = prep.std.empty() ? 1.0f : prep.std[std::min(c, prep.std.size() - 1)];
    image.pixels[p] = (image.pixels[p] - mean) / stdDev;
  }
  // The model input: [N, C, H, W] or [N, H, W, C] with N = 1 and C the image's channels.
  if (!input.shape.isStatic() || input.shape.rank() != 4)
    return bad(fmt::format("the input it feeds has shape {}, not a static 4-D image shape",
                           input.shape.toString()),
               "give the input's shape with --inputShape, or use input_type=BIN");
  const auto dims = input.shape.staticDims();
  const bool chw = dims[1] == image.channels && dims[2] == image.height && dims[3] == image.width;
  const bool hwc = dims[3] == image.channels && dims[1] == image.height && dims[2] == image.width;
  if (dims[0] != 1 || (!chw && !hwc))
    return bad(fmt::format("after preprocessing it is {}x{} with {} channel(s), the input takes {}",
                           image.width, image.height, image.channels, input.shape.toString()),
               "set resize_width/resize_height (and center_crop_*) to the input's size, and "
               "image_to_format=GRAY for a one-channel input");
  std::vector<float> values(image.pixels.size());
  const size_t plane = size_t(image.width) * size_t(image.height);
  for (size_t i = 0; i < plane; ++i)
    for (size_t c = 0; c < size_t(image.channels); ++c)
      values[chw ? c * plane + i : i * size_t(image.channels) + c] =
          image.pixels[i * size_t(image.channels) + c];
  Tensor tensor = Tensor::fromValues<float>(DType::Float32, dims, values);
  if (input.dtype != DType::Float32 && input.dtype != DType::Undefined)
    return bad(fmt::format("the input it feeds is {}, not float32", dtypeName(input.dtype)),
               "use input_type=BIN with tensors of the input's type");
  return tensor;
}

Expected<Tensor> loadCalibrationImage(const std::string& path, const ValueType& input,
                                      const ImagePreprocess& prep) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return Status(ErrorCode::FileNotFound, fmt::format("cannot open '{}'", path), "check the path");
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return calibrationImageFromBytes(bytes, path, input, prep);
}

} // namespace kiln
