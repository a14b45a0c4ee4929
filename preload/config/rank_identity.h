// Who this process is in the job, from the launcher's variables (torchrun, Slurm, Open MPI,
// MPICH/PMI, PMIx), and which job it belongs to (the run id that keeps runs apart on disk).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "env.h"

namespace laggard {

struct RankIdentity {
  int rank = -1;
  int local_rank = -1;   // -1: unknown
  int world_size = -1;   // -1: unknown
  std::string rank_source;  // the variable the rank came from, e.g. "RANK"
  std::string run_id;       // sanitized for use as a directory name
  std::string run_id_source;
};

struct RankResult {
  std::optional<RankIdentity> identity;  // empty: not a rank (launcher, shell): capture nothing
  std::vector<std::string> warnings;
};

// host and ppid feed the fallback run id when no launcher provides one.
RankResult detect_rank(const Env& env, const std::string& host, long ppid);

// Keeps [A-Za-z0-9._-], replaces anything else with '_', never empty.
std::string sanitize_for_path(const std::string& s);

}  // namespace laggard
