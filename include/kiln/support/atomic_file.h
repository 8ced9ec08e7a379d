// Atomic file output: write to a temp file beside the target, then rename, so failures leave
// nothing; the one place that decides which output paths kiln may write.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "kiln/support/status.h"

namespace kiln {

// Refuses (K1003) an output path kiln must not replace: a symlink (renaming onto it would replace
// the link, not write where it points; kiln refuses rather than guess), anything but a regular
// file (a device such as /dev/null, a FIFO, a socket, a folder), and a file this process read as
// an input, by any name or hard link (openInputFile's registry). A path that does not exist yet
// passes. writeFileAtomically checks this itself; writers of several files check every target
// first, so a refusal leaves none of them written.
Status checkOutputTarget(const std::string& path);

// Creates an output folder and its parents. A failure names the folder and the real reason
// (read-only file system, permission denied, a file in the way), K1003.
Status makeOutputFolder(const std::string& folder);

// Calls `write` with a stream onto a temp file in the target's folder; on success fsyncs and
// renames it to `path`. On any failure (from `write` or I/O) the temp file is removed and `path` is
// untouched. The target must pass checkOutputTarget.
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
