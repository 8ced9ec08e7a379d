// The last resort of every tool's main: an exception that escaped the library as one coded error.
#pragma once

#include "kiln/support/status.h"

namespace kiln {

// Call inside `catch (...)`: the exception being handled as a Status. Running out of memory (or a
// size too large to allocate) is K5004; anything else is K9001 with the exception's text. The
// causes themselves are fixed where they arise; this only keeps a missed one from aborting.
Status statusFromCurrentException();

} // namespace kiln
