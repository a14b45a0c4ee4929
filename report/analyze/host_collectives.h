// Collectives timed on the host (issue 25): NVTX ranges named "<op>@<group>", in any domain.
// laggard's automatic PyTorch sections time every torch.distributed collective on a gloo or MPI
// process group this way ("torch:all_reduce@default", DDP's bucket all-reduce included, see
// docs/pytorch.md); a program marks its own (MPI, a custom backend) by the same rule. Their time
// is mostly waiting for the slowest rank, not work, so they go into the "who everyone waited
// for" analysis (comm_analysis.h) instead of being scored as sections: the k-th call on a group
// is matched across the ranks that use it, its start is the rank's arrival, and the rank that
// arrived last is named. Host clocks are used as they are (no per-GPU clock fit): ranks of one
// host share one clock, and hosts are expected to be kept in step (NTP, PTP).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "comm_analysis.h"
#include "model.h"
#include "scores.h"

namespace laggard::report {

struct HostCollectiveName {
  std::string op;     // "all_reduce", "MPI_Allreduce", ...
  std::string group;  // "default", "pg1", "world": the communicator, with its domain ("torch:default")
};

// Parses a section name ("torch:all_reduce@default", "MPI_Allreduce@world"): true when its op is a
// collective (all_reduce, allreduce, broadcast, barrier, MPI_*, ... in any case, '_' ignored) and
// a group follows the '@'.
bool parse_host_collective(const std::string& section, HostCollectiveName* out = nullptr);

// The run's host-timed collectives as NCCL-style records (Collective: comm = group, seq = the
// call's index on the group, gpu_start/end = host times), in a model with the same ranks in the
// same order and only those records, for analyze_collectives. A window whose occurrences of a
// group are a sample (too many to keep) has no usable order: it is left out, and the calls after
// it keep their index because counts stay exact.
RunModel host_collective_model(const RunModel& model);

// Per rank index, the intervals (epoch ns) the rank spent in host-timed collectives waiting for
// the last arriver: [its arrival, the last arrival], at most its own end. Sorted, not merged.
std::vector<std::vector<std::pair<int64_t, int64_t>>> host_collective_waits(const RunModel& host_model,
                                                                            double lead_floor_ns);

// The "who everyone waited for" analysis of a run: NCCL's records when the run has any, else its
// host-timed collectives (report.source "host", with host_waits filled for the verdict).
CommReport analyze_run_collectives(const RunModel& model, const ScoreReport& scores, const CommOptions& options = {});

}  // namespace laggard::report
