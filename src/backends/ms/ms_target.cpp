// Registers the "ms" target: `.ms` files load through readMsFile, so `kiln run/inspect/compare`
// take them, and `--via ms` round-trips models through the .ms writer and reader.
#include "kiln/backends/ms_reader.h"
#include "kiln/backends/target.h"

namespace kiln {
namespace {

TargetHooks makeMsTarget() {
  TargetHooks hooks;
  hooks.name = "ms";
  hooks.extensions = {".ms"};
  hooks.read = [](const std::string& path) { return readMsFile(path); };
  hooks.unsupportedCodes = {ErrorCode::MsLowerUnsupported, ErrorCode::MsLowerBadAttribute};
  return hooks;
}

} // namespace
} // namespace kiln

KILN_REGISTER_TARGET(ms, kiln::makeMsTarget);
