// Synthetic runs for the analysis tests: a simulated data-parallel training job (host thread
// launching kernels, one compute stream, an NCCL all-reduce ending every step) turned into a
// report::RunModel, with faults injected on purpose. Every number is deterministic.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model.h"

namespace laggard::synth {

using report::GpuKind;

struct KernelSpec {
  std::string name;
  std::string section;       // NVTX section it is launched in
  int64_t dur_ns;            // GPU duration on a healthy rank
  GpuKind kind = GpuKind::kernel;
};

struct Fault {
  enum class Kind {
    slow_gpu,        // rank's compute kernels take factor x longer (in `section`, or all if empty);
                     // CPU-only runs: its host work there takes factor x longer
    host_bound,      // rank's host spends extra_ns before each launch (in `section`, or all)
    late_collective, // rank's host stalls extra_ns before launching the step's all-reduce
    late_collective_device,  // rank launches the all-reduce in time but it starts extra_ns late
                             // (waits on another stream or communicator)
    step_stall,      // rank's host stalls extra_ns at the start of the step, outside every
                     // sub-section (the OS descheduled it, a hiccup of the step itself)
    cpu_stall,       // as step_stall, and the stall is time its threads waited for a CPU: with
                     // Spec::cpu_wait, the window's cpu_wait says so (issue 30)
  } kind;
  int rank = 0;
  double factor = 1.0;
  int64_t extra_ns = 0;
  std::string section;
  int first_step = 0, last_step = 1 << 30;  // affected steps [first, last)
};

struct Spec {
  int ranks = 8;
  int ranks_per_host = 4;
  int steps = 24;
  int64_t launch_ns = 6'000;      // host time of one launch call
  int64_t host_gap_ns = 2'000;    // host time between launch calls
  int64_t allreduce_ns = 400'000; // all-reduce kernel time once every rank has arrived
  int64_t step_gap_ns = 50'000;   // host work between steps (outside any section)
  double jitter = 0.01;           // +- relative noise on every duration
  double window_s = 0.05;         // capture window length (flush interval)
  // false: a CPU-only run (NVTX only, no CUDA, no NCCL): each KernelSpec is host work of dur_ns
  // in its section, and ranks do not wait for each other.
  bool gpu = true;
  uint64_t seed = 42;             // of the noise
  // Every window records its CPU wait (issue 30): 1 % of the window (+- jitter) for every rank,
  // plus the rank's cpu_stall faults in it.
  bool cpu_wait = false;
  std::vector<KernelSpec> kernels = default_kernels();
  std::vector<Fault> faults;

  static std::vector<KernelSpec> default_kernels();
};

// rank r lives on host "node<r / ranks_per_host>".
report::RunModel make_run(const Spec& spec);

}  // namespace laggard::synth
