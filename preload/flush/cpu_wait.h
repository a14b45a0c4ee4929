// How long this process's threads waited for a CPU (issue 30): a rank whose threads were
// runnable but not running (another process, oversubscribed data-loader workers, a noisy
// neighbour) is slow for a reason of the machine, not of its own work. Per window, the flush
// thread reads each thread's /proc/self/task/<tid>/schedstat (proc(5): time on a CPU, time
// waiting on a run queue, timeslices run; kernel/sched/stats.c, CONFIG_SCHED_INFO) and writes
// the increase summed over the application's threads (laggard's own flush thread left out).
// The threads that use NVTX (whose ranges the report times) are also read at every drain tick
// (about 20 times a second; at most kMaxTickThreads of them), so the report can place their wait
// in the steps it delayed, not only in a window of many steps.
// Flush thread only (through private_fds.h): it opens files. Never on application threads.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace laggard {

constexpr int kMaxTickThreads = 32;

// The NVTX threads' wait for a CPU between two drain ticks: from the previous entry's end (or
// the window's start) to end_ns.
struct TickWait {
  int64_t end_ns = 0;  // epoch ns
  int64_t wait_ns = 0;
};

// What the writer puts under a window's "cpu_wait" (docs/schema.md, "Issue 30: CPU wait").
struct CpuWaitWindow {
  bool present = false;          // schedstat could be read for at least one thread
  uint32_t threads = 0;          // threads read (alive at the window's end, the flush thread left out)
  int64_t run_ns = 0;            // their time on a CPU during the window
  int64_t wait_ns = 0;           // their time runnable on a run queue, waiting for a CPU
  int64_t max_thread_wait_ns = 0;  // the most one thread waited
  uint64_t timeslices = 0;       // times they were put on a CPU
  uint32_t nvtx_threads = 0;     // NVTX threads read at the ticks (the most at one tick)
  std::vector<TickWait> ticks;   // their wait, tick by tick, in time order
};

// One thread's three schedstat counters, cumulative since the thread started.
struct SchedStat {
  int64_t run_ns = 0, wait_ns = 0;
  uint64_t timeslices = 0;
};

// Parses a schedstat line ("123 456 7\n"); false when it is not three numbers.
bool parse_schedstat(const char* text, SchedStat* out);

class CpuWaitSampler {
 public:
  // task_dir: /proc/self/task (tests give a directory of their own).
  explicit CpuWaitSampler(std::string task_dir = "/proc/self/task") : task_dir_(std::move(task_dir)) {}

  // Reads every thread's counters, keeps them as the next window's baseline and returns the
  // increase since the previous call (the first call only takes the baseline: present false).
  // A thread that started since the previous call counts from its start; one that ended since
  // takes its last part with it (its counters are gone). `laggard_threads` are left out
  // (laggard's own: the flush thread, the private-table thread; 0 for none).
  CpuWaitWindow sample(std::array<pid_t, 2> laggard_threads);

  // The summed wait of threads `tids` since the previous call for each (a thread seen for the
  // first time only takes its baseline), as one entry ending at now_ns, kept for take_ticks().
  void tick(const uint32_t* tids, int n, int64_t now_ns);
  // The entries up to now, moved out (the window's series).
  std::vector<TickWait> take_ticks(uint32_t* most_threads);

  // In a forked child: the parent's threads are not ours, start over.
  void reset() {
    last_.clear();
    tick_last_.clear();
    ticks_.clear();
    primed_ = false;
  }

 private:
  std::string task_dir_;
  std::unordered_map<pid_t, SchedStat> last_;
  bool primed_ = false;
  std::unordered_map<uint32_t, int64_t> tick_last_;  // per NVTX thread: its wait at the last tick
  std::vector<TickWait> ticks_;
  uint32_t tick_threads_ = 0;
};

}  // namespace laggard
