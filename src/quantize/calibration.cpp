// Calibration for `kiln quantize`: the calibration folder, per-tensor statistics collected from
// executor runs in bounded memory, and the MinMax / Percentile / Entropy (KL) / Mse range choices.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "kiln/quantize.h"
#include "kiln/runtime/executor.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/display.h"
#include "kiln/support/progress.h"
#include "kiln/tensor_files.h"

namespace kiln {

void AbsHistogram::add(const float* values, size_t count) {
  if (counts.empty()) return;
  const size_t last = counts.size() - 1;
  // Multiplying by bins / limit rather than dividing per element; a zero limit puts all in bin 0.
  const double perUnit = limit > 0 ? static_cast<double>(counts.size()) / limit : 0;
  for (size_t i = 0; i < count; ++i) {
    const double v = std::fabs(static_cast<double>(values[i]));
    if (!std::isfinite(v)) continue;
    const double bin = v * perUnit;
    ++counts[bin >= static_cast<double>(last) ? last : static_cast<size_t>(bin)];
  }
}

uint64_t AbsHistogram::total() const {
  uint64_t sum = 0;
  for (uint64_t c : counts)
    sum += c;
  return sum;
}

double percentileThreshold(const AbsHistogram& histogram, double percentile) {
  const uint64_t total = histogram.total();
  if (total == 0) return histogram.limit;
  // The count that must lie at or below the threshold, rounded up so 100% takes every value.
  const double wanted = std::ceil(std::clamp(percentile, 0.0, 100.0) / 100.0 * double(total));
  uint64_t running = 0;
  for (size_t i = 0; i < histogram.counts.size(); ++i) {
    running += histogram.counts[i];
    if (static_cast<double>(running) >= wanted)
      return std::min(histogram.limit, double(i + 1) * histogram.binWidth());
  }
  return histogram.limit;
}

double entropyThreshold(const AbsHistogram& histogram, size_t levels) {
  const std::vector<uint64_t>& h = histogram.counts;
  const size_t bins = h.size();
  if (levels == 0 || bins <= levels || histogram.total() == 0) return histogram.limit;
  // Suffix sums: the outliers a clip at bin i folds into its last bin.
  std::vector<double> beyond(bins + 1, 0);
  for (size_t i = bins; i-- > 0;)
    beyond[i] = beyond[i + 1] + double(h[i]);
  double bestDivergence = std::numeric_limits<double>::infinity();
  size_t bestEdge = bins;
  std::vector<double> reference(bins), candidate(bins);
  for (size_t edge = levels; edge <= bins; ++edge) {
    // Reference: the first `edge` bins, the clipped mass added to the last of them.
    double referenceSum = 0;
    for (size_t j = 0; j < edge; ++j) {
      reference[j] = double(h[j]);
      referenceSum += reference[j];
    }
    reference[edge - 1] += beyond[edge];
    referenceSum += beyond[edge];
    // Candidate: the same bins (without the outliers) merged into `levels` groups (group k takes
    // bins [k·edge/levels, (k+1)·edge/levels)), each group's count spread evenly over the bins of
    // it the reference has values in (an empty bin stays empty).
    double candidateSum = 0;
    for (size_t k = 0; k < levels; ++k) {
      const size_t first = k * edge / levels, end = (k + 1) * edge / levels;
      double mass = 0;
      size_t occupied = 0;
      for (size_t j = first; j < end; ++j) {
        mass += double(h[j]);
        occupied += reference[j] != 0;
      }
      const double share = occupied ? mass / double(occupied) : 0;
      for (size_t j = first; j < end; ++j)
        candidate[j] = reference[j] != 0 ? share : 0;
      candidateSum += mass;
    }
    if (referenceSum <= 0 || candidateSum <= 0) continue;
    // KL(P || Q). Where P has mass Q lacks (a group whose only values are the folded outliers)
    // Q gets a tiny floor, which makes such clips costly but finite.
    constexpr double kFloor = 1e-9;
    double divergence = 0;
    for (size_t j = 0; j < edge; ++j) {
      if (reference[j] <= 0) continue;
      const double p = reference[j] / referenceSum;
      const double q = std::max(candidate[j] / candidateSum, kFloor);
      divergence += p * std::log(p / q);
    }
    // Strictly smaller: of equal divergences the smallest clip wins (finer steps).
    if (divergence < bestDivergence) {
      bestDivergence = divergence;
      bestEdge = edge;
    }
  }
  return std::min(histogram.limit, double(bestEdge) * histogram.binWidth());
}

double mseThreshold(const AbsHistogram& histogram, double min, double max, bool int8Symmetric) {
  const std::vector<uint64_t>& h = histogram.counts;
  const size_t bins = h.size();
  if (bins == 0 || histogram.total() == 0) return histogram.limit;
  const double width = histogram.binWidth();
  // Suffix sums of count, count·centre and count·centre² give the clipping error past any edge
  // in one step: Σ h (c - T)² = S2 - 2T·S1 + T²·S0.
  std::vector<double> s0(bins + 1, 0), s1(bins + 1, 0), s2(bins + 1, 0);
  for (size_t i = bins; i-- > 0;) {
    const double centre = (double(i) + 0.5) * width, n = double(h[i]);
    s0[i] = s0[i + 1] + n;
    s1[i] = s1[i + 1] + n * centre;
    s2[i] = s2[i + 1] + n * centre * centre;
  }
  double bestError = std::numeric_limits<double>::infinity();
  size_t bestEdge = bins;
  for (size_t edge = 1; edge <= bins; ++edge) {
    const double t = double(edge) * width;
    const double lo = std::min(0.0, std::max(min, -t)), hi = std::max(0.0, std::min(max, t));
    const double step = int8Symmetric ? t / 127.0 : (hi - lo) / 255.0;
    const double inside = s0[0] - s0[edge];
    const double clipped = s2[edge] - 2 * t * s1[edge] + t * t * s0[edge];
    const double error = inside * step * step / 12.0 + std::max(0.0, clipped);
    // Strictly smaller: of equal errors the smallest clip wins (finer steps).
    if (error < bestError) {
      bestError = error;
      bestEdge = edge;
    }
  }
  return std::min(histogram.limit, double(bestEdge) * width);
}

std::pair<double, double> activationRange(const ActivationStats& stats,
                                          const CalibrationOptions& options, size_t levels,
                                          bool int8Symmetric) {
  if (options.method == CalibrationMethod::MinMax || stats.histogram.counts.empty())
    return {stats.min, stats.max};
  const double threshold = options.method == CalibrationMethod::Percentile
                               ? percentileThreshold(stats.histogram, options.percentile)
                           : options.method == CalibrationMethod::Mse
                               ? mseThreshold(stats.histogram, stats.min, stats.max, int8Symmetric)
                               : entropyThreshold(stats.histogram, levels);
  return {std::max(stats.min, -threshold), std::min(stats.max, threshold)};
}

QuantParam activationQuantParam(double min, double max, bool int8Symmetric) {
  QuantParam param;
  if (int8Symmetric) {
    const double bound = std::max(std::fabs(min), std::fabs(max));
    param.scale = bound > 0 ? static_cast<float>(bound / 127.0) : 1.0f;
    return param;
  }
  // The range must hold 0 exactly (zero padding, ReLU outputs): widen it to include 0.
  min = std::min(min, 0.0);
  max = std::max(max, 0.0);
  if (max - min <= 0) return param;
  param.scale = static_cast<float>((max - min) / 255.0);
  param.zeroPoint =
      static_cast<int32_t>(std::clamp(std::nearbyint(-min / double(param.scale)), 0.0, 255.0));
  return param;
}

namespace {

namespace fs = std::filesystem;

// kiln run's file names for values: characters a file name may not hold become '_'.
std::string fileStem(const std::string& valueName) {
  std::string out;
  for (char c : valueName)
    out +=
        (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.') ? c : '_';
  return out;
}

bool isSampleFile(const fs::path& path) {
  const std::string ext = path.extension().string();
  return ext == ".pb" || ext == ".npy" || ext == ".bin";
}

bool isImageFile(const fs::path& path) {
  std::string ext = path.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp";
}

Status badFolder(const std::string& dir, const std::string& what) {
  return Status(ErrorCode::BadFlag, fmt::format("--calibration '{}': {}", dir, what),
                "give one subfolder per sample holding INPUT.npy / INPUT.pb / INPUT.bin for each "
                "graph input (docs/quantization.md), or, for a one-input model, the sample files");
}

} // namespace

Expected<CalibrationData> CalibrationData::open(const Graph& graph, const std::string& dir) {
  std::error_code error;
  const fs::file_status status = fs::status(dir, error);
  if (!fs::exists(status))
    return Status(ErrorCode::FileNotFound, fmt::format("cannot open '{}': no such folder", dir),
                  "check the --calibration path");
  if (!fs::is_directory(status))
    return Status(ErrorCode::FileUnreadable, fmt::format("'{}' is not a folder", dir),
                  "--calibration takes a folder of samples");
  CalibrationData data;
  std::vector<std::string> inputs;
  for (const Value* in : graph.inputs()) {
    if (in->isInitializer()) continue;
    inputs.push_back(in->name());
    data.inputTypes_[in->name()] = in->type();
  }
  if (inputs.empty()) return badFolder(dir, "the model has no input to feed");
  std::vector<fs::path> folders, files;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory())
      folders.push_back(entry.path());
    else if (entry.is_regular_file() && isSampleFile(entry.path()))
      files.push_back(entry.path());
  }
  if (error)
    return Status(ErrorCode::FileUnreadable,
                  fmt::format("cannot list '{}': {}", dir, error.message()),
                  "check the folder's permissions");
  std::sort(folders.begin(), folders.end());
  std::sort(files.begin(), files.end());
  if (!folders.empty()) {
    for (const fs::path& folder : folders) {
      Sample sample;
      sample.name = folder.filename().string();
      for (const std::string& input : inputs) {
        for (const std::string& stem : {input, fileStem(input)})
          for (const char* ext : {".npy", ".pb", ".bin"}) {
            const fs::path candidate = folder / (stem + ext);
            if (sample.files.count(input) == 0 && fs::is_regular_file(candidate))
              sample.files[input] = candidate.string();
          }
        if (!sample.files.count(input))
          return badFolder(dir, fmt::format("sample '{}' has no file for input '{}' ({}.npy, "
                                            "{}.pb or {}.bin)",
                                            sample.name, input, fileStem(input), fileStem(input),
                                            fileStem(input)));
      }
      data.samples_.push_back(std::move(sample));
    }
  } else {
    if (inputs.size() != 1)
      return badFolder(dir, fmt::format("the model has {} inputs, so each sample needs its own "
                                        "subfolder",
                                        inputs.size()));
    for (const fs::path& file : files)
      data.samples_.push_back({file.filename().string(), {{inputs[0], file.string()}}});
  }
  if (data.samples_.empty()) return badFolder(dir, "it holds no sample");
  return data;
}

Expected<CalibrationData>
CalibrationData::fromInputFolders(const Graph& graph,
                                  const std::map<std::string, std::string>& folders,
                                  const std::string& flag, const ImagePreprocess* images) {
  auto bad = [&](const std::string& what) {
    return Status(ErrorCode::BadFlag, fmt::format("{}: {}", flag, what),
                  "give NAME:FOLDER for every graph input, each folder holding one file per "
                  "sample (.npy, .pb or .bin), the same number in each");
  };
  CalibrationData data;
  if (images) data.images_ = *images;
  std::map<std::string, std::vector<fs::path>> files;
  for (const Value* in : graph.inputs()) {
    if (in->isInitializer()) continue;
    data.inputTypes_[in->name()] = in->type();
    auto folder = folders.find(in->name());
    if (folder == folders.end())
      return bad(fmt::format("no folder for input '{}'", displayName(in->name())));
    std::error_code error;
    if (!fs::is_directory(folder->second, error))
      return Status(ErrorCode::FileNotFound,
                    fmt::format("{}: cannot open folder '{}' of input '{}'", flag, folder->second,
                                displayName(in->name())),
                    "check the path");
    std::vector<fs::path>& list = files[in->name()];
    for (const auto& entry : fs::directory_iterator(folder->second, error))
      if (entry.is_regular_file() &&
          (images ? isImageFile(entry.path()) : isSampleFile(entry.path())))
        list.push_back(entry.path());
    std::sort(list.begin(), list.end());
  }
  for (const auto& [name, dir] : folders)
    if (!data.inputTypes_.count(name))
      return bad(fmt::format("'{}' is not a graph input", displayName(name)));
  if (files.empty()) return bad("the model has no input to feed");
  const size_t count = files.begin()->second.size();
  for (const auto& [name, list] : files)
    if (list.empty())
      return bad(fmt::format("the folder '{}' of input '{}' holds no {} file", folders.at(name),
                             displayName(name),
                             images ? ".png, .jpg, .jpeg or .bmp" : ".npy, .pb or .bin"));
  for (const auto& [name, list] : files)
    if (list.size() != count)
      return bad(fmt::format("input '{}' has {} sample file(s), input '{}' {}",
                             displayName(files.begin()->first), count, displayName(name),
                             list.size()));
  for (size_t k = 0; k < count; ++k) {
    Sample sample;
    sample.name = files.begin()->second[k].filename().string();
    for (const auto& [name, list] : files)
      sample.files[name] = list[k].string();
    data.samples_.push_back(std::move(sample));
  }
  return data;
}

Expected<std::map<std::string, rt::RtValue>> CalibrationData::load(size_t i) const {
  std::map<std::string, rt::RtValue> feeds;
  for (const auto& [input, path] : samples_[i].files) {
    const ValueType& type = inputTypes_.at(input);
    if (images_) {
      KILN_ASSIGN_OR_RETURN(Tensor image, loadCalibrationImage(path, type, *images_));
      feeds[input] = rt::RtValue::ofTensor(std::move(image));
      continue;
    }
    RawLayout raw;
    raw.dtype = type.dtype;
    if (type.shape.isStatic()) raw.dims = type.shape.staticDims();
    KILN_ASSIGN_OR_RETURN(NamedTensor file, readTensorFile(path, raw));
    Tensor tensor = std::move(file.tensor);
    if (type.dtype != DType::Undefined && tensor.dtype() != type.dtype) {
      KILN_ASSIGN_OR_RETURN(Tensor cast, castTensorFile(tensor, type.dtype));
      tensor = std::move(cast);
    }
    feeds[input] = rt::RtValue::ofTensor(std::move(tensor));
  }
  return feeds;
}

namespace {

// Hands the float32 elements of a tensor to `fn` without a copy when it is float32 already.
template <typename F> void withFloats(const Tensor& tensor, F&& fn) {
  if (tensor.dtype() != DType::Float32) return;
  fn(reinterpret_cast<const float*>(tensor.data()), static_cast<size_t>(tensor.elementCount()));
}

} // namespace

Expected<CalibrationResult> calibrate(const Model& model, const CalibrationData& data,
                                      const std::vector<std::string>& tensors,
                                      const CalibrationOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  CalibrationResult result;
  const size_t samples =
      options.maxSamples ? std::min(options.maxSamples, data.size()) : data.size();
  result.samples = samples;
  const std::set<std::string> wanted(tensors.begin(), tensors.end());
  const bool histograms = options.method != CalibrationMethod::MinMax;

  rt::ExecutorOptions executorOptions;
  executorOptions.threads = std::max(1, options.threads);
  executorOptions.captureNames = tensors;
  // Which pass is running: 0 gathers min/max, 1 fills the histograms over those ranges.
  int pass = 0;
  auto observe = [&](const std::string& name, const Tensor& tensor) {
    if (!wanted.count(name)) return;
    withFloats(tensor, [&](const float* values, size_t n) {
      ActivationStats& stats = result.tensors[name];
      if (pass == 1) {
        stats.histogram.add(values, n);
        return;
      }
      double lo = stats.count ? stats.min : std::numeric_limits<double>::infinity();
      double hi = stats.count ? stats.max : -std::numeric_limits<double>::infinity();
      for (size_t i = 0; i < n; ++i) {
        const float v = values[i];
        if (!std::isfinite(v)) continue;
        lo = std::min(lo, double(v));
        hi = std::max(hi, double(v));
      }
      if (lo <= hi) stats.min = lo, stats.max = hi;
      stats.count += n;
      const auto& dims = tensor.dims();
      if (dims.size() >= 3 && dims[1] > 0 && n > 0) {
        const size_t channels = size_t(dims[1]);
        const size_t inner = n / size_t(dims[0] ? dims[0] : 1) / channels;
        stats.channelPeak.resize(channels, 0.0);
        for (size_t i = 0; i < n; ++i) {
          const double v = std::fabs(double(values[i]));
          double& peak = stats.channelPeak[(i / inner) % channels];
          if (std::isfinite(v) && v > peak) peak = v;
        }
      }
    });
  };
  executorOptions.observeCaptured = [&](const Value& value, const rt::RtValue& produced) {
    if (produced.isTensor()) observe(value.name(), produced.tensor);
  };
  rt::Executor executor(model, executorOptions);
  KILN_TRY(executor.checkSupported());
  const int passes = histograms ? 2 : 1;
  WriteProgress progress("calibrating", static_cast<uint64_t>(samples * passes));
  for (pass = 0; pass < passes; ++pass) {
    if (pass == 1)
      for (auto& [name, stats] : result.tensors)
        stats.histogram =
            AbsHistogram(std::max(std::fabs(stats.min), std::fabs(stats.max)), kCalibrationBins);
    for (size_t i = 0; i < samples; ++i) {
      KILN_ASSIGN_OR_RETURN(auto feeds, data.load(i));
      // Graph inputs are fed, not produced: the executor does not hand them to the observer.
      for (const auto& [name, value] : feeds)
        if (value.isTensor()) observe(name, value.tensor);
      auto ran = executor.run(feeds);
      if (!ran)
        return ran.status().withContext(fmt::format("calibration sample '{}'", data.sampleName(i)));
      ++result.runs;
      progress.advance(1);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

} // namespace kiln
