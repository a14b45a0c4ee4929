// `laggard run -- srun ...` and SIGTERM (issue 28). srun answers SIGTERM by sending SIGKILL to its
// tasks (SchedMD/slurm slurm-22-05-8-1, src/srun/libsrun/srun_job.c, _srun_signal_mgr, lines
// 2326-2333: "forcing job termination"), so a rank killed that way never writes its last
// window. Slurm's own way to end a step gently is `scancel --signal=TERM JOB.STEP`: the tasks get
// SIGTERM, flush, exit, and srun ends with them. These functions find the steps that our own srun
// processes started and send them that.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace laggard::cli {

struct SrunStep {
  std::string step;  // "JOB.STEP", as scancel takes it
  long srun_pid = 0;
};

// The steps in `scontrol show step --oneliner` output whose srun ran on `host` (short names
// compared) with a pid in `pids` (each line: "StepId=12.0 ... SrunHost:Pid=node1:4242 ...").
std::vector<SrunStep> steps_of_sruns(const std::string& scontrol_text, const std::string& host,
                                     const std::set<long>& pids);

// Every process below `pid` on this machine (children, their children, ...), from /proc.
std::set<long> descendants_of(long pid);

// Sends SIGTERM to the tasks of every step an srun below this process started, through Slurm
// (scancel --signal=TERM). Returns the pids of those sruns: they must not get the SIGTERM
// themselves. Empty when there are none, or scontrol/scancel are missing or fail.
std::set<long> terminate_our_srun_steps();

}  // namespace laggard::cli
