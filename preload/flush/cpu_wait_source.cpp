// The CPU-wait source's hooks into the capture lifecycle (cpu_wait.h, issue 30). Lives in
// liblaggard.so itself: a static library would drop this registration object, which nothing
// references. Both hooks run on the flush thread; the files are read on the private-table thread
// (private_fds.h: a schedstat opened 20 times a second must not take a number the application is
// about to get). Both threads are laggard's, left out of the sums.
#include <unistd.h>

#include "clock.h"
#include "cpu_wait.h"
#include "private_fds.h"
#include "source.h"
#include "thread_registry.h"
#include "writer.h"

namespace laggard {
namespace {

// Never freed: the flush thread may still close a window while static destructors run.
CpuWaitSampler& sampler() {
  static CpuWaitSampler* s = new CpuWaitSampler();
  return *s;
}
// At load, as every object laggard keeps for the process (see files/safe_write.cpp): never a
// guard a forked child could find held.
[[gnu::constructor]] void make_sampler_at_load() { sampler(); }

bool g_primed = false;  // flush thread only

// The NVTX threads' wait since the previous tick, ending now (epoch ns, as the windows' times).
void tick_nvtx_threads() {
  const FileInfo* fi = active_file_info();
  if (!fi) return;
  uint32_t tids[kMaxTickThreads];
  const int n = watch::nvtx_thread_ids(tids, kMaxTickThreads);
  const int64_t now_ns = mono_ns() + fi->epoch_offset_ns;
  run_with_private_fds([&] { sampler().tick(tids, n, now_ns); });
}

// Every application thread's counters since the previous window.
CpuWaitWindow sample_threads() {
  const pid_t flush_thread = gettid();
  CpuWaitWindow w;
  run_with_private_fds([&] { w = sampler().sample({flush_thread, private_fds_thread_id()}); });
  return w;
}

// The first tick takes the baseline, so the first window counts from about its start.
void on_tick() {
  if (!g_primed) {
    g_primed = true;
    sample_threads();
  }
  tick_nvtx_threads();
}

void on_window(WindowSnapshot& w, bool) {
  g_primed = true;
  w.cpu_wait = sample_threads();
  tick_nvtx_threads();  // the series reaches the window's end
  w.cpu_wait.ticks = sampler().take_ticks(&w.cpu_wait.nvtx_threads);
}

const bool g_registered = [] {
  SourceHooks hooks{"cpu_wait"};
  hooks.on_tick = on_tick;
  hooks.on_window = on_window;
  register_source(hooks);
  return true;
}();

}  // namespace
}  // namespace laggard
