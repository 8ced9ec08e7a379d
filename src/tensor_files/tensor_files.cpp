// Tensor files for `kiln tensor`: reading and writing .pb / .npy / .bin, random and filled
// tensors, summaries and benchmark data text.
#include "kiln/tensor_files.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

#include <fmt/ranges.h>
#include <onnx/onnx_pb.h>

#include "kiln/frontend/onnx.h"
#include "kiln/frontend/value_io.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/atomic_file.h"
#include "kiln/support/checked_math.h"
#include "kiln/support/display.h"
#include "kiln/support/input_file.h"

namespace kiln {
namespace {

struct TypeName {
  DType dtype;
  const char* name;
};
constexpr TypeName kTypeNames[] = {
    {DType::Float32, "float32"}, {DType::Float16, "float16"}, {DType::Float64, "float64"},
    {DType::Int8, "int8"},       {DType::UInt8, "uint8"},     {DType::Int32, "int32"},
    {DType::Int64, "int64"},     {DType::Bool, "bool"},
};

std::string typeNameList() {
  std::string out;
  for (const TypeName& t : kTypeNames)
    out += (out.empty() ? "" : ", ") + std::string(t.name);
  return out;
}

bool isTensorFileType(DType type) {
  for (const TypeName& t : kTypeNames)
    if (t.dtype == type) return true;
  return false;
}

Status badFlag(std::string_view flag, const std::string& what, std::string hint) {
  return Status(ErrorCode::BadFlag, fmt::format("{}: {}", flag, what), std::move(hint));
}

Status badFile(const std::string& path, const std::string& what, std::string hint) {
  return Status(ErrorCode::ConformanceDataBad, fmt::format("{}: {}", path, what), std::move(hint));
}

std::string extensionOf(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  for (char& c : ext)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return ext;
}

template <typename T> bool parseWhole(std::string_view text, T& value) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && end == text.data() + text.size();
}

// Integer range of an integer or bool type, as doubles (exact: every bound is below 2^63 and the
// int64 ones are powers of two).
std::pair<double, double> integerLimits(DType type) {
  switch (type) {
  case DType::Int8:
    return {-128.0, 127.0};
  case DType::UInt8:
    return {0.0, 255.0};
  case DType::Int32:
    return {-2147483648.0, 2147483647.0};
  case DType::Bool:
    return {0.0, 1.0};
  default:
    return {-9223372036854775808.0, 9223372036854775807.0};
  }
}

double floatLimit(DType type) {
  if (type == DType::Float16) return 65504.0;
  if (type == DType::Float32) return std::numeric_limits<float>::max();
  return std::numeric_limits<double>::max();
}

// splitmix64: a fixed, documented generator, so a seed means the same tensor on every machine and
// standard library (std::uniform_*_distribution is implementation-defined).
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

uint16_t halfBelow(uint16_t h) {
  if (h == 0x0000) return 0x8001;
  return (h & 0x8000) ? static_cast<uint16_t>(h + 1) : static_cast<uint16_t>(h - 1);
}

template <typename T> void store(std::vector<uint8_t>& bytes, uint64_t i, T value) {
  std::memcpy(bytes.data() + i * sizeof(T), &value, sizeof(T));
}

// Element i as int64 (exact for every integer type) or as double.
int64_t integerAt(const Tensor& t, uint64_t i) {
  const uint8_t* p = t.data() + i * static_cast<uint64_t>(dtypeBits(t.dtype()) / 8);
  switch (t.dtype()) {
  case DType::Int8:
    return static_cast<int8_t>(*p);
  case DType::UInt8:
  case DType::Bool:
    return *p;
  case DType::Int32: {
    int32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  case DType::Int64: {
    int64_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  default:
    return static_cast<int64_t>(rt::elementAsDouble(t, i));
  }
}

} // namespace

const std::vector<DType>& tensorFileDTypes() {
  static const std::vector<DType> types = [] {
    std::vector<DType> out;
    for (const TypeName& t : kTypeNames)
      out.push_back(t.dtype);
    return out;
  }();
  return types;
}

std::string tensorFileDTypeName(DType type) {
  for (const TypeName& t : kTypeNames)
    if (t.dtype == type) return t.name;
  return dtypeName(type);
}

Expected<DType> parseTensorFileDType(const std::string& name, std::string_view flag) {
  for (const TypeName& t : kTypeNames)
    if (name == t.name) return t.dtype;
  return badFlag(flag,
                 fmt::format("'{}' is not an element type kiln tensor takes", displayName(name)),
                 fmt::format("use one of {}", typeNameList()));
}

Expected<std::vector<int64_t>> parseTensorFileShape(const std::string& text,
                                                    std::string_view flag) {
  std::vector<int64_t> dims;
  if (!text.empty()) {
    size_t start = 0;
    while (true) {
      size_t comma = text.find(',', start);
      std::string_view piece(text.data() + start,
                             (comma == std::string::npos ? text.size() : comma) - start);
      int64_t d = 0;
      if (!parseWhole(piece, d) || d < 0)
        return badFlag(flag,
                       fmt::format("'{}' in '{}' is not a non-negative integer",
                                   displayName(std::string(piece)), displayName(text)),
                       "write the dims separated by commas, e.g. --shape 1,3,224,224");
      dims.push_back(d);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  if (!checkedElementCount(dims))
    return badFlag(flag, fmt::format("the element count of [{}] overflows", fmt::join(dims, ",")),
                   "give the dims of a tensor that fits in memory");
  return dims;
}

Expected<NamedTensor> readTensorFile(const std::string& path, const RawLayout& raw) {
  const std::string ext = extensionOf(path);
  if (ext == ".pb") {
    KILN_ASSIGN_OR_RETURN(std::string bytes, readInputFile(path));
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      return badFile(path,
                     fmt::format("{} bytes is more than a TensorProto can hold", bytes.size()),
                     "pass a serialized onnx TensorProto under 2 GiB");
    onnx::TensorProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return badFile(path, "not a TensorProto",
                     "pass a serialized onnx TensorProto (as `kiln run` and `kiln tensor make` "
                     "write)");
    KILN_ASSIGN_OR_RETURN(
        Tensor tensor,
        tensorFromOnnx(proto, std::filesystem::path(path).parent_path().string(), path));
    return NamedTensor{proto.name(), std::move(tensor)};
  }
  if (ext == ".npy") {
    KILN_ASSIGN_OR_RETURN(std::string bytes, readInputFile(path));
    KILN_ASSIGN_OR_RETURN(Tensor tensor, parseNpy(bytes, path));
    return NamedTensor{"", std::move(tensor)};
  }
  const std::string what = fmt::format("{} is raw data (not .pb or .npy)", path);
  if (!raw.dtype)
    return badFlag("--dtype", what + ", so its element type must be given",
                   fmt::format("add --dtype (one of {}) and --shape", typeNameList()));
  if (!raw.dims)
    return badFlag("--shape", what + ", so its dims must be given",
                   "add --shape with the dims, e.g. --shape 1,3,224,224");
  KILN_ASSIGN_OR_RETURN(TensorExtent extent,
                        checkTensorExtent(*raw.dims, static_cast<unsigned>(dtypeBits(*raw.dtype)),
                                          tensorFileDTypeName(*raw.dtype), ErrorCode::BadFlag,
                                          "--shape", "give the dims of a tensor that fits"));
  KILN_ASSIGN_OR_RETURN(std::string bytes, readInputFile(path));
  if (bytes.size() != extent.bytes)
    return badFile(path,
                   fmt::format("holds {} bytes but --shape {} of {} needs {}", bytes.size(),
                               fmt::join(*raw.dims, ","), tensorFileDTypeName(*raw.dtype),
                               extent.bytes),
                   "give the --dtype and --shape the file was written with");
  std::vector<uint8_t> data(bytes.begin(), bytes.end());
  if (*raw.dtype == DType::Bool)
    for (uint8_t& b : data)
      b = b != 0;
  return NamedTensor{"", Tensor(*raw.dtype, *raw.dims, Buffer::owned(std::move(data)))};
}

Status writeTensorFile(const std::string& path, const std::string& name, const Tensor& tensor) {
  const std::string ext = extensionOf(path);
  if (ext == ".pb") return writeValueFile(path, name, rt::RtValue::ofTensor(tensor));
  if (ext != ".npy" && ext != ".bin")
    return badFlag("--output", fmt::format("'{}' is not a .pb, .npy or .bin file", path),
                   "name the output FILE.pb (ONNX TensorProto, for kiln run / compare --input), "
                   "FILE.bin (raw, for benchmark --inDataFile) or FILE.npy");
  if (!isTensorFileType(tensor.dtype()))
    return badFlag(
        "--output", fmt::format("{} cannot hold a {} tensor", path, dtypeName(tensor.dtype())),
        fmt::format("convert it with --dtype (one of {}) or write a .pb", typeNameList()));
  if (ext == ".npy") return writeFileAtomically(path, npyBytes(tensor));
  return writeFileAtomically(
      path, std::string(reinterpret_cast<const char*>(tensor.data()), tensor.byteSize()));
}

Expected<RandomRange> tensorRandomRange(DType type, const std::string& text) {
  RandomRange range;
  if (isFloatingPoint(type)) {
    range = {-1.0, 1.0};
  } else if (type == DType::Bool) {
    range = {0.0, 2.0};
  } else if (type == DType::Int8 || type == DType::UInt8) {
    auto [lo, hi] = integerLimits(type);
    range = {lo, hi + 1};
  } else {
    range = {-1000.0, 1000.0};
  }
  if (text.empty()) return range;
  const std::string hint =
      isFloatingPoint(type)
          ? "write --range LOW,HIGH with LOW < HIGH; values are drawn from [LOW, HIGH)"
          : "write --range LOW,HIGH with whole numbers LOW < HIGH; values are drawn from "
            "LOW to HIGH-1";
  size_t comma = text.find(',');
  if (comma == std::string::npos ||
      !parseWhole(std::string_view(text).substr(0, comma), range.low) ||
      !parseWhole(std::string_view(text).substr(comma + 1), range.high) ||
      !std::isfinite(range.low) || !std::isfinite(range.high) || !(range.low < range.high))
    return badFlag("--range",
                   fmt::format("'{}' is not LOW,HIGH with LOW < HIGH", displayName(text)), hint);
  if (isFloatingPoint(type)) {
    const double limit = floatLimit(type);
    if (std::fabs(range.low) > limit || std::fabs(range.high) > limit)
      return badFlag("--range",
                     fmt::format("[{:g}, {:g}) goes beyond {} (at most {:g} in size)", range.low,
                                 range.high, tensorFileDTypeName(type), limit),
                     hint);
    return range;
  }
  auto [lo, hi] = integerLimits(type);
  if (range.low != std::floor(range.low) || range.high != std::floor(range.high))
    return badFlag("--range", fmt::format("'{}' is not two whole numbers", displayName(text)),
                   hint);
  // Whole numbers beyond 2^53 are not exact doubles: the interval would not be the one written.
  const double exact = 9007199254740992.0;
  if (range.low < std::max(lo, -exact) || range.high - 1 > std::min(hi, exact))
    return badFlag("--range",
                   fmt::format("[{:.0f}, {:.0f}) goes beyond {} (whole numbers from {:.0f} to "
                               "{:.0f})",
                               range.low, range.high, tensorFileDTypeName(type),
                               std::max(lo, -exact), std::min(hi, exact)),
                   hint);
  return range;
}

Tensor randomTensor(DType type, const std::vector<int64_t>& dims, uint64_t seed,
                    RandomRange range) {
  const uint64_t count = *checkedElementCount(dims);
  const size_t width = static_cast<size_t>(dtypeBits(type) / 8);
  std::vector<uint8_t> bytes(count * width);
  SplitMix64 random{seed};
  const double span = range.high - range.low;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t bits = random.next();
    switch (type) {
    case DType::Float64: {
      double v = range.low + span * (static_cast<double>(bits >> 11) * 0x1p-53);
      if (v >= range.high) v = std::nextafter(range.high, range.low);
      store(bytes, i, v);
      break;
    }
    case DType::Float32:
    case DType::Float16: {
      const float high = static_cast<float>(range.high);
      float v = static_cast<float>(range.low + span * (static_cast<double>(bits >> 40) * 0x1p-24));
      if (v >= high) v = std::nextafter(high, static_cast<float>(range.low));
      if (type == DType::Float32) {
        store(bytes, i, v);
      } else {
        uint16_t h = rt::floatToHalf(v);
        while (rt::halfToFloat(h) >= high)
          h = halfBelow(h);
        store(bytes, i, h);
      }
      break;
    }
    default: {
      const auto values = static_cast<uint64_t>(span);
      const int64_t v = static_cast<int64_t>(range.low) + static_cast<int64_t>(bits % values);
      switch (type) {
      case DType::Int8:
        store(bytes, i, static_cast<int8_t>(v));
        break;
      case DType::UInt8:
      case DType::Bool:
        store(bytes, i, static_cast<uint8_t>(v));
        break;
      case DType::Int32:
        store(bytes, i, static_cast<int32_t>(v));
        break;
      default:
        store(bytes, i, v);
        break;
      }
    }
    }
  }
  return Tensor(type, dims, Buffer::owned(std::move(bytes)));
}

Expected<Tensor> filledTensor(DType type, const std::vector<int64_t>& dims,
                              const std::string& value) {
  const uint64_t count = *checkedElementCount(dims);
  const size_t width = static_cast<size_t>(dtypeBits(type) / 8);
  std::vector<uint8_t> bytes(count * width);
  const std::string what =
      fmt::format("'{}' is not a {} value", displayName(value), tensorFileDTypeName(type));
  if (isFloatingPoint(type)) {
    double v = 0;
    if (!parseWhole(std::string_view(value), v))
      return badFlag("--fill", what, "write a decimal number, nan, inf or -inf");
    if (std::isfinite(v) && std::fabs(v) > floatLimit(type))
      return badFlag("--fill",
                     fmt::format("{} is beyond the largest {} ({:g})", displayName(value),
                                 tensorFileDTypeName(type), floatLimit(type)),
                     "give a value the type holds, or another --dtype");
    for (uint64_t i = 0; i < count; ++i) {
      if (type == DType::Float64)
        store(bytes, i, v);
      else if (type == DType::Float32)
        store(bytes, i, static_cast<float>(v));
      else
        store(bytes, i, rt::floatToHalf(static_cast<float>(v)));
    }
    return Tensor(type, dims, Buffer::owned(std::move(bytes)));
  }
  int64_t v = 0;
  if (type == DType::Bool && (value == "true" || value == "false")) {
    v = value == "true";
  } else if (!parseWhole(std::string_view(value), v)) {
    return badFlag("--fill", what,
                   type == DType::Bool ? "write 0, 1, true or false" : "write a whole number");
  }
  auto [lo, hi] = integerLimits(type);
  if (static_cast<double>(v) < lo || static_cast<double>(v) > hi)
    return badFlag("--fill",
                   fmt::format("{} is outside {} ({} to {})", v, tensorFileDTypeName(type),
                               static_cast<int64_t>(lo), static_cast<uint64_t>(hi)),
                   "give a value the type holds, or another --dtype");
  for (uint64_t i = 0; i < count; ++i) {
    if (width == 1)
      store(bytes, i, static_cast<uint8_t>(v));
    else if (width == 4)
      store(bytes, i, static_cast<int32_t>(v));
    else
      store(bytes, i, v);
  }
  return Tensor(type, dims, Buffer::owned(std::move(bytes)));
}

Expected<Tensor> castTensorFile(const Tensor& tensor, DType type) {
  if (tensor.dtype() == type) return tensor;
  auto cast = rt::castTensor(tensor, type);
  if (!cast)
    return badFlag("--dtype",
                   fmt::format("a {} tensor cannot be converted to {}", dtypeName(tensor.dtype()),
                               tensorFileDTypeName(type)),
                   "convert numeric tensors only");
  return *cast;
}

Expected<Tensor> reshapeTensorFile(const Tensor& tensor, const std::vector<int64_t>& dims) {
  const uint64_t count = *checkedElementCount(dims);
  if (count != tensor.elementCount())
    return badFlag("--shape",
                   fmt::format("[{}] has {} elements but the tensor has {} ([{}])",
                               fmt::join(dims, ","), count, tensor.elementCount(),
                               fmt::join(tensor.dims(), ",")),
                   "give dims whose product is the tensor's element count");
  return Tensor(tensor.dtype(), dims, tensor.buffer());
}

std::string tensorSummaryText(const NamedTensor& named, size_t firstCount) {
  const Tensor& t = named.tensor;
  std::string out;
  out += fmt::format("name: {}\n", named.name.empty() ? "(none)" : displayName(named.name));
  out += fmt::format("dtype: {}\n", tensorFileDTypeName(t.dtype()));
  out += fmt::format("shape: [{}]\n", fmt::join(t.dims(), ","));
  const uint64_t count = t.elementCount();
  out += fmt::format("elements: {}\n", count);
  if (t.dtype() == DType::String || t.dtype() == DType::Complex64 ||
      t.dtype() == DType::Complex128 || dtypeBits(t.dtype()) < 8)
    return out;
  const bool floating = isFloatingPoint(t.dtype());
  auto text = [&](uint64_t i) {
    return floating ? fmt::format("{:.6g}", rt::elementAsDouble(t, i))
                    : fmt::format("{}", integerAt(t, i));
  };
  uint64_t finite = 0, nonFinite = 0, minAt = 0, maxAt = 0;
  double sum = 0, lo = 0, hi = 0;
  for (uint64_t i = 0; i < count; ++i) {
    const double v = rt::elementAsDouble(t, i);
    if (!std::isfinite(v)) {
      ++nonFinite;
      continue;
    }
    if (finite == 0 || v < lo) lo = v, minAt = i;
    if (finite == 0 || v > hi) hi = v, maxAt = i;
    sum += v;
    ++finite;
  }
  if (finite > 0) {
    out += fmt::format("min: {}\nmax: {}\nmean: {:.6g}\n", text(minAt), text(maxAt),
                       sum / static_cast<double>(finite));
  }
  if (nonFinite > 0) out += fmt::format("non-finite (NaN or Inf): {}\n", nonFinite);
  const uint64_t shown = std::min<uint64_t>(count, firstCount);
  if (shown > 0) {
    std::string values;
    for (uint64_t i = 0; i < shown; ++i)
      values += (i ? " " : "") + text(i);
    out += fmt::format("values: {}{}\n", values,
                       shown < count ? fmt::format(" ... ({} more)", count - shown) : "");
  }
  return out;
}

Expected<std::string> benchmarkDataText(const std::vector<NamedTensor>& tensors,
                                        const std::vector<std::string>& sources) {
  KILN_CHECK(tensors.size() == sources.size(), "benchmarkDataText: one source per tensor");
  std::string out;
  std::set<std::string> names;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const NamedTensor& named = tensors[i];
    const std::string& source = sources[i];
    const std::string hint = "pass the TensorProto files `kiln run` writes for the model's outputs";
    if (named.name.empty())
      return badFile(source, "the tensor has no name, and benchmark data names each output", hint);
    if (named.name.find_first_of(" \t\r\n") != std::string::npos)
      return badFile(source,
                     fmt::format("tensor name '{}' holds white space, which benchmark's data "
                                 "format cannot",
                                 displayName(named.name)),
                     "rename the model's output (benchmark reads names up to white space)");
    if (!names.insert(named.name).second)
      return badFile(
          source,
          fmt::format("tensor '{}' was already given by another file", displayName(named.name)),
          "pass each output's file once");
    const Tensor& t = named.tensor;
    if (t.dtype() == DType::String || dtypeBits(t.dtype()) == 0 || t.dtype() == DType::Complex64 ||
        t.dtype() == DType::Complex128)
      return badFile(source,
                     fmt::format("tensor '{}' is {}, which benchmark data cannot hold",
                                 displayName(named.name), dtypeName(t.dtype())),
                     "benchmark compares numeric outputs only");
    out += fmt::format("{} {}", named.name, t.dims().size());
    for (int64_t d : t.dims())
      out += fmt::format(" {}", d);
    out += '\n';
    // fmt's shortest representation reads back (strtof) as the same float32.
    std::vector<float> values = rt::toFloatVector(t);
    for (size_t v = 0; v < values.size(); ++v) {
      if (v) out += ' ';
      out += fmt::format("{}", values[v]);
    }
    out += '\n';
  }
  return out;
}

} // namespace kiln
