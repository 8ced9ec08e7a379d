// The toolchain's version, printed by every tool's --version.
#pragma once

#include <string>

namespace kiln {

// The project version (CMake's project(VERSION)), e.g. "0.1.0".
const char* versionString();

// The line every tool prints for --version: "<tool> (kiln) 0.1.0", then what the output files are for.
std::string versionBanner(const std::string& tool);

// True when ARGS ask only for the version (a lone --version), so the front-ends answer before parsing.
bool asksForVersion(int argc, char** argv);

} // namespace kiln
