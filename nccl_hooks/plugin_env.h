// Load-time step of the NCCL source: point NCCL_PROFILER_PLUGIN at liblaggard so NCCL loads the
// plugin tables this library exports, unless the user (or another tool) chose a plugin already,
// in the environment or in one of NCCL's configuration files. Also decides, at the plugin's
// init, whether NCCL's per-channel kernel (KernelCh) events are asked for.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config.h"

namespace laggard::nccl {

// The value laggard sets: its own soname. NCCL dlopen()s the value as given (2.27.3 only
// accepts values shaped lib*.so, later versions anything), and the dynamic loader answers a
// soname with the already loaded (preloaded) library. So it works from NCCL 2.27.3 on, unlike
// STATIC_PLUGIN or an absolute path (2.27.5+), and never loads laggard into a process that was
// not started with it.
inline constexpr const char* kPluginSoname = "liblaggard.so";

// A setting found in one of NCCL's configuration files.
struct ConfValue {
  std::string value;
  std::string file;
};

// The files NCCL reads its settings from, in the order it reads them (src/misc/param.cc,
// initEnvFunc, the same from v2.27.3 to v2.30.7): $NCCL_CONF_FILE when set and not empty, else
// ~/.nccl.conf; then /etc/nccl.conf.
std::vector<std::string> nccl_conf_files(const char* nccl_conf_file, const char* home);

// `key`'s value as NCCL would take it from `files`: NCCL setenv()s every KEY=VALUE line without
// overwriting, so the first definition wins, across files and within one. Lines starting with
// '#' and lines without '=' are skipped; key and value are taken verbatim (no trimming), a
// trailing "\r" is dropped (v2.30.7 does; earlier versions would keep it in the value).
std::optional<ConfValue> nccl_conf_lookup(const std::vector<std::string>& files, const std::string& key);

// Whether LD_PRELOAD (entries separated by spaces or colons) names this library: by path (the
// same file) or, for an entry without '/', by file name (the loader searched for it).
bool listed_in_ld_preload(const char* ld_preload, const std::string& self_path);

struct PluginEnvInput {
  const char* current = nullptr;    // NCCL_PROFILER_PLUGIN in the environment (null: unset)
  std::optional<ConfValue> conf;    // NCCL_PROFILER_PLUGIN from NCCL's configuration files
  bool nccl_enabled = true;         // LAGGARD_NCCL
  bool preloaded = true;            // listed_in_ld_preload
  std::string self_path;            // this library's path
};

struct PluginEnvDecision {
  std::optional<std::string> set_to;  // value to set NCCL_PROFILER_PLUGIN to, if any
  std::string status;                 // "on" or "off: why" (file header, capture.nccl)
  std::string warning;                // for ranks: why laggard will not see NCCL
};

// Pure.
PluginEnvDecision decide_plugin_env(const PluginEnvInput& in);
// The environment only, as if preloaded and without configuration files.
PluginEnvDecision decide_plugin_env(const char* current, bool nccl_enabled, const std::string& self_path);

// Applies the decision to the process (setenv, one warning for ranks), remembers whether the
// plugin may capture and the kernel-event setting, and returns the status. Called once from the
// library constructor.
std::string offer_plugin_at_load(const Config& cfg, const std::string& self_path, bool is_rank);

// Whether the plugin may capture (set by offer_plugin_at_load; false before it ran).
bool plugin_allowed();
// LAGGARD_NCCL_KERNEL_EVENTS as offer_plugin_at_load saw it (-1 auto, 0 off, 1 on).
int kernel_events_setting();

// What NCCL puts in /dev/shm per proxy state once a communicator's profiler proxy connection
// needs progress (kernel events): an ops pool of sizeof(ncclProxyOp) 232 x MAX_OPS_PER_PEER 2048 x
// NCCL_MAX_LOCAL_RANKS 72 bytes, about 32.6 MiB (proxy.cc proxyProgressInit, v2.30.7 1444-1489;
// one proxy state per communicator unless it shares its parent's resources). Every local rank of
// the communicator makes its own.
inline constexpr int64_t kProxyOpsPoolBytes = int64_t{232} * 2048 * 72;

// /dev/shm bytes the local ranks of a new communicator will take with kernel events on: its
// ranks on this host (nranks / nnodes, rounded up) times one ops pool, plus a quarter for what
// else uses /dev/shm meanwhile (NCCL's other segments, DataLoader workers).
int64_t shm_needed_for_comm(int nranks, int nnodes);

struct KernelEventsDecision {
  bool on = true;
  std::string status;   // "on" or "off: why" (written with the windows' nccl.plugin)
  std::string warning;  // for the log, once
};

// Whether to ask NCCL for KernelCh events (the GPU times of each channel), in auto mode:
// - not with the v4 table, i.e. NCCL 2.27: its profiler proxy connections are shared and
//   all-to-all batches overflow them ("Proxy append out of bounds", NVIDIA/nccl#2039);
// - not when /dev/shm has less free space than the communicator's local ranks need
//   (shm_needed_for_comm): NCCL 2.27-2.30 ignore a failed profiler connection setup and
//   dereference it later (NVIDIA/nccl#2326). shm_free_bytes < 0: unknown (not checked).
// Asked at every communicator's init while kernel events are on: once off, they stay off.
// setting: kernel_events_setting(); table_version: 4, 5 or 6.
KernelEventsDecision decide_kernel_events(int setting, int table_version, int64_t shm_free_bytes,
                                          int64_t shm_needed_bytes);

// The profiler plugin NCCL would have loaded had laggard not set NCCL_PROFILER_PLUGIN (only
// asked when laggard set it): NCCL's default "libnccl-profiler.so" in a directory of
// `search_dirs` (the loader's search path for libnccl), else, from NCCL 2.28 (table >= 5), a
// loaded net plugin ("libnccl-net*") exporting a profiler table (profiler.cc
// ncclProfilerPluginLoad, v2.30.7 62-68). Empty: none. NCCL loads only one profiler plugin:
// laggard does not chain to it (it says so).
struct LoadedLibrary {
  std::string path;
  bool has_profiler_table = false;
};
std::string find_displaced_profiler(const std::vector<std::string>& search_dirs,
                                    const std::vector<LoadedLibrary>& loaded, int table_version);
// The same, for this process: the loader's search path of the loaded libnccl (or of the
// program), and the loaded libraries.
std::string find_displaced_profiler_here(int table_version);
// Whether offer_plugin_at_load set NCCL_PROFILER_PLUGIN (it was set nowhere before).
bool plugin_env_was_unset();

}  // namespace laggard::nccl
