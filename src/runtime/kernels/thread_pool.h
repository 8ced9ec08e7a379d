// The executor's one worker pool: kernels split their work into contiguous ranges with
// parallelFor; OpenBLAS runs single-threaded inside each range (nn_util.cpp), so no second pool
// spins against this one. The split depends only on the sizes and the thread count, and each
// range computes its elements exactly as a single-threaded run would.
#pragma once

#include <cstdint>
#include <functional>

namespace kiln::rt::pool {

// Runs fn(begin, end) over [0, count) cut into at most `threads` contiguous ranges whose bounds
// are multiples of `grain` (the last excepted); the calling thread takes the first range. Calls
// from inside a range run serially.
void parallelFor(int threads, int64_t count, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn);

} // namespace kiln::rt::pool
