// Temp-file-and-rename writer shared by every artifact writer, and the output-path rules.
#include "kiln/support/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>

#include "kiln/support/input_file.h"
#include "kiln/support/sigbus_guard.h"
#include "written_files.h"

namespace kiln {
namespace {

// The fix for a folder kiln cannot create files in, by the reason.
std::string folderHint(int err) {
  if (err == EROFS) return "the folder is on a read-only file system; write the output elsewhere";
  if (err == EACCES || err == EPERM)
    return "make the folder writable (or remove its immutable flag), or write the output elsewhere";
  if (err == ENOSPC || err == EDQUOT) return "free disk space, or write the output elsewhere";
  return "check that the output folder exists and is writable";
}

} // namespace

Status checkOutputTarget(const std::string& path) {
  struct stat info {};
  // Not there yet is fine; an unreachable path is reported by the write itself.
  if (::lstat(path.c_str(), &info) != 0) return Status::ok();
  if (S_ISLNK(info.st_mode)) {
    std::error_code ec;
    std::string target = std::filesystem::read_symlink(path, ec).string();
    return makeError(ErrorCode::FileWriteFailed,
                     "kiln does not write through symbolic links; name the real file or another "
                     "path",
                     "refusing to write '{}': it is a symbolic link (to '{}')", path, target);
  }
  if (!S_ISREG(info.st_mode))
    return makeError(ErrorCode::FileWriteFailed, "write the output to a regular file path",
                     "refusing to write '{}': it is {}, which kiln would replace with a file", path,
                     fileKindName(info.st_mode));
  if (auto input = inputFileAt(info.st_dev, info.st_ino))
    return makeError(ErrorCode::FileWriteFailed, "write the output to another path",
                     "refusing to write '{}': it is the input '{}', which the output would replace",
                     path, *input);
  return Status::ok();
}

Status makeOutputFolder(const std::string& folder) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(fs::path(folder), ec);
  if (ec)
    return makeError(ErrorCode::FileWriteFailed, folderHint(ec.value()),
                     "cannot create the output folder '{}': {}", folder, ec.message());
  if (!fs::is_directory(fs::path(folder), ec))
    return makeError(ErrorCode::FileWriteFailed, "remove the file or write the output elsewhere",
                     "cannot use '{}' as the output folder: it is not a folder", folder);
  return Status::ok();
}

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write) {
  return writeFileAtomically(path, write, nullptr);
}

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write,
                           const std::function<Status(const std::string& writtenPath)>& verify) {
  namespace fs = std::filesystem;
  KILN_TRY(checkOutputTarget(path));
  fs::path target(path);
  fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string pattern = (folder / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(pattern.data());
  if (fd < 0) {
    int err = errno;
    return makeError(ErrorCode::FileWriteFailed, folderHint(err),
                     "cannot create a file in '{}': {}", folder.string(), std::strerror(err));
  }
  // A SIGBUS exit while the output is written (an input shrank) removes the temp file.
  int guard = guardUnfinishedOutput(pattern);
  ::fchmod(fd, 0644);
  Status status;
  struct stat written {};
  {
    __gnu_cxx::stdio_filebuf<char> buffer(fd, std::ios::out | std::ios::binary);
    std::ostream stream(&buffer);
    status = write(stream);
    stream.flush();
    if (status.isOk() && !stream)
      status = makeError(ErrorCode::FileWriteFailed, "check free disk space", "writing '{}' failed",
                         path);
    if (status.isOk() && ::fsync(fd) != 0)
      status = makeError(ErrorCode::FileWriteFailed, "check free disk space",
                         "writing '{}' failed: {}", path, std::strerror(errno));
    if (status.isOk() && ::fstat(fd, &written) != 0) written = {};
  } // the filebuf closes fd
  if (status.isOk() && verify) status = verify(pattern);
  if (status.isOk() && std::rename(pattern.c_str(), path.c_str()) != 0)
    status = makeError(ErrorCode::FileWriteFailed, "check the output path",
                       "cannot rename onto '{}': {}", path, std::strerror(errno));
  if (!status.isOk()) ::unlink(pattern.c_str());
  releaseUnfinishedOutput(guard);
  // Reading this file back later (a writer checking its output) must not make it an input that
  // a later write in this process would be refused to replace.
  if (status.isOk() && written.st_ino != 0) noteWrittenPath(written.st_dev, written.st_ino, path);
  return status;
}

Status writeFileAtomically(const std::string& path, const std::string& bytes) {
  return writeFileAtomically(path, [&](std::ostream& stream) {
    stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return Status::ok();
  });
}

} // namespace kiln
