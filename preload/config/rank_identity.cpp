#include "rank_identity.h"

#include <climits>
#include <cstring>


namespace laggard {
namespace {

struct Var {
  const char* rank;
  const char* local_rank;
  const char* world_size;
};

// Order matters: an explicit override first, then the launcher closest to the process.
// torchrun sets RANK even when started inside Slurm, and its value is the one NCCL uses.
constexpr Var kSources[] = {
    {"LAGGARD_RANK", "LAGGARD_LOCAL_RANK", "LAGGARD_WORLD_SIZE"},
    {"RANK", "LOCAL_RANK", "WORLD_SIZE"},
    {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_SIZE"},
    {"PMIX_RANK", "PMIX_LOCAL_RANK", "PMIX_SIZE"},
    {"PMI_RANK", "MPI_LOCALRANKID", "PMI_SIZE"},
    {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NTASKS"},
};

int read_int(const Env& env, const char* var, long long min, std::vector<std::string>& warnings) {
  const char* v = env(var);
  if (!v) return -1;
  long long n = 0;
  if (parse_int(v, min, INT_MAX, &n)) return static_cast<int>(n);
  warnings.push_back(std::string(var) + "='" + v + "' is not a valid number; ignored");
  return -1;
}

std::string get(const Env& env, const char* name) {
  const char* v = env(name);
  return v ? v : "";
}

// Slurm's special steps are not srun steps: slurm.h at slurm-22-05-8-1 (lines 149-155) has the
// interactive step 0xfffffffa, batch 0xfffffffb, extern 0xfffffffc, pending 0xfffffffd; newer
// Slurm says every normal step is below SLURM_MAX_NORMAL_STEP_ID 0xfffffff0. slurmstepd sets
// SLURM_STEP_ID only when the id, as an int, is >= 0 (src/common/env.c, setup_env, lines 671-680),
// so the batch script has none at all; srun's own environment for a step prints it with %u
// (env.c line 1357).
constexpr unsigned long long kFirstSpecialStep = 0xfffffff0ULL;

// The id of the srun step this process is a task of; empty outside one (the batch script and
// everything it runs directly, salloc's shell, a login shell).
std::string slurm_step(const Env& env) {
  std::string step = get(env, "SLURM_STEP_ID");
  if (step.empty()) step = get(env, "SLURM_STEPID");  // the older name, still set beside it
  long long n = 0;
  if (step.empty() || !parse_int(step.c_str(), 0, kFirstSpecialStep - 1, &n)) return "";
  return step;
}

// Slurm gives the batch script SLURM_PROCID=0 and SLURM_NTASKS=N as if it were a task (issue 28):
// only a task of an srun step is a rank by SLURM_PROCID.
bool source_applies(const Env& env, const Var& src) {
  return std::strcmp(src.rank, "SLURM_PROCID") != 0 || !slurm_step(env).empty();
}

// A non-zero count as the suffix "<what><N>"; nothing for 0, absent or garbage.
std::string attempt_suffix(const Env& env, const char* var, const char* what, std::vector<std::string>& used) {
  long long n = 0;
  std::string v = get(env, var);
  if (v.empty() || !parse_int(v.c_str(), 1, INT_MAX, &n)) return "";
  used.push_back(var);
  return "." + std::string(what) + std::to_string(n);
}

// The launch this process belongs to: the launcher closest to it that names its launch.
// An MPI launcher's job id is the same on every node of one mpirun, and the Slurm step is not
// (mpirun starts its own node's ranks itself, the other nodes' through an srun step of its
// daemons); torchrun's rendezvous id is often just $SLURM_JOB_ID. See docs/slurm.md.
std::string launch_part(const Env& env, bool have_prefix, const std::string& host, long ppid,
                        std::vector<std::string>& used) {
  std::vector<std::string> parts;
  if (auto job = get(env, "SLURM_JOB_ID"); !job.empty()) {
    parts.push_back("slurm-" + job);
    used.push_back("SLURM_JOB_ID");
  }
  std::string pmix = get(env, "PMIX_NAMESPACE");
  if (pmix.rfind("slurm.pmix.", 0) == 0) pmix.clear();  // srun --mpi=pmix: the step says it
  std::string torch = get(env, "TORCHELASTIC_RUN_ID");
  if (torch == "none") torch.clear();  // torchrun's default rendezvous id: names nothing
  if (auto ompi = get(env, "OMPI_MCA_ess_base_jobid"); !ompi.empty()) {
    parts.push_back("ompi-" + ompi);
    used.push_back("OMPI_MCA_ess_base_jobid");
  } else if (!pmix.empty()) {
    parts.push_back("pmix-" + pmix);
    used.push_back("PMIX_NAMESPACE");
  } else if (auto step = slurm_step(env); !step.empty()) {
    parts.push_back(step);
    used.push_back("SLURM_STEP_ID");
  } else if (!torch.empty()) {
    parts.push_back(torch);
    used.push_back("TORCHELASTIC_RUN_ID");
  } else if (!have_prefix) {
    // Ranks started by one local launcher share its pid: good enough on a single host.
    parts.push_back("local-" + host + "-" + std::to_string(ppid));
    used.push_back("host and parent pid");
  }
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : ".") + p;
  return out;
}

// One run per launch (docs/slurm.md, "One run per launch"): [laggard run's id.]launch, then
// .requeueN (a requeued Slurm job keeps its id and starts its steps at 0 again) and .restartN
// (a torchrun elastic restart keeps its rendezvous and agent).
std::pair<std::string, std::string> detect_run_id(const Env& env, const std::string& host, long ppid) {
  if (auto v = get(env, "LAGGARD_RUN_ID"); !v.empty()) return {v, "LAGGARD_RUN_ID"};
  std::vector<std::string> used;
  std::string prefix = get(env, "LAGGARD_RUN_PREFIX");
  if (!prefix.empty()) used.push_back("LAGGARD_RUN_PREFIX");
  std::string id = prefix;
  if (std::string launch = launch_part(env, !prefix.empty(), host, ppid, used); !launch.empty())
    id += (id.empty() ? "" : ".") + launch;
  id += attempt_suffix(env, "SLURM_RESTART_COUNT", "requeue", used);
  id += attempt_suffix(env, "TORCHELASTIC_RESTART_COUNT", "restart", used);
  std::string source;
  for (const std::string& u : used) source += (source.empty() ? "" : " + ") + u;
  return {id, source};
}

}  // namespace

std::string sanitize_for_path(const std::string& s) {
  std::string out;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  if (out.empty() || out == "." || out == "..") out = "run";
  return out;
}

RankResult detect_rank(const Env& env, const std::string& host, long ppid) {
  RankResult r;
  for (const Var& src : kSources) {
    if (!source_applies(env, src)) continue;
    int rank = read_int(env, src.rank, 0, r.warnings);
    if (rank < 0) continue;
    RankIdentity id;
    id.rank = rank;
    id.rank_source = src.rank;
    id.local_rank = read_int(env, src.local_rank, 0, r.warnings);
    id.world_size = read_int(env, src.world_size, 1, r.warnings);
    // An override may give only the rank; take the rest from the launcher.
    for (const Var& other : kSources) {
      if (&other == &src || !source_applies(env, other)) continue;
      if (id.local_rank < 0 && env(other.rank)) id.local_rank = read_int(env, other.local_rank, 0, r.warnings);
      if (id.world_size < 0 && env(other.rank)) id.world_size = read_int(env, other.world_size, 1, r.warnings);
    }
    if (id.world_size > 0 && id.rank >= id.world_size) {
      r.warnings.push_back(std::string(src.rank) + "=" + std::to_string(rank) +
                           " is not below the world size " + std::to_string(id.world_size) +
                           "; world size treated as unknown");
      id.world_size = -1;
    }
    auto [run, run_src] = detect_run_id(env, host, ppid);
    id.run_id = sanitize_for_path(run);
    id.run_id_source = run_src;
    r.identity = id;
    return r;
  }
  return r;
}

}  // namespace laggard
