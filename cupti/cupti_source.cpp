// Plugs GPU capture into the process lifecycle (preload/source.h) and decides when to start it.
//
// CUPTI is loaded only once the process really uses CUDA, found two ways:
//  1. CUDA's own injection hook: at load, laggard sets CUDA_INJECTION64_PATH to itself (unless
//     another tool owns it), and the driver calls InitializeInjection() from inside the first
//     cuInit. This activates capture even in a process that never calls NVTX, and attaches
//     before any context exists, so no kernel is missed. A process that never calls cuInit
//     never gets here: no thread, no dlopen, no CUDA initialization.
//  2. A fallback poll from the flush thread (only in processes already capturing NVTX): once
//     libcuda.so.1 is loaded and initialized, attach. CUPTI callbacks and activity kinds
//     enabled after contexts exist cover later launches only; kernels before that are missed.
// Missing or unusable CUPTI: one warning, NVTX capture goes on.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "capture.h"
#include "clock.h"
#include "config.h"
#include "cupti_loader.h"
#include "gpu_capture.h"
#include "log.h"
#include "source.h"

namespace laggard::cupti {
namespace {

constexpr int64_t kPollNs = 250'000'000;   // look for an initialized driver 4x a second
constexpr int64_t kFlushNs = 200'000'000;  // hand completed CUPTI buffers over 5x a second

struct SourceState {
  std::mutex mu;  // attach vs. window close
  Config cfg;
  std::unique_ptr<CuptiApi> api;          // never freed: CUPTI may call back until exit
  std::unique_ptr<GpuCapture> capture;
  std::atomic<bool> attached{false};
  std::atomic<bool> gave_up{false};
  std::atomic<bool> forked{false};
  bool injection_ours = false;
  std::string status = "idle: this process has not used CUDA";
  uint64_t open_window = 0;
  int64_t next_poll_ns = 0, next_flush_ns = 0;
};

SourceState& state() {
  static auto* s = new SourceState();  // never destroyed: used during exit
  return *s;
}

std::string own_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_path), &info) || !info.dli_fname) return "";
  char buf[PATH_MAX];
  return realpath(info.dli_fname, buf) ? std::string(buf) : std::string(info.dli_fname);
}

std::string section_name(uint32_t id) {
  Capture* cap = g_capture.load(std::memory_order_acquire);
  return cap ? cap->names->name(id) : std::string("(unknown)");
}

// Caller holds st.mu.
void attach_locked(SourceState& st, const char* trigger) {
  if (st.attached.load() || st.gave_up.load() || st.forked.load() || !st.cfg.cupti) return;
  const char* cuda_home = std::getenv("CUDA_HOME");
  LoadResult lr = load_cupti({st.cfg.cupti_path, cuda_home ? cuda_home : ""});
  std::string err = lr.error;
  if (lr.api) {
    st.api = std::move(lr.api);
    GpuCaptureOptions opt;
    opt.profiling_interval = st.cfg.profiling_interval;
    st.capture = std::make_unique<GpuCapture>(*st.api, opt, &current_section);
    err = st.capture->attach(st.open_window);
  }
  if (!err.empty()) {
    st.gave_up.store(true);
    st.status = "off: " + err;
    LAGGARD_WARN_ONCE("GPU kernels are not captured: %s; NVTX capture goes on", err.c_str());
    return;
  }
  st.status = "on";
  st.attached.store(true);
  log_info("capturing GPU kernels (found CUDA via %s) with %s", trigger, st.api->describe().c_str());
}

void on_window(WindowSnapshot& w, bool final) {
  SourceState& st = state();
  if (st.forked.load()) return;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.attached.load()) st.capture->close_window(w, final, section_name);
  else if (st.cfg.cupti) w.gpu_status.cupti = st.status;
  st.open_window = w.index + 1;
}

void on_tick() {
  SourceState& st = state();
  if (st.forked.load() || st.gave_up.load() || !st.cfg.cupti) return;
  int64_t now = mono_ns();
  if (st.attached.load()) {
    if (now < st.next_flush_ns) return;
    st.next_flush_ns = now + kFlushNs;
    st.capture->tick();
    return;
  }
  if (now < st.next_poll_ns) return;
  st.next_poll_ns = now + kPollNs;
  if (!cuda_initialized()) return;
  std::lock_guard<std::mutex> lock(st.mu);
  attach_locked(st, "the flush thread's poll");
}

void on_fork_child() {
  SourceState& st = state();
  st.forked.store(true);
  if (st.capture) st.capture->make_inert();
}

// Load time: decide whether to ask the driver for InitializeInjection. Reads the environment
// only; logging waits for the lifecycle (which also reports bad values).
__attribute__((constructor)) void on_load() {
  try {
    SourceState& st = state();
    ConfigResult cr = parse_config(process_env());
    st.cfg = cr.config;
    if (!st.cfg.enabled) st.cfg.cupti = false;
    if (!st.cfg.cupti) return;
    const char* current = std::getenv("CUDA_INJECTION64_PATH");
    std::string self = own_path();
    if (!current || !*current) {
      st.injection_ours = !self.empty() && setenv("CUDA_INJECTION64_PATH", self.c_str(), 1) == 0;
    } else {
      char a[PATH_MAX], b[PATH_MAX];
      st.injection_ours = realpath(current, a) && realpath(self.c_str(), b) && std::strcmp(a, b) == 0;
    }
  } catch (...) {
  }
}

const bool registered = [] {
  register_source(SourceHooks{"cupti", nullptr, &on_window, &on_fork_child, &on_tick});
  return true;
}();

}  // namespace
}  // namespace laggard::cupti

// The CUDA driver calls this from inside the first cuInit when CUDA_INJECTION64_PATH names this
// library. 1 means success; laggard never fails cuInit, whatever happens here.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    using namespace laggard::cupti;
    SourceState& st = state();
    if (!st.cfg.cupti || st.forked.load() || !laggard::activate_capture()) return 1;
    std::lock_guard<std::mutex> lock(st.mu);
    attach_locked(st, "cuInit");
  } catch (...) {
  }
  return 1;
}
