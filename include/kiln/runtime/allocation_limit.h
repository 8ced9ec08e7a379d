// What the executor refuses to allocate: outputs whose element count or byte size overflows
// (kiln/support/checked_math.h) and buffers larger than the machine's memory.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <vector>

#include "kiln/ir/dtype.h"

namespace kiln::rt {

// Thrown instead of allocating when a tensor cannot exist: its element count or byte size
// overflows, or it needs more bytes than the machine has. Trying would wrap to a short buffer or
// fault pages in for minutes; the executor turns this into K5004 naming the node (callKernel).
class AllocationRefused : public std::bad_alloc {
 public:
  explicit AllocationRefused(std::string reason) : reason_(std::move(reason)) {}
  const char* what() const noexcept override { return reason_.c_str(); }
  const std::string& reason() const { return reason_; }

 private:
  std::string reason_;
};

// The most bytes one buffer may have: the machine's physical memory.
uint64_t allocationLimitBytes();
// Throws AllocationRefused when `bytes` exceeds allocationLimitBytes().
void checkAllocationLimit(uint64_t bytes);

// Element count of a kernel's output dims, before or after its OutTensor exists; an overflow
// throws AllocationRefused.
uint64_t outputElementCount(const std::vector<int64_t>& dims);
// Throws AllocationRefused when an output of `dtype` and `dims` could not be allocated (its size
// overflows or exceeds the machine's memory): for kernels that build index tables as long as the
// output's axes before they allocate it.
void checkOutputFits(DType dtype, const std::vector<int64_t>& dims);

} // namespace kiln::rt
