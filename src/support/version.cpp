#include "kiln/support/version.h"

#include <cstring>

namespace kiln {

const char* versionString() { return KILN_VERSION_STRING; }

std::string versionBanner(const std::string& tool) {
  return tool + " (kiln) " + versionString() + "\n";
}

bool asksForVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--version") == 0) return true;
  return false;
}

} // namespace kiln
