#include "gpu_capture.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <iterator>

#include "activity_parser.h"
#include "clock.h"
#include "log.h"

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
      agg_(options.records_per_window) {}

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
  ClockSync best{0, INT64_MAX};
  for (int i = 0; i < 7; ++i) {
    int64_t a = mono_ns();
    uint64_t gpu = 0;
    CUptiResult r = api_.timestamp(&gpu);
    int64_t b = mono_ns();
    if (r != CUPTI_SUCCESS || gpu == 0) continue;
    if (b - a < best.uncertainty_ns) {
      best.uncertainty_ns = b - a;
      best.gpu_to_epoch_ns = (a + (b - a) / 2) + epoch_offset_ns_ - static_cast<int64_t>(gpu);
    }
  }
  if (best.uncertainty_ns == INT64_MAX) return clock_;  // keep the last good one
  return best;
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

std::string GpuCapture::attach(uint64_t open_window) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (attached_) return "";
  CUptiResult r = api_.subscribe(&subscriber_, &GpuCapture::on_callback, this);
  if (r != CUPTI_SUCCESS) {
    subscriber_ = nullptr;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return "another CUPTI client (Nsight Systems, torch.profiler, ...) is attached";
    return "cuptiSubscribe: " + api_.error_string(r);
  }
  choose_callbacks();
  GpuCapture* expected = nullptr;
  if (!g_active.compare_exchange_strong(expected, this)) {
    api_.unsubscribe(subscriber_);
    subscriber_ = nullptr;
    return "GPU capture is already attached in this process";
  }
  r = api_.register_buffers(&GpuCapture::on_buffer_requested, &GpuCapture::on_buffer_completed);
  std::string err;
  if (r != CUPTI_SUCCESS) err = "cuptiActivityRegisterCallbacks: " + api_.error_string(r);
  epoch_offset_ns_ = measure_epoch_offset_ns();
  if (err.empty()) {
    clock_ = measure_clock();
    open_window_ = open_window;
    err = set_capturing(open_window % static_cast<uint64_t>(opt_.profiling_interval) == 0);
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

void GpuCapture::tick() {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed)) return;
  api_.flush_all(0);
}

void GpuCapture::close_window(WindowSnapshot& w, bool final, const GpuAggregator::SectionName& section_name) {
  std::lock_guard<std::mutex> lock(control_mu_);
  if (!attached_ || inert_.load(std::memory_order_relaxed)) return;
  // Forced at exit: also buffers with records CUPTI has not completed (kernels still running
  // are lost either way; laggard never synchronizes the application's GPU work).
  api_.flush_all(final ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
  clock_ = measure_clock();

  GpuWindow g;
  DropCounters d;
  {
    std::lock_guard<std::mutex> data(data_mu_);
    d.unmatched_correlation = agg_.unmatched();
    d.gpu_records_not_stored = agg_.not_stored();
    d.gpu_no_timestamp = no_timestamp_;
    no_timestamp_ = 0;
    g = agg_.close(clock_.gpu_to_epoch_ns, epoch_offset_ns_, section_name);
  }
  uint64_t dropped = cupti_dropped_.load(std::memory_order_relaxed);
  d.cupti_records_dropped = dropped - seen_cupti_dropped_;
  seen_cupti_dropped_ = dropped;
  uint64_t declined = pool_.declined();
  d.gpu_buffer_full = declined - seen_declined_;
  seen_declined_ = declined;
  w.dropped += d;

  g.sampled = window_sampled_;
  w.gpu = std::move(g);
  w.gpu_status.cupti = "on";
  w.gpu_status.library = api_.describe();
  w.gpu_status.has_clock = true;
  w.gpu_status.clock_offset_ns = clock_.gpu_to_epoch_ns;
  w.gpu_status.clock_uncertainty_ns = clock_.uncertainty_ns;

  open_window_ = w.index + 1;
  if (!final) {
    std::string err = set_capturing(open_window_ % static_cast<uint64_t>(opt_.profiling_interval) == 0);
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
  if (cb->callbackSite == CUPTI_API_ENTER)
    self->table_.enter(cb->correlationId, self->section_ ? self->section_() : kNoName, thread_tid(), now);
  else
    self->table_.exit(cb->correlationId, now);
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
  if (!self || !buffer) return;
  try {
    if (!self->inert_.load(std::memory_order_relaxed)) self->consume(buffer, valid_size);
    size_t dropped = 0;
    if (self->api_.dropped_records(context, stream, &dropped) == CUPTI_SUCCESS && dropped)
      self->cupti_dropped_.fetch_add(dropped, std::memory_order_relaxed);
  } catch (...) {
  }
  self->pool_.release(buffer);
}

void GpuCapture::consume(uint8_t* buffer, size_t valid_size) {
  std::lock_guard<std::mutex> lock(data_mu_);
  CUpti_Activity* rec = nullptr;
  while (valid_size && api_.next_record(buffer, valid_size, &rec) == CUPTI_SUCCESS) {
    GpuRecord r;
    switch (parse_record(rec, &r)) {
      case ParseResult::ok: {
        LaunchInfo launch;
        agg_.add(r, table_.find(r.correlation, &launch) ? &launch : nullptr);
        break;
      }
      case ParseResult::no_timestamp: ++no_timestamp_; break;
      case ParseResult::other_kind: break;
    }
  }
}

}  // namespace laggard::cupti
