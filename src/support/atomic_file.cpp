// Temp-file-and-rename writer shared by every artifact writer.
#include "kiln/support/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ext/stdio_filebuf.h>
#include <filesystem>

namespace kiln {

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write) {
  return writeFileAtomically(path, write, nullptr);
}

Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write,
                           const std::function<Status(const std::string& writtenPath)>& verify) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path folder = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::string pattern = (folder / ("." + target.filename().string() + ".tmp-XXXXXX")).string();
  int fd = ::mkstemp(pattern.data());
  if (fd < 0)
    return makeError(ErrorCode::FileWriteFailed,
                     "check that the output folder exists and is writable",
                     "cannot create a file in '{}': {}", folder.string(), std::strerror(errno));
  ::fchmod(fd, 0644);
  Status status;
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
  } // the filebuf closes fd
  if (status.isOk() && verify) status = verify(pattern);
  if (status.isOk() && std::rename(pattern.c_str(), path.c_str()) != 0)
    status = makeError(ErrorCode::FileWriteFailed, "check the output path",
                       "cannot rename onto '{}': {}", path, std::strerror(errno));
  if (!status.isOk()) ::unlink(pattern.c_str());
  return status;
}

Status writeFileAtomically(const std::string& path, const std::string& bytes) {
  return writeFileAtomically(path, [&](std::ostream& stream) {
    stream.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return Status::ok();
  });
}

} // namespace kiln
