// What srun passes on to its tasks (issue 28). `#SBATCH --export=NONE` (or `sbatch --export=NONE`)
// puts SLURM_EXPORT_ENV=NONE into the job, and srun then gives its tasks none of the batch
// script's variables: an `export LD_PRELOAD=... LAGGARD_OUT=...` in the script reaches srun (it
// runs under LD_PRELOAD like everything in the script) but no rank, and the job runs without
// laggard, silently. srun, loading laggard, names laggard's variables in front of that value,
// which srun reads after its constructors have run (SchedMD/slurm, slurm-22-05-8-1:
// src/plugins/launch/slurm/launch_slurm.c, _build_user_env, lines 609-651: each named variable
// is passed from srun's environment, up to a NONE; SLURM_* always).
#pragma once

#include <string>
#include <vector>

#include "env.h"

namespace laggard {

struct SlurmExportPlan {
  std::string var;      // the variable to set in this process; empty: change nothing
  std::string value;
  std::string warning;  // one line for the user; empty: nothing to say
};

// program: this process's short name (only "srun" and "sbatch" get a plan); args: its arguments
// after the program name; ours: the names of laggard's variables in this environment
// (LD_PRELOAD, LAGGARD_*).
SlurmExportPlan plan_slurm_export(const std::string& program, const Env& env, const std::vector<std::string>& args,
                                  const std::vector<std::string>& ours);

}  // namespace laggard
