// How calibration images are turned into input tensors (converter_lite's [data_preprocess_param]):
// a plain settings struct shared by the config parser and the calibration reader.
#pragma once

#include <string>
#include <vector>

namespace kiln {

// converter_lite's image preprocessing ([data_preprocess_param], input_type=IMAGE): the decoded
// image in `toFormat` channel order (BGR, RGB or GRAY), resized (0: kept), center-cropped (0:
// kept), then (v - mean[c]) / std[c] on 0..255 values (empty: 0 and 1), laid out as the input's
// [1, C, H, W] or [1, H, W, C].
struct ImagePreprocess {
  std::string toFormat = "BGR";
  int resizeWidth = 0, resizeHeight = 0;
  std::string resizeMethod = "LINEAR"; // LINEAR, NEAREST or CUBIC
  int cropWidth = 0, cropHeight = 0;
  std::vector<float> mean, std;
};

} // namespace kiln
