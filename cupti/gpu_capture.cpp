#include "gpu_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "activity_parser.h"
#include "clock.h"
#include "log.h"
#include "pause_state.h"

namespace laggard::cupti {
namespace {

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

// What a launch callback puts on the GPU, as bits: a record of that class reaches laggard only
// while its activity kind is on (laggard's or another client's).
constexpr uint8_t kClassKernel = 1, kClassMemcpy = 2, kClassMemset = 4;

uint8_t class_of_kind(CUpti_ActivityKind k) {
  switch (k) {
    case CUPTI_ACTIVITY_KIND_KERNEL:
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: return kClassKernel;
    case CUPTI_ACTIVITY_KIND_MEMCPY: return kClassMemcpy;
    case CUPTI_ACTIVITY_KIND_MEMSET: return kClassMemset;
    default: return 0;
  }
}

// API calls that put work on the GPU, by name prefix. Host-function launches put none.
struct Prefix {
  const char* text;
  uint8_t cls;
};
constexpr Prefix kRuntimePrefixes[] = {{"cudaLaunch", kClassKernel}, {"cudaGraphLaunch", kClassKernel},
                                       {"cudaMemcpy", kClassMemcpy}, {"cudaMemset", kClassMemset}};
constexpr Prefix kDriverPrefixes[] = {{"cuLaunch", kClassKernel}, {"cuGraphLaunch", kClassKernel},
                                      {"cuMemcpy", kClassMemcpy}, {"cuMemset", kClassMemset}};

// Used when this CUPTI cannot name callbacks (no cuptiGetCallbackName): kernel and graph
// launches by id (ids are stable across CUDA versions), plus the common async copies/sets.
struct Known {
  CUpti_CallbackId id;
  uint8_t cls;
};
constexpr Known kRuntimeFallback[] = {
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060, kClassKernel},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020, kClassMemcpy},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020, kClassMemcpy},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000, kClassMemcpy},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020, kClassMemset},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020, kClassMemset},
    {CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000, kClassMemset},
};
constexpr Known kDriverFallback[] = {
    {CUPTI_DRIVER_TRACE_CBID_cuLaunch, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, kClassKernel},
    {CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, kClassKernel},
};

uint8_t class_of_name(const char* name, const Prefix* prefixes, size_t n) {
  if (!name || std::strstr(name, "HostFunc")) return 0;
  for (size_t i = 0; i < n; ++i)
    if (std::strncmp(name, prefixes[i].text, std::strlen(prefixes[i].text)) == 0) return prefixes[i].cls;
  return 0;
}

uint8_t class_at(const std::vector<uint8_t>& classes, uint32_t cbid) { return cbid < classes.size() ? classes[cbid] : 0; }

uint32_t thread_tid() {
  thread_local uint32_t tid = 0;
  if (__builtin_expect(tid == 0, 0)) tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
}

// Another client's thread (inside its CUPTI call) waits this long at most for laggard's state.
constexpr int64_t kLockPatienceNs = 2'000'000'000;

// try_lock in 1 ms steps rather than std::timed_mutex::try_lock_for, whose pthread_mutex_clocklock
// GCC 12's ThreadSanitizer does not see.
bool lock_patiently(std::unique_lock<std::mutex>& l) {
  const int64_t deadline = mono_ns() + kLockPatienceNs;
  while (!l.try_lock()) {
    if (mono_ns() >= deadline) return false;
    timespec step{0, 1'000'000};
    nanosleep(&step, nullptr);
  }
  return true;
}

}  // namespace

GpuCapture::GpuCapture(CuptiApi& api, GpuCaptureOptions options, SectionFn section)
    : api_(api),
      opt_(options),
      section_(section),
      table_(options.table_slots),
      pool_(options.buffer_bytes, options.max_buffers),
      agg_(options.records_per_window, GpuAggregator::kMedianSample, options.late_windows) {}

GpuCapture::~GpuCapture() {
  clear_tenant(this);
  if (subscriber_ && !finalized_.load()) api_.unsubscribe(subscriber_);
}

void GpuCapture::set_subscriber_locked(CUpti_SubscriberHandle h) {
  subscriber_ = h;
  has_subscriber_.store(h != nullptr, std::memory_order_relaxed);
}

void GpuCapture::choose_callbacks() {
  runtime_cbids_.clear();
  driver_cbids_.clear();
  runtime_class_.assign(CUPTI_RUNTIME_TRACE_CBID_SIZE, 0);
  driver_class_.assign(CUPTI_DRIVER_TRACE_CBID_SIZE, 0);
  const char* probe = nullptr;
  if (api_.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &probe) !=
      CUPTI_SUCCESS) {
    for (const Known& k : kRuntimeFallback) runtime_cbids_.push_back(k.id), runtime_class_[k.id] = k.cls;
    for (const Known& k : kDriverFallback) driver_cbids_.push_back(k.id), driver_class_[k.id] = k.cls;
    return;
  }
  // By name, so launch entry points newer than laggard's headers are still covered as long as
  // their ids are below the header's count; the count itself only grows between versions.
  for (uint32_t id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (api_.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, id, &name) != CUPTI_SUCCESS) continue;
    if (uint8_t c = class_of_name(name, kRuntimePrefixes, std::size(kRuntimePrefixes))) {
      runtime_cbids_.push_back(id);
      runtime_class_[id] = c;
    }
  }
  for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (api_.callback_name(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS) continue;
    if (uint8_t c = class_of_name(name, kDriverPrefixes, std::size(kDriverPrefixes))) {
      driver_cbids_.push_back(id);
      driver_class_[id] = c;
    }
  }
}

ClockSync GpuCapture::measure_clock() {
  ClockSync best{0, INT64_MAX, 0, 0};
  for (int i = 0; i < 7; ++i) {
    int64_t a = mono_ns();
    uint64_t gpu = 0;
    CUptiResult r = api_.timestamp(&gpu);
    int64_t b = mono_ns();
    if (r != CUPTI_SUCCESS || gpu == 0) continue;
    if (b - a < best.uncertainty_ns) {
      best.uncertainty_ns = b - a;
      best.epoch_ns = (a + (b - a) / 2) + epoch_offset_ns_;
      best.gpu = gpu;
      best.gpu_to_epoch_ns = best.epoch_ns - static_cast<int64_t>(gpu);
    }
  }
  if (best.uncertainty_ns == INT64_MAX) return clock_;  // keep the last good one
  return best;
}

// CUPTI's timestamps are nanoseconds on CLOCK_REALTIME unless a client called
// cuptiActivityRegisterTimestampCallback (cupti_activity.h); Kineto installs one returning TSC
// cycles when torch.profiler starts (libkineto/src/CuptiTimestamp.cpp) and never removes it.
// Measured at each window close: ticks of CUPTI's clock per host ns since the previous close.
ClockCheck GpuCapture::check_clock(const ClockSync& now) {
  ClockCheck c;
  c.ticks_per_ns = clock_rate_;
  const ClockSync prev = last_point_;
  if (now.gpu == 0) return c;
  last_point_ = now;
  const int64_t interval = now.epoch_ns - prev.epoch_ns;
  if (prev.gpu == 0 || interval < 20'000'000) return c;  // too short to tell
  // Brackets too wide for this interval (the measuring thread was preempted): no verdict.
  if (double(prev.uncertainty_ns + now.uncertainty_ns) > ClockCheck::kTolerance / 4 * double(interval)) return c;
  double rate = (double(now.gpu) - double(prev.gpu)) / double(interval);
  auto near = [](double a, double b) { return b > 0 && std::abs(a / b - 1.0) <= ClockCheck::kTolerance * 10; };
  const double before = last_rate_;
  last_rate_ = rate;
  std::string who = timestamp_owner_.empty() ? "" : " (timestamp callback installed by " + timestamp_owner_ + ")";
  if (std::abs(rate - 1.0) <= ClockCheck::kTolerance) {
    if (clock_rate_ != 1.0) c.note = "CUPTI timestamps are nanoseconds again";
    clock_rate_ = 1.0;
  } else if (rate > 0 && (near(rate, before) || changed_last_window_)) {
    // Confirmed by the window before, or the change fell in the window before: this interval
    // saw one clock only.
    if (clock_rate_ != rate && !near(rate, clock_rate_))
      c.note = "CUPTI timestamps run at " + std::to_string(rate) + " ticks per ns" + who + "; converting";
    clock_rate_ = rate;
  } else {
    // The clock changed during this window (or jumped): its records may mix two clocks.
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.4g", rate);
    c.problem = std::string("CUPTI's clock changed during this window: ") + buf + " ticks per host ns" + who;
    if (rate > 0) clock_rate_ = rate;
  }
  changed_last_window_ = !c.problem.empty();
  c.ticks_per_ns = clock_rate_;
  return c;
}

void GpuCapture::note_clock_owner() {
  Tenancy t = tenancy();
  if (t.timestamp_callbacks == seen_timestamp_callbacks_) return;
  seen_timestamp_callbacks_ = t.timestamp_callbacks;
  timestamp_owner_ = t.timestamp_owner;
  log_info("%s installed a CUPTI timestamp callback; laggard checks CUPTI's clock at every window",
           timestamp_owner_.c_str());
}

// False after exit closed this capture, and in a forked child (CUPTI is the parent's): no CUPTI
// call then, also not for another client's calls handed over by the interposers.
bool GpuCapture::enter_cupti() {
  in_cupti_.fetch_add(1, std::memory_order_acq_rel);
  if (closed_.load(std::memory_order_acquire) || inert_.load(std::memory_order_relaxed)) {
    leave_cupti();
    return false;
  }
  return true;
}

bool GpuCapture::close_for_exit(int64_t wait_ns) {
  closed_.store(true, std::memory_order_release);
  int64_t deadline = mono_ns() + wait_ns;
  while (in_cupti_.load(std::memory_order_acquire) != 0) {
    if (mono_ns() >= deadline) return false;
    timespec step{0, 1'000'000};
    nanosleep(&step, nullptr);
  }
  return true;
}

// Which record classes reach laggard now: those whose kind is on, by laggard or another client
// (CUPTI's buffers go to laggard, or laggard reads them on their way back to the other client).
void GpuCapture::update_flowing_locked() {
  Tenancy t = tenancy();
  uint8_t f = 0;
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_KERNEL,
                               CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET})
    if (has_kind(own_on_, k) || has_kind(t.foreign_kinds, k)) f |= class_of_kind(k);
  flowing_.store(f, std::memory_order_relaxed);
}

void GpuCapture::enable_callbacks_locked(bool on) {
  if (!subscriber_) return;
  for (CUpti_CallbackId id : runtime_cbids_) api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id : driver_cbids_) api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id);
}

// laggard's kinds on, unless another client holds the activity API: then laggard reads the
// records of the kinds it has on, and counts launches of the others as missed.
std::string GpuCapture::enable_kinds_locked() {
  Tenancy t = tenancy();
  if (t.foreign_activity || t.release_pending) return "";
  for (CUpti_ActivityKind k : kKinds) {
    if (has_kind(own_on_, k)) continue;
    CUptiResult r = api_.enable_kind(k);
    if (r == CUPTI_SUCCESS) own_on_.set(size_t(k));
    // Kernels are what capture is for; copies and sets are extras a CUPTI may refuse.
    else if (k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
      return "cuptiActivityEnable(CONCURRENT_KERNEL): " + api_.error_string(r);
    else
      log_debug("cupti: enabling activity kind %d: %s", int(k), api_.error_string(r).c_str());
  }
  return "";
}

// Only the kinds laggard switched on and no other client has on.
void GpuCapture::disable_kinds_locked() {
  Tenancy t = tenancy();
  for (CUpti_ActivityKind k : kKinds) {
    if (!has_kind(own_on_, k)) continue;
    if (!has_kind(t.foreign_kinds, k)) api_.disable_kind(k);
    own_on_.reset(size_t(k));
  }
}

std::string GpuCapture::set_capturing_locked(bool on) {
  if (on) {
    if (std::string err = enable_kinds_locked(); !err.empty()) return err;
  } else {
    disable_kinds_locked();
  }
  if (on != capturing_) enable_callbacks_locked(on);
  capturing_ = on;
  capturing_now_.store(on, std::memory_order_relaxed);
  update_flowing_locked();
  return "";
}

// cuptiSubscribe_v2 (CUDA 13.0, cupti_callbacks.h) names laggard to other tools and, when
// another subscriber exists, names that one; older CUPTIs get cuptiSubscribe.
CUptiResult GpuCapture::subscribe_locked(std::string* other_name) {
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "laggard";
  params.oldSubscriberName = other;
  params.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
  CUpti_SubscriberHandle h = nullptr;
  CUptiResult r = api_.subscribe_v2(&h, &GpuCapture::on_callback, this, &params);
  if (r == CUPTI_ERROR_NOT_SUPPORTED) r = api_.subscribe(&h, &GpuCapture::on_callback, this);
  if (r == CUPTI_SUCCESS) set_subscriber_locked(h);
  if (other_name) *other_name = other;
  return r;
}

std::string GpuCapture::attach(uint64_t open_window, AttachTrigger trigger) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (attached_) return "";
  retryable_ = false;
  std::string other;
  CUptiResult r;
  {
    std::lock_guard<std::mutex> l(cupti_mu_);
    r = subscribe_locked(&other);
  }
  attach_result_ = r;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && !tenancy().foreign_subscriber) {
    // A client laggard did not see subscribe (Nsight Systems, injected; a static CUPTI): it may
    // use the activity API too, so laggard touches nothing, and tries again later.
    retryable_ = true;
    return std::string("another CUPTI client (") + (other[0] ? other : "Nsight Systems, a profiler, ...") +
           ") is attached";
  }
  // A client seen subscribing through laggard's interposers holds it: capture goes on, kernels
  // unattributed, until it unsubscribes.
  if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return "cuptiSubscribe: " + api_.error_string(r);
  if (api_.version(&version_) != CUPTI_SUCCESS) version_ = 0;
  if (runtime_class_.empty()) choose_callbacks();
  auto undo = [&](std::string why) {
    std::lock_guard<std::mutex> l(cupti_mu_);
    set_capturing_locked(false);
    if (subscriber_) api_.unsubscribe(subscriber_);
    set_subscriber_locked(nullptr);
    routes_buffers_.store(false);
    clear_tenant(this);
    return why;
  };
  if (GpuCapture* cur = tenant(); cur && cur != this) return undo("GPU capture is already attached in this process");
  set_tenant(this);
  // Kernels launched from the device (device graphs) are recorded only when asked for before
  // CUDA initializes (cupti_activity.h); from inside cuInit only, then.
  if (trigger == AttachTrigger::cuda_init) api_.enable_device_graph(1);
  if (CUptiResult rr = api_.register_buffers(&buffer_requested, &buffer_completed); rr != CUPTI_SUCCESS) {
    attach_result_ = rr;
    return undo("cuptiActivityRegisterCallbacks: " + api_.error_string(rr));
  }
  routes_buffers_.store(true);
  epoch_offset_ns_ = measure_epoch_offset_ns();
  clock_ = measure_clock();
  last_point_ = clock_;
  open_window_ = open_window;
  std::string err;
  {
    std::lock_guard<std::mutex> l(cupti_mu_);
    err = set_capturing_locked(wants_capture(open_window));
    Tenancy t = tenancy();
    foreign_this_window_ = t.foreign_activity || t.release_pending;
    unattributed_this_window_ = subscriber_ == nullptr;
  }
  if (!err.empty()) return undo(err);
  window_sampled_ = capturing_;
  attached_ = true;
  return "";
}

bool GpuCapture::give_subscriber() {
  std::unique_lock<std::mutex> l(cupti_mu_, std::defer_lock);
  if (!lock_patiently(l)) return false;
  if (!subscriber_ || finalized_.load() || !enter_cupti()) return false;
  api_.unsubscribe(subscriber_);  // its callbacks go with it
  leave_cupti();
  set_subscriber_locked(nullptr);
  unattributed_this_window_ = true;
  return true;
}

void GpuCapture::take_subscriber_back() {
  std::unique_lock<std::mutex> l(cupti_mu_, std::defer_lock);
  if (!lock_patiently(l)) return;
  if (subscriber_ || finalized_.load() || !enter_cupti()) return;
  if (subscribe_locked(nullptr) == CUPTI_SUCCESS && capturing_) enable_callbacks_locked(true);
  leave_cupti();
}

void GpuCapture::give_activity(const std::function<void()>& take) {
  {
    std::unique_lock<std::mutex> l(cupti_mu_, std::defer_lock);
    const bool locked = lock_patiently(l);
    if (locked && !finalized_.load() && enter_cupti()) {
      Tenancy t = tenancy();
      for (CUpti_ActivityKind k : kKinds)
        if (has_kind(own_on_, k) && !has_kind(t.foreign_kinds, k)) api_.disable_kind(k);
      leave_cupti();
    }
    if (locked) own_on_.reset();
    take();  // routed to the other client even if laggard could not switch its kinds off
    if (locked) {
      foreign_this_window_ = true;
      update_flowing_locked();
    }
  }
  // CUPTI's current buffer is laggard's if laggard has any out: returned now, so that the other
  // client's records go to a buffer of its own, as they would without laggard.
  if (pool_.outstanding() > 0) flush_forced();
}

void GpuCapture::take_activity_back() {
  std::unique_lock<std::mutex> l(cupti_mu_, std::defer_lock);
  if (!lock_patiently(l) || finalized_.load() || !enter_cupti()) return;
  if (capturing_)
    if (std::string err = enable_kinds_locked(); !err.empty())
      LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
  update_flowing_locked();
  leave_cupti();
}

void GpuCapture::foreign_kind_changed(CUpti_ActivityKind kind, bool on) {
  std::unique_lock<std::mutex> l(cupti_mu_, std::defer_lock);
  if (!lock_patiently(l)) return;
  if (!on && size_t(kind) < kKindSlots) own_on_.reset(size_t(kind));  // off for everyone now
  update_flowing_locked();
}

void GpuCapture::cupti_finalized(const std::string& by) {
  finalized_.store(true);
  routes_buffers_.store(false);
  std::unique_lock<std::mutex> l(cupti_mu_, std::try_to_lock);  // may be inside a callback: no wait
  if (l.owns_lock()) finalized_by_ = by;
}

void GpuCapture::flush_forced() {
  if (!enter_cupti()) return;
  api_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  leave_cupti();
}

// Another client's cuptiFinalize took laggard's subscriber, buffer callbacks and kinds with it:
// laggard attaches again (the flush thread, next tick).
void GpuCapture::attach_again_after_finalize() {
  buffers_lost_ += pool_.forget_outstanding();
  std::lock_guard<std::mutex> l(cupti_mu_);
  set_subscriber_locked(nullptr);
  own_on_.reset();
  finalized_this_window_ = true;
  finalized_.store(false);
  if (!tenancy().foreign_subscriber && subscribe_locked(nullptr) != CUPTI_SUCCESS) unattributed_this_window_ = true;
  if (api_.register_buffers(&buffer_requested, &buffer_completed) != CUPTI_SUCCESS) {
    LAGGARD_WARN_ONCE("could not register CUPTI buffers again after %s finalized CUPTI",
                      finalized_by_.empty() ? "another client" : finalized_by_.c_str());
    return;
  }
  routes_buffers_.store(true);
  const bool on = capturing_;
  capturing_ = false;
  if (std::string err = set_capturing_locked(on); !err.empty())
    LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
  log_info("%s finalized CUPTI; laggard attached again", finalized_by_.empty() ? "another client" : finalized_by_.c_str());
}

void GpuCapture::resubscribe_if_free() {
  std::lock_guard<std::mutex> l(cupti_mu_);
  if (subscriber_ || tenancy().foreign_subscriber) return;
  if (subscribe_locked(nullptr) == CUPTI_SUCCESS && capturing_) enable_callbacks_locked(true);
}

bool GpuCapture::wants_capture(uint64_t window) const {
  return !capture_paused() && window % static_cast<uint64_t>(opt_.profiling_interval) == 0;
}

void GpuCapture::apply_pause() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  std::string err;
  {
    std::lock_guard<std::mutex> l(cupti_mu_);
    if (!finalized_.load()) err = set_capturing_locked(wants_capture(open_window_));
  }
  leave_cupti();
  if (!err.empty()) LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
}

void GpuCapture::tick() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  if (finalized_.load()) attach_again_after_finalize();
  else resubscribe_if_free();
  Tenancy t = tenancy();
  if (t.release_pending) {
    // The other client switched its kinds off but has not fetched its buffers: after a while
    // laggard hands them back to it with a forced flush and takes the activity API back.
    if (++release_ticks_ >= opt_.release_wait_ticks) finish_release(true);
  } else {
    release_ticks_ = 0;
  }
  // Flushing while another client holds the activity API would hand it its buffers early and
  // part-filled: more buffers than it would use alone, so its buffer limit comes sooner.
  if (!t.foreign_activity && !t.release_pending) {
    api_.flush_all(0);
    take_activity_back();  // a kind another client switched off meanwhile is switched on again
  }
  note_clock_owner();
  leave_cupti();
}

std::string GpuCapture::shared_note(const Tenancy& t, uint64_t missed) {
  auto who = [](const std::string& s) { return s.empty() ? std::string("another CUPTI client") : s; };
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : "; ") + part; };
  bool foreign, unattributed, finalized;
  {
    std::lock_guard<std::mutex> l(cupti_mu_);
    foreign = foreign_this_window_;
    unattributed = unattributed_this_window_;
    finalized = finalized_this_window_;
    foreign_this_window_ = t.foreign_activity || t.release_pending;
    unattributed_this_window_ = subscriber_ == nullptr;
    finalized_this_window_ = false;
  }
  const std::string n = std::to_string(missed) + " launch" + (missed == 1 ? "" : "es");
  if (foreign && missed) add(who(t.activity) + " held CUPTI's activity API without laggard's record kinds: " + n +
                             " not recorded");
  else if (foreign) add(who(t.activity) + " held CUPTI's activity API; laggard read the records from its buffers");
  else if (missed) add(n + " not recorded: another CUPTI client switched their activity kinds off");
  if (unattributed) add(who(t.subscriber) + " held CUPTI's only subscriber: kernels not attributed to NVTX sections");
  if (finalized) {
    add(who(finalized_by_) + " finalized CUPTI; laggard attached again");
    if (buffers_lost_) add(std::to_string(buffers_lost_) + " of laggard's buffers lost with it");
    buffers_lost_ = 0;
  }
  return out;
}

// A sampled window with launches but no records: CUPTI's records went to a client laggard
// did not see (one it saw is `explained`, and said in the window's `shared` note).
std::string GpuCapture::starvation(uint64_t launches, uint64_t records, bool explained) {
  bool empty = window_sampled_ && launches > 0 && records == 0 && !explained;
  empty_windows_ = empty ? empty_windows_ + 1 : 0;
  // One empty window can be kernels still running at the close; two in a row are not.
  if (empty_windows_ >= 2)
    return "CUPTI delivered no records for " + std::to_string(launches) +
           " launches (another CUPTI client holds the activity API or switched kernel records off)";
  return "";
}

void GpuCapture::close_window(WindowSnapshot& w, bool final, const GpuAggregator::SectionName& section_name) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  const Tenancy t = tenancy();
  const bool foreign_now = t.foreign_activity || t.release_pending;
  // Forced at exit: also buffers with records CUPTI has not completed (kernels still running
  // are lost either way; laggard never synchronizes the application's GPU work). Not while
  // another client holds the activity API (see tick).
  if (final || !foreign_now) api_.flush_all(final ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  // Records CUPTI had no buffer for, counted for the global queue; read here, outside the data
  // mutex, as well as per buffer (Kineto notes the query re-enters CUPTI's lock).
  size_t dropped_now = 0;
  if (api_.dropped_records(nullptr, 0, &dropped_now) == CUPTI_SUCCESS && dropped_now)
    cupti_dropped_.fetch_add(dropped_now, std::memory_order_relaxed);
  note_clock_owner();
  ClockSync measured = measure_clock();
  leave_cupti();
  const bool fresh = measured.gpu != 0 && measured.gpu != clock_.gpu;  // measure_clock keeps the last on failure
  clock_ = measured;
  ClockCheck check = check_clock(measured);
  if (!check.note.empty()) log_info("%s", check.note.c_str());

  DropCounters d;
  GpuAggregator::Taken taken;
  {
    std::lock_guard<std::mutex> data(data_mu_);  // CUPTI's worker may wait on it: only moves here
    d.unmatched_correlation = agg_.unmatched();
    d.gpu_records_not_stored = agg_.not_stored();
    d.gpu_no_timestamp = no_timestamp_;
    no_timestamp_ = 0;
    taken = agg_.take();
    // Records that ended by this close but arrive later are this window's (issue 9, item 11);
    // placed by CUPTI time, so only while CUPTI's clock holds still.
    if (fresh && check.problem.empty() && check.ticks_per_ns == boundary_rate_) agg_.close_boundary(w.index, measured.gpu);
    else agg_.forget_boundaries();
  }
  boundary_rate_ = check.ticks_per_ns;
  uint64_t records = taken.records;
  GpuClockMap map{static_cast<int64_t>(clock_.gpu), clock_.epoch_ns, check.ticks_per_ns};
  if (clock_.gpu == 0) map = GpuClockMap::offset(clock_.gpu_to_epoch_ns);
  d.gpu_no_timestamp += drop_records_of_another_clock(taken.stored, map);
  GpuWindow g = GpuAggregator::finish(std::move(taken), map, epoch_offset_ns_, section_name);
  uint64_t dropped = cupti_dropped_.load(std::memory_order_relaxed);
  d.cupti_records_dropped = dropped - seen_cupti_dropped_;
  seen_cupti_dropped_ = dropped;
  uint64_t declined = pool_.declined();
  d.gpu_buffer_full = declined - seen_declined_;
  seen_declined_ = declined;
  if (uint64_t overflowed = pool_.overflowed(); overflowed != seen_overflowed_) {
    LAGGARD_WARN_ONCE("laggard's %zu CUPTI buffers were all in use; CUPTI %u cannot be refused a buffer (before API "
                      "version 27), so laggard lent it more", opt_.max_buffers, version_);
    seen_overflowed_ = overflowed;
  }
  w.dropped += d;

  g.sampled = window_sampled_;
  g.launches = launches_.exchange(0, std::memory_order_relaxed);
  g.missed_launches = missed_.exchange(0, std::memory_order_relaxed);
  g.shared = shared_note(t, g.missed_launches);
  g.starved = starvation(g.launches, records, !g.shared.empty());
  g.clock_ticks_per_ns = check.ticks_per_ns;
  g.clock_problem = check.problem;
  w.gpu = std::move(g);
  w.gpu_status.cupti = w.gpu.starved.empty() ? "on" : "starved: " + w.gpu.starved;
  w.gpu_status.library = api_.describe();
  w.gpu_status.version = version_;
  w.gpu_status.has_clock = true;
  w.gpu_status.clock_offset_ns = clock_.gpu_to_epoch_ns;
  w.gpu_status.clock_uncertainty_ns = clock_.uncertainty_ns;

  open_window_ = w.index + 1;
  if (!final && enter_cupti()) {
    std::string err;
    {
      std::lock_guard<std::mutex> l(cupti_mu_);
      if (!finalized_.load()) err = set_capturing_locked(wants_capture(open_window_));
    }
    leave_cupti();
    if (!err.empty()) LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
  }
  window_sampled_ = capturing_;
}

// A window in which another client installed a timestamp callback (Kineto's TSC cycles) holds
// records of two clocks; mapped with one, those of the other land days or decades away, which no
// reader accepts (it would leave the whole window out). Their detail is dropped, counted with
// the records without usable timestamps; the window is marked (clock_problem) either way.
uint64_t GpuCapture::drop_records_of_another_clock(std::vector<GpuAggregator::Stored>& stored, const GpuClockMap& map) {
  constexpr int64_t kPlausibleNs = 24LL * 3600 * 1'000'000'000;
  const size_t before = stored.size();
  std::erase_if(stored, [&](const GpuAggregator::Stored& s) {
    const int64_t at = map.to_epoch(s.r.start);
    return at < map.epoch_ref - kPlausibleNs || at > map.epoch_ref + kPlausibleNs;
  });
  return before - stored.size();
}

void CUPTIAPI GpuCapture::on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                      const void* data) {
  auto* self = static_cast<GpuCapture*>(userdata);
  if (!self || !data || self->inert_.load(std::memory_order_relaxed)) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  int64_t now = mono_ns();
  if (cb->callbackSite == CUPTI_API_ENTER) {
    // A runtime launch and the driver call inside it share the id: one launch.
    if (!self->table_.enter(cb->correlationId, self->section_ ? self->section_() : kNoName, thread_tid(), now)) return;
    self->launches_.fetch_add(1, std::memory_order_relaxed);
    const uint8_t cls = class_at(domain == CUPTI_CB_DOMAIN_RUNTIME_API ? self->runtime_class_ : self->driver_class_, cbid);
    if (cls && !(self->flowing_.load(std::memory_order_relaxed) & cls))
      self->missed_.fetch_add(1, std::memory_order_relaxed);
  } else {
    self->table_.exit(cb->correlationId, now);
  }
}

uint8_t* GpuCapture::buffer_for_cupti(size_t* size) {
  if (inert_.load(std::memory_order_relaxed)) return nullptr;
  // Declining is safe from CUPTI API version 27 only (buffer_pool.h); 0 = unknown: not safe.
  uint8_t* b = pool_.acquire(version_ >= 27);
  if (b) *size = pool_.buffer_bytes();
  return b;
}

void GpuCapture::own_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t valid_size) {
  // A forked child returns at once: the pool, the tables and CUPTI belong to the parent.
  if (inert_.load(std::memory_order_relaxed)) return;
  try {
    consume(buffer, valid_size, false);
    size_t dropped = 0;
    if (!closed_.load() && api_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
      cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  } catch (...) {
  }
  pool_.release(buffer);
}

void GpuCapture::read_foreign_buffer(const uint8_t* buffer, size_t valid_size) {
  if (inert_.load(std::memory_order_relaxed) || !capturing_now_.load(std::memory_order_relaxed)) return;
  try {
    consume(buffer, valid_size, true);
  } catch (...) {
  }
}

// The buffer is parsed and joined to its launches before the data mutex is taken (the flush
// thread may hold it); only the additions to the window happen under it. In another client's
// buffer, when laggard has no subscriber (no launch callbacks), its API records count the
// launches: one whose kernel, copy or set record is neither in this buffer nor in the previous
// one (a record is reserved at launch, before its API record at the call's exit) never existed,
// because no one had its kind on: missed.
void GpuCapture::consume(const uint8_t* buffer, size_t valid_size, bool foreign) {
  struct Parsed {
    GpuRecord r;
    LaunchInfo launch;
    bool matched;
  };
  thread_local std::vector<Parsed> parsed;          // CUPTI's worker thread (or the flush thread), reused
  thread_local std::vector<uint32_t> launch_calls;  // correlation ids of launches in API records
  thread_local std::vector<uint32_t> work;          // ... and of kernel, copy, set records
  parsed.clear();
  launch_calls.clear();
  work.clear();
  uint64_t no_timestamp = 0;
  const bool count_api = foreign && !has_subscriber_.load(std::memory_order_relaxed);
  auto* buf = const_cast<uint8_t*>(buffer);  // cuptiActivityGetNextRecord's signature; never written
  CUpti_Activity* rec = nullptr;
  while (valid_size && api_.next_record(buf, valid_size, &rec) == CUPTI_SUCCESS) {
    if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME || rec->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      if (count_api && class_at(rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME ? runtime_class_ : driver_class_, a->cbid))
        launch_calls.push_back(a->correlationId);
      continue;
    }
    Parsed p{};
    switch (parse_record(rec, &p.r)) {
      case ParseResult::ok:
        p.matched = table_.find(p.r.correlation, &p.launch);
        parsed.push_back(p);
        if (count_api) work.push_back(p.r.correlation);
        break;
      case ParseResult::no_timestamp: ++no_timestamp; break;
      case ParseResult::other_kind: break;
    }
  }
  std::lock_guard<std::mutex> lock(data_mu_);
  if (count_api) count_missed_locked(launch_calls, work);
  no_timestamp_ += no_timestamp;
  for (const Parsed& p : parsed) agg_.add(p.r, p.matched ? &p.launch : nullptr);
}

// Caller holds data_mu_.
void GpuCapture::count_missed_locked(std::vector<uint32_t>& launches, std::vector<uint32_t>& work) {
  std::sort(work.begin(), work.end());
  std::sort(launches.begin(), launches.end());
  launches.erase(std::unique(launches.begin(), launches.end()), launches.end());  // runtime + driver record of one launch
  uint64_t missed = 0;
  for (uint32_t id : launches)
    if (!std::binary_search(work.begin(), work.end(), id) &&
        !std::binary_search(previous_work_.begin(), previous_work_.end(), id))
      ++missed;
  previous_work_.assign(work.begin(), work.end());
  if (missed) missed_.fetch_add(missed, std::memory_order_relaxed);
}

}  // namespace laggard::cupti
