// Files this process wrote (writeFileAtomically), by identity and final path: reading one back
// does not make it an input a later write must not replace. Shared by atomic_file.cpp and
// input_file.cpp only.
#pragma once

#include <string>
#include <sys/types.h>

namespace kiln {

void noteWrittenPath(dev_t device, ino_t inode, const std::string& path);

} // namespace kiln
