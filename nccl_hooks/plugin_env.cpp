#include "plugin_env.h"

#include <pwd.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "log.h"

namespace laggard::nccl {
namespace {

std::atomic<bool> g_allowed{false};
std::atomic<bool> g_was_unset{false};
std::atomic<int> g_kernel_setting{-1};

bool same_file(const char* a, const std::string& b) {
  struct stat sa, sb;
  return !b.empty() && stat(a, &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

// NCCL treats any case-insensitive prefix of STATIC_PLUGIN as "look in the process itself",
// where the preloaded laggard is found.
bool is_static_plugin(const char* v) {
  size_t n = std::strlen(v);
  return n > 0 && n <= std::strlen("STATIC_PLUGIN") && strncasecmp(v, "STATIC_PLUGIN", n) == 0;
}

bool means_laggard(const char* v, const std::string& self_path) {
  return std::strcmp(v, kPluginSoname) == 0 || is_static_plugin(v) || same_file(v, self_path);
}

std::string file_name(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// NCCL's userHomeDir(): the passwd entry, not $HOME.
const char* home_dir() {
  struct passwd* pw = getpwuid(getuid());
  return pw ? pw->pw_dir : nullptr;
}

}  // namespace

std::vector<std::string> nccl_conf_files(const char* nccl_conf_file, const char* home) {
  std::vector<std::string> files;
  if (nccl_conf_file && *nccl_conf_file) files.emplace_back(nccl_conf_file);
  else if (home) files.push_back(std::string(home) + "/.nccl.conf");
  files.emplace_back("/etc/nccl.conf");
  return files;
}

std::optional<ConfValue> nccl_conf_lookup(const std::vector<std::string>& files, const std::string& key) {
  for (const std::string& f : files) {
    std::ifstream in(f);
    std::string line;
    while (in && std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      size_t eq = line.find('=');
      if (eq == std::string::npos) continue;
      // NCCL copies at most 1023 characters of either side.
      if (line.compare(0, std::min<size_t>(eq, 1023), key) == 0 && std::min<size_t>(eq, 1023) == key.size())
        return ConfValue{line.substr(eq + 1, 1023), f};
    }
  }
  return std::nullopt;
}

bool listed_in_ld_preload(const char* ld_preload, const std::string& self_path) {
  if (!ld_preload || self_path.empty()) return false;
  const std::string self_name = file_name(self_path);
  std::string all = ld_preload;
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t end = all.find_first_of(" :", pos);
    if (end == std::string::npos) end = all.size();
    std::string entry = all.substr(pos, end - pos);
    if (!entry.empty()) {
      if (entry.find('/') == std::string::npos ? entry == self_name : same_file(entry.c_str(), self_path))
        return true;
    }
    pos = end + 1;
  }
  return false;
}

PluginEnvDecision decide_plugin_env(const PluginEnvInput& in) {
  PluginEnvDecision d;
  if (!in.nccl_enabled) {
    d.status = "off: LAGGARD_NCCL=0";
    return d;
  }
  if (!in.preloaded) {
    // A process that loaded liblaggard only because it inherited NCCL_PROFILER_PLUGIN (or
    // NVTX_INJECTION64_PATH) from a laggard parent: laggard was not asked to run here.
    d.status = "off: not preloaded (LD_PRELOAD does not name liblaggard)";
    return d;
  }
  const char* current = in.current && *in.current ? in.current : nullptr;
  std::string where = "is already set to";
  if (!current && in.conf && !in.conf->value.empty()) {
    current = in.conf->value.c_str();
    where = "is set in " + in.conf->file + " to";
  }
  if (!current) {
    d.set_to = kPluginSoname;
    d.status = "on";
    return d;
  }
  // Already ours: set by a parent process that runs laggard too, or by the user on purpose.
  if (means_laggard(current, in.self_path)) {
    d.status = "on";
    return d;
  }
  d.status = "off: NCCL_PROFILER_PLUGIN " + where + " '" + current + "'";
  d.warning = "NCCL_PROFILER_PLUGIN " + where + " '" + current +
              "' (another NCCL profiler, e.g. the NCCL Inspector?); NCCL loads only one profiler plugin, "
              "so laggard leaves it alone and will not capture NCCL collectives";
  return d;
}

PluginEnvDecision decide_plugin_env(const char* current, bool nccl_enabled, const std::string& self_path) {
  PluginEnvInput in;
  in.current = current;
  in.nccl_enabled = nccl_enabled;
  in.self_path = self_path;
  return decide_plugin_env(in);
}

std::string offer_plugin_at_load(const Config& cfg, const std::string& self_path, bool is_rank) {
  PluginEnvInput in;
  in.current = std::getenv("NCCL_PROFILER_PLUGIN");
  in.nccl_enabled = cfg.nccl;
  in.preloaded = listed_in_ld_preload(std::getenv("LD_PRELOAD"), self_path);
  in.self_path = self_path;
  if (cfg.nccl && in.preloaded && !(in.current && *in.current))
    in.conf = nccl_conf_lookup(nccl_conf_files(std::getenv("NCCL_CONF_FILE"), home_dir()), "NCCL_PROFILER_PLUGIN");
  PluginEnvDecision d = decide_plugin_env(in);
  if (d.set_to && setenv("NCCL_PROFILER_PLUGIN", d.set_to->c_str(), 1) != 0) {
    d.status = "off: cannot set NCCL_PROFILER_PLUGIN";
    d.set_to.reset();
  }
  if (!d.warning.empty() && is_rank) LAGGARD_WARN_ONCE("%s", d.warning.c_str());
  // NCCL 2.29+ reads its settings through an env plugin (src/plugin/env.cc): an external one
  // may answer NCCL_PROFILER_PLUGIN with another plugin than the environment's.
  const char* env_plugin = std::getenv("NCCL_ENV_PLUGIN");
  if (d.status == "on" && is_rank && env_plugin && *env_plugin && strcasecmp(env_plugin, "none") != 0)
    LAGGARD_WARN_ONCE("NCCL_ENV_PLUGIN is set to '%s': NCCL 2.29+ asks it for NCCL_PROFILER_PLUGIN, and if it names "
                      "another profiler NCCL does not load laggard (the report then says NCCL never initialized it)",
                      env_plugin);
  g_was_unset.store(d.set_to.has_value(), std::memory_order_relaxed);
  g_kernel_setting.store(cfg.nccl_kernel_events, std::memory_order_relaxed);
  g_allowed.store(d.status == "on", std::memory_order_release);
  return d.status;
}

bool plugin_allowed() { return g_allowed.load(std::memory_order_acquire); }
bool plugin_env_was_unset() { return g_was_unset.load(std::memory_order_relaxed); }
int kernel_events_setting() { return g_kernel_setting.load(std::memory_order_relaxed); }

int64_t shm_needed_for_comm(int nranks, int nnodes) {
  const int64_t local = (std::max(nranks, 1) + std::max(nnodes, 1) - 1) / std::max(nnodes, 1);
  return local * kProxyOpsPoolBytes * 5 / 4;
}

KernelEventsDecision decide_kernel_events(int setting, int table_version, int64_t shm_free_bytes,
                                          int64_t shm_needed_bytes) {
  KernelEventsDecision d;
  if (setting == 0) {
    d.on = false;
    d.status = "off: LAGGARD_NCCL_KERNEL_EVENTS=0";
  } else if (setting == 1) {
    d.status = "on";
  } else if (table_version == 4) {
    d.on = false;
    d.status = "off: NCCL 2.27 (v4 table) overflows its profiler proxy connections with kernel events "
               "(NVIDIA/nccl#2039); LAGGARD_NCCL_KERNEL_EVENTS=1 asks for them anyway";
  } else if (shm_free_bytes >= 0 && shm_free_bytes < shm_needed_bytes) {
    d.on = false;
    d.status = "off: /dev/shm has " + std::to_string(shm_free_bytes >> 20) + " MiB free, a communicator's local ranks need " +
               std::to_string(shm_needed_bytes >> 20) +
               " MiB; NCCL crashes when its profiler connection cannot be set up there (NVIDIA/nccl#2326)";
    d.warning = "/dev/shm has only " + std::to_string(shm_free_bytes >> 20) + " MiB free (" +
                std::to_string(shm_needed_bytes >> 20) +
                " MiB needed for the next communicator): laggard stops asking NCCL for per-channel GPU times "
                "(NVIDIA/nccl#2326), so NCCL collectives from now on are recorded without GPU times and nobody is "
                "blamed from them; enlarge /dev/shm (docker --shm-size) or set LAGGARD_NCCL_KERNEL_EVENTS=1";
  } else {
    d.status = "on";
  }
  return d;
}

}  // namespace laggard::nccl
