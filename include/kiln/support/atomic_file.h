// Atomic file output: write to a temp file beside the target, then rename, so failures leave
// nothing.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

// Calls `write` with a stream onto a temp file in the target's folder; on success fsyncs and
// renames it to `path`. On any failure (from `write` or I/O) the temp file is removed and `path` is
// untouched.
Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write);

// As above, and before the rename calls `verify` with the temp file's path: a writer reads back
// what it wrote, so a file kiln's own readers would refuse never takes the target's place.
Status writeFileAtomically(const std::string& path,
                           const std::function<Status(std::ostream&)>& write,
                           const std::function<Status(const std::string& writtenPath)>& verify);

// Convenience for an in-memory payload.
Status writeFileAtomically(const std::string& path, const std::string& bytes);

} // namespace kiln
