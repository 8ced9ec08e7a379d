// --name=value splitting shared by the converter_lite and benchmark front-ends.
#include "lite_flags.h"

#include <algorithm>

#include <fmt/format.h>

#include "kiln/support/suggest.h"

namespace kiln {

Expected<std::map<std::string, std::string>> splitLiteFlags(
    const std::vector<std::string>& args, const std::vector<std::string>& knownNames,
    const std::string& unknownHint, const std::string& peerCode,
    const std::function<Status(const std::string& name, const std::string& value)>& checkValue) {
  auto badFlag = [&](const std::string& message, const std::string& hint) {
    return Status(ErrorCode::BadFlag, message, hint).withPeerCode(peerCode);
  };
  std::map<std::string, std::string> given;
  for (const std::string& arg : args) {
    if (arg.rfind("--", 0) != 0)
      return badFlag(fmt::format("'{}' is not a --name=value flag", arg),
                     "write every flag as --name=value, without spaces around '='");
    size_t eq = arg.find('=');
    std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (std::find(knownNames.begin(), knownNames.end(), name) == knownNames.end()) {
      const std::string near = closestSpelling(name, knownNames);
      return badFlag(near.empty()
                         ? fmt::format("unknown flag --{}", name)
                         : fmt::format("unknown flag --{}; did you mean --{}?", name, near),
                     unknownHint);
    }
    if (eq == std::string::npos)
      return badFlag(fmt::format("flag --{} has no value", name),
                     fmt::format("write --{}=VALUE (one argument, no space)", name));
    if (given.count(name))
      return badFlag(fmt::format("flag --{} is given twice", name), "give each flag once");
    std::string value = arg.substr(eq + 1);
    KILN_TRY(checkValue(name, value));
    given[name] = value;
  }
  return given;
}

} // namespace kiln
