// The simulated job behind a synthetic run. Each step, every rank's host thread opens the NVTX
// range "step" and inside it "fwd", "bwd" and "opt", launching that section's compute kernels
// on one stream (the host runs ahead of the GPU, as PyTorch does), then launches an NCCL
// all-reduce that ends on every rank once the last rank's GPU has arrived. The host waits for
// it (loss.item()) and starts the next step.
//
// Every number comes from a counter-based random stream keyed by (seed, rank, step), so any
// (rank, step) can be regenerated alone: a first pass over all ranks finds when each step's
// all-reduce ends (the only cross-rank coupling), then each rank is written on its own with
// memory bounded by one window, whatever the number of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spec.h"

namespace laggard::gen {

constexpr int kSectionCount = 3;
constexpr const char* kSectionNames[kSectionCount] = {"fwd", "bwd", "opt"};
constexpr int64_t kRunStartNs = 1'800'000'000'000'000'000;  // an epoch time in 2027

struct KernelDef {
  std::string name;
  int section = 0;       // index into kSectionNames
  int64_t dur_ns = 0;    // on a healthy rank, before noise
};

struct Launch {
  int kernel = -1;       // index into Job::kernels(); -1: the NCCL all-reduce
  int64_t api_start_ns = 0, api_end_ns = 0;  // the launch call on the host
  int64_t gpu_start_ns = 0, gpu_end_ns = 0;
};

// One rank's step, epoch ns.
struct StepTrace {
  int64_t start_ns = 0, end_ns = 0;  // the "step" range
  int64_t section_start_ns[kSectionCount] = {}, section_end_ns[kSectionCount] = {};
  std::vector<Launch> launches;      // launch order; the all-reduce last
  int64_t collective_launch_ns = 0;  // host: the all-reduce's launch call starts
};

class Job {
 public:
  explicit Job(const Spec& spec);  // runs the first pass: every step's all-reduce end

  const Spec& spec() const { return spec_; }
  const std::vector<KernelDef>& kernels() const { return kernels_; }
  std::string allreduce_kernel_name() const { return "ncclDevKernel_AllReduce_Sum_f32_RING_LL"; }

  StepTrace step(int rank, int step) const;
  int64_t step_start_ns(int rank, int step) const;
  int64_t run_end_ns() const { return done_ns_.back() + 1'000'000'000; }  // after every rank's last file

 private:
  // Host and GPU work of (rank, step) from its start; returns when its GPU reaches the all-reduce.
  int64_t simulate(int rank, int step, int64_t start_ns, StepTrace* out) const;
  int64_t allreduce_end_ns(int rank, int step) const;

  Spec spec_;
  std::vector<KernelDef> kernels_;
  std::vector<int64_t> done_ns_;  // per step: when the slowest rank's all-reduce can end
};

}  // namespace laggard::gen
