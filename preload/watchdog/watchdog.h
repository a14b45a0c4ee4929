// ROOM watchdog/ -- hang reports. watchdog.cpp runs on the watchdog's OWN thread
// (watchdog_source.cpp), never on the flush thread, so a CUPTI, NVML or file-system call that
// blocks the flush thread cannot keep a hang report from being written. stack_copy.cpp holds
// what runs in a SIGNAL HANDLER on an application thread interrupted at any instruction (inside
// malloc, holding the loader lock, mid-fork): only async-signal-safe calls there
// (signal-safety(7)): register and stack copies, raw system calls; no allocation, no locks, no
// unwinding, no dlopen/dl_iterate_phdr. Reports are written through files/safe_write.h.
//
// The hang watchdog: when no thread of this rank has entered or left an NVTX range and no
// collective has started or completed for LAGGARD_HANG_S seconds, write a hang report (every
// thread's native stack, open NVTX sections, NCCL collectives in flight) into the run
// directory, again at most every LAGGARD_HANG_REPEAT_S while the stall lasts. Off unless
// LAGGARD_HANG_S is set. docs/hang-watchdog.md explains the design.
#pragma once

#include <atomic>
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
  std::string image;             // this process image's identity (FileInfo::image)
  std::string python;            // python_note(pid), taken at activation (dlsym takes the loader lock)
  int64_t epoch_offset_ns = 0;
};

class Watchdog {
 public:
  Watchdog(const HangConfig& cfg, RankInfo rank, int64_t start_mono_ns);

  // Loads the unwinder and installs the signal handler. The watchdog thread does it when it
  // starts, while nothing is hung: dlopen takes the loader lock a hung thread may hold later.
  void arm();

  // The watchdog thread, every tick. `stop`: the process is exiting; checked between threads.
  void tick(int64_t now_mono_ns, const std::atomic<bool>* stop = nullptr);

  // Builds a report of the process now: every thread but the calling one, frames unnamed.
  HangReport build_report(int64_t now_mono_ns, const std::atomic<bool>* stop = nullptr);
  // Names the report's frames (may wait for the loader lock: after a first write).
  void name_frames(HangReport& r);
  // Writes it into the run directory (again: the same file is replaced); returns "" or an error.
  std::string write(const HangReport& r);
  // After a report is complete: the next one gets the next index.
  void next_index() { ++written_; }

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
