// What a synthetic run looks like: N ranks x K kernels x S steps of a data-parallel training job,
// and the stragglers injected into it. Plain data; parse_straggler reads the command-line form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace laggard::gen {

// One injected straggler. kind follows from the fields given:
//  - delay_ns > 0: late collective: the rank launches the step's all-reduce delay_ns after its
//    GPU went idle (a host stall before the collective);
//  - else factor on the rank's compute kernels, in `section` only, or in every section (a slow GPU).
struct Straggler {
  int rank = 0;
  std::string section;  // empty: every section
  double factor = 1.0;
  int64_t delay_ns = 0;
  int first_step = 0, last_step = 1 << 30;  // affected steps [first, last)

  bool late_collective() const { return delay_ns > 0; }
  bool hits(int r, int step) const { return r == rank && step >= first_step && step < last_step; }
};

struct Spec {
  int ranks = 8;
  int kernels = 20;           // compute kernels per step (plus one NCCL all-reduce kernel)
  int steps = 10;
  int ranks_per_host = 8;
  int steps_per_window = 25;  // capture windows (flushes) cut at step boundaries
  uint64_t seed = 1;
  double jitter = 0.01;       // +- relative noise on every duration
  bool summaries_only = false;  // window summaries only: no per-kernel records, no NVTX occurrences
  bool binary = true;           // schema v5 appended binary frames (LAGGARD_FILE_FORMAT=binary); false: JSON
  std::vector<Straggler> stragglers;
};

// "rank=17,section=fwd,factor=1.3", "rank=3,delay_ms=2", "rank=5,factor=1.2,steps=10:20".
// Returns the straggler or sets *error.
std::optional<Straggler> parse_straggler(const std::string& text, std::string* error);

// Empty when the spec is usable, else why not.
std::string check_spec(const Spec& spec);

}  // namespace laggard::gen
