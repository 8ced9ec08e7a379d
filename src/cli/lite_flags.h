// The flag form MindSpore Lite's tools share (converter_lite, benchmark): every argument is
// --name=value, each name known and given once.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kiln/support/status.h"

namespace kiln {

// Splits `args` into name → value. Errors are BadFlag with `peerCode`; `unknownHint` is the fix for
// an unknown name; `checkValue` vets each value (Status::ok() to accept).
Expected<std::map<std::string, std::string>> splitLiteFlags(
    const std::vector<std::string>& args, const std::vector<std::string>& knownNames,
    const std::string& unknownHint, const std::string& peerCode,
    const std::function<Status(const std::string& name, const std::string& value)>& checkValue);

} // namespace kiln
