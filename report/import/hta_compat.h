// Holistic Trace Analysis's own numbers (`laggard report --hta-compatible`), computed from the run
// model exactly as HTA defines them (HolisticTraceAnalysis f4d0062, hta/analyzers/breakdown_analysis.py,
// communication_analysis.py, cuda_kernel_analysis.py; trace loading in hta/common/trace.py and
// trace_parser.py), so a user can check laggard against HTA on the same trace:
//  - times in whole µs: start rounded up, end rounded down (HTA's round_down_time_stamps);
//  - with two or more profiler steps, only GPU work whose launch call started before the last
//    step began (HTA drops the last step, _filter_irrelevant_gpu_kernels);
//  - kernel types by HTA's name patterns (COMMUNICATION, MEMORY, COMPUTATION, else OTHER);
//  - temporal: over [first GPU start, last GPU end], idle = not covered by any GPU event
//    (CUDA stream syncs count as GPU events), compute = covered by COMPUTATION kernels;
//  - idle per stream: gaps between consecutive kernels/memcpys/memsets of a stream, host wait when
//    the next one's launch call started after the previous ended, else kernel wait when shorter
//    than 30 µs, else other (that order of tests);
//  - kernel type breakdown: time covered by each combination of types, summed over ranks;
//  - overlap: time computing while communicating / time communicating;
//  - launch statistics: cudaLaunchKernel(ExC) / cudaMemcpyAsync / cudaMemsetAsync calls and their GPU work.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model.h"

namespace laggard::report {

struct HtaOptions {
  int64_t consecutive_kernel_delay_us = 30;  // HTA get_idle_time_breakdown's default (µs, the trace unit)
  int64_t runtime_cutoff_us = 50;            // HTA get_cuda_kernel_launch_stats' defaults
  int64_t launch_delay_cutoff_us = 100;
};

struct HtaIdle {
  int64_t host_wait_us = 0, kernel_wait_us = 0, other_us = 0;
};

struct HtaLaunch {
  uint64_t count = 0, short_kernels = 0, runtime_outliers = 0, delay_outliers = 0;
  int64_t delay_sum_us = 0;
};

struct HtaRank {
  int rank = -1;
  bool has_gpu = false;
  bool last_step_dropped = false;
  int64_t idle_us = 0, compute_us = 0, non_compute_us = 0, kernel_time_us = 0;  // temporal breakdown
  std::map<uint32_t, HtaIdle> idle_by_stream;
  std::optional<double> overlap_pct;  // HTA's comp_comm_overlap_pctg (rounded to 2 decimals); none: no comm
  HtaLaunch launch;
};

struct HtaReport {
  bool available = false;
  std::string why_not;
  HtaOptions options;
  std::vector<HtaRank> ranks;
  std::map<std::string, int64_t> kernel_types_us;  // "COMPUTATION", "COMPUTATION overlapping COMMUNICATION", ...
};

HtaReport analyze_hta(const RunModel& model, const HtaOptions& options = {});

// HTA's get_kernel_type on a name: COMMUNICATION | MEMORY | COMPUTATION | OTHER.
std::string hta_kernel_type(const std::string& name);

}  // namespace laggard::report
