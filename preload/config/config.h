// ROOM config/ -- who this process is in the job and what its LAGGARD_* variables ask for.
// Runs at load (from the library constructor: read the environment, nothing heavy, no threads)
// and on the flush thread. log.h is the one way to print, usable from any thread and from fork
// and exit paths (one write(2) per line, no allocation).
//
// LAGGARD_* settings. Parsing never fails: a bad value becomes a warning and the default.
#pragma once

#include <string>
#include <vector>

#include "env.h"
#include "log.h"
#include "tsc_clock.h"

namespace laggard {

struct Config {
  bool enabled = true;                    // LAGGARD_ENABLE
  std::string out_dir = "laggard-out";    // LAGGARD_OUT
  std::string sections;                   // LAGGARD_SECTIONS (RE2 regex, empty = all)
  double flush_s = 10.0;                  // LAGGARD_FLUSH_S
  LogLevel log = LogLevel::warn;          // LAGGARD_LOG
  int windows_per_file = 30;              // LAGGARD_WINDOWS_PER_FILE
  int max_occurrences = 2048;             // LAGGARD_MAX_OCCURRENCES (raw samples per section/window)
  bool cupti = true;                      // LAGGARD_CUPTI (GPU kernel capture once the process uses CUDA)
  int profiling_interval = 1;             // LAGGARD_PROFILING_INTERVAL (kernels captured in 1 window of N)
  std::string cupti_path;                 // LAGGARD_CUPTI_PATH (libcupti file or directory; only place tried)
  bool nccl = true;                       // LAGGARD_NCCL: offer laggard to NCCL as its profiler plugin
  int nccl_kernel_events = -1;            // LAGGARD_NCCL_KERNEL_EVENTS: -1 auto, 0 off, 1 on (NCCL's KernelCh events)
  double exit_wait_s = 1.0;               // LAGGARD_EXIT_WAIT_S: most that exit + SIGTERM/SIGINT wait for flushes
  bool binary_files = true;               // schema v5 appended frames; LAGGARD_FILE_FORMAT=json: rewritten JSON
  ClockChoice clock = ClockChoice::automatic;  // LAGGARD_CLOCK: auto | tsc | monotonic (NVTX range times)
};

struct ConfigResult {
  Config config;
  std::vector<std::string> warnings;  // one line each, already phrased for the user
};

ConfigResult parse_config(const Env& env);

}  // namespace laggard
