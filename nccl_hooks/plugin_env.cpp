#include "plugin_env.h"

#include <strings.h>
#include <sys/stat.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "log.h"

namespace laggard::nccl {
namespace {

std::atomic<bool> g_allowed{false};

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

}  // namespace

PluginEnvDecision decide_plugin_env(const char* current, bool nccl_enabled, const std::string& self_path) {
  PluginEnvDecision d;
  if (!nccl_enabled) {
    d.status = "off: LAGGARD_NCCL=0";
    return d;
  }
  if (!current || !*current) {
    d.set_to = kPluginSoname;
    d.status = "on";
    return d;
  }
  // Already ours: set by a parent process that runs laggard too, or by the user on purpose.
  if (std::strcmp(current, kPluginSoname) == 0 || is_static_plugin(current) || same_file(current, self_path)) {
    d.status = "on";
    return d;
  }
  d.status = std::string("off: NCCL_PROFILER_PLUGIN is set to '") + current + "'";
  d.warning = std::string("NCCL_PROFILER_PLUGIN is already set to '") + current +
              "' (another NCCL profiler, e.g. the NCCL Inspector?); NCCL loads only one profiler plugin, "
              "so laggard leaves it alone and will not capture NCCL collectives";
  return d;
}

std::string offer_plugin_at_load(const Config& cfg, const std::string& self_path, bool is_rank) {
  PluginEnvDecision d = decide_plugin_env(std::getenv("NCCL_PROFILER_PLUGIN"), cfg.nccl, self_path);
  if (d.set_to && setenv("NCCL_PROFILER_PLUGIN", d.set_to->c_str(), 1) != 0) {
    d.status = "off: cannot set NCCL_PROFILER_PLUGIN";
    d.set_to.reset();
  }
  if (!d.warning.empty() && is_rank) LAGGARD_WARN_ONCE("%s", d.warning.c_str());
  g_allowed.store(d.status == "on", std::memory_order_release);
  return d.status;
}

bool plugin_allowed() { return g_allowed.load(std::memory_order_acquire); }

}  // namespace laggard::nccl
