// GPU health's hooks into the capture lifecycle (see gpu_health.h): load NVML when capture
// starts, sample on the flush thread about once a second, hand each window its summary.
#include <atomic>
#include <cstdlib>

#include "clock.h"
#include "gpu_health.h"
#include "log.h"
#include "source.h"
#include "writer.h"

namespace laggard::nvml {
namespace {

constexpr int64_t kSampleEveryNs = 1'000'000'000;

std::atomic<GpuHealth*> g_health{nullptr};  // never freed: the flush thread may still use it
int64_t g_next_sample = 0;                  // flush thread only

void on_activate() {
  const char* off = std::getenv("LAGGARD_NVML");
  if (off && (std::string(off) == "0" || std::string(off) == "off")) return;
  const FileInfo* fi = active_file_info();
  auto* h = new GpuHealth();
  std::string why = h->load();
  if (why.empty()) h->choose_devices(std::getenv("CUDA_VISIBLE_DEVICES"), fi ? fi->local_rank : 0);
  if (!why.empty() || !h->active()) {
    log_info("no GPU health telemetry: %s", why.empty() ? "NVML sees no GPU for this rank" : why.c_str());
    return;  // h is leaked on purpose: NVML stays loaded, nothing else is kept
  }
  g_health.store(h, std::memory_order_release);
  log_info("GPU health telemetry on (NVML, 1 sample per second)");
}

void on_tick() {
  GpuHealth* h = g_health.load(std::memory_order_acquire);
  if (!h) return;
  int64_t now = mono_ns();
  if (now < g_next_sample) return;
  g_next_sample = now + kSampleEveryNs;
  h->sample();
}

void on_window(WindowSnapshot& w, bool) {
  if (GpuHealth* h = g_health.load(std::memory_order_acquire)) w.gpu_health = h->take_window();
}

void on_fork_child() { g_health.store(nullptr, std::memory_order_relaxed); }

const bool g_registered = [] {
  SourceHooks hooks{"nvml"};
  hooks.on_activate = on_activate;
  hooks.on_tick = on_tick;
  hooks.on_window = on_window;
  hooks.on_fork_child = on_fork_child;
  register_source(hooks);
  return true;
}();

}  // namespace
}  // namespace laggard::nvml
