// ATC's error shapes, shared by atc's flag parser (atc_flags.cpp) and its option checks
// (atc_options.cpp).
#pragma once

#include <string>

#include "kiln/support/status.h"

namespace kiln {

// A K8202-coded error (or `code`) carrying ATC's own code `peer` ("E10001", ...).
Status atcError(const char* peer, std::string message, std::string hint,
                ErrorCode code = ErrorCode::AtcOptionInvalid);
// "Value V for parameter --F is invalid. Reason: R" (E10001) and the E10003 twin.
Status invalidValue(const char* peer, const std::string& flagName, const std::string& value,
                    const std::string& reason, std::string hint = {});
// E10055: "The operation is not supported. Reason: ...".
Status notSupported(const std::string& reason, std::string hint);
// E10054: a required flag given empty.
Status requiredEmpty(const std::string& flagName);
bool isDigits(const std::string& s);

} // namespace kiln
