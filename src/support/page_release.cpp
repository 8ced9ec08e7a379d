// madvise-based page release for mapped weights (page_release.h).
#include "kiln/support/page_release.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>

#include "kiln/ir/tensor.h"

namespace kiln {

void releasePages(const Buffer* buffer) {
  if (!buffer || !buffer->file() || buffer->size() == 0) return;
  const MappedFile& file = *buffer->file();
  if (!file.contains(buffer->data())) return;
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  auto begin = reinterpret_cast<uintptr_t>(buffer->data());
  const uintptr_t end = std::min(begin + buffer->size(),
                                 reinterpret_cast<uintptr_t>(file.data() + file.size())) /
                        page * page;
  begin = (begin + page - 1) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

} // namespace kiln
