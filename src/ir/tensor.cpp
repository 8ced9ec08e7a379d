// Buffers and tensors.
#include "kiln/ir/tensor.h"

#include "kiln/ir/shape.h"

namespace kiln {

std::shared_ptr<const Buffer> Buffer::owned(std::vector<uint8_t> bytes) {
  std::shared_ptr<Buffer> buffer(new Buffer());
  buffer->owned_ = std::move(bytes);
  buffer->data_ = buffer->owned_.data();
  buffer->size_ = buffer->owned_.size();
  return buffer;
}

std::shared_ptr<const Buffer> Buffer::view(std::shared_ptr<const MappedFile> file, size_t offset,
                                           size_t size) {
  KILN_CHECK(file && offset <= file->size() && size <= file->size() - offset,
             "buffer view out of range");
  const MappedFile* raw = file.get();
  return borrowed(std::move(file), raw->data() + offset, size, raw);
}

std::shared_ptr<const Buffer> Buffer::borrowed(std::shared_ptr<const void> owner,
                                               const uint8_t* data, size_t size,
                                               const MappedFile* file) {
  std::shared_ptr<Buffer> buffer(new Buffer());
  buffer->keepAlive_ = std::move(owner);
  buffer->file_ = file;
  buffer->data_ = data;
  buffer->size_ = size;
  return buffer;
}

Tensor Tensor::strings(std::vector<int64_t> dims, std::vector<std::string> values) {
  Tensor tensor;
  tensor.dtype_ = DType::String;
  tensor.dims_ = std::move(dims);
  tensor.strings_ = std::make_shared<const std::vector<std::string>>(std::move(values));
  return tensor;
}

uint64_t Tensor::elementCount() const { return checkedElementCount(dims_).value_or(0); }

const std::vector<std::string>& Tensor::stringValues() const {
  static const std::vector<std::string> empty;
  return strings_ ? *strings_ : empty;
}

bool Tensor::sameContents(const Tensor& other) const {
  if (dtype_ != other.dtype_ || dims_ != other.dims_) return false;
  if (dtype_ == DType::String) return stringValues() == other.stringValues();
  return byteSize() == other.byteSize() &&
         (byteSize() == 0 || std::memcmp(data(), other.data(), byteSize()) == 0);
}

} // namespace kiln
