#include "rank_identity.h"

#include <climits>

#include "config.h"

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

std::pair<std::string, std::string> detect_run_id(const Env& env, const std::string& host,
                                                  long ppid) {
  auto get = [&](const char* n) -> std::string {
    const char* v = env(n);
    return v ? v : "";
  };
  if (auto v = get("LAGGARD_RUN_ID"); !v.empty()) return {v, "LAGGARD_RUN_ID"};
  // torchrun's default rendezvous id is the literal "none": useless as a run id.
  if (auto v = get("TORCHELASTIC_RUN_ID"); !v.empty() && v != "none") {
    auto restart = get("TORCHELASTIC_RESTART_COUNT");
    if (!restart.empty() && restart != "0") v += ".restart" + restart;
    return {v, "TORCHELASTIC_RUN_ID"};
  }
  if (auto v = get("SLURM_JOB_ID"); !v.empty()) {
    auto step = get("SLURM_STEP_ID");
    return {"slurm-" + v + (step.empty() ? "" : "." + step), "SLURM_JOB_ID"};
  }
  if (auto v = get("OMPI_MCA_ess_base_jobid"); !v.empty()) return {"ompi-" + v, "OMPI_MCA_ess_base_jobid"};
  if (auto v = get("PMIX_NAMESPACE"); !v.empty()) return {"pmix-" + v, "PMIX_NAMESPACE"};
  // Ranks started by one local launcher share its pid: good enough on a single host.
  return {"local-" + host + "-" + std::to_string(ppid), "fallback (host and parent pid)"};
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
    int rank = read_int(env, src.rank, 0, r.warnings);
    if (rank < 0) continue;
    RankIdentity id;
    id.rank = rank;
    id.rank_source = src.rank;
    id.local_rank = read_int(env, src.local_rank, 0, r.warnings);
    id.world_size = read_int(env, src.world_size, 1, r.warnings);
    // An override may give only the rank; take the rest from the launcher.
    for (const Var& other : kSources) {
      if (&other == &src) continue;
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
