#include "gpu_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <time.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "activity_parser.h"
#include "activity_watch.h"
#include "clock.h"
#include "log.h"
#include "pause_state.h"

namespace laggard::cupti {
namespace {

// The capture that owns the registered buffer callbacks (CUPTI passes them no user data).
std::atomic<GpuCapture*> g_active{nullptr};

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMSET};

// API calls that put work on the GPU. Host-function launches put none and are skipped.
constexpr const char* kRuntimePrefixes[] = {"cudaLaunch", "cudaGraphLaunch", "cudaMemcpy", "cudaMemset"};
constexpr const char* kDriverPrefixes[] = {"cuLaunch", "cuGraphLaunch", "cuMemcpy", "cuMemset"};

// Used when this CUPTI cannot name callbacks (no cuptiGetCallbackName): kernel and graph
// launches by id (ids are stable across CUDA versions), plus the common async copies/sets.
constexpr CUpti_CallbackId kRuntimeFallback[] = {
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunch_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernelMultiDevice_v9000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpy_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_ptsz_v7000,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemset_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
    CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_ptsz_v7000,
};
constexpr CUpti_CallbackId kDriverFallback[] = {
    CUPTI_DRIVER_TRACE_CBID_cuLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGrid,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchGridAsync,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
};

bool wanted(const char* name, const char* const* prefixes, size_t n) {
  if (!name || std::strstr(name, "HostFunc")) return false;
  for (size_t i = 0; i < n; ++i)
    if (std::strncmp(name, prefixes[i], std::strlen(prefixes[i])) == 0) return true;
  return false;
}

uint32_t thread_tid() {
  thread_local uint32_t tid = 0;
  if (__builtin_expect(tid == 0, 0)) tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  return tid;
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
  GpuCapture* self = this;
  g_active.compare_exchange_strong(self, nullptr);
  if (subscriber_) api_.unsubscribe(subscriber_);
}

void GpuCapture::choose_callbacks() {
  runtime_cbids_.clear();
  driver_cbids_.clear();
  const char* probe = nullptr;
  if (api_.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &probe) !=
      CUPTI_SUCCESS) {
    runtime_cbids_.assign(std::begin(kRuntimeFallback), std::end(kRuntimeFallback));
    driver_cbids_.assign(std::begin(kDriverFallback), std::end(kDriverFallback));
    return;
  }
  // By name, so launch entry points newer than laggard's headers are still covered as long as
  // their ids are below the header's count; the count itself only grows between versions.
  for (uint32_t id = 1; id < CUPTI_RUNTIME_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (api_.callback_name(CUPTI_CB_DOMAIN_RUNTIME_API, id, &name) == CUPTI_SUCCESS &&
        wanted(name, kRuntimePrefixes, std::size(kRuntimePrefixes)))
      runtime_cbids_.push_back(id);
  }
  for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (api_.callback_name(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) == CUPTI_SUCCESS &&
        wanted(name, kDriverPrefixes, std::size(kDriverPrefixes)))
      driver_cbids_.push_back(id);
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

bool GpuCapture::enter_cupti() {
  in_cupti_.fetch_add(1, std::memory_order_acq_rel);
  if (closed_.load(std::memory_order_acquire)) {
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

void GpuCapture::enable_kinds() {
  for (CUpti_ActivityKind k : kKinds) {
    CUptiResult r = api_.enable_kind(k);
    if (r != CUPTI_SUCCESS) log_debug("cupti: enabling activity kind %d: %s", int(k), api_.error_string(r).c_str());
  }
}

std::string GpuCapture::set_capturing(bool on) {
  if (on == capturing_) return "";
  for (CUpti_ActivityKind k : kKinds) {
    CUptiResult r = on ? api_.enable_kind(k) : api_.disable_kind(k);
    // Kernels are what capture is for; copies and sets are extras a CUPTI may refuse.
    if (r != CUPTI_SUCCESS && k == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && on)
      return "cuptiActivityEnable(CONCURRENT_KERNEL): " + api_.error_string(r);
    if (r != CUPTI_SUCCESS) log_debug("cupti: %s activity kind %d: %s", on ? "enabling" : "disabling", int(k),
                                      api_.error_string(r).c_str());
  }
  for (CUpti_CallbackId id : runtime_cbids_) api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_RUNTIME_API, id);
  for (CUpti_CallbackId id : driver_cbids_) api_.enable_callback(on, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API, id);
  capturing_ = on;
  return "";
}

// cuptiSubscribe_v2 (CUDA 13.0, cupti_callbacks.h) names laggard to other tools and, when
// another subscriber exists, names that one; older CUPTIs get cuptiSubscribe.
std::string GpuCapture::subscribe() {
  char other[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {0};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = "laggard";
  params.oldSubscriberName = other;
  params.oldSubscriberSize = CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN;
  CUptiResult r = api_.subscribe_v2(&subscriber_, &GpuCapture::on_callback, this, &params);
  if (r == CUPTI_ERROR_NOT_SUPPORTED) r = api_.subscribe(&subscriber_, &GpuCapture::on_callback, this);
  attach_result_ = r;
  if (r == CUPTI_SUCCESS) return "";
  subscriber_ = nullptr;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return std::string("another CUPTI client (") + (other[0] ? other : "Nsight Systems, torch.profiler, ...") +
           ") is attached";
  return "cuptiSubscribe: " + api_.error_string(r);
}

std::string GpuCapture::attach(uint64_t open_window) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (attached_) return "";
  if (std::string err = subscribe(); !err.empty()) return err;
  if (api_.version(&version_) != CUPTI_SUCCESS) version_ = 0;
  choose_callbacks();
  GpuCapture* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this)) {
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
    return "GPU capture is already attached in this process";
  }
  // Kernels launched from the device (device graphs) are recorded only when asked for before
  // CUDA initializes (cupti_activity.h); attach runs inside cuInit when it can.
  api_.enable_device_graph(1);
  // A client that already holds the activity API keeps it until it switches kernels off.
  ForeignActivity fa = foreign_activity();
  seen_takes_ = fa.takes;
  seen_timestamp_callbacks_ = fa.timestamp_callbacks;
  timestamp_owner_ = fa.timestamp_owner;
  foreign_holds_ = held_this_window_ = fa.holding;
  taker_ = fa.taker;
  CUptiResult r = fa.holding ? CUPTI_SUCCESS
                             : api_.register_buffers(&GpuCapture::on_buffer_requested, &GpuCapture::on_buffer_completed);
  std::string err;
  if (r != CUPTI_SUCCESS) {
    attach_result_ = r;
    err = "cuptiActivityRegisterCallbacks: " + api_.error_string(r);
  }
  epoch_offset_ns_ = measure_epoch_offset_ns();
  if (err.empty()) {
    clock_ = measure_clock();
    last_point_ = clock_;
    open_window_ = open_window;
    err = set_capturing(wants_capture(open_window));
  }
  if (!err.empty()) {
    set_capturing(false);
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
    g_active.store(nullptr);
    return err;
  }
  window_sampled_ = capturing_;
  attached_ = true;
  return "";
}

// Another client registering its buffers takes every record from laggard; when it switches
// kernel records off again (torch.profiler stopping), laggard registers its buffers again and
// switches its kinds back on. Never while the other client holds them: that would take its
// records away from it.
void GpuCapture::watch_other_clients() {
  ForeignActivity fa = foreign_activity();
  if (fa.timestamp_callbacks != seen_timestamp_callbacks_) {
    seen_timestamp_callbacks_ = fa.timestamp_callbacks;
    timestamp_owner_ = fa.timestamp_owner;
    log_info("%s installed a CUPTI timestamp callback; laggard checks CUPTI's clock at every window",
             timestamp_owner_.c_str());
  }
  if (fa.takes != seen_takes_) {
    seen_takes_ = fa.takes;
    taker_ = fa.taker;
    if (!foreign_holds_)
      log_warn("%s registered its own CUPTI activity buffers (torch.profiler?); laggard records no GPU "
               "activity until it stops", taker_.c_str());
    foreign_holds_ = true;
  }
  if (foreign_holds_) held_this_window_ = true;
  if (!foreign_holds_ || fa.holding) return;
  CUptiResult r = api_.register_buffers(&GpuCapture::on_buffer_requested, &GpuCapture::on_buffer_completed);
  if (r != CUPTI_SUCCESS) {
    LAGGARD_WARN_ONCE("could not take the CUPTI activity API back: %s", api_.error_string(r).c_str());
    return;
  }
  if (capturing_) enable_kinds();
  foreign_holds_ = false;
  log_info("%s stopped; laggard took the CUPTI activity API back", taker_.c_str());
}

// A sampled window with launches but no records: CUPTI's records went elsewhere.
std::string GpuCapture::starvation(uint64_t launches, uint64_t records) {
  bool empty = window_sampled_ && launches > 0 && records == 0;
  empty_windows_ = empty ? empty_windows_ + 1 : 0;
  if (window_sampled_ && held_this_window_ && launches > 0)
    return taker_ + " held the CUPTI activity API (its own buffer callbacks): " + std::to_string(records) +
           " records for " + std::to_string(launches) + " launches";
  // One empty window can be kernels still running at the close; two in a row are not.
  if (empty_windows_ >= 2)
    return "CUPTI delivered no records for " + std::to_string(launches) +
           " launches (another CUPTI client holds the activity API or switched kernel records off)";
  return "";
}

bool GpuCapture::wants_capture(uint64_t window) const {
  return !capture_paused() && window % static_cast<uint64_t>(opt_.profiling_interval) == 0;
}

void GpuCapture::apply_pause() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  std::string err = set_capturing(wants_capture(open_window_));
  leave_cupti();
  if (!err.empty()) LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
}

void GpuCapture::tick() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  api_.flush_all(0);
  watch_other_clients();
  leave_cupti();
}

void GpuCapture::close_window(WindowSnapshot& w, bool final, const GpuAggregator::SectionName& section_name) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed) || !enter_cupti()) return;
  // Forced at exit: also buffers with records CUPTI has not completed (kernels still running
  // are lost either way; laggard never synchronizes the application's GPU work).
  api_.flush_all(final ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  // Records CUPTI had no buffer for, counted for the global queue; read here, outside the data
  // mutex, as well as per buffer (Kineto notes the query re-enters CUPTI's lock).
  size_t dropped_now = 0;
  if (api_.dropped_records(nullptr, 0, &dropped_now) == CUPTI_SUCCESS && dropped_now)
    cupti_dropped_.fetch_add(dropped_now, std::memory_order_relaxed);
  watch_other_clients();
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
  GpuWindow g = GpuAggregator::finish(std::move(taken), map, epoch_offset_ns_, section_name);
  uint64_t dropped = cupti_dropped_.load(std::memory_order_relaxed);
  d.cupti_records_dropped = dropped - seen_cupti_dropped_;
  seen_cupti_dropped_ = dropped;
  uint64_t declined = pool_.declined();
  d.gpu_buffer_full = declined - seen_declined_;
  seen_declined_ = declined;
  w.dropped += d;

  g.sampled = window_sampled_;
  g.launches = launches_.exchange(0, std::memory_order_relaxed);
  g.starved = starvation(g.launches, records);
  g.clock_ticks_per_ns = check.ticks_per_ns;
  g.clock_problem = check.problem;
  held_this_window_ = foreign_holds_;
  w.gpu = std::move(g);
  w.gpu_status.cupti = w.gpu.starved.empty() ? "on" : "starved: " + w.gpu.starved;
  w.gpu_status.library = api_.describe();
  w.gpu_status.version = version_;
  w.gpu_status.has_clock = true;
  w.gpu_status.clock_offset_ns = clock_.gpu_to_epoch_ns;
  w.gpu_status.clock_uncertainty_ns = clock_.uncertainty_ns;

  open_window_ = w.index + 1;
  if (!final && enter_cupti()) {
    std::string err = set_capturing(wants_capture(open_window_));
    leave_cupti();
    if (!err.empty()) LAGGARD_WARN_ONCE("GPU capture could not be switched back on: %s", err.c_str());
  }
  window_sampled_ = capturing_;
}

void CUPTIAPI GpuCapture::on_callback(void* userdata, CUpti_CallbackDomain domain, CUpti_CallbackId,
                                      const void* data) {
  auto* self = static_cast<GpuCapture*>(userdata);
  if (!self || !data || self->inert_.load(std::memory_order_relaxed)) return;
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API && domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  int64_t now = mono_ns();
  if (cb->callbackSite == CUPTI_API_ENTER) {
    self->launches_.fetch_add(1, std::memory_order_relaxed);
    self->table_.enter(cb->correlationId, self->section_ ? self->section_() : kNoName, thread_tid(), now);
  } else {
    self->table_.exit(cb->correlationId, now);
  }
}

void CUPTIAPI GpuCapture::on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  try {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    GpuCapture* self = g_active.load(std::memory_order_acquire);
    if (!self || self->inert_.load(std::memory_order_relaxed)) return;
    if (uint8_t* b = self->pool_.acquire()) {
      *buffer = b;
      *size = self->pool_.buffer_bytes();
    }
  } catch (...) {
  }
}

void CUPTIAPI GpuCapture::on_buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t,
                                              size_t valid_size) {
  GpuCapture* self = g_active.load(std::memory_order_acquire);
  // A forked child returns at once: the pool, the tables and CUPTI belong to the parent.
  if (!self || !buffer || self->inert_.load(std::memory_order_relaxed)) return;
  try {
    self->consume(buffer, valid_size);
    size_t dropped = 0;
    if (self->api_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
      self->cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  } catch (...) {
  }
  self->pool_.release(buffer);
}

// The buffer is parsed and joined to its launches before the data mutex is taken (the flush
// thread may hold it); only the additions to the window happen under it.
void GpuCapture::consume(uint8_t* buffer, size_t valid_size) {
  struct Parsed {
    GpuRecord r;
    LaunchInfo launch;
    bool matched;
  };
  thread_local std::vector<Parsed> parsed;  // CUPTI's worker thread (or the flush thread), reused
  parsed.clear();
  uint64_t no_timestamp = 0;
  CUpti_Activity* rec = nullptr;
  while (valid_size && api_.next_record(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
    Parsed p{};
    switch (parse_record(rec, &p.r)) {
      case ParseResult::ok:
        p.matched = table_.find(p.r.correlation, &p.launch);
        parsed.push_back(p);
        break;
      case ParseResult::no_timestamp: ++no_timestamp; break;
      case ParseResult::other_kind: break;
    }
  }
  std::lock_guard<std::mutex> lock(data_mu_);
  no_timestamp_ += no_timestamp;
  for (const Parsed& p : parsed) agg_.add(p.r, p.matched ? &p.launch : nullptr);
}

}  // namespace laggard::cupti
