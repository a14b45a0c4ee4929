#include "nccl_source.h"

#include <atomic>
#include <mutex>

#include <dlfcn.h>
#include <sys/statvfs.h>

#include "capture.h"
#include "clock.h"
#include "log.h"
#include "plugin_env.h"
#include "source.h"
#include "thread_registry.h"
#include "watchdog.h"

namespace laggard::nccl {
namespace {

std::atomic<Profiler*> g_profiler{nullptr};  // never freed: NCCL may call in during exit
std::atomic<bool> g_forked{false};
std::mutex g_create_mu;

// The harvest's view of NCCL's progress, passed on to the hang watchdog (flush thread only).
void harvest(Profiler& p, bool final) {
  static uint64_t reported = 0;
  p.harvest(mono_ns(), final);
  if (p.progress() != reported) {
    watch::note_collective_event(p.progress() - reported);
    reported = p.progress();
  }
}

// Every flush-thread tick: finished operations leave the pool, so slots are reused quickly.
void on_tick() {
  if (Profiler* p = g_profiler.load(std::memory_order_acquire)) harvest(*p, false);
}

void on_window(WindowSnapshot& w, bool final) {
  if (Profiler* p = g_profiler.load(std::memory_order_acquire)) {
    harvest(*p, final);
    w.nccl = p->take_window();
  }
}

// NCCL in a forked child belongs to the child; the parent's flush thread is gone there.
void on_fork_child() {
  g_forked.store(true, std::memory_order_relaxed);
  g_active_profiler.store(nullptr, std::memory_order_relaxed);
}

CollectiveProgress describe_for_watchdog() {
  if (Profiler* p = g_profiler.load(std::memory_order_acquire)) return p->describe();
  return {};
}

const bool g_registered = [] {
  watch::set_collective_provider(describe_for_watchdog);
  SourceHooks hooks{"nccl"};
  hooks.on_window = on_window;
  hooks.on_fork_child = on_fork_child;
  hooks.on_tick = on_tick;
  register_source(hooks);
  return true;
}();

}  // namespace

std::atomic<Profiler*> g_active_profiler{nullptr};

int64_t dev_shm_free_bytes() {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) != 0) return -1;
  return static_cast<int64_t>(st.f_bavail) * static_cast<int64_t>(st.f_frsize);
}

int cuda_current_device() {
  // NCCL initializes a communicator on a thread whose current device is the communicator's
  // (init.cc ncclCommInitRankFunc: cudaSetDevice before the plugin's init). libcuda is loaded by
  // then; laggard never loads it.
  static auto get = [] {
    using Fn = int (*)(int*);
    void* h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    return h ? reinterpret_cast<Fn>(dlsym(h, "cuCtxGetDevice")) : nullptr;
  }();
  int device = -1;
  if (!get || get(&device) != 0) return -1;
  return device;
}

Profiler* profiler_for_init(int table_version) {
  if (g_forked.load(std::memory_order_relaxed) || !plugin_allowed() || !activate_capture()) return nullptr;
  std::lock_guard<std::mutex> lock(g_create_mu);
  Profiler* p = g_profiler.load(std::memory_order_acquire);
  if (!p) {
    ProfilerOptions options;
    // The first communicator's /dev/shm need is checked in add_comm_for_init, like every later one's.
    KernelEventsDecision k = decide_kernel_events(kernel_events_setting(), table_version, -1, 0);
    options.kernel_events = k.on;
    options.kernel_events_status = k.status;
    options.keep_shifted = kernel_events_setting() == 1;
    p = new Profiler(options, measure_epoch_offset_ns());
    if (plugin_env_was_unset()) {
      std::string displaced = find_displaced_profiler_here(table_version);
      if (!displaced.empty()) {
        p->set_displaced(displaced);
        log_warn("laggard set NCCL_PROFILER_PLUGIN, so NCCL does not load %s, which it would have loaded otherwise; "
                 "NCCL loads one profiler plugin and laggard does not call the other one: set "
                 "NCCL_PROFILER_PLUGIN to it (or LAGGARD_NCCL=0) to keep using it",
                 displaced.c_str());
      }
    }
    g_profiler.store(p, std::memory_order_release);
    if (!g_forked.load(std::memory_order_relaxed)) g_active_profiler.store(p, std::memory_order_release);
    log_info("NCCL profiler plugin active (v%d table): capturing collectives; kernel events %s", table_version,
             k.status.c_str());
  }
  return p;
}

void* add_comm_for_init(Profiler& p, int table_version, uint64_t hash, const char* name, int nnodes, int nranks,
                        int rank) {
  if (p.kernel_events()) {
    std::lock_guard<std::mutex> lock(g_create_mu);
    KernelEventsDecision k = decide_kernel_events(kernel_events_setting(), table_version, dev_shm_free_bytes(),
                                                  shm_needed_for_comm(nranks, nnodes));
    if (!k.on && p.kernel_events()) {
      p.switch_kernel_events_off(k.status);
      if (!k.warning.empty()) log_warn("%s", k.warning.c_str());
    }
  }
  return p.add_comm(hash, name, nnodes, nranks, rank, table_version, cuda_current_device());
}

}  // namespace laggard::nccl
