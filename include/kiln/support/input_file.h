// Opening the files a user names (models, configs, input data) without ever blocking, regular files
// only, and remembering them so no output replaces them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

// What a non-regular file is ("a folder", "a FIFO (named pipe)", ...), for messages.
const char* fileKindName(mode_t mode);

// An open, regular, readable file. Owns the descriptor.
class InputFile {
 public:
  InputFile(InputFile&& other) noexcept;
  InputFile& operator=(InputFile&& other) noexcept;
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  ~InputFile();

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  friend Expected<InputFile> openInputFile(const std::string& path);
  InputFile(int fd, uint64_t size, std::string path)
      : fd_(fd), size_(size), path_(std::move(path)) {}
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// Opens `path` for reading. A folder, FIFO, socket or device is refused with K1002 before it is
// opened, and the open itself never waits (O_NONBLOCK), so a FIFO swapped in meanwhile fails too
// instead of hanging. A missing file is K1001. The file is noted as an input of this process
// (see inputFileAt).
Expected<InputFile> openInputFile(const std::string& path);

// The whole content of `path`, opened as openInputFile does.
Expected<std::string> readInputFile(const std::string& path);

// The path under which this process read the file with this device and inode, unless this process
// wrote that file itself (then rewriting it is its own business). Outputs use this to refuse
// replacing an input.
std::optional<std::string> inputFileAt(dev_t device, ino_t inode);

// Notes a file this process wrote, so reading it back does not make it an input.
void noteWrittenFile(dev_t device, ino_t inode);

} // namespace kiln
