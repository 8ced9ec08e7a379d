// The SIGBUS handler for mapped inputs and the fixed tables it reads (async-signal-safe: no
// allocation or locks in the handler, only atomics, write, unlink and _exit).
#include "kiln/support/sigbus_guard.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace kiln {
namespace {

// Slots are claimed with `used`, then filled, then published by `end` (non-zero = live), so the
// handler never reads a half-written name.
struct RangeSlot {
  std::atomic<bool> used{false};
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  char name[512] = {};
};

struct OutputSlot {
  std::atomic<bool> used{false};
  std::atomic<bool> live{false};
  char path[4096] = {};
};

// An ONNX model may keep each tensor in its own file; past this many mappings the rest are
// simply not covered.
constexpr int kRangeSlots = 2048;
constexpr int kOutputSlots = 256;
RangeSlot rangeSlots[kRangeSlots];
OutputSlot outputSlots[kOutputSlots];
std::atomic<bool> reporting{false};
struct sigaction previousAction;

void copyTruncated(char* to, size_t capacity, const std::string& from) {
  size_t n = from.size() < capacity - 1 ? from.size() : capacity - 1;
  std::memcpy(to, from.data(), n);
  to[n] = '\0';
}

void writeText(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

[[noreturn]] void reportTruncated(const char* name) {
  // Several threads may fault on the same file at once: one line, from the first.
  if (reporting.exchange(true)) {
    for (;;)
      ::pause();
  }
  writeText(program_invocation_short_name);
  writeText(": error K1002: '");
  writeText(name);
  writeText("' became shorter while it was being read (truncated or rewritten in place). Fix: "
            "leave input files unchanged while kiln uses them, then run again\n");
  for (OutputSlot& slot : outputSlots)
    if (slot.live.load(std::memory_order_acquire)) ::unlink(slot.path);
  ::_exit(1);
}

void onSigbus(int signal, siginfo_t* info, void* context) {
  auto address = reinterpret_cast<uintptr_t>(info->si_addr);
  if (info->si_code > 0) // a real fault, not a kill(): si_addr is meaningful
    for (RangeSlot& slot : rangeSlots) {
      uintptr_t end = slot.end.load(std::memory_order_acquire);
      if (end != 0 && address >= slot.begin.load(std::memory_order_relaxed) && address < end)
        reportTruncated(slot.name);
    }
  // Not a mapped input: hand the signal to whoever had it before.
  ::sigaction(SIGBUS, &previousAction, nullptr);
  if (previousAction.sa_flags & SA_SIGINFO) {
    if (previousAction.sa_sigaction != nullptr) {
      previousAction.sa_sigaction(signal, info, context);
      return;
    }
  } else if (previousAction.sa_handler != SIG_DFL && previousAction.sa_handler != SIG_IGN) {
    previousAction.sa_handler(signal);
    return;
  }
  // Default action: a fault re-executes the instruction and dies of it; a sent signal is re-sent.
  if (info->si_code <= 0) ::raise(SIGBUS);
}

void installHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction action {};
    action.sa_sigaction = onSigbus;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, &previousAction);
  });
}

} // namespace

bool guardMappedRange(const void* begin, size_t size, const std::string& name) {
  if (size == 0) return false;
  installHandler();
  for (RangeSlot& slot : rangeSlots) {
    bool expected = false;
    if (!slot.used.compare_exchange_strong(expected, true)) continue;
    copyTruncated(slot.name, sizeof slot.name, name);
    auto start = reinterpret_cast<uintptr_t>(begin);
    slot.begin.store(start, std::memory_order_relaxed);
    slot.end.store(start + size, std::memory_order_release);
    return true;
  }
  return false;
}

void releaseMappedRange(const void* begin) {
  auto start = reinterpret_cast<uintptr_t>(begin);
  for (RangeSlot& slot : rangeSlots)
    if (slot.end.load(std::memory_order_acquire) != 0 &&
        slot.begin.load(std::memory_order_relaxed) == start) {
      slot.end.store(0, std::memory_order_release);
      slot.used.store(false, std::memory_order_release);
      return;
    }
}

int guardUnfinishedOutput(const std::string& path) {
  for (int i = 0; i < kOutputSlots; ++i) {
    OutputSlot& slot = outputSlots[i];
    bool expected = false;
    if (!slot.used.compare_exchange_strong(expected, true)) continue;
    copyTruncated(slot.path, sizeof slot.path, path);
    // A truncated path would name another file: leave such an output uncovered.
    if (path.size() >= sizeof slot.path) {
      slot.used.store(false);
      return -1;
    }
    slot.live.store(true, std::memory_order_release);
    return i;
  }
  return -1;
}

void releaseUnfinishedOutput(int token) {
  if (token < 0 || token >= kOutputSlots) return;
  OutputSlot& slot = outputSlots[token];
  slot.live.store(false, std::memory_order_release);
  slot.used.store(false, std::memory_order_release);
}

} // namespace kiln
