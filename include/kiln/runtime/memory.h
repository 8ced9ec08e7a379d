// Memory of the CPU executor: uninitialised or zeroed buffers for kernel outputs and scratch, a
// pool that keeps freed buffers of one executor for its later runs, and float32 copies of
// fp16/bf16 weights made once per executor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/ir/tensor.h"

namespace kiln::rt {

// What a new buffer holds before the kernel writes it. Uninitialised (the default) is for kernels
// that write every element; a kernel that accumulates into its output, or leaves some elements
// untouched, asks for Zeroed.
enum class Init { Uninitialised, Zeroed };

// Buffers of one executor. A buffer released by its last tensor goes back to a free list of its
// size class (sizes rounded up by at most 1/8) and is handed out again, in this or a later run;
// nothing is returned to the system before close(). Buffers still held after close() free
// themselves when released. Thread-safe (the lock is uncontended in practice).
class BufferPool {
 public:
  struct Stats {
    uint64_t requests = 0; // allocations asked of the pool
    uint64_t reused = 0;   // of them, served from a free list
    size_t heldBytes = 0;  // bytes allocated from the system and not freed
    size_t liveBytes = 0;  // bytes of capacity in use by tensors
    size_t peakLiveBytes = 0;
  };

  BufferPool();
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // A block of at least `bytes` bytes (64-byte aligned), owned by the returned handle; when the
  // handle's last copy goes, the block returns to the pool.
  std::shared_ptr<void> allocate(size_t bytes, uint8_t** data);
  // Frees every free block and detaches blocks in use (they free themselves later).
  void close();
  Stats stats() const;

  // The capacity a request of `bytes` gets: 64-byte steps up to 1 KiB, then 8 steps per power
  // of two.
  static size_t sizeClass(size_t bytes);

  struct State; // shared with the blocks handed out, which outlive a closed pool

 private:
  std::shared_ptr<State> state_;
};

// Writable bytes of a new tensor and the immutable Buffer that owns them.
struct Allocation {
  std::shared_ptr<const Buffer> buffer;
  uint8_t* data = nullptr;
};

// A buffer for `bytes` bytes: from the current thread's executor pool when one is active (see
// MemoryScope), otherwise from the heap.
Allocation allocateBuffer(size_t bytes, Init init = Init::Uninitialised);

// Temporary typed storage of a kernel (column matrices, staged inputs, accumulators), from the
// same pool as outputs, so that the big ones are not mapped and faulted in on every run.
template <typename T> class Scratch {
 public:
  Scratch() = default;
  explicit Scratch(size_t count, Init init = Init::Uninitialised) { reset(count, init); }
  void reset(size_t count, Init init = Init::Uninitialised) {
    Allocation a = allocateBuffer(count * sizeof(T), init);
    owner_ = std::move(a.buffer);
    data_ = reinterpret_cast<T*>(a.data);
    size_ = count;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T* begin() { return data_; }
  T* end() { return data_ + size_; }

 private:
  std::shared_ptr<const Buffer> owner_;
  T* data_ = nullptr;
  size_t size_ = 0;
};

// Float32 copies of an executor's fp16/bf16 initializers, made the first time a kernel asks and
// kept for the executor's life (weights are then widened once, not on every run).
class WideningCache {
 public:
  // Marks `t` (an initializer's tensor) as cacheable.
  void addInitializer(const Tensor& t);
  // The float32 bytes of `t` when it is a registered half initializer (any dims over the same
  // buffer), nullptr otherwise.
  std::shared_ptr<const Buffer> widened(const Tensor& t);
  size_t bytes() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<const Buffer*, std::shared_ptr<const Buffer>> entries_; // null until first use
  size_t bytes_ = 0;
};

// What an executor lends its kernels while it runs.
struct ExecutorMemory {
  BufferPool pool;
  WideningCache widening;
};

// Sets a thread-local slot while alive; the previous value comes back on destruction, so
// bindings nest. The scopes below are the executor's two bindings.
template <typename T>
class ThreadBinding {
 public:
  ThreadBinding(const ThreadBinding&) = delete;
  ThreadBinding& operator=(const ThreadBinding&) = delete;

 protected:
  ThreadBinding(T*& slot, T* value) : slot_(slot), previous_(slot) { slot_ = value; }
  ~ThreadBinding() { slot_ = previous_; }

 private:
  T*& slot_;
  T* previous_;
};

// While alive, allocateBuffer and cachedWidening on this thread use `memory` (nullptr: the heap,
// no cache). Nests.
class MemoryScope : ThreadBinding<ExecutorMemory> {
 public:
  explicit MemoryScope(ExecutorMemory* memory);
};

// The cached float32 copy of a half initializer on this thread's executor, or nullptr.
std::shared_ptr<const Buffer> cachedWidening(const Tensor& t);

// Debugging aid for the audit of kernels that rely on zeroed outputs: when on, every
// Uninitialised buffer is filled with 0xFF bytes (NaN as float, -1 as integers). Off by default;
// the environment variable KILN_POISON_UNINITIALISED=1 turns it on at start-up.
void setPoisonUninitialised(bool on);
bool poisonUninitialised();

} // namespace kiln::rt
