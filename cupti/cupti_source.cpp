// Plugs GPU capture into the process lifecycle (preload/flush/source.h) and decides when to start it.
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
// Missing or unusable CUPTI: one warning, NVTX capture goes on. Another CUPTI client holding the
// subscriber at attach (Nsight Systems): one warning, CUPTI stays loaded and attach is tried again
// from the flush thread until it succeeds. Sharing CUPTI with other clients: docs/cupti.md.
//
// Exit order: libcupti's static destructors are registered (__cxa_atexit) when it loads, and
// exit runs handlers in reverse order of registration. The lifecycle's handler is registered at
// activation, often before libcupti is loaded, so it would run after CUPTI was torn down and
// then flush it. After a successful attach this source registers a handler of its own, which
// runs first: it writes the final window while CUPTI is whole, and if the flush thread is still
// inside a CUPTI call past the lifecycle's deadline, it ends the process with the application's
// exit status (_exit) rather than let CUPTI's destructors run under that call.
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
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
#include "shared_cupti.h"
#include "source.h"

namespace laggard::cupti {
namespace {

constexpr int64_t kPollNs = 250'000'000;   // look for an initialized driver 4x a second
constexpr int64_t kFlushNs = 200'000'000;  // hand completed CUPTI buffers over 5x a second
constexpr int64_t kExitCuptiWaitNs = 200'000'000;  // after the lifecycle's own wait for the flush thread
constexpr int64_t kFirstRetryNs = 1'000'000'000;   // another client held CUPTI at attach: try again
constexpr int64_t kMaxRetryNs = 60'000'000'000;

struct SourceState {
  std::mutex mu;  // attach vs. window close
  Config cfg;
  std::unique_ptr<CuptiApi> api;          // never freed: CUPTI may call back until exit
  std::unique_ptr<GpuCapture> capture;
  std::atomic<bool> attached{false};
  std::atomic<bool> gave_up{false};
  std::atomic<bool> forked{false};
  bool injection_ours = false;
  std::string injection_other;            // CUDA_INJECTION64_PATH of another tool
  std::string status = "idle: this process has not used CUDA";
  std::string library_real;               // realpath of the libcupti in use
  unsigned long long seen_adds = 0;       // loader's object count at the last second-copy check
  bool warned_second_copy = false;
  uint64_t open_window = 0;
  int64_t next_poll_ns = 0, next_flush_ns = 0;
  int64_t next_retry_ns = 0, retry_delay_ns = 0;  // attach waiting for another CUPTI client to leave
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

// Exit handler registered after CUPTI is loaded (see the top of this file). `status` is what
// the application passed to exit().
void on_process_exit(int status, void*) {
  try {
    laggard::finish_capture_at_exit();
    SourceState& st = state();
    if (!st.attached.load() || st.forked.load() || !st.capture) return;
    if (st.capture->close_for_exit(kExitCuptiWaitNs)) return;
    log_warn("the flush thread is stuck inside a CUPTI call; ending the process now (exit status %d) "
             "so that CUPTI is not torn down under it", status);
    fflush(nullptr);
    _exit(status);
  } catch (...) {
  }
}

std::string real_path(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) ? std::string(buf) : p;
}

// Two copies of libcupti in one process (e.g. laggard's from /usr/local/cuda and PyTorch's
// from a pip wheel) each keep their own activity state; warn once when a second one appears.
void check_second_copy(SourceState& st) {
  if (st.warned_second_copy || st.library_real.empty()) return;
  unsigned long long adds = 0;
  std::vector<std::string> paths = loaded_cupti_paths(&adds);
  if (adds == st.seen_adds) return;
  st.seen_adds = adds;
  for (const std::string& p : paths) {
    std::string rp = real_path(p);
    if (rp == st.library_real) continue;
    st.warned_second_copy = true;
    log_warn("a second libcupti is loaded in this process (%s, besides laggard's %s); the two do not share "
             "their activity state, so GPU data may be incomplete: point LAGGARD_CUPTI_PATH at %s",
             rp.c_str(), st.library_real.c_str(), rp.c_str());
    return;
  }
}

// An attach that succeeded: CUPTI stays loaded and attached until exit.
void attached(SourceState& st, const char* trigger) {
  st.library_real = real_path(st.api->describe());
  set_laggard_cupti_library(st.library_real);
  st.status = "on";
  st.attached.store(true);
  on_exit(&on_process_exit, nullptr);  // after libcupti's destructors were registered: runs first
  log_info("capturing GPU kernels (found CUDA via %s) with %s (CUPTI %u)", trigger, st.api->describe().c_str(),
           st.capture->cupti_version());
  if (!st.injection_other.empty())
    log_warn("CUDA_INJECTION64_PATH belongs to another tool (%s): laggard attached late, from its poll, so GPU "
             "work launched before that is not captured", st.injection_other.c_str());
}

// Another CUPTI client held the subscriber at attach (Nsight Systems, a profiler): CUPTI stays
// loaded and attach is tried again (one cuptiSubscribe call) after 1 s, then twice as long each
// time, up to every 60 s.
void wait_and_retry(SourceState& st, const std::string& why) {
  const bool first = st.retry_delay_ns == 0;
  st.retry_delay_ns = first ? kFirstRetryNs : std::min(st.retry_delay_ns * 2, kMaxRetryNs);
  st.next_retry_ns = mono_ns() + st.retry_delay_ns;
  st.status = "waiting: " + why;
  if (first)
    log_warn("GPU kernels are not captured yet: %s: %s; laggard tries again while NVTX capture goes on",
             st.api->describe().c_str(), why.c_str());
}

void give_up(SourceState& st, const std::string& err) {
  st.gave_up.store(true);
  st.status = "off: " + err;
  LAGGARD_WARN_ONCE("GPU kernels are not captured: %s; NVTX capture goes on", err.c_str());
}

// A retry with the CUPTI already loaded (caller holds st.mu).
void retry_locked(SourceState& st) {
  std::string why = st.capture->attach(st.open_window, AttachTrigger::later);
  if (why.empty()) return attached(st, "a retry");
  if (st.capture->retryable()) return wait_and_retry(st, why);
  give_up(st, st.api->describe() + ": " + why);
}

// Caller holds st.mu.
void attach_locked(SourceState& st, const char* trigger, AttachTrigger when) {
  if (st.attached.load() || st.gave_up.load() || st.forked.load() || !st.cfg.cupti) return;
  if (st.capture) return retry_locked(st);
  const char* cuda_home = std::getenv("CUDA_HOME");
  LoaderOptions lo{st.cfg.cupti_path, cuda_home ? cuda_home : ""};
  discover_loaded(lo);
  GpuCaptureOptions opt;
  opt.profiling_interval = st.cfg.profiling_interval;
  // Each candidate is tried by attaching: a CUPTI that cannot talk to this driver answers
  // CUPTI_ERROR_NOT_INITIALIZED, and the next candidate gets its turn.
  auto accept = [&](CuptiApi& api, std::string* why) -> Accept {
    auto cap = std::make_unique<GpuCapture>(api, opt, &current_section);
    *why = cap->attach(st.open_window, when);
    if (why->empty() || cap->retryable()) {
      st.capture = std::move(cap);
      return Accept::use;
    }
    if (cap->attach_result() == CUPTI_ERROR_NOT_INITIALIZED) {
      *why = "CUPTI_ERROR_NOT_INITIALIZED";
      if (lo.driver_version)
        *why += " (needs a newer driver than CUDA " + std::to_string(lo.driver_version / 1000) + "." +
                std::to_string(lo.driver_version % 1000 / 10) + "?)";
      return Accept::next;
    }
    return Accept::use;  // with the error: another candidate would fail the same way
  };
  LoadResult lr = load_cupti(lo, accept);
  if (!lr.api) return give_up(st, lr.error);
  st.api = std::move(lr.api);
  if (!st.capture) return give_up(st, st.api->describe() + ": " + (lr.error.empty() ? "attach failed" : lr.error));
  if (!lr.error.empty()) return wait_and_retry(st, lr.error);
  attached(st, trigger);
}

void on_window(WindowSnapshot& w, bool final) {
  SourceState& st = state();
  if (st.forked.load()) return;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.attached.load()) {
    st.capture->close_window(w, final, section_name);
    check_second_copy(st);
  } else if (st.cfg.cupti) {
    w.gpu_status.cupti = st.status;
    if (st.api) w.gpu_status.library = st.api->describe();
  }
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
  if (st.capture) {  // loaded, waiting for another client to leave CUPTI
    if (now < st.next_retry_ns) return;
    std::lock_guard<std::mutex> lock(st.mu);
    return retry_locked(st);
  }
  if (now < st.next_poll_ns) return;
  st.next_poll_ns = now + kPollNs;
  if (!cuda_initialized()) return;
  std::lock_guard<std::mutex> lock(st.mu);
  attach_locked(st, "the flush thread's poll", AttachTrigger::later);
}

void on_pause(bool) {
  SourceState& st = state();
  if (st.forked.load()) return;
  std::lock_guard<std::mutex> lock(st.mu);
  if (st.attached.load()) st.capture->apply_pause();
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
      if (!st.injection_ours) st.injection_other = current;
    }
  } catch (...) {
  }
}

const bool registered = [] {
  register_source(SourceHooks{"cupti", nullptr, &on_window, &on_fork_child, &on_tick, &on_pause});
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
    attach_locked(st, "cuInit", AttachTrigger::cuda_init);
  } catch (...) {
  }
  return 1;
}
