// The one rule for files a model names beside itself (ONNX external data, .om FileConstant weight
// files, .ms .msw weights): they must stay inside the model's folder.
#pragma once

#include <string>

#include "kiln/support/status.h"

namespace kiln {

// What a reader calls the path it is resolving and which error it reports.
struct SideFileRule {
  ErrorCode code;   // K2011 for ONNX external data, the reader's own "invalid file" code otherwise
  std::string what; // "external data location", "FileConstant location" ...
  std::string hint; // the fix, in the reader's words
};

// Resolves `location`, a path read from a model, against `folder`, the model's folder ("" is the
// current folder), and returns the canonical path to open. Refused with rule.code: an empty
// location, an absolute one, one with a ".." component, and one whose canonical path (every
// symlink followed) is not below the folder's canonical path. A location that does not exist
// resolves (opening it then reports K1001); opening the result must still refuse non-regular
// files, as openInputFile and MappedFile::open do.
Expected<std::string> resolveInsideFolder(const std::string& folder, const std::string& location,
                                          const SideFileRule& rule);

} // namespace kiln
