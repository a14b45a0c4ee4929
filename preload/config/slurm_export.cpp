#include "slurm_export.h"

#include <strings.h>

namespace laggard {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t comma = s.find(',', start);
    out.push_back(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

// Whether an --export value hands LD_PRELOAD to the tasks: ALL, or LD_PRELOAD named before the
// first NONE (srun stops reading the list there; sbatch takes NONE alone to mean nothing).
bool passes_preload(const std::string& value) {
  for (const std::string& tok : split_commas(value)) {
    if (strcasecmp(tok.c_str(), "NONE") == 0) return false;
    if (strcasecmp(tok.c_str(), "ALL") == 0 || tok == "LD_PRELOAD" || tok.rfind("LD_PRELOAD=", 0) == 0) return true;
  }
  return false;
}

// The last --export among the launcher's own options (a later one wins). Its options end at the
// first word that is neither an option nor the value of one: a guess (flags like -l take no
// value), which at worst makes us miss an --export or warn about the program's own.
const std::string* export_option(const std::vector<std::string>& args, std::string* storage) {
  const std::string* found = nullptr;
  bool value_next = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.empty() || a[0] != '-') {
      if (!value_next) break;
      value_next = false;
      continue;
    }
    if (a.rfind("--export=", 0) == 0) {
      *storage = a.substr(9);
      found = storage;
    } else if (a == "--export" && i + 1 < args.size()) {
      *storage = args[++i];
      found = storage;
    }
    value_next = a.find('=') == std::string::npos && a != "--export";
  }
  return found;
}

std::string joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

}  // namespace

SlurmExportPlan plan_slurm_export(const std::string& program, const Env& env, const std::vector<std::string>& args,
                                  const std::vector<std::string>& ours) {
  SlurmExportPlan plan;
  if (program != "srun" && program != "sbatch") return plan;
  std::string storage;
  if (const std::string* opt = export_option(args, &storage); opt && !passes_preload(*opt)) {
    plan.warning = program + " --export=" + *opt + " starts " + (program == "srun" ? "the tasks" : "the batch script") +
                   " without LD_PRELOAD: laggard captures nothing there (add ALL, or LD_PRELOAD and the LAGGARD_ "
                   "variables, to --export" + (program == "sbatch" ? ", or export them in the script" : "") + ")";
    return plan;
  }
  if (program != "srun" || ours.empty()) return plan;
  // SRUN_EXPORT_ENV overrides SLURM_EXPORT_ENV (src/srun/libsrun/opt.c lines 553-554).
  for (const char* var : {"SRUN_EXPORT_ENV", "SLURM_EXPORT_ENV"}) {
    const char* v = env(var);
    if (!v) continue;
    if (!passes_preload(v)) {
      plan.var = var;
      plan.value = joined(ours) + (*v ? "," + std::string(v) : "");
    }
    break;
  }
  return plan;
}

}  // namespace laggard
