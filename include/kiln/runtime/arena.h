// The planned arena of the CPU executor: buffers of a run placed at offsets in one block, planned
// from the first run's allocation trace (see RunArena).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/runtime/memory.h"

namespace kiln::rt {

// One block of memory for the buffers of a run, with each buffer's offset planned from the
// first run's allocation trace. The first run (recording) takes its buffers from the heap and logs
// every request and release; at its end the buffers released within the run get offsets (largest
// first, lowest offset whose bytes no buffer of overlapping lifetime uses) and the arena is sized
// at the planned peak. Later runs that make the same requests and releases in the same order get
// their buffers at the planned offsets; a buffer the first run handed out and kept (a graph
// output) comes from the pool. From the first event that differs from the trace (other shapes,
// another branch taken) the rest of that run uses the pool, so a buffer of the arena is never
// handed out while one it overlaps is in use; a run also skips the arena while a buffer of it is
// still held from an earlier run. Thread-safe.
class RunArena {
 public:
  struct Stats {
    size_t arenaBytes = 0;     // size of the planned block (0 before the first run ends)
    size_t recordedPeak = 0;   // bytes in use at the first run's peak, in request sizes
    uint64_t planned = 0;      // buffers of the trace with an offset
    uint64_t served = 0;       // buffers handed out from the arena, over all runs
    uint64_t divergedRuns = 0; // runs that left the plan part way
  };

  RunArena();
  ~RunArena();
  RunArena(const RunArena&) = delete;
  RunArena& operator=(const RunArena&) = delete;

  void beginRun();
  // After the first run: plans the offsets and allocates the arena; with `prefault` (later runs
  // are expected) its pages are also made resident now instead of faulting in one by one during
  // the first run that uses them.
  void endRun(bool prefault = false);
  // A buffer for this request when the arena serves it (recording: from the heap, traced), or
  // nullptr: take it from `fallback`.
  std::shared_ptr<void> allocate(size_t bytes, uint8_t** data, BufferPool& fallback);
  Stats stats() const;
  // Turns the arena off (every request goes to the pool); for comparisons.
  void disable();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// While alive, allocateBuffer on this thread asks `arena` first (nullptr: no arena). Nests.
class ArenaScope : ThreadBinding<RunArena> {
 public:
  explicit ArenaScope(RunArena* arena);
};

} // namespace kiln::rt
