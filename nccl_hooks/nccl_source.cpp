#include "nccl_source.h"

#include <atomic>
#include <mutex>

#include <sys/statvfs.h>

#include "capture.h"
#include "clock.h"
#include "log.h"
#include "plugin_env.h"
#include "source.h"
#include "watchdog.h"

namespace laggard::nccl {
namespace {

std::atomic<Profiler*> g_profiler{nullptr};  // never freed: NCCL may call in during exit
std::atomic<bool> g_forked{false};
std::mutex g_create_mu;

// Every flush-thread tick: finished operations leave the pool, so slots are reused quickly.
void on_tick() {
  if (Profiler* p = g_profiler.load(std::memory_order_acquire)) p->harvest(mono_ns(), false);
}

void on_window(WindowSnapshot& w, bool final) {
  if (Profiler* p = g_profiler.load(std::memory_order_acquire)) {
    p->harvest(mono_ns(), final);
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

int64_t dev_shm_bytes() {
  struct statvfs st;
  if (statvfs("/dev/shm", &st) != 0) return -1;
  return static_cast<int64_t>(st.f_blocks) * static_cast<int64_t>(st.f_frsize);
}

Profiler* profiler_for_init(int table_version) {
  if (g_forked.load(std::memory_order_relaxed) || !plugin_allowed() || !activate_capture()) return nullptr;
  std::lock_guard<std::mutex> lock(g_create_mu);
  Profiler* p = g_profiler.load(std::memory_order_acquire);
  if (!p) {
    KernelEventsDecision k = decide_kernel_events(kernel_events_setting(), table_version, dev_shm_bytes());
    if (!k.warning.empty()) log_warn("%s", k.warning.c_str());
    ProfilerOptions options;
    options.kernel_events = k.on;
    options.kernel_events_status = k.status;
    p = new Profiler(options, measure_epoch_offset_ns());
    g_profiler.store(p, std::memory_order_release);
    if (!g_forked.load(std::memory_order_relaxed)) g_active_profiler.store(p, std::memory_order_release);
    log_info("NCCL profiler plugin active (v%d table): capturing collectives; kernel events %s", table_version,
             k.status.c_str());
  }
  return p;
}

}  // namespace laggard::nccl
