// Containment of model-named side files in the model's folder (contained_path.h).
#include "kiln/support/contained_path.h"

#include <algorithm>
#include <filesystem>

namespace kiln {

Expected<std::string> resolveInsideFolder(const std::string& folder, const std::string& location,
                                          const SideFileRule& rule) {
  namespace fs = std::filesystem;
  if (location.empty()) return Status(rule.code, rule.what + " is empty", rule.hint);
  fs::path relative(location);
  if (relative.is_absolute())
    return makeError(rule.code, rule.hint, "{} '{}' is absolute", rule.what, location);
  for (const auto& part : relative)
    if (part == "..")
      return makeError(rule.code, rule.hint, "{} '{}' leaves the model folder", rule.what,
                       location);
  // Canonical paths follow symlinks, so a link inside the folder that points out is caught too.
  std::error_code baseError, resolvedError;
  fs::path base =
      fs::weakly_canonical(folder.empty() ? fs::path(".") : fs::path(folder), baseError);
  fs::path resolved = fs::weakly_canonical(base / relative, resolvedError);
  auto [baseEnd, resolvedIt] =
      std::mismatch(base.begin(), base.end(), resolved.begin(), resolved.end());
  // The folder itself ("." or "sub/..") is not a file inside it.
  if (baseError || resolvedError || baseEnd != base.end() || resolvedIt == resolved.end())
    return makeError(rule.code, rule.hint, "{} '{}' resolves outside the model folder (to '{}')",
                     rule.what, location, resolved.string());
  return resolved.string();
}

} // namespace kiln
