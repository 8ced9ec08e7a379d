// Giving a weight's mapped-file pages back to the kernel once they have been read.
#pragma once

namespace kiln {

class Buffer;

// When `buffer` is a window of a mapped file: hands the pages that lie wholly inside it back to the
// kernel (madvise MADV_DONTNEED). They stop counting towards this process's RSS and are read again
// from the file (page cache) if touched later; the mapping is private and read-only, so nothing is
// lost. Writers and weight passes call it after a weight has gone to the output or been
// converted, so a conversion never holds all of a model's pages at once. No-op otherwise.
void releasePages(const Buffer* buffer);

} // namespace kiln
