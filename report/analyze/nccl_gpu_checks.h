// Per-rank checks of NCCL's GPU timestamps, run by the reader once a rank's windows are merged.
// What NCCL guarantees and what it does not (src/transport/profiler.cc, v2.27.3-v2.30.7): the
// proxy thread reads each channel's start/stop timestamp from a 64-entry ring once the ring
// slot's counter has reached the op's work counter, then calls the plugin. So
// - a GPU time is never later than the host callback that reported it (on one clock);
// - a slot overwritten by later work (a CPU-starved proxy, 64+ works behind) or a counter
//   shifted by CUDA-graph replays hands an op another work's timestamps.
// The kernels of one communicator run one after another, so such times show up as an op whose
// GPU interval is out of order with its neighbours'. The operations of one plan (a group: one
// kernel) share their batch's timestamps and overlap (device/common.h profiler()): a plan is one
// interval. A process driving several GPUs is checked per GPU (Collective::device).
#pragma once

#include <vector>

#include "model.h"

namespace laggard::report {

struct NcclGpuCheckOptions {
  int64_t far_clock_ns = 10'000'000'000;  // GPU clock further off the host's: not epoch-based, shift it
  int64_t callback_tolerance_ns = 500'000;  // a GPU time this much after its callback's baseline: not its own
  int neighbours = 32;                      // ops each side giving the callback baselines, at least,
  int64_t baseline_window_ns = 5'000'000'000;  // ... and every op within this long of it
  int64_t order_tolerance_ns = 10'000;      // overlap of consecutive kernels of one communicator tolerated
};

// One shift per GPU (per rank: one GPU each) when its %globaltimer is far from the host clock:
// the smallest (callback host time - GPU time) over its ops puts every GPU time just before the
// callback that reported it; without callback times (version 3 files), the earliest op starts at
// its plan upload. Records the shift in rank.nccl_gpu_shift_ns and a problem.
void shift_far_gpu_clock(RankData& rank, std::vector<Problem>& problems, const NcclGpuCheckOptions& o = {});
void shift_far_gpu_clock(RankData& rank, int device, const std::vector<Collective*>& ops, std::vector<Problem>& problems,
                         const NcclGpuCheckOptions& o);

// Sets Collective::gpu_time_suspect ("partial", "after_callback", "out_of_order", "shifted") and
// adds one problem per rank with the counts. Suspect ops stay out of blame and out of the clock fit.
void flag_implausible_gpu_times(RankData& rank, std::vector<Problem>& problems, const NcclGpuCheckOptions& o = {});
// The same for the ops of one GPU.
void flag_implausible_gpu_times(std::vector<Collective*>& ops, const NcclGpuCheckOptions& o);

// Problems about what NCCL did with the plugin: offered but never initialized while the rank ran
// NCCL kernels (NCCL <= 2.26 has only v3 tables; 2.27.3 opens neither STATIC_PLUGIN nor absolute
// paths), and kernel events switched off (no GPU times, nobody blamed from NCCL).
void check_nccl_plugin(const RankData& rank, std::vector<Problem>& problems);

}  // namespace laggard::report
