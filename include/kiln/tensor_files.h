// Tensor data files without Python (`kiln tensor`): NumPy .npy, ONNX TensorProto .pb and raw
// little-endian .bin (MindSpore Lite benchmark --inDataFile) read and written, deterministic
// random and filled tensors, a printed summary, and `kiln run` outputs as benchmark data text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/ir/tensor.h"
#include "kiln/support/status.h"

namespace kiln {

// The element types tensor files take here, by their NumPy names: float32, float16, float64,
// int8, uint8, int32, int64, bool.
const std::vector<DType>& tensorFileDTypes();
// "float32" for DType::Float32 ... ("?" for a type outside tensorFileDTypes()).
std::string tensorFileDTypeName(DType type);
// --dtype NAME: one of tensorFileDTypes()' names, else K4001 naming `flag` and listing them.
Expected<DType> parseTensorFileDType(const std::string& name, std::string_view flag);
// --shape "1,3,8,8" ("" is a scalar): non-negative integers whose element count fits
// (checked_math.h), else K4001 naming `flag`.
Expected<std::vector<int64_t>> parseTensorFileShape(const std::string& text, std::string_view flag);

// A tensor and the name its file gives it ("" when the format has none: .npy, .bin).
struct NamedTensor {
  std::string name;
  Tensor tensor;
};

// NPY format versions 1.0 and 2.0 (little-endian or byte-sized element types of
// tensorFileDTypes(), C order). Anything else is K6001 naming `displayName` and the header
// field. The bytes are copied out of `bytes`.
Expected<Tensor> parseNpy(std::string_view bytes, const std::string& displayName);
// The .npy bytes of `tensor` (version 1.0, or 2.0 when the header needs it), as numpy.save
// writes them. The tensor's type must be in tensorFileDTypes().
std::string npyBytes(const Tensor& tensor);

// How a raw file is read: its element type and dims (the file holds nothing else).
struct RawLayout {
  std::optional<DType> dtype;
  std::optional<std::vector<int64_t>> dims;
};

// Reads a tensor file by its extension: .pb (TensorProto), .npy, anything else raw bytes laid out
// as `raw` says (both must be given: K4001 naming --dtype / --shape otherwise). A missing file is
// K1001, a folder or device K1002, bad contents or a size that does not match K6001.
Expected<NamedTensor> readTensorFile(const std::string& path, const RawLayout& raw);

// Writes `tensor` atomically by the extension of `path`: .pb (a TensorProto named `name`), .npy,
// .bin (raw little-endian bytes, what benchmark --inDataFile reads). Another extension is K4001.
Status writeTensorFile(const std::string& path, const std::string& name, const Tensor& tensor);

// A deterministic random tensor: the same seed, type and dims give the same bytes on every
// machine (splitmix64). Values are uniform in [low, high): floats over the whole interval,
// integers and bool over the whole numbers in it.
struct RandomRange {
  double low = -1;
  double high = 1;
};
// The interval --range "LOW,HIGH" gives for `type` (K4001 naming --range when it does not parse,
// is empty or leaves the type), or the type's default for "": [-1, 1) for floats, the whole type
// for int8 and uint8, [-1000, 1000) for int32 and int64, {0, 1} for bool.
Expected<RandomRange> tensorRandomRange(DType type, const std::string& text);
Tensor randomTensor(DType type, const std::vector<int64_t>& dims, uint64_t seed, RandomRange range);

// A tensor whose every element is `value` ("1.5", "-3", "nan", "inf", "true"): K4001 naming
// --fill when the text is not a number the type holds exactly (integers) or at all (floats).
Expected<Tensor> filledTensor(DType type, const std::vector<int64_t>& dims,
                              const std::string& value);

// A tensor as another type (ONNX Cast rules) or dims (same element count, else K4001 naming
// --shape).
Expected<Tensor> castTensorFile(const Tensor& tensor, DType type);
Expected<Tensor> reshapeTensorFile(const Tensor& tensor, const std::vector<int64_t>& dims);

// What `kiln tensor show` prints: name, dtype, shape, element count, min/max/mean (and how many
// values are NaN/Inf) and the first `firstCount` values.
std::string tensorSummaryText(const NamedTensor& tensor, size_t firstCount);

// The text MindSpore Lite's benchmark reads with --benchmarkDataFile (its calibration data): per
// tensor a line "<name> <ndim> <d0> ... <dn-1>" and a line of all its values, printed so that they
// read back as the same float32 numbers. A nameless tensor, a name with white space, a name
// given twice or a non-numeric tensor is K6001 naming `sources[i]`.
Expected<std::string> benchmarkDataText(const std::vector<NamedTensor>& tensors,
                                        const std::vector<std::string>& sources);

} // namespace kiln
