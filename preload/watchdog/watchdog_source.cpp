// The hang watchdog's place in the capture lifecycle (see watchdog.h). It runs on a thread of
// its own, never on the flush thread: the flush thread calls into CUPTI, NVML and the file
// system, and any of those can block for good -- exactly when a hang report is needed.
// Lives in liblaggard.so itself: a static library would drop this registration object, which
// nothing references.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdlib>
#include <thread>

#include "clock.h"
#include "log.h"
#include "fork_gate.h"
#include "source.h"
#include "watchdog.h"
#include "writer.h"

namespace laggard::watch {
namespace {

std::atomic<Watchdog*> g_watchdog{nullptr};  // never freed: its thread may still run at exit
std::atomic<bool> g_stop{false};             // exit or fork: stop between two threads' stacks
std::atomic<bool> g_busy{false};             // a report is being built

constexpr int64_t kMaxTickNs = 50'000'000;
constexpr int64_t kExitWaitNs = 300'000'000;  // how long exit waits for a report under way

void sleep_ns(int64_t ns) {
  timespec t{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&t, nullptr);
}

void watchdog_thread(Watchdog* w, int64_t tick_ns) {
  pthread_setname_np(pthread_self(), "laggard-watch");  // as the flush thread (lifecycle.cpp)
  try {
    w->arm();
  } catch (...) {
  }
  // Arming loads libunwind: where it is missing, the failed dlopen leaves glibc's error block on
  // this thread, which can outlive the process's exit check (fork_gate.h; a LeakSanitizer report
  // in CI for LAGGARD_HANG_UNWINDER=/nonexistent/...). So can a report's symbol lookups.
  release_dl_error_state();
  while (!g_stop.load(std::memory_order_acquire)) {
    sleep_ns(tick_ns);
    g_busy.store(true, std::memory_order_release);
    if (!g_stop.load(std::memory_order_acquire)) {
      try {
        w->tick(mono_ns(), &g_stop);
      } catch (...) {
        // a report lost; the next tick tries again
      }
      release_dl_error_state();
    }
    g_busy.store(false, std::memory_order_release);
  }
}

// At exit: no report may be half built while the process tears down its libraries.
void stop_at_exit() {
  g_stop.store(true, std::memory_order_release);
  for (int64_t waited = 0; g_busy.load(std::memory_order_acquire) && waited < kExitWaitNs; waited += 1'000'000)
    sleep_ns(1'000'000);
}

bool start_thread(Watchdog* w, int64_t tick_ns) {
  // Every signal blocked: the application's signals go to its own threads.
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  bool ok = true;
  try {
    std::thread(watchdog_thread, w, tick_ns).detach();
  } catch (...) {
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  return ok;
}

void on_activate() {
  std::vector<std::string> warnings;
  HangConfig cfg = parse_hang_config(process_env(), &warnings);
  for (const std::string& w : warnings) log_warn("%s", w.c_str());
  const FileInfo* fi = active_file_info();
  if (cfg.hang_s <= 0 || !fi) return;
  RankInfo ri;
  ri.run_dir = active_run_dir();
  ri.run_id = fi->run_id;
  ri.host = fi->host;
  ri.rank = fi->rank;
  ri.local_rank = fi->local_rank;
  ri.world_size = fi->world_size;
  ri.pid = fi->pid;
  ri.image = fi->image;
  ri.python = python_note(fi->pid);
  ri.epoch_offset_ns = fi->epoch_offset_ns;
  auto* w = new Watchdog(cfg, ri, mono_ns());
  int64_t tick_ns = std::min<int64_t>(kMaxTickNs, static_cast<int64_t>(cfg.hang_s * 1e9 / 4));
  if (!start_thread(w, tick_ns)) {
    log_warn("hang watchdog: cannot start its thread; no hang reports");
    return;
  }
  g_watchdog.store(w, std::memory_order_release);
  {
    ForkGate no_fork_while;  // fork_gate.h: a child must not inherit the exit list's lock
    std::atexit(stop_at_exit);
  }
  log_info("hang watchdog on: a report after %.1f s without progress, again every %.1f s", cfg.hang_s,
           cfg.repeat_s);
}

void on_fork_child() {
  // The watchdog thread does not exist in a child; a report it was building is not the child's.
  g_stop.store(true, std::memory_order_relaxed);
  g_busy.store(false, std::memory_order_relaxed);
  g_watchdog.store(nullptr, std::memory_order_relaxed);
}

const bool g_registered = [] {
  SourceHooks hooks{"watchdog"};
  hooks.on_activate = on_activate;
  hooks.on_fork_child = on_fork_child;
  register_source(hooks);
  return true;
}();

}  // namespace
}  // namespace laggard::watch
