// Formatting of coded errors and the internal check failure path.
#include "kiln/support/status.h"

#include <cstdio>

#include "kiln/support/display.h"

namespace kiln {

std::string codeString(ErrorCode code) { return fmt::format("K{:04d}", static_cast<int>(code)); }

std::string Status::toString() const {
  if (isOk()) return "OK";
  // Messages quote names from model files: escaped and capped here, so no name can break the one
  // line into several, reach the terminal as a control sequence, or make the line megabytes long.
  std::string text = codeString(code_) + (peerCode_.empty() ? "" : " (" + peerCode_ + ")") + ": " +
                     displayLine(message_);
  // Messages quoting a peer tool's sentence may already end in a full stop (or a question:
  // "did you mean ...?").
  if (!hint_.empty())
    text += (text.back() == '.' || text.back() == '?' ? " Fix: " : ". Fix: ") + displayLine(hint_);
  return text;
}

Status Status::withContext(const std::string& context) const {
  if (isOk()) return *this;
  return Status(code_, context + ": " + message_, hint_).withPeerCode(peerCode_);
}

void checkFailed(const char* file, int line, const char* expr, const std::string& message) {
  std::fprintf(stderr, "kiln internal error at %s:%d: check '%s' failed %s\n", file, line, expr,
               message.c_str());
  std::abort();
}

} // namespace kiln
