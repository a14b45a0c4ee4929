// Load-time step of the NCCL source: point NCCL_PROFILER_PLUGIN at liblaggard so NCCL loads the
// plugin tables this library exports, unless the user (or another tool) chose a plugin already.
#pragma once

#include <optional>
#include <string>

#include "config.h"

namespace laggard::nccl {

// The value laggard sets: its own soname. NCCL dlopen()s the value as given (2.27.3 only
// accepts values shaped lib*.so, later versions anything), and the dynamic loader answers a
// soname with the already loaded (preloaded) library. So it works from NCCL 2.27.3 on, unlike
// STATIC_PLUGIN or an absolute path (2.27.5+), and never loads laggard into a process that was
// not started with it.
inline constexpr const char* kPluginSoname = "liblaggard.so";

struct PluginEnvDecision {
  std::optional<std::string> set_to;  // value to set NCCL_PROFILER_PLUGIN to, if any
  std::string status;                 // "on" or "off: why" (file header, capture.nccl)
  std::string warning;                // for ranks: why laggard will not see NCCL
};

// Pure: `current` is NCCL_PROFILER_PLUGIN (null when unset), self_path this library's path.
PluginEnvDecision decide_plugin_env(const char* current, bool nccl_enabled, const std::string& self_path);

// Applies the decision to the process (setenv, one warning for ranks), remembers whether the
// plugin may capture, and returns the status. Called once from the library constructor.
std::string offer_plugin_at_load(const Config& cfg, const std::string& self_path, bool is_rank);

// Whether LAGGARD_NCCL allowed capture (set by offer_plugin_at_load; false before it ran).
bool plugin_allowed();

}  // namespace laggard::nccl
