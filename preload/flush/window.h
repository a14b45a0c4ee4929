// What the recorder hands the writer when a window closes: plain data with names resolved and
// times in epoch nanoseconds. The writer knows nothing else about capture.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cpu_wait.h"
#include "gpu_health_window.h"
#include "gpu_window.h"
#include "nccl_window.h"
#include "records.h"

namespace laggard {

struct SectionWindowStats {
  std::string name;    // as Nsight Systems shows it ("message" or "domain:message")
  std::string domain;  // NVTX domain; empty: the default domain
  bool folded = false; // "(other)": names past the name table's limits (counted, never scored)
  bool median_from_sample = false;  // median_ns is of the stored sample, not of every occurrence
  std::string parent;  // empty: top level
  uint64_t count = 0;
  int64_t total_ns = 0;
  int64_t min_ns = 0;
  int64_t max_ns = 0;
  int64_t median_ns = 0;  // exact when every occurrence is stored, else of the sample (the mean if none)
  // Stored occurrences (all, or a uniform sample when count exceeds the cap), columnar.
  std::vector<int64_t> start_ns;  // epoch ns
  std::vector<int64_t> dur_ns;
  std::vector<uint32_t> tid;
};

// Part of a window during which `laggard ctl` had capture paused (schema version 5).
struct PausedSpan {
  int64_t start_ns = 0, end_ns = 0;  // epoch ns, clipped to the window
  std::string command;               // what paused capture: "pause", or "window" (its time was over)
  uint64_t seq = 0;                  // that command's sequence number in the control file
  bool ongoing = false;              // still paused when the window closed
};

struct WindowSnapshot {
  uint64_t index = 0;
  int64_t start_ns = 0;  // epoch ns
  int64_t end_ns = 0;
  std::vector<SectionWindowStats> sections;
  DropCounters dropped;  // during this window
  GpuWindow gpu;         // CUPTI kernels, filled by the cupti source (gpu.present false: none)
  GpuStatus gpu_status;  // for the file header
  NcclWindow nccl;       // NCCL operations (nccl_hooks/), when NCCL loaded the plugin
  GpuHealthWindow gpu_health;  // NVML samples (nvml/), when NVML could be loaded
  std::vector<PausedSpan> paused;  // empty: capture was on for the whole window
  CpuWaitWindow cpu_wait;          // the threads' wait for a CPU (flush/cpu_wait.h), issue 30
};

}  // namespace laggard
