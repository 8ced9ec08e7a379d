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

// The cost model that decides how many threads a piece of work is worth (docs/architecture.md,
// "Threads"). Work is estimated in nanoseconds of one thread: elements times a per-element cost.
// Handing ranges to sleeping workers and waiting for the last one (one fork-join, of this pool or
// of oneDNN's OpenMP team) costs about kHandOffNs: 9-13 us back to back on a busy 2-core machine,
// more between kernels (the workers slept longer, the join waits for the slower range); splitting
// openWakeWord's 50-us convolutions stopped losing only from 20 us on (bench/results.md "Threads").
constexpr double kHandOffNs = 20000;
// One float read, combined and written by a vector loop (elementwise kernels, copies).
constexpr double kNsPerElement = 0.5;
// One step of a Conv epilogue on one float of a block already in cache: counting these as
// streamed floats made openWakeWord's few-microsecond epilogues split, and two threads lost to
// one on waking the worker (bench/results.md "Issue 28 after session 20's merges").
constexpr double kNsPerCachedStep = 0.1;
// One float multiply-add in a GEMM or a oneDNN convolution.
constexpr double kNsPerMac = 0.015;
// One scalar libm call (exp, tanh) per element.
constexpr double kNsPerMathCall = 4.0;

// How many of `threads` to use for `workNs` of work that makes `handOffs` fork-joins when split:
// every range must hold at least two hand-offs' worth of work, so a split saves at least as much
// as it costs. Depends only on its arguments (never on timing), so the same shapes and thread
// count always split alike.
int threadsFor(int threads, double workNs, int handOffs = 1);

// For tests: while set, threadsFor returns `threads` whatever the work, so that small inputs
// take the split paths.
void setSplitAlways(bool on);

} // namespace kiln::rt::pool
