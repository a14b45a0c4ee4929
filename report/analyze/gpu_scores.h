// NVRx GPU scores (nvidia-resiliency-ext, attribution/straggler/reporting.py,
// ReportGenerator._compute_gpu_perf_score), computed from CUPTI kernel statistics:
//   per kernel (name + grid + block)  ratio = reference median / this rank's median
//   rank score = sum(ratio * weight) / sum(weight), weight = the kernel's total time on this rank
//   relative:   reference = lowest median across ranks; a kernel counts only if every rank with
//               GPU data in that scope ran it (NVRx skips kernels some rank lacks)
//   individual: reference = this rank's lowest median up to and including this window
// NCCL kernels are excluded (communication, not compute: NVRx drops "ncclDev*"), as are memcpy
// and memset. laggard also scores each NVTX section with the same formula restricted to the
// kernels launched inside it ("(no section)" for kernels launched outside any).
// Whole run: relative from whole-run medians; individual is the lowest report-window score.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model.h"
#include "scores.h"

namespace laggard::report {

inline const std::string kNoSection = "(no section)";

struct GpuScore {
  std::optional<double> relative, individual;
  uint64_t kernels = 0;       // compute kernel executions (NCCL excluded)
  int64_t kernel_ns = 0;      // their total GPU time
};

struct RankGpu {
  int rank = -1;
  std::string host;
  std::string cupti_status;
  bool has_data = false;      // any GPU record in any window
  int windows = 0, sampled_windows = 0;
  GpuScore score;             // all compute kernels
  std::map<std::string, GpuScore> sections;
  // Totals over the run, every kind.
  uint64_t kernel_count = 0, nccl_count = 0, memcpy_count = 0, memset_count = 0, graph_count = 0;
  int64_t kernel_ns = 0, nccl_ns = 0, memcpy_ns = 0, memset_ns = 0;
  // Data completeness: records captured vs. lost (CUPTI drops, records without times).
  uint64_t records = 0, lost = 0, unmatched = 0, buffer_full = 0;
  uint64_t missed_launches = 0;  // launches another CUPTI client's use of CUPTI kept from laggard (issue 26)
  double completeness = 1.0;
};

struct GpuWindowRank {
  int rank = -1;
  GpuScore score;
  std::map<std::string, GpuScore> sections;
};

struct GpuTopKernel {
  std::string name;           // as captured (mangled)
  uint64_t count = 0;         // over all ranks
  int64_t total_ns = 0;
  int ranks = 0;
  bool nccl = false;
  GpuKind kind = GpuKind::kernel;
};

struct GpuScoreReport {
  bool any = false;                                   // some rank has GPU data
  std::vector<RankGpu> ranks;                         // every rank of the model, same order
  std::vector<std::vector<GpuWindowRank>> windows;    // per report window: ranks with data
  std::map<std::string, std::vector<GpuTopKernel>> top_kernels;  // per section, longest total first
};

// Scores every rank over the report windows of `rep` and appends the GPU stragglers (scope
// "gpu"; section "" for the rank-level score, else the section name) to rep.stragglers.
GpuScoreReport compute_gpu_scores(const RunModel& model, ScoreReport& rep, size_t top_n = 5);

// "_Z4gemmPf" -> "gemm(float*)"; names that are not mangled come back unchanged.
std::string demangle(const std::string& name);

}  // namespace laggard::report
