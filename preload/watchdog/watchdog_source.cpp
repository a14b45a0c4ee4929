// The hang watchdog's hooks into the capture lifecycle (see watchdog.h). Lives in liblaggard.so
// itself: a static library would drop this registration object, which nothing references.
#include <atomic>

#include "clock.h"
#include "log.h"
#include "source.h"
#include "watchdog.h"
#include "writer.h"

namespace laggard::watch {
namespace {

std::atomic<Watchdog*> g_watchdog{nullptr};  // never freed: the flush thread may still tick

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
  ri.epoch_offset_ns = fi->epoch_offset_ns;
  g_watchdog.store(new Watchdog(cfg, ri, mono_ns()), std::memory_order_release);
  log_info("hang watchdog on: a report after %.1f s without progress, again every %.1f s", cfg.hang_s,
           cfg.repeat_s);
}

void on_tick() {
  if (Watchdog* w = g_watchdog.load(std::memory_order_acquire)) w->tick(mono_ns());
}

void on_fork_child() { g_watchdog.store(nullptr, std::memory_order_relaxed); }

const bool g_registered = [] {
  SourceHooks hooks{"watchdog"};
  hooks.on_activate = on_activate;
  hooks.on_tick = on_tick;
  hooks.on_fork_child = on_fork_child;
  register_source(hooks);
  return true;
}();

}  // namespace
}  // namespace laggard::watch
