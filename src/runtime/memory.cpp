// Executor memory: the buffer pool, uninitialised/zeroed allocation, the fp16 weight cache.
#include "kiln/runtime/memory.h"

#include "kiln/runtime/allocation_limit.h"
#include "kiln/runtime/arena.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

#include <sys/mman.h>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "kiln/runtime/half_block.h"
#include "kiln/runtime/tensor_util.h"
#include "kiln/support/checked_math.h"

namespace kiln::rt {
namespace {

constexpr size_t kAlignment = 64;

thread_local ExecutorMemory* currentMemory = nullptr;
thread_local RunArena* currentArena = nullptr;

bool poisonFromEnvironment() {
  const char* v = std::getenv("KILN_POISON_UNINITIALISED");
  return v && *v && std::strcmp(v, "0") != 0;
}

bool& poisonFlag() {
  static bool flag = poisonFromEnvironment();
  return flag;
}

uint8_t* systemAllocate(size_t capacity) {
  void* p = std::aligned_alloc(kAlignment, capacity);
  if (!p) throw std::bad_alloc();
  return static_cast<uint8_t*>(p);
}

// Bytes from the heap outside any pool, freed with their last tensor.
struct HeapBlock {
  uint8_t* data;
  explicit HeapBlock(size_t capacity) : data(systemAllocate(capacity)) {}
  ~HeapBlock() { std::free(data); }
  HeapBlock(const HeapBlock&) = delete;
  HeapBlock& operator=(const HeapBlock&) = delete;
};

// Fresh anonymous memory of `bytes`; from 2 MiB on the mapping starts on a 2 MiB boundary and
// asks for transparent huge pages, so that the first touch of a large tensor takes one page
// fault per 2 MiB instead of one per 4 KiB (faults dominated the first run of big-image models).
constexpr size_t kHugePage = size_t{2} << 20;

uint8_t* mapFresh(size_t bytes) {
  const bool huge = bytes >= kHugePage;
  const size_t span = huge ? bytes + kHugePage : bytes;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* start = static_cast<uint8_t*>(p);
  if (!huge) return start;
  const auto address = reinterpret_cast<uintptr_t>(start);
  auto* aligned = reinterpret_cast<uint8_t*>((address + kHugePage - 1) & ~(kHugePage - 1));
  if (aligned > start) munmap(start, static_cast<size_t>(aligned - start));
  const size_t tail = static_cast<size_t>(start + span - (aligned + bytes));
  if (tail > 0) munmap(aligned + bytes, tail);
#if defined(MADV_HUGEPAGE)
  madvise(aligned, bytes, MADV_HUGEPAGE); // advice only: without it the pages are small
#endif
  return aligned;
}

// Bytes of the first (recording) run: large blocks are mapped and unmapped so that none of them
// stays in the heap after the run, where it would add to the arena planned from it.
struct RecordedBlock {
  static constexpr size_t kMapFrom = size_t{256} << 10;
  uint8_t* data;
  size_t capacity;
  explicit RecordedBlock(size_t c) : capacity(c) {
    data = capacity >= kMapFrom ? mapFresh(capacity) : systemAllocate(capacity);
  }
  ~RecordedBlock() {
    if (capacity >= kMapFrom)
      munmap(data, capacity);
    else
      std::free(data);
  }
  RecordedBlock(const RecordedBlock&) = delete;
  RecordedBlock& operator=(const RecordedBlock&) = delete;
};

} // namespace

struct BufferPool::State {
  mutable std::mutex mutex;
  bool open = true;
  std::map<size_t, std::vector<uint8_t*>> free; // by capacity; LIFO per class
  Stats stats;

  void release(uint8_t* data, size_t capacity) {
    std::lock_guard<std::mutex> lock(mutex);
    stats.liveBytes -= capacity;
    if (!open) {
      stats.heldBytes -= capacity;
      std::free(data);
      return;
    }
    free[capacity].push_back(data);
  }
};

namespace {

// A pooled block: returns to its pool's free list with the last tensor that uses it.
struct PoolBlock {
  std::shared_ptr<BufferPool::State> pool;
  uint8_t* data;
  size_t capacity;
  PoolBlock(std::shared_ptr<BufferPool::State> p, uint8_t* d, size_t c)
      : pool(std::move(p)), data(d), capacity(c) {}
  ~PoolBlock() { pool->release(data, capacity); }
  PoolBlock(const PoolBlock&) = delete;
  PoolBlock& operator=(const PoolBlock&) = delete;
};

} // namespace

BufferPool::BufferPool() : state_(std::make_shared<State>()) {}

BufferPool::~BufferPool() { close(); }

size_t BufferPool::sizeClass(size_t bytes) {
  if (bytes <= 1024)
    return std::max<size_t>(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  const unsigned width = std::bit_width(bytes - 1); // 2^(width-1) < bytes <= 2^width
  const size_t step = size_t{1} << (width - 4);     // eight steps between powers of two
  return (bytes + step - 1) / step * step;
}

std::shared_ptr<void> BufferPool::allocate(size_t bytes, uint8_t** data) {
  size_t capacity = sizeClass(bytes);
  uint8_t* block = nullptr;
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    ++state_->stats.requests;
    // The smallest free block that fits, up to four times the size class: tensors of different
    // sizes share blocks instead of each size keeping its own (PP-OCR det: 69 MiB held for a
    // 51 MiB peak in use, against 77 MiB at twice and 89 MiB unbounded). Lists are LIFO; the
    // choice depends only on the order of requests and releases.
    auto it = state_->free.lower_bound(capacity);
    if (it != state_->free.end() && it->first <= 4 * capacity) {
      block = it->second.back();
      it->second.pop_back();
      capacity = it->first;
      if (it->second.empty()) state_->free.erase(it);
      ++state_->stats.reused;
    }
    state_->stats.liveBytes += capacity;
    state_->stats.peakLiveBytes = std::max(state_->stats.peakLiveBytes, state_->stats.liveBytes);
    if (!block) state_->stats.heldBytes += capacity;
  }
  if (!block) {
    try {
      block = systemAllocate(capacity);
    } catch (...) {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->stats.liveBytes -= capacity;
      state_->stats.heldBytes -= capacity;
      throw;
    }
  }
  *data = block;
  return std::make_shared<PoolBlock>(state_, block, capacity);
}

void BufferPool::close() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->open = false;
  for (auto& [capacity, blocks] : state_->free)
    for (uint8_t* block : blocks) {
      std::free(block);
      state_->stats.heldBytes -= capacity;
    }
  state_->free.clear();
}

BufferPool::Stats BufferPool::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

struct RunArena::State {
  enum class Phase { Idle, Recording, Planned, Off };
  static constexpr size_t kNone = ~size_t{0};
  struct Request {
    size_t bytes;
    uint64_t start, end = ~uint64_t{0}; // event ticks; end: released within the run, or never
    size_t offset = kNone;              // planned place in the arena
  };

  mutable std::mutex mutex;
  Phase phase = Phase::Idle;
  bool disabled = false;
  std::vector<Request> requests;         // the first run's, in order
  std::vector<uint32_t> events;          // the first run's: request id * 2 (+1 for a release)
  uint64_t run = 0;                      // number of the current (or last) run
  bool inRun = false, following = false; // following: this run still matches the trace
  size_t position = 0, nextRequest = 0;
  size_t live = 0, recordedLive = 0;
  uint8_t* base = nullptr;
  size_t arenaLive = 0; // arena buffers in use (any run)
  Stats stats;

  ~State() {
    if (base) munmap(base, stats.arenaBytes);
  }

  // A traced buffer of run `r` (request `id`) was released.
  void released(uint32_t id, uint64_t r, bool fromArena, size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex);
    if (fromArena) --arenaLive;
    if (r != run || !inRun) return;
    if (phase == Phase::Recording) {
      requests[id].end = events.size();
      events.push_back(id * 2 + 1);
      recordedLive -= bytes;
      return;
    }
    if (following) {
      if (position < events.size() && events[position] == id * 2 + 1)
        ++position;
      else
        diverge();
    }
  }
  void diverge() {
    following = false;
    ++stats.divergedRuns;
  }
  void plan();
  void prefault();
};

namespace {

// A buffer of a traced run: from the heap while recording, the pool when the trace keeps it past
// the run, or the arena; reports its release to the arena's state.
struct TracedBlock {
  std::shared_ptr<RunArena::State> state;
  std::shared_ptr<void> inner; // heap or pool block; null for the arena
  uint32_t id;
  uint64_t run;
  size_t bytes;
  TracedBlock(std::shared_ptr<RunArena::State> s, std::shared_ptr<void> in, uint32_t i, uint64_t r,
              size_t b)
      : state(std::move(s)), inner(std::move(in)), id(i), run(r), bytes(b) {}
  ~TracedBlock() { state->released(id, run, !inner, bytes); }
  TracedBlock(const TracedBlock&) = delete;
  TracedBlock& operator=(const TracedBlock&) = delete;
};

} // namespace

// Largest first; each takes the lowest 64-byte aligned offset not used by a placed buffer whose
// lifetime overlaps its own.
void RunArena::State::plan() {
  std::vector<size_t> order;
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].end != ~uint64_t{0}) order.push_back(i);
  auto size = [&](size_t i) { return BufferPool::sizeClass(requests[i].bytes); };
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return size(a) > size(b); });
  std::vector<size_t> placed;
  std::vector<std::pair<size_t, size_t>> busy; // [offset, end) of overlapping placed buffers
  size_t total = 0;
  for (size_t i : order) {
    Request& r = requests[i];
    busy.clear();
    for (size_t j : placed) {
      const Request& p = requests[j];
      if (p.start < r.end && r.start < p.end) busy.emplace_back(p.offset, p.offset + size(j));
    }
    std::sort(busy.begin(), busy.end());
    size_t offset = 0;
    for (const auto& [from, to] : busy) {
      if (from >= offset + size(i)) break;
      offset = std::max(offset, to);
    }
    r.offset = offset;
    total = std::max(total, offset + size(i));
    placed.push_back(i);
    ++stats.planned;
  }
  stats.arenaBytes = total;
  if (total > 0) base = mapFresh(total);
}

// Fresh pages fault one at a time on first touch (in a VM each fault can also exit to the
// host): left to the first planned run, that cost made it several times slower than the runs
// after it on small models (oww_embedding: ~240 faults, about +3 ms on a 1 ms run). Populating
// maps them in one call; writing them makes them resident.
void RunArena::State::prefault() {
  if (!base) return;
#if defined(MADV_POPULATE_WRITE)
  madvise(base, stats.arenaBytes, MADV_POPULATE_WRITE); // advice only: older kernels refuse it
#endif
  std::memset(base, 0, stats.arenaBytes);
}

RunArena::RunArena() : state_(std::make_shared<State>()) {}
RunArena::~RunArena() = default;

void RunArena::disable() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->disabled = true;
}

void RunArena::beginRun() {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  ++s.run;
  s.inRun = true;
  s.position = s.nextRequest = 0;
  if (s.disabled) s.phase = State::Phase::Off;
  if (s.phase == State::Phase::Idle) s.phase = State::Phase::Recording;
  // Not while a buffer of the arena is still held: the plan assumes all of it is free.
  s.following = s.phase == State::Phase::Planned && s.arenaLive == 0;
}

void RunArena::endRun(bool prefault) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  State& s = *state_;
  s.inRun = false;
  if (s.phase != State::Phase::Recording) return;
#if defined(__GLIBC__)
  // Kernels' own temporaries of the first run go back to the system before the arena is made.
  malloc_trim(0);
#endif
  s.plan();
  s.phase = s.stats.planned ? State::Phase::Planned : State::Phase::Off;
  if (prefault && s.phase == State::Phase::Planned) s.prefault();
}

std::shared_ptr<void> RunArena::allocate(size_t bytes, uint8_t** data, BufferPool& fallback) {
  std::unique_lock<std::mutex> lock(state_->mutex);
  State& s = *state_;
  if (!s.inRun) return nullptr;
  if (s.phase == State::Phase::Recording) {
    const auto id = static_cast<uint32_t>(s.requests.size());
    s.requests.push_back({bytes, s.events.size()});
    s.events.push_back(id * 2);
    s.recordedLive += bytes;
    s.stats.recordedPeak = std::max(s.stats.recordedPeak, s.recordedLive);
    const uint64_t run = s.run;
    lock.unlock();
    auto heap = std::make_shared<RecordedBlock>(BufferPool::sizeClass(bytes));
    *data = heap->data;
    return std::make_shared<TracedBlock>(state_, std::move(heap), id, run, bytes);
  }
  if (s.phase != State::Phase::Planned || !s.following) return nullptr;
  const size_t id = s.nextRequest;
  if (s.position >= s.events.size() || s.events[s.position] != id * 2 ||
      s.requests[id].bytes != bytes) {
    s.diverge();
    return nullptr;
  }
  ++s.position;
  ++s.nextRequest;
  const uint64_t run = s.run;
  const size_t offset = s.requests[id].offset;
  if (offset != State::kNone) {
    ++s.arenaLive;
    ++s.stats.served;
    *data = s.base + offset;
    return std::make_shared<TracedBlock>(state_, nullptr, static_cast<uint32_t>(id), run, bytes);
  }
  // Kept past the run by the trace: a pool block, still traced (an early release is a change).
  lock.unlock();
  auto block = fallback.allocate(bytes, data);
  return std::make_shared<TracedBlock>(state_, std::move(block), static_cast<uint32_t>(id), run,
                                       bytes);
}

RunArena::Stats RunArena::stats() const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->stats;
}

uint64_t allocationLimitBytes() {
  static const uint64_t limit = [] {
    // A lower cap for harnesses (the fuzzers run under a 2.5 GB RSS limit): KILN_MAX_BUFFER_BYTES.
    if (const char* cap = std::getenv("KILN_MAX_BUFFER_BYTES"); cap && *cap) {
      char* end = nullptr;
      const unsigned long long bytes = std::strtoull(cap, &end, 10);
      if (end && *end == '\0' && bytes > 0) return static_cast<uint64_t>(bytes);
    }
    const long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pageSize <= 0) return kMaxTensorExtent;
    return checkedMul<uint64_t>(static_cast<uint64_t>(pages), static_cast<uint64_t>(pageSize))
        .value_or(kMaxTensorExtent);
  }();
  return limit;
}

void checkAllocationLimit(uint64_t bytes) {
  if (bytes > allocationLimitBytes())
    throw AllocationRefused(fmt::format("a buffer of {} bytes: more than this machine's memory "
                                        "({} bytes)",
                                        bytes, allocationLimitBytes()));
}

Allocation allocateBuffer(size_t bytes, Init init) {
  // Refused before asking the system: with overcommit a huge mapping can succeed and then take
  // minutes of page faults (or the OOM killer) when the kernel fills it.
  checkAllocationLimit(bytes);
  Allocation out;
  if (bytes == 0) {
    out.buffer = Buffer::owned({});
    return out;
  }
  std::shared_ptr<const void> owner;
  if (currentMemory) {
    if (currentArena) owner = currentArena->allocate(bytes, &out.data, currentMemory->pool);
    if (!owner) owner = currentMemory->pool.allocate(bytes, &out.data);
  } else {
    auto heap = std::make_shared<HeapBlock>(BufferPool::sizeClass(bytes));
    out.data = heap->data;
    owner = std::move(heap);
  }
  if (init == Init::Zeroed)
    std::memset(out.data, 0, bytes);
  else if (poisonFlag())
    std::memset(out.data, 0xff, bytes);
  out.buffer = Buffer::borrowed(std::move(owner), out.data, bytes);
  return out;
}

void WideningCache::addInitializer(const Tensor& t) {
  if ((t.dtype() != DType::Float16 && t.dtype() != DType::BFloat16) || !t.buffer()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.try_emplace(t.buffer().get());
}

std::shared_ptr<const Buffer> WideningCache::widened(const Tensor& t) {
  if ((t.dtype() != DType::Float16 && t.dtype() != DType::BFloat16) || !t.buffer()) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(t.buffer().get());
  if (it == entries_.end()) return nullptr;
  if (!it->second) {
    // Outside the pool: the copy lives as long as the executor, not one run.
    const size_t n = t.byteSize() / 2;
    std::vector<uint8_t> bytes(n * sizeof(float));
    const uint16_t* src = reinterpret_cast<const uint16_t*>(t.data());
    float* dst = reinterpret_cast<float*>(bytes.data());
    if (t.dtype() == DType::Float16)
      halvesToFloats(src, dst, n);
    else
      for (size_t i = 0; i < n; ++i)
        dst[i] = bfloat16ToFloat(src[i]);
    bytes_ += bytes.size();
    it->second = Buffer::owned(std::move(bytes));
  }
  return it->second;
}

size_t WideningCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

MemoryScope::MemoryScope(ExecutorMemory* memory) : ThreadBinding(currentMemory, memory) {}

ArenaScope::ArenaScope(RunArena* arena) : ThreadBinding(currentArena, arena) {}

std::shared_ptr<const Buffer> cachedWidening(const Tensor& t) {
  return currentMemory ? currentMemory->widening.widened(t) : nullptr;
}

void setPoisonUninitialised(bool on) { poisonFlag() = on; }
bool poisonUninitialised() { return poisonFlag(); }

} // namespace kiln::rt
