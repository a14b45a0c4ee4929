// GPU health's hooks into the capture lifecycle (see gpu_health.h): load NVML when capture
// starts, sample on the flush thread about once a second, hand each window its summary.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "clock.h"
#include "gpu_health.h"
#include "log.h"
#include "source.h"
#include "writer.h"

namespace laggard::nvml {
namespace {

constexpr int64_t kSampleEveryNs = 1'000'000'000;
// NVML calls take no timeout: a sample that took longer than this (a GPU in trouble, a busy
// driver) makes sampling back off, up to once a minute, so the flush thread's other work (CUPTI
// buffers, the window writes) keeps its pace. The hang watchdog runs on its own thread.
constexpr int64_t kSlowSampleNs = 200'000'000;
constexpr int64_t kMaxSampleEveryNs = 60'000'000'000;
constexpr int64_t kCudaLookEveryNs = 1'000'000'000;  // until CUDA names the rank's device

std::atomic<GpuHealth*> g_health{nullptr};  // never freed: the flush thread may still use it
std::atomic<bool> g_wanted{false};
int g_local_rank = 0;                       // set before g_wanted
bool g_tried = false;                       // flush thread only
GpuHealth* volatile g_kept_unused = nullptr;  // NVML loaded but no GPU for this rank: kept, reachable (volatile: the store must stay)
int64_t g_next_sample = 0;                  // flush thread only
int64_t g_sample_every = kSampleEveryNs;    // flush thread only
int64_t g_next_cuda_look = 0;               // flush thread only
// Flush thread only: the choice is a guess while the CUDA driver is loaded but has not named the
// rank's device yet (its cuInit is under way): windows then get no samples, never the guess's.
bool g_cuda_pending = false;

// On the activating (application) thread: only decide; loading NVML (nvmlInit can take a while
// on a big machine) happens on the flush thread.
void on_activate() {
  const char* off = std::getenv("LAGGARD_NVML");
  if (off && (std::string(off) == "0" || std::string(off) == "off")) return;
  const FileInfo* fi = active_file_info();
  g_local_rank = fi && fi->local_rank >= 0 ? fi->local_rank : 0;
  g_wanted.store(true, std::memory_order_release);
}

GpuHealth* load_once() {
  g_tried = true;
  auto* h = new GpuHealth();
  std::string why = h->load();
  CudaDevice dev;
  if (why.empty() && !(cuda_device_of_rank(g_local_rank, &dev) && h->choose_cuda_device(dev)))
    h->choose_devices(std::getenv("CUDA_VISIBLE_DEVICES"), g_local_rank);
  if (!why.empty() || !h->active()) {
    log_info("no GPU health telemetry: %s", why.empty() ? "NVML sees no GPU for this rank" : why.c_str());
    g_kept_unused = h;  // never freed on purpose (NVML stays loaded), but reachable: no leak report
    return nullptr;
  }
  g_health.store(h, std::memory_order_release);
  log_info("GPU health telemetry on (NVML, 1 sample per second)");
  return h;
}

// A guess made before CUDA was initialized is replaced by the device CUDA gives this rank: looked
// for at every tick while the driver is loaded (its cuInit is under way; windows meanwhile get no
// samples, see g_cuda_pending), once a second while it is not. With a look a second and the guess's
// samples written, a test saw 10 windows of 12 report the wrong GPU.
void match_cuda_device(GpuHealth* h, int64_t now) {
  if (h->exact() || now < g_next_cuda_look) return;
  CudaDevice dev;
  bool driver_loaded = false;
  if (!cuda_device_of_rank(g_local_rank, &dev, "libcuda.so.1", &driver_loaded)) {
    g_cuda_pending = driver_loaded;
    g_next_cuda_look = driver_loaded ? now : now + kCudaLookEveryNs;
    return;
  }
  g_cuda_pending = false;
  if (!h->choose_cuda_device(dev))
    log_info("GPU health: NVML has no GPU at PCI bus %s (CUDA's device for this rank)", dev.pci_bus_id.c_str());
  g_next_cuda_look = INT64_MAX;  // CUDA answered: its device is final
}

void on_tick() {
  GpuHealth* h = g_health.load(std::memory_order_acquire);
  if (!h) {
    if (g_tried || !g_wanted.load(std::memory_order_acquire)) return;
    if (!(h = load_once())) return;
  }
  int64_t now = mono_ns();
  match_cuda_device(h, now);
  if (now < g_next_sample) return;
  h->sample();
  const int64_t took = mono_ns() - now;
  if (took > kSlowSampleNs && g_sample_every < kMaxSampleEveryNs) {
    g_sample_every = std::min(g_sample_every * 4, kMaxSampleEveryNs);
    log_warn("GPU health: one NVML sample took %lld ms; sampling every %lld s from now on", (long long)(took / 1000000),
             (long long)(g_sample_every / 1000000000));
  }
  g_next_sample = now + took + g_sample_every;
}

void on_window(WindowSnapshot& w, bool) {
  GpuHealth* h = g_health.load(std::memory_order_acquire);
  if (!h) return;
  GpuHealthWindow samples = h->take_window();  // taken either way: a guess's never reach a later window
  if (!g_cuda_pending) w.gpu_health = std::move(samples);
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
