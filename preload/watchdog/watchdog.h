// ROOM watchdog/ -- hang reports. watchdog.cpp runs on the flush thread; stack_sampler.cpp
// holds a SIGNAL HANDLER that runs on an application thread interrupted at any instruction
// (inside malloc, holding the loader lock, mid-fork): only async-signal-safe calls there
// (signal-safety(7)): no allocation, no locks, no dlopen/dl_iterate_phdr, nothing that may take
// a lock the interrupted thread could hold. Reports are written through files/safe_write.h.
//
// The hang watchdog: when no thread of this rank has entered or left an NVTX range and no
// collective has started or completed for LAGGARD_HANG_S seconds, write a hang report (every
// thread's native stack, open NVTX sections, NCCL collectives in flight) into the run
// directory, again at most every LAGGARD_HANG_REPEAT_S while the stall lasts. Runs on the flush
// thread; off unless LAGGARD_HANG_S is set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "env.h"
#include "hang_report.h"
#include "stack_sampler.h"

namespace laggard::watch {

struct HangConfig {
  double hang_s = 0;          // LAGGARD_HANG_S; 0: off
  double repeat_s = 300;      // LAGGARD_HANG_REPEAT_S: at most one report per this while stalled
  int signal = 0;             // LAGGARD_HANG_SIGNAL: real-time signal for stacks (0: choose)
  double thread_timeout_s = 0.2;  // how long one thread may take to answer
  std::string unwinder = "libunwind.so.8";  // LAGGARD_HANG_UNWINDER: libunwind file to dlopen
};

// Never fails: bad values become warnings and defaults.
HangConfig parse_hang_config(const Env& env, std::vector<std::string>* warnings);

// When a report is due. Progress is any change of the summed progress counters.
class StallClock {
 public:
  StallClock(int64_t hang_ns, int64_t repeat_ns, int64_t start_mono_ns)
      : hang_ns_(hang_ns), repeat_ns_(repeat_ns), last_change_(start_mono_ns) {}

  // Observes the progress counter at now; true when a report should be written now.
  bool due(uint64_t progress, int64_t now_mono_ns);
  int64_t last_progress_mono() const { return last_change_; }

 private:
  int64_t hang_ns_, repeat_ns_;
  uint64_t progress_ = 0;
  bool seen_ = false;
  int64_t last_change_;
  int64_t last_report_ = -1;  // in the current stall; -1: none yet
};

// Supplied by the NCCL source (nccl_hooks), which the capture core does not depend on.
using CollectiveProvider = CollectiveProgress (*)();
void set_collective_provider(CollectiveProvider provider);

struct RankInfo {
  std::string run_dir, run_id, host;
  int rank = -1, local_rank = -1, world_size = -1;
  long pid = 0;
  int64_t epoch_offset_ns = 0;
};

class Watchdog {
 public:
  Watchdog(const HangConfig& cfg, RankInfo rank, int64_t start_mono_ns);

  // Flush thread, every tick.
  void tick(int64_t now_mono_ns);

  // Builds a report of the process now (every thread but the calling one is signalled).
  HangReport build_report(int64_t now_mono_ns);
  // Writes it into the run directory; returns "" or an error.
  std::string write(const HangReport& r);

 private:
  HangConfig cfg_;
  RankInfo rank_;
  StallClock clock_;
  StackSampler sampler_;
  bool armed_ = false;
  int written_ = 0;
};

// "" when the process is not a Python interpreter; else what the report says about Python stacks.
std::string python_note(long pid);

}  // namespace laggard::watch
