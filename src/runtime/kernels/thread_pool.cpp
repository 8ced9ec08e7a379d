// Persistent worker threads behind pool::parallelFor (thread_pool.h).
#include "thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::rt::pool {
namespace {

thread_local bool insideRange = false;
std::atomic<bool> splitAlways{false};

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_)
      t.join();
  }

  // Runs jobs[1..] on workers and jobs[0] here; returns when all are done. One batch at a time.
  void run(std::vector<std::function<void()>>& jobs) {
    std::lock_guard<std::mutex> batchLock(batch_);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (workers_.size() + 1 < jobs.size())
        workers_.emplace_back([this] { work(); });
      for (size_t i = 1; i < jobs.size(); ++i)
        queue_.push_back(&jobs[i]);
      pending_ = jobs.size() - 1;
    }
    wake_.notify_all();
    insideRange = true;
    jobs[0]();
    insideRange = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void work() {
    insideRange = true;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      std::function<void()>* job = queue_.back();
      queue_.pop_back();
      lock.unlock();
      (*job)();
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::mutex batch_, mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  std::vector<std::function<void()>*> queue_;
  size_t pending_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

} // namespace

void parallelFor(int threads, int64_t count, int64_t grain,
                 const std::function<void(int64_t, int64_t)>& fn) {
  if (count <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int64_t units = (count + grain - 1) / grain;
  const int64_t parts = std::min<int64_t>(std::max(threads, 1), units);
  if (parts <= 1 || insideRange) {
    fn(0, count);
    return;
  }
  std::vector<std::function<void()>> jobs;
  for (int64_t p = 0; p < parts; ++p) {
    const int64_t begin = std::min(count, units * p / parts * grain);
    const int64_t end = std::min(count, units * (p + 1) / parts * grain);
    if (begin < end) jobs.emplace_back([&fn, begin, end] { fn(begin, end); });
  }
  pool().run(jobs);
}

int threadsFor(int threads, double workNs, int handOffs) {
  if (threads <= 1) return 1;
  if (splitAlways.load(std::memory_order_relaxed)) return threads;
  const double perRange = 2.0 * kHandOffNs * std::max(handOffs, 1);
  const double ranges = workNs / perRange;
  if (!(ranges >= 2.0)) return 1; // also NaN
  return ranges >= threads ? threads : static_cast<int>(ranges);
}

void setSplitAlways(bool on) { splitAlways.store(on, std::memory_order_relaxed); }

} // namespace kiln::rt::pool
