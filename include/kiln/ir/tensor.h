// Tensor constants whose bytes live in shared immutable buffers, possibly aliasing a mapped model
// file.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/ir/dtype.h"
#include "kiln/support/mapped_file.h"

namespace kiln {

// Immutable bytes: owned, or a window of a MappedFile that the buffer keeps alive.
class Buffer {
 public:
  static std::shared_ptr<const Buffer> owned(std::vector<uint8_t> bytes);
  static std::shared_ptr<const Buffer> view(std::shared_ptr<const MappedFile> file, size_t offset,
                                            size_t size);
  // Bytes owned by someone else, kept alive by `owner`; `file` is set when they are a mapped file's
  // pages.
  static std::shared_ptr<const Buffer> borrowed(std::shared_ptr<const void> owner,
                                                const uint8_t* data, size_t size,
                                                const MappedFile* file = nullptr);

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  // True when the bytes are the mapped file's own pages (no copy was made).
  bool aliasesFile() const { return file_ != nullptr; }
  const MappedFile* file() const { return file_; }

 private:
  Buffer() = default;
  std::vector<uint8_t> owned_;
  std::shared_ptr<const void> keepAlive_;
  const MappedFile* file_ = nullptr;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

class Tensor {
 public:
  Tensor() = default;
  // Numeric tensor over `buffer`; the caller guarantees buffer->size() matches dims × dtype.
  Tensor(DType dtype, std::vector<int64_t> dims, std::shared_ptr<const Buffer> buffer)
      : dtype_(dtype), dims_(std::move(dims)), buffer_(std::move(buffer)) {}
  static Tensor strings(std::vector<int64_t> dims, std::vector<std::string> values);
  template <typename T>
  static Tensor fromValues(DType dtype, std::vector<int64_t> dims, const std::vector<T>& values) {
    std::vector<uint8_t> bytes(values.size() * sizeof(T));
    if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
    return Tensor(dtype, std::move(dims), Buffer::owned(std::move(bytes)));
  }

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  uint64_t elementCount() const;
  const uint8_t* data() const { return buffer_ ? buffer_->data() : nullptr; }
  size_t byteSize() const { return buffer_ ? buffer_->size() : 0; }
  const std::shared_ptr<const Buffer>& buffer() const { return buffer_; }
  const std::vector<std::string>& stringValues() const;
  bool aliasesFile() const { return buffer_ && buffer_->aliasesFile(); }
  // Values copied out (safe for unaligned, file-aliased bytes).
  template <typename T> std::vector<T> copyValues() const {
    std::vector<T> out(byteSize() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), data(), out.size() * sizeof(T));
    return out;
  }
  bool sameContents(const Tensor& other) const;

 private:
  DType dtype_ = DType::Undefined;
  std::vector<int64_t> dims_;
  std::shared_ptr<const Buffer> buffer_;
  std::shared_ptr<const std::vector<std::string>> strings_;
};

} // namespace kiln
