// NumPy .npy files (format versions 1.0 and 2.0) read into and written from kiln tensors.
//
// The one Debian-packaged C++ reader, xtensor's xnpy.hpp (libxtensor-dev), loads into an
// xt::xarray<T> whose element type the caller must name at compile time, reports a malformed
// header by throwing, and would bring a template library into every build for the hundred lines
// a header takes. kiln learns the element type from the header, must answer every bad byte with
// one coded line (no exceptions cross the library boundary) and keeps its fuzz target on exactly
// this parser, so it reads the header itself.
#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>

#include <fmt/ranges.h>

#include "kiln/support/checked_math.h"
#include "kiln/support/display.h"
#include "kiln/tensor_files.h"

namespace kiln {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// numpy pads the header so the data starts on this boundary.
constexpr size_t kAlignment = 64;

struct NpyType {
  DType dtype;
  const char* descr; // as numpy.save writes it
};
constexpr NpyType kNpyTypes[] = {
    {DType::Float32, "<f4"}, {DType::Float16, "<f2"}, {DType::Float64, "<f8"}, {DType::Int8, "|i1"},
    {DType::UInt8, "|u1"},   {DType::Int32, "<i4"},   {DType::Int64, "<i8"},   {DType::Bool, "|b1"},
};

std::string supportedDescrs() {
  std::string out;
  for (const NpyType& t : kNpyTypes)
    out += (out.empty() ? "" : ", ") + std::string(t.descr);
  return out;
}

Status npyError(const std::string& file, const std::string& what, std::string hint = {}) {
  return Status(ErrorCode::ConformanceDataBad, fmt::format("{}: {}", file, what),
                hint.empty() ? "write the file with numpy.save (a C-ordered array of a supported "
                               "type), or make it with `kiln tensor make`"
                             : std::move(hint));
}

// The header is a Python dict literal; this reads the subset numpy.save writes: string keys and
// values, True/False, and tuples of integers.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& file) : text_(text), file_(file) {}

  struct Fields {
    std::optional<std::string> descr;
    std::optional<bool> fortranOrder;
    std::optional<std::vector<int64_t>> shape;
  };

  Expected<Fields> parse() {
    Fields fields;
    skipSpace();
    if (!take('{')) return bad("does not start with '{'");
    while (true) {
      skipSpace();
      if (take('}')) break;
      KILN_ASSIGN_OR_RETURN(std::string key, string("a key"));
      skipSpace();
      if (!take(':')) return bad(fmt::format("no ':' after key '{}'", displayName(key)));
      skipSpace();
      if (key == "descr") {
        if (fields.descr) return bad("key 'descr' is given twice");
        if (peek() != '\'' && peek() != '"')
          return npyError(file_, ".npy header: 'descr' is not a type string (a structured array)",
                          fmt::format("save a plain array of one of {}", supportedDescrs()));
        KILN_ASSIGN_OR_RETURN(fields.descr, string("the 'descr' value"));
      } else if (key == "fortran_order") {
        if (fields.fortranOrder) return bad("key 'fortran_order' is given twice");
        if (word("True"))
          fields.fortranOrder = true;
        else if (word("False"))
          fields.fortranOrder = false;
        else
          return bad("'fortran_order' is neither True nor False");
      } else if (key == "shape") {
        if (fields.shape) return bad("key 'shape' is given twice");
        KILN_ASSIGN_OR_RETURN(fields.shape, tuple());
      } else {
        return bad(fmt::format("unknown key '{}'", displayName(key)));
      }
      skipSpace();
      if (take(',')) continue;
      skipSpace();
      if (take('}')) break;
      return bad(fmt::format("expected ',' or '}}' at byte {}", pos_));
    }
    skipSpace();
    if (pos_ != text_.size())
      return bad(fmt::format("text after the closing '}}' (byte {})", pos_));
    if (!fields.descr) return bad("no 'descr' key");
    if (!fields.fortranOrder) return bad("no 'fortran_order' key");
    if (!fields.shape) return bad("no 'shape' key");
    return fields;
  }

 private:
  Status bad(const std::string& what) const { return npyError(file_, ".npy header: " + what); }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool take(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }
  bool word(std::string_view w) {
    if (text_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  Expected<std::string> string(const char* what) {
    char quote = peek();
    if (quote != '\'' && quote != '"') return bad(fmt::format("{} is not a quoted string", what));
    size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) return bad(fmt::format("{} is not closed", what));
    std::string out(text_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  Expected<std::vector<int64_t>> tuple() {
    std::vector<int64_t> dims;
    if (!take('(')) return bad("'shape' is not a tuple");
    while (true) {
      skipSpace();
      if (take(')')) break;
      const char* begin = text_.data() + pos_;
      const char* end = text_.data() + text_.size();
      int64_t dim = 0;
      auto [next, ec] = std::from_chars(begin, end, dim);
      if (ec == std::errc::result_out_of_range)
        return bad(fmt::format("dim {} of 'shape' does not fit in 64 bits", dims.size()));
      if (ec != std::errc() || dim < 0)
        return bad(fmt::format("dim {} of 'shape' is not a non-negative integer", dims.size()));
      pos_ += static_cast<size_t>(next - begin);
      take('L'); // Python 2's numpy wrote long integers as 3L
      dims.push_back(dim);
      skipSpace();
      if (take(',')) continue;
      skipSpace();
      if (take(')')) break;
      return bad("'shape' is not a tuple of integers");
    }
    return dims;
  }

  std::string_view text_;
  const std::string& file_;
  size_t pos_ = 0;
};

Expected<DType> typeFromDescr(const std::string& descr, const std::string& file) {
  for (const NpyType& t : kNpyTypes) {
    if (descr == t.descr) return t.dtype;
    // A byte-sized element has no byte order: '<i1', '=u1' and '|b1' are all the same type.
    if (dtypeBits(t.dtype) == 8 && descr.size() == 3 &&
        std::string_view("<>|=").find(descr[0]) != std::string_view::npos &&
        std::string_view(descr).substr(1) == std::string_view(t.descr).substr(1))
      return t.dtype;
  }
  if (!descr.empty() && descr[0] == '>')
    return npyError(file, fmt::format(".npy element type '{}' is big-endian", displayName(descr)),
                    "save the array as little-endian: a.astype(a.dtype.newbyteorder('<'))");
  return npyError(file, fmt::format(".npy element type '{}' is not supported", displayName(descr)),
                  fmt::format("save the array as one of {}", supportedDescrs()));
}

uint64_t readLittleEndian(std::string_view bytes, size_t offset, size_t width) {
  uint64_t value = 0;
  for (size_t i = 0; i < width; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[offset + i])) << (8 * i);
  return value;
}

} // namespace

Expected<Tensor> parseNpy(std::string_view bytes, const std::string& displayName) {
  const std::string& file = displayName;
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    return npyError(file, "not a .npy file (no \\x93NUMPY magic)");
  if (bytes.size() < 8) return npyError(file, ".npy file ends inside its version");
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  // Version 3.0 differs only in a UTF-8 header, which numpy uses for field names this reader
  // refuses anyway.
  if (major != 1 && major != 2)
    return npyError(file, fmt::format(".npy format version {}.{} is not supported", major, minor),
                    "save with numpy.save, which writes version 1.0 (2.0 for huge headers)");
  const size_t lengthBytes = major == 1 ? 2 : 4;
  const size_t headerStart = 8 + lengthBytes;
  if (bytes.size() < headerStart) return npyError(file, ".npy file ends inside its header length");
  const uint64_t headerLength = readLittleEndian(bytes, 8, lengthBytes);
  if (headerLength > bytes.size() - headerStart)
    return npyError(file,
                    fmt::format(".npy header says {} bytes but the file has {} after it",
                                headerLength, bytes.size() - headerStart),
                    "the file is cut short; write it again");
  const size_t dataStart = headerStart + headerLength;
  HeaderParser parser(bytes.substr(headerStart, headerLength), file);
  KILN_ASSIGN_OR_RETURN(auto fields, parser.parse());
  KILN_ASSIGN_OR_RETURN(DType dtype, typeFromDescr(*fields.descr, file));
  if (*fields.fortranOrder)
    return npyError(file, ".npy array is in Fortran order (fortran_order: True)",
                    "save a C-ordered array: numpy.save(path, numpy.ascontiguousarray(a))");
  const std::vector<int64_t>& dims = *fields.shape;
  KILN_ASSIGN_OR_RETURN(TensorExtent extent,
                        checkTensorExtent(dims, static_cast<unsigned>(dtypeBits(dtype)),
                                          tensorFileDTypeName(dtype), ErrorCode::ConformanceDataBad,
                                          file + ": .npy shape",
                                          "save an array of a size a tensor can hold"));
  const uint64_t dataBytes = bytes.size() - dataStart;
  if (dataBytes != extent.bytes)
    return npyError(file,
                    fmt::format(".npy data is {} bytes but shape ({}) of {} needs {}", dataBytes,
                                fmt::join(dims, ","), tensorFileDTypeName(dtype), extent.bytes),
                    "the file is cut short or has bytes after the array; write it again");
  std::vector<uint8_t> data(bytes.begin() + static_cast<ptrdiff_t>(dataStart), bytes.end());
  // ONNX bool elements are 0 or 1; numpy reads any non-zero byte as True.
  if (dtype == DType::Bool)
    for (uint8_t& b : data)
      b = b != 0;
  return Tensor(dtype, dims, Buffer::owned(std::move(data)));
}

std::string npyBytes(const Tensor& tensor) {
  const char* descr = nullptr;
  for (const NpyType& t : kNpyTypes)
    if (t.dtype == tensor.dtype()) descr = t.descr;
  KILN_CHECK(descr, "npyBytes: no .npy type for {}", dtypeName(tensor.dtype()));
  std::string shape;
  for (int64_t d : tensor.dims())
    shape += fmt::format("{}, ", d);
  if (tensor.dims().size() > 1) shape.resize(shape.size() - 2);
  if (tensor.dims().size() == 1) shape.resize(shape.size() - 1);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, shape);
  const bool version1 = header.size() + 1 + 10 + kAlignment <= 0xffff;
  const size_t prefix = version1 ? 10 : 12;
  const size_t padded = (prefix + header.size() + 1 + kAlignment - 1) / kAlignment * kAlignment;
  header.append(padded - prefix - header.size() - 1, ' ');
  header += '\n';
  std::string out(kMagic);
  out += static_cast<char>(version1 ? 1 : 2);
  out += '\0';
  const size_t length = header.size();
  for (size_t i = 0; i < prefix - 8; ++i)
    out += static_cast<char>((length >> (8 * i)) & 0xff);
  out += header;
  out.append(reinterpret_cast<const char*>(tensor.data()), tensor.byteSize());
  return out;
}

} // namespace kiln
