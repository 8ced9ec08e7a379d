// Non-blocking, regular-files-only opening of user-named inputs, and the registry of what was read.
#include "kiln/support/input_file.h"

#include "written_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace kiln {
namespace {

using FileId = std::pair<dev_t, ino_t>;

struct Registry {
  std::mutex mutex;
  std::map<FileId, std::string> inputs;
  std::map<FileId, std::string> written; // identity -> the path it was written to
};

Registry& registry() {
  static Registry* r = new Registry(); // never destroyed: readers may run during static teardown
  return *r;
}

void noteInput(const struct stat& info, const std::string& path) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.inputs[FileId{info.st_dev, info.st_ino}] = path; // the latest name: an older entry may be stale
}

Status notRegular(const std::string& path, mode_t mode) {
  return makeError(ErrorCode::FileUnreadable, "pass a regular file",
                   "'{}' is not a regular file (it is {})", path, fileKindName(mode));
}

Status openFailed(const std::string& path, int err) {
  if (err == ENOENT)
    return makeError(ErrorCode::FileNotFound, "check the path", "cannot open '{}': no such file",
                     path);
  return makeError(ErrorCode::FileUnreadable, "check permissions", "cannot open '{}': {}", path,
                   std::strerror(err));
}

} // namespace

InputFile::InputFile(InputFile&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), size_(other.size_), path_(std::move(other.path_)) {}

InputFile& InputFile::operator=(InputFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
    path_ = std::move(other.path_);
  }
  return *this;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<InputFile> openInputFile(const std::string& path) {
  // stat first so a device or FIFO is never opened at all (opening some devices has effects).
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return openFailed(path, errno);
  if (!S_ISREG(info.st_mode)) return notRegular(path, info.st_mode);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return openFailed(path, errno);
  // The path may have been swapped between stat and open: judge what was actually opened.
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    mode_t mode = info.st_mode;
    ::close(fd);
    return notRegular(path, mode);
  }
  noteInput(info, path);
  return InputFile(fd, static_cast<uint64_t>(info.st_size), path);
}

Expected<std::string> readInputFile(const std::string& path) {
  KILN_ASSIGN_OR_RETURN(InputFile file, openInputFile(path));
  std::string text;
  text.reserve(static_cast<size_t>(file.size()));
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(file.fd(), chunk, sizeof chunk);
    if (got == 0) break;
    if (got < 0) {
      if (errno == EINTR) continue;
      return makeError(ErrorCode::FileUnreadable, "check the file and its permissions",
                       "cannot read '{}': {}", path, std::strerror(errno));
    }
    text.append(chunk, static_cast<size_t>(got));
  }
  return text;
}

std::optional<std::string> inputFileAt(dev_t device, ino_t inode) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  FileId id{device, inode};
  // A file deleted since (a temp file, a test's model) frees its inode for the next file made:
  // an entry holds only while its path still names that file, or an unrelated new file would be
  // taken for kiln's output (and replaced) or for an input (and refused).
  auto stillNames = [&](const std::string& path) {
    struct stat now {};
    return ::stat(path.c_str(), &now) == 0 && now.st_dev == device && now.st_ino == inode;
  };
  if (auto own = r.written.find(id); own != r.written.end()) {
    if (own->second.empty() || stillNames(own->second)) return std::nullopt;
    r.written.erase(own);
  }
  auto found = r.inputs.find(id);
  if (found == r.inputs.end()) return std::nullopt;
  if (!stillNames(found->second)) {
    r.inputs.erase(found);
    return std::nullopt;
  }
  return found->second;
}

void noteWrittenPath(dev_t device, ino_t inode, const std::string& path) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.written[FileId{device, inode}] = path;
}

void noteWrittenFile(dev_t device, ino_t inode) {
  // Without a path the identity is kept as written while that inode lives under any name.
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.written.emplace(FileId{device, inode}, std::string());
}

const char* fileKindName(mode_t mode) {
  if (S_ISDIR(mode)) return "a folder";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

} // namespace kiln
