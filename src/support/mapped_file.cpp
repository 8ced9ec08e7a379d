// mmap-backed read-only files.
#include "kiln/support/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "kiln/support/input_file.h"
#include "kiln/support/sigbus_guard.h"

namespace kiln {

Expected<std::shared_ptr<const MappedFile>> MappedFile::open(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile input, openInputFile(path));
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(input.size());
  if (file->size_ > 0) {
    void* address = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, input.fd(), 0);
    if (address == MAP_FAILED)
      return makeError(ErrorCode::FileUnreadable, "check free address space", "cannot map '{}': {}",
                       path, std::strerror(errno));
    file->data_ = static_cast<const uint8_t*>(address);
    // Someone truncating the file now would turn reads of the lost pages into SIGBUS.
    (void)guardMappedRange(address, file->size_, path);
  }
  return std::shared_ptr<const MappedFile>(std::move(file));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) {
    releaseMappedRange(data_);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

} // namespace kiln
