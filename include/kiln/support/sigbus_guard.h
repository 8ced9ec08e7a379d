// Turns SIGBUS on a mapped input that shrank while kiln read it into one coded line and a non-zero
// exit, with unfinished outputs removed, instead of a crash.
#pragma once

#include <cstddef>
#include <string>

namespace kiln {

// Registers [begin, begin + size) as mapped from the file `name`. A fault there (the file was
// truncated after mapping) prints "<tool>: error K1002: '<name>' became shorter while it was being
// read ..." on stderr, removes the registered temp outputs and exits with status 1. Faults
// elsewhere reach the handler that was installed before (or the default action). Returns false
// when the table is full, and then the range is not covered.
bool guardMappedRange(const void* begin, size_t size, const std::string& name);
// Forgets the range that starts at `begin` (before it is unmapped).
void releaseMappedRange(const void* begin);

// Registers an output file that is not complete yet (an atomic writer's temp file, or the first
// file of a pair), so the SIGBUS exit removes it. Returns a token; -1 when the table is full.
int guardUnfinishedOutput(const std::string& path);
void releaseUnfinishedOutput(int token);

} // namespace kiln
