// mmap-backed read-only files.
#include "kiln/support/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kiln {

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    if (err == ENOENT)
      return makeError(ErrorCode::FileNotFound, "check the path", "cannot open '{}': no such file",
                       path);
    return makeError(ErrorCode::FileUnreadable, "check permissions", "cannot open '{}': {}", path,
                     std::strerror(err));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    return makeError(ErrorCode::FileUnreadable, "pass a regular file", "'{}' is not a regular file",
                     path);
  }
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(info.st_size);
  if (file->size_ > 0) {
    void* address = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return makeError(ErrorCode::FileUnreadable, "check free address space", "cannot map '{}': {}",
                       path, std::strerror(err));
    }
    file->data_ = static_cast<const uint8_t*>(address);
  }
  ::close(fd);
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

} // namespace kiln
