// A stand-in for CUPTI (and the bit of the CUDA driver that triggers it), for tests on machines
// without a GPU. It behaves like CUPTI where laggard depends on it: one subscriber, per-cbid
// callbacks with correlation ids at API enter/exit, activity kinds switched on and off, records
// delivered in client-provided buffers through the registered callbacks, dropped records counted
// when the client declines a buffer. Records are the real CUDA 13 structs from the headers.
//
// The activity API is process-wide, as in CUDA 13.0's cupti_activity.h: one pair of buffer
// callbacks (the last cuptiActivityRegisterCallbacks wins, whoever calls it), one set of enabled
// kinds (any client's cuptiActivityDisable switches a kind off for everyone), one timestamp
// source (cuptiActivityRegisterTimestampCallback replaces it for records and cuptiGetTimestamp,
// which the header says is "normalized to correspond with" record timestamps). SecondClient
// below plays the other client the way Kineto (torch.profiler) does it.
//
// Used in-process by the unit tests (wrapped as a CuptiApi) and, exported as C functions, by the
// fake libcuda.so.1 that the integration tests load into real processes.
#pragma once

#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <time.h>
#include <vector>

namespace laggard::fake {

inline uint64_t realtime_now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

struct KernelSpec {
  std::string name = "kernel";
  uint32_t grid[3] = {1, 1, 1}, block[3] = {128, 1, 1};
  uint64_t start = 0;       // CUPTI time; 0: now
  uint64_t dur_ns = 1000;
  uint32_t stream = 7, device = 0, graph_id = 0;
  bool no_timestamp = false;
  bool incomplete = false;  // still running: holds back default flushes until complete_all()
};

class FakeCuptiCore {
 public:
  // ---- behaviour switches for tests ----
  bool refuse_subscribe = false;   // as if another CUPTI client were subscribed
  std::string other_subscriber = "CUPTI for Nsight Systems";  // what cuptiSubscribe_v2 names then
  bool have_subscribe_v2 = true;   // cuptiSubscribe_v2 (CUDA 13.0) available
  bool not_initialized = false;    // every call fails as with a CUPTI too new for the driver
  uint32_t api_version = CUPTI_API_VERSION;
  bool have_callback_names = true; // cuptiGetCallbackName available
  int64_t clock_skew_ns = 0;       // CUPTI timestamp = CLOCK_REALTIME + skew
  size_t records_per_buffer = 0;   // 0: as many as fit
  size_t hold_buffers = 0;         // request this many buffers before delivering any
  std::function<void()> on_flush;  // runs at the start of every cuptiActivityFlushAll (e.g. to block)

  // ---- CUPTI API ----
  CUptiResult subscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) {
    return subscribe_v2(s, cb, ud, nullptr);
  }
  // cupti_callbacks.h: the new subscriber's name, and on MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED the
  // existing subscriber's name written to oldSubscriberName.
  CUptiResult subscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud, CUpti_SubscriberParams* p) {
    if (not_initialized) return CUPTI_ERROR_NOT_INITIALIZED;
    if (p && p->structSize < CUpti_SubscriberParams_STRUCT_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> l(mu_);
    if (refuse_subscribe || callback_) {
      std::string old = refuse_subscribe ? other_subscriber : subscriber_name_;
      if (p && p->oldSubscriberName && p->oldSubscriberSize)
        std::snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", old.c_str());
      return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    callback_ = cb;
    userdata_ = ud;
    subscriber_name_ = p && p->subscriberName ? std::string("CUPTI for ") + p->subscriberName : "CUPTI";
    *s = reinterpret_cast<CUpti_SubscriberHandle>(this);
    return CUPTI_SUCCESS;
  }
  CUptiResult unsubscribe(CUpti_SubscriberHandle) {
    std::lock_guard<std::mutex> l(mu_);
    callback_ = nullptr;
    enabled_cbs_.clear();
    subscriber_name_.clear();
    return CUPTI_SUCCESS;
  }
  CUptiResult get_version(uint32_t* v) {
    *v = api_version;
    return CUPTI_SUCCESS;
  }
  // "needs to be called before initialization of CUDA": the fake only remembers the setting.
  CUptiResult enable_device_graph(uint8_t enable) {
    std::lock_guard<std::mutex> l(mu_);
    device_graph_ = enable != 0;
    return CUPTI_SUCCESS;
  }
  CUptiResult register_timestamp_callback(CUpti_TimestampCallbackFunc fn) {
    if (!fn) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> l(mu_);
    timestamp_fn_ = fn;
    return CUPTI_SUCCESS;
  }
  CUptiResult enable_callback(uint32_t en, CUpti_SubscriberHandle, CUpti_CallbackDomain d, CUpti_CallbackId id) {
    std::lock_guard<std::mutex> l(mu_);
    if (en) enabled_cbs_.insert({d, id});
    else enabled_cbs_.erase({d, id});
    return CUPTI_SUCCESS;
  }
  CUptiResult callback_name(CUpti_CallbackDomain d, uint32_t id, const char** name) {
    if (!have_callback_names) return CUPTI_ERROR_NOT_SUPPORTED;
    static const std::map<std::pair<int, uint32_t>, const char*> names = {
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000}, "cudaLaunchKernel_v7000"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060}, "cudaLaunchKernelExC_v11060"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000}, "cudaGraphLaunch_v10000"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020}, "cudaMemcpyAsync_v3020"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020}, "cudaMemsetAsync_v3020"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchHostFunc_v10000}, "cudaLaunchHostFunc_v10000"},
        {{CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGetDevice_v3020}, "cudaGetDevice_v3020"},
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel}, "cuLaunchKernel"},
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx}, "cuLaunchKernelEx"},
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoD_v2}, "cuMemcpyHtoD_v2"},
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent}, "cuCtxGetCurrent"},
    };
    auto it = names.find({d, id});
    if (it == names.end()) return CUPTI_ERROR_INVALID_PARAMETER;
    *name = it->second;
    return CUPTI_SUCCESS;
  }
  // Process-wide: replaces whatever another client registered.
  CUptiResult register_buffers(CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc done) {
    if (not_initialized) return CUPTI_ERROR_NOT_INITIALIZED;
    if (!rq || !done) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> l(mu_);
    request_ = rq;
    complete_ = done;
    ++registrations_;
    return CUPTI_SUCCESS;
  }
  CUptiResult enable_kind(CUpti_ActivityKind k) {
    if (not_initialized) return CUPTI_ERROR_NOT_INITIALIZED;
    std::lock_guard<std::mutex> l(mu_);
    kinds_.insert(k);
    return CUPTI_SUCCESS;
  }
  CUptiResult disable_kind(CUpti_ActivityKind k) {
    std::lock_guard<std::mutex> l(mu_);
    kinds_.erase(k);
    return CUPTI_SUCCESS;
  }
  CUptiResult timestamp(uint64_t* ns) {
    *ns = now();
    return CUPTI_SUCCESS;
  }
  // The count is reset by every read (cupti_activity.h), and counted as a CUPTI call here.
  CUptiResult dropped_records(CUcontext, uint32_t, size_t* n) {
    std::lock_guard<std::mutex> l(mu_);
    ++dropped_queries_;
    *n = dropped_;
    dropped_ = 0;
    return CUPTI_SUCCESS;
  }
  // Buffer layout: each record is preceded by its size (8 bytes), records 8-byte aligned.
  static CUptiResult next_record(uint8_t* buf, size_t valid, CUpti_Activity** rec) {
    size_t off = 0;
    if (*rec) {
      auto* cur = reinterpret_cast<uint8_t*>(*rec);
      uint64_t size = 0;
      std::memcpy(&size, cur - 8, 8);
      off = size_t(cur - buf) + size;
    }
    if (off + 8 > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *rec = reinterpret_cast<CUpti_Activity*>(buf + off + 8);
    return CUPTI_SUCCESS;
  }
  // Delivers every queued record through the client's buffers. As cupti_activity.h says of
  // cuptiActivityFlushAll: a default flush (flag 0) "doesn't return buffers which have one or more
  // incomplete records"; the fake holds everything back while an incomplete record is queued. A
  // forced flush (CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) delivers all. A buffer is handed back as soon
  // as it is full (CUPTI's worker does so), unless hold_buffers asks for several at once.
  CUptiResult flush_all(uint32_t flag) {
    if (on_flush) on_flush();
    {
      std::lock_guard<std::mutex> l(mu_);
      ++flushes_;
    }
    std::vector<std::vector<uint8_t>> records;
    CUpti_BuffersCallbackRequestFunc rq;
    CUpti_BuffersCallbackCompleteFunc done;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (incomplete_ && !(flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED)) return CUPTI_SUCCESS;
      incomplete_ = 0;
      records.swap(pending_);
      rq = request_;
      done = complete_;
    }
    if (!rq || !done) return records.empty() ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_OPERATION;
    struct Buf {
      uint8_t* p;
      size_t size, used, count;
    };
    std::vector<Buf> held;
    size_t next = 0;
    auto get = [&]() -> bool {
      uint8_t* p = nullptr;
      size_t size = 0, max = 0;
      rq(&p, &size, &max);
      if (!p) return false;
      held.push_back({p, size, 0, 0});
      return true;
    };
    for (size_t i = 0; i < hold_buffers; ++i)
      if (!get()) break;
    size_t cur = 0;
    while (next < records.size()) {
      if (cur >= held.size() && !get()) {
        std::lock_guard<std::mutex> l(mu_);
        dropped_ += records.size() - next;  // CUPTI drops what it has nowhere to put
        break;
      }
      Buf& b = held[cur];
      const auto& r = records[next];
      size_t need = 8 + r.size();
      bool full = b.used + need > b.size || (records_per_buffer && b.count >= records_per_buffer);
      if (full) {
        if (b.count == 0) {  // the record does not fit in an empty buffer: dropped
          std::lock_guard<std::mutex> l(mu_);
          ++dropped_;
          ++next;
          continue;
        }
        if (hold_buffers == 0) {  // full: handed back at once, so its memory can be reused
          done(nullptr, 0, b.p, b.size, b.used);
          b.p = nullptr;
        }
        ++cur;
        continue;
      }
      uint64_t sz = r.size();
      std::memcpy(b.p + b.used, &sz, 8);
      std::memcpy(b.p + b.used + 8, r.data(), r.size());
      b.used += need;
      ++b.count;
      ++next;
    }
    for (Buf& b : held)
      if (b.p) done(nullptr, 0, b.p, b.size, b.used);
    return CUPTI_SUCCESS;
  }

  // ---- driving it from a test ----
  uint64_t now() {
    CUpti_TimestampCallbackFunc fn;
    {
      std::lock_guard<std::mutex> l(mu_);
      fn = timestamp_fn_;
    }
    return fn ? fn() : uint64_t(int64_t(realtime_now_ns()) + clock_skew_ns);
  }
  bool device_graph() {
    std::lock_guard<std::mutex> l(mu_);
    return device_graph_;
  }
  uint64_t registrations() {
    std::lock_guard<std::mutex> l(mu_);
    return registrations_;
  }
  uint64_t flushes() {
    std::lock_guard<std::mutex> l(mu_);
    return flushes_;
  }
  uint64_t dropped_queries() {
    std::lock_guard<std::mutex> l(mu_);
    return dropped_queries_;
  }
  // Whose buffer callback pair is registered now.
  bool buffers_registered_by(CUpti_BuffersCallbackRequestFunc rq) {
    std::lock_guard<std::mutex> l(mu_);
    return request_ == rq;
  }
  void add_dropped(size_t n) {
    std::lock_guard<std::mutex> l(mu_);
    dropped_ += n;
  }

  bool callback_enabled(CUpti_CallbackDomain d, CUpti_CallbackId id) {
    std::lock_guard<std::mutex> l(mu_);
    return callback_ && enabled_cbs_.count({d, id});
  }
  bool kind_enabled(CUpti_ActivityKind k) {
    std::lock_guard<std::mutex> l(mu_);
    return kinds_.count(k) > 0;
  }
  size_t pending() {
    std::lock_guard<std::mutex> l(mu_);
    return pending_.size();
  }

  uint32_t new_correlation() {
    std::lock_guard<std::mutex> l(mu_);
    return next_corr_++;
  }
  // One API callback (enter or exit) as CUPTI would deliver it, if that cbid is enabled.
  void api_callback(CUpti_CallbackDomain d, CUpti_CallbackId id, uint32_t corr, CUpti_ApiCallbackSite site,
                    const char* symbol = nullptr) {
    CUpti_CallbackFunc cb;
    void* ud;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!callback_ || !enabled_cbs_.count({d, id})) return;
      cb = callback_;
      ud = userdata_;
    }
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionName = "fake";
    data.symbolName = symbol;
    data.correlationId = corr;
    cb(ud, d, id, &data);
  }
  // A kernel launched the way cudaLaunchKernel does: callbacks around it, then (if kernel
  // activity is on) its record queued. Returns the correlation id.
  uint32_t launch(const KernelSpec& k, CUpti_CallbackDomain d = CUPTI_CB_DOMAIN_RUNTIME_API,
                  CUpti_CallbackId id = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    uint32_t corr = new_correlation();
    api_callback(d, id, corr, CUPTI_API_ENTER, k.name.c_str());
    if (kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) queue_kernel(k, corr);
    api_callback(d, id, corr, CUPTI_API_EXIT, k.name.c_str());
    return corr;
  }
  uint32_t memcpy_async(uint64_t bytes, uint8_t copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, uint64_t dur = 500) {
    uint32_t corr = new_correlation();
    const auto d = CUPTI_CB_DOMAIN_RUNTIME_API;
    const auto id = CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
    api_callback(d, id, corr, CUPTI_API_ENTER);
    if (kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) queue_memcpy(bytes, copy_kind, dur, corr);
    api_callback(d, id, corr, CUPTI_API_EXIT);
    return corr;
  }
  uint32_t memset_async(uint64_t bytes, uint64_t dur = 300) {
    uint32_t corr = new_correlation();
    const auto d = CUPTI_CB_DOMAIN_RUNTIME_API;
    const auto id = CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020;
    api_callback(d, id, corr, CUPTI_API_ENTER);
    if (kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) queue_memset(bytes, dur, corr);
    api_callback(d, id, corr, CUPTI_API_EXIT);
    return corr;
  }

  void queue_kernel(const KernelSpec& k, uint32_t corr) {
    CUpti_ActivityKernel10 r{};
    r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    r.start = k.no_timestamp ? 0 : (k.start ? k.start : now());
    r.end = k.no_timestamp ? 0 : r.start + k.dur_ns;
    r.deviceId = k.device;
    r.streamId = k.stream;
    r.gridX = int32_t(k.grid[0]);
    r.gridY = int32_t(k.grid[1]);
    r.gridZ = int32_t(k.grid[2]);
    r.blockX = int32_t(k.block[0]);
    r.blockY = int32_t(k.block[1]);
    r.blockZ = int32_t(k.block[2]);
    r.correlationId = corr;
    r.name = intern(k.name);
    r.graphId = k.graph_id;
    push(&r, sizeof r);
    if (k.incomplete) {
      std::lock_guard<std::mutex> l(mu_);
      ++incomplete_;
    }
  }
  // The running kernels finished: default flushes deliver again.
  void complete_all() {
    std::lock_guard<std::mutex> l(mu_);
    incomplete_ = 0;
  }
  void queue_memcpy(uint64_t bytes, uint8_t copy_kind, uint64_t dur, uint32_t corr) {
    CUpti_ActivityMemcpy6 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
    r.copyKind = copy_kind;
    r.bytes = bytes;
    r.start = now();
    r.end = r.start + dur;
    r.streamId = 7;
    r.correlationId = corr;
    push(&r, sizeof r);
  }
  void queue_memset(uint64_t bytes, uint64_t dur, uint32_t corr) {
    CUpti_ActivityMemset4 r{};
    r.kind = CUPTI_ACTIVITY_KIND_MEMSET;
    r.bytes = bytes;
    r.start = now();
    r.end = r.start + dur;
    r.streamId = 7;
    r.correlationId = corr;
    push(&r, sizeof r);
  }
  // Any raw record (e.g. an older struct version or a kind laggard ignores).
  void push(const void* rec, size_t size) {
    std::vector<uint8_t> bytes((size + 7) / 8 * 8, 0);
    std::memcpy(bytes.data(), rec, size);
    std::lock_guard<std::mutex> l(mu_);
    pending_.push_back(std::move(bytes));
  }
  // Reorders queued records (CUPTI delivers in completion order, not launch order).
  void reverse_pending() {
    std::lock_guard<std::mutex> l(mu_);
    std::reverse(pending_.begin(), pending_.end());
  }

 private:
  const char* intern(const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& n : names_)
      if (n == s) return n.c_str();
    names_.push_back(s);
    return names_.back().c_str();
  }

  std::mutex mu_;
  std::string subscriber_name_;
  CUpti_TimestampCallbackFunc timestamp_fn_ = nullptr;
  bool device_graph_ = false;
  uint64_t registrations_ = 0, dropped_queries_ = 0, flushes_ = 0;
  CUpti_CallbackFunc callback_ = nullptr;
  void* userdata_ = nullptr;
  std::set<std::pair<int, uint32_t>> enabled_cbs_;
  std::set<int> kinds_;
  CUpti_BuffersCallbackRequestFunc request_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete_ = nullptr;
  std::vector<std::vector<uint8_t>> pending_;
  std::deque<std::string> names_;  // stable pointers, one per distinct name (as CUPTI shares them)
  size_t dropped_ = 0;
  size_t incomplete_ = 0;  // queued records still running
  uint32_t next_corr_ = 1;
};

// A second CUPTI client in the same process, doing to the activity API what Kineto does when
// torch.profiler starts and stops (libkineto/src/CuptiActivityProfiler.cpp, configureGpuTracing;
// CuptiActivityApi.cpp, enableCuptiActivities / disableCuptiActivities; CuptiTimestamp.cpp):
//   start: optionally cuptiActivityRegisterTimestampCallback returning TSC cycles (Kineto's
//          default on x86 Linux with CUDA >= 11.6), then cuptiActivityRegisterCallbacks with its
//          own buffer functions, then cuptiActivityEnable for kernels, copies, sets.
//   stop:  cuptiActivityFlushAll, cuptiActivityDisable for the same kinds. Its buffer callbacks
//          and its timestamp callback stay registered (Kineto never unregisters either).
// Kineto's own cuptiSubscribe fails while another subscriber exists; its activity API does not
// need one. Buffer callbacks carry no user data, so one SecondClient at a time.
class SecondClient {
 public:
  static constexpr double kCyclesPerNs = 2.5;  // a 2.5 GHz TSC

  explicit SecondClient(FakeCuptiCore& core) : core_(core) { current() = this; }
  ~SecondClient() { current() = nullptr; }

  void start(bool cycles_clock) {
    if (cycles_clock) core_.register_timestamp_callback(&SecondClient::cycles);
    core_.register_buffers(&SecondClient::requested, &SecondClient::completed);
    for (auto k : kKinds) core_.enable_kind(k);
  }
  void stop() {
    core_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (auto k : kKinds) core_.disable_kind(k);
  }
  uint64_t records() const { return records_; }
  static CUpti_BuffersCallbackRequestFunc request_fn() { return &SecondClient::requested; }
  // What the cycles clock reads at epoch time `realtime_ns`.
  static uint64_t cycles_at(uint64_t realtime_ns) { return uint64_t(double(realtime_ns - base()) * kCyclesPerNs); }

 private:
  static constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                  CUPTI_ACTIVITY_KIND_MEMSET};
  static SecondClient*& current() {
    static SecondClient* c = nullptr;
    return c;
  }
  static uint64_t base() {
    static const uint64_t b = realtime_now_ns() - 1'000'000'000ull;  // counter started 1 s ago
    return b;
  }
  static uint64_t CUPTIAPI cycles() { return cycles_at(realtime_now_ns()); }
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 16));
    *size = 1 << 16;
    *max_records = 0;
  }
  static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    CUpti_Activity* rec = nullptr;
    if (SecondClient* self = current())
      while (FakeCuptiCore::next_record(buffer, valid, &rec) == CUPTI_SUCCESS) ++self->records_;
    std::free(buffer);
  }

  FakeCuptiCore& core_;
  uint64_t records_ = 0;
};

}  // namespace laggard::fake
