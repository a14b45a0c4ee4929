#include "parallel.h"

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <system_error>
#include <thread>

#include <unistd.h>

namespace laggard::report::detail {
namespace {

// Threads kept for parallel_for from its first call to the end of the process. A report calls it a
// few hundred times (jitter: five times a step), and a new thread per call cost its start, its
// stack's first pages and its own arrays kept per thread (split_buffer, MedianGuess) anew each time
// (issue 29: 258 threads started for 96 ranks x 50 steps).
class WorkerPool {
 public:
  // job(ctx) on `helpers` pool threads and on the caller; false (nothing run) when the pool is busy
  // or could start no thread.
  bool run(void (*job)(void*), void* ctx, size_t helpers) {
    std::unique_lock<std::mutex> in_use(busy_, std::try_to_lock);
    if (!in_use || getpid() != pid_) return false;  // nested or beside another; or a forked child: no threads there
    std::unique_lock<std::mutex> lk(m_);
    start_threads(helpers);
    const size_t n = std::min(helpers, started_);
    if (n == 0) return false;
    job_ = job;
    ctx_ = ctx;
    wanted_ = n;
    running_ = n;
    ++generation_;
    lk.unlock();
    wake_.notify_all();
    job(ctx);  // never throws: parallel_for's work catches
    lk.lock();
    done_.wait(lk, [&] { return running_ == 0; });
    return true;
  }

 private:
  // With m_ held. A thread that cannot be started leaves the pool smaller; parallel_for still runs.
  void start_threads(size_t helpers) {
    while (started_ < helpers) {
      try {
        std::thread([this, index = started_, seen = generation_] { serve(index, seen); }).detach();
      } catch (const std::system_error&) {
        return;
      }
      ++started_;
    }
  }
  void serve(size_t index, uint64_t seen) {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      wake_.wait(lk, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= wanted_) continue;  // this call wants fewer threads
      void (*job)(void*) = job_;
      void* ctx = ctx_;
      lk.unlock();
      job(ctx);
      lk.lock();
      if (--running_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;  // held by the parallel_for running on the pool
  std::mutex m_;     // the fields below
  std::condition_variable wake_, done_;
  void (*job_)(void*) = nullptr;
  void* ctx_ = nullptr;
  uint64_t generation_ = 0;  // one per call: a thread runs each call's job at most once
  size_t wanted_ = 0, running_ = 0, started_ = 0;
  const pid_t pid_ = getpid();
};

}  // namespace

bool run_on_pool(void (*job)(void*), void* ctx, size_t helpers) {
  // Never destroyed: its threads wait in it until the process ends, and exit() must not wait for them.
  static WorkerPool* pool = new WorkerPool;
  return pool->run(job, ctx, helpers);
}

}  // namespace laggard::report::detail
