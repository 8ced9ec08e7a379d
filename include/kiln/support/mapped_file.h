// Read-only memory-mapped files, shared so tensors can alias weights without copying them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

class MappedFile {
 public:
  // Maps the whole file read-only. An empty file maps to a valid, zero-length region.
  static Expected<std::shared_ptr<const MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }
  bool contains(const void* pointer) const {
    auto p = static_cast<const uint8_t*>(pointer);
    return size_ > 0 && p >= data_ && p < data_ + size_;
  }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

} // namespace kiln
