// A stand-in for CUPTI (and the bit of the CUDA driver that triggers it), for tests on machines
// without a GPU. It models the CUPTI of CUDA 13.0's headers (cupti_callbacks.h, cupti_activity.h,
// cupti_result.h under /usr/local/cuda/include) where laggard and another profiler in the same
// process depend on it, including the awkward parts:
//
//  - One subscriber per process (cupti_callbacks.h, cuptiSubscribe: "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_
//    NOT_SUPPORTED if there is already a CUPTI subscriber"); handles are distinct per subscription,
//    and cuptiUnsubscribe with a handle that is not the current subscriber is INVALID_PARAMETER.
//  - The activity API is process-wide: one pair of buffer callbacks (the last
//    cuptiActivityRegisterCallbacks wins, whoever calls it), one set of enabled kinds (any client's
//    cuptiActivityDisable switches a kind off for everyone), one timestamp source
//    (cuptiActivityRegisterTimestampCallback).
//  - Records are written into the buffer CUPTI holds at the moment the work is launched (a record
//    is reserved at launch and completed when the GPU finishes: cupti_activity.h's "incomplete
//    records"). CUPTI keeps that buffer across flushes and across a change of buffer callbacks: a
//    default flush (flag 0) returns only buffers whose records are all complete
//    (cuptiActivityFlushAll), a partly filled buffer is returned only when
//    `partial_on_default_flush` (the header's wording, "buffers need not to be full"; false: the
//    stricter behaviour seen in practice, full buffers only); a forced flush returns every buffer
//    it holds, empty or not. A buffer goes to the complete callback registered *when it is
//    returned*, not to the one that supplied it: a buffer supplied by laggard and returned after
//    torch.profiler registered its own callbacks lands in Kineto's bufferCompleted, which drops
//    buffers it did not allocate (pytorch/kineto libkineto/src/CuptiActivityApi.cpp at 114171df,
//    lines 292-296).
//  - A declined buffer request (null buffer) makes CUPTI drop the records it had no room for and
//    count them (cuptiActivityGetNumDroppedRecords, reset by each read); below CUPTI API version 27
//    (CUDA 12.9) it crashes instead: Kineto's kCuptiBufferRejectionMinVersion (baea3804,
//    CuptiActivityApi.cpp:28 and :165-172, "Rejecting buffers can crash CUPTI before API v27").
//    The fake aborts then, naming the reason.
//  - cuptiFinalize tears everything down: subscriber, callbacks, kinds, buffer callbacks; buffers
//    CUPTI still held are not returned (Kineto flushes before it finalizes, CuptiActivityApi.cpp at
//    baea3804:477-478, because of that).
//  - cuptiActivityEnableDeviceGraph "needs to be called before initialization of CUDA"
//    (cupti_activity.h): a call after cuInit is remembered as late.
//  - A runtime launch (cudaLaunchKernel) calls the driver (cuLaunchKernel) inside it: callbacks of
//    both domains fire with the same correlation id, and API records (kinds RUNTIME / DRIVER) are
//    written for each call when those kinds are on.
// Records are the real CUDA 13 structs from the headers.
//
// Used in-process by the unit tests (wrapped as a CuptiApi, fake_cupti_api.h) and, exported as C
// functions, by the fake libcuda.so.1 that the integration tests load into real processes.
// The other CUPTI client, playing Kineto, is in fake_kineto.h.
#pragma once

#include <cupti.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <time.h>
#include <unistd.h>
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
  bool incomplete = false;  // still running: its buffer is held back by default flushes until complete_all()
};

class FakeCuptiCore {
 public:
  static constexpr uint32_t kRejectionMinVersion = 27;  // Kineto baea3804, CuptiActivityApi.cpp:28

  // ---- behaviour switches for tests ----
  bool refuse_subscribe = false;   // a subscriber laggard cannot see (Nsight Systems, injected)
  std::string other_subscriber = "CUPTI for Nsight Systems";  // what cuptiSubscribe_v2 names then
  bool have_subscribe_v2 = true;   // cuptiSubscribe_v2 (CUDA 13.0) available
  bool not_initialized = false;    // every call fails as with a CUPTI too new for the driver
  uint32_t api_version = CUPTI_API_VERSION;
  bool have_callback_names = true; // cuptiGetCallbackName available
  int64_t clock_skew_ns = 0;       // CUPTI timestamp = CLOCK_REALTIME + skew
  size_t records_per_buffer = 0;   // 0: as many as fit
  bool partial_on_default_flush = true;  // see the top of this file
  bool nested_driver_calls = true; // runtime launches wrap a driver call with the same correlation id
  std::function<void()> on_flush;  // runs at the start of every cuptiActivityFlushAll (e.g. to block)

  // ---- CUPTI API ----
  CUptiResult subscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) {
    return subscribe_v2(s, cb, ud, nullptr);
  }
  // cupti_callbacks.h: the new subscriber's name, and on MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED the
  // existing subscriber's name written to oldSubscriberName.
  CUptiResult subscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud, CUpti_SubscriberParams* p) {
    if (not_initialized) return CUPTI_ERROR_NOT_INITIALIZED;
    if (!s) return CUPTI_ERROR_INVALID_PARAMETER;
    if (p && p->structSize < CUpti_SubscriberParams_STRUCT_SIZE) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> l(mu_);
    if (refuse_subscribe || handle_) {
      std::string old = refuse_subscribe ? other_subscriber : subscriber_name_;
      if (p && p->oldSubscriberName && p->oldSubscriberSize)
        std::snprintf(p->oldSubscriberName, p->oldSubscriberSize, "%s", old.c_str());
      return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
    }
    callback_ = cb;
    userdata_ = ud;
    subscriber_name_ = p && p->subscriberName ? std::string("CUPTI for ") + p->subscriberName : "CUPTI";
    handle_ = ++subscriptions_;
    *s = reinterpret_cast<CUpti_SubscriberHandle>(uintptr_t(handle_));
    return CUPTI_SUCCESS;
  }
  CUptiResult unsubscribe(CUpti_SubscriberHandle s) {
    std::lock_guard<std::mutex> l(mu_);
    if (!s || uintptr_t(s) != handle_) return CUPTI_ERROR_INVALID_PARAMETER;
    drop_subscriber();
    return CUPTI_SUCCESS;
  }
  // cupti_activity.h / cupti_callbacks.h: destroys and cleans up everything CUPTI holds.
  CUptiResult finalize() {
    std::lock_guard<std::mutex> l(mu_);
    drop_subscriber();
    kinds_.clear();
    request_ = nullptr;
    complete_ = nullptr;
    timestamp_fn_ = nullptr;
    lost_at_finalize_ += held_.size();
    held_.clear();
    ++finalizes_;
    return CUPTI_SUCCESS;
  }
  CUptiResult get_version(uint32_t* v) {
    if (!v) return CUPTI_ERROR_INVALID_PARAMETER;
    *v = api_version;
    return CUPTI_SUCCESS;
  }
  CUptiResult enable_device_graph(uint8_t enable) {
    std::lock_guard<std::mutex> l(mu_);
    device_graph_ = enable != 0;
    device_graph_late_ = cuda_initialized_;
    return CUPTI_SUCCESS;
  }
  CUptiResult register_timestamp_callback(CUpti_TimestampCallbackFunc fn) {
    if (!fn) return CUPTI_ERROR_INVALID_PARAMETER;
    std::lock_guard<std::mutex> l(mu_);
    timestamp_fn_ = fn;
    return CUPTI_SUCCESS;
  }
  CUptiResult enable_callback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id) {
    std::lock_guard<std::mutex> l(mu_);
    if (!s || uintptr_t(s) != handle_) return CUPTI_ERROR_INVALID_PARAMETER;
    if (en) enabled_cbs_.insert({d, id});
    else enabled_cbs_.erase({d, id});
    return CUPTI_SUCCESS;
  }
  CUptiResult enable_domain(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d) {
    std::lock_guard<std::mutex> l(mu_);
    if (!s || uintptr_t(s) != handle_) return CUPTI_ERROR_INVALID_PARAMETER;
    if (en) enabled_domains_.insert(d);
    else enabled_domains_.erase(d);
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
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async}, "cuMemsetD8Async"},
        {{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuCtxGetCurrent}, "cuCtxGetCurrent"},
    };
    auto it = names.find({d, id});
    if (it == names.end()) return CUPTI_ERROR_INVALID_PARAMETER;
    *name = it->second;
    return CUPTI_SUCCESS;
  }
  // Process-wide: replaces whatever another client registered. The buffers CUPTI holds stay.
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
  // cupti_activity.h, cuptiActivityFlushAll: flag 0 returns the buffers whose records are all
  // complete (a partly filled one only with partial_on_default_flush); FLUSH_FORCED returns every
  // buffer CUPTI holds. Each goes to the complete callback registered now.
  CUptiResult flush_all(uint32_t flag) {
    if (on_flush) on_flush();
    std::vector<Held> out;
    CUpti_BuffersCallbackCompleteFunc done;
    {
      std::lock_guard<std::mutex> l(mu_);
      ++flushes_;
      if (!complete_) return held_.empty() ? CUPTI_SUCCESS : CUPTI_ERROR_INVALID_OPERATION;
      const bool forced = flag & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
      for (size_t i = 0; i < held_.size();) {
        const Held& h = held_[i];
        const bool last = i + 1 == held_.size();  // the buffer being filled; earlier ones are full
        const bool ready = h.incomplete == 0 && h.count > 0 && (!last || partial_on_default_flush);
        if (forced || ready) {
          out.push_back(std::move(held_[i]));
          held_.erase(held_.begin() + long(i));
        } else {
          ++i;
        }
      }
      done = complete_;
    }
    for (Held& h : out) deliver(h, done);
    return CUPTI_SUCCESS;
  }

  // ---- driving it from a test ----
  // What the fake libcuda's cuInit does: CUDA is initialized from now on.
  void cuda_init() {
    std::lock_guard<std::mutex> l(mu_);
    cuda_initialized_ = true;
  }
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
  bool device_graph_late() {
    std::lock_guard<std::mutex> l(mu_);
    return device_graph_late_;
  }
  uint64_t registrations() { return read(registrations_); }
  uint64_t flushes() { return read(flushes_); }
  uint64_t dropped_queries() { return read(dropped_queries_); }
  uint64_t finalizes() { return read(finalizes_); }
  uint64_t lost_at_finalize() { return read(lost_at_finalize_); }
  uint64_t requests() { return read(requests_); }
  uint64_t declined() { return read(declined_); }
  size_t held_buffers() { return read(held_.size()); }
  bool subscribed() { return read(handle_) != 0; }
  // Whose buffer callback pair is registered now.
  bool buffers_registered_by(CUpti_BuffersCallbackRequestFunc rq) { return read(request_) == rq; }
  // The subscriber laggard cannot see (refuse_subscribe) unsubscribes.
  void other_subscriber_leaves() {
    std::lock_guard<std::mutex> l(mu_);
    refuse_subscribe = false;
  }
  void add_dropped(size_t n) {
    std::lock_guard<std::mutex> l(mu_);
    dropped_ += n;
  }
  bool callback_enabled(CUpti_CallbackDomain d, CUpti_CallbackId id) {
    std::lock_guard<std::mutex> l(mu_);
    return callback_ && (enabled_cbs_.count({d, id}) || enabled_domains_.count(d));
  }
  bool kind_enabled(CUpti_ActivityKind k) {
    std::lock_guard<std::mutex> l(mu_);
    return kinds_.count(k) > 0;
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
      if (!callback_ || !(enabled_cbs_.count({d, id}) || enabled_domains_.count(d))) return;
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
  // A resource callback (cupti_callbacks.h, CUPTI_CB_DOMAIN_RESOURCE), e.g. the context creation
  // the fake cuInit announces: Kineto before 7a3ba363 subscribes for it (init.cpp at 7a3ba363^:92-99).
  void resource_callback(CUpti_CallbackId id) {
    CUpti_CallbackFunc cb;
    void* ud;
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!callback_ || !(enabled_cbs_.count({CUPTI_CB_DOMAIN_RESOURCE, id}) ||
                          enabled_domains_.count(CUPTI_CB_DOMAIN_RESOURCE)))
        return;
      cb = callback_;
      ud = userdata_;
    }
    CUpti_ResourceData data{};
    ++resource_callbacks_;
    cb(ud, CUPTI_CB_DOMAIN_RESOURCE, id, &data);
  }
  uint64_t resource_callbacks() { return read(resource_callbacks_); }

  // A kernel launched the way cudaLaunchKernel does (or cuLaunchKernel, for the driver domain):
  // callbacks around it, its kernel record reserved in CUPTI's current buffer when kernel activity
  // is on, API records written at each call's exit when RUNTIME / DRIVER activity is on. Returns
  // the correlation id.
  uint32_t launch(const KernelSpec& k, CUpti_CallbackDomain d = CUPTI_CB_DOMAIN_RUNTIME_API,
                  CUpti_CallbackId id = CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000) {
    return api_call(d, id, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, k.name.c_str(), [&](uint32_t corr) {
      if (kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)) queue_kernel(k, corr);
    });
  }
  uint32_t memcpy_async(uint64_t bytes, uint8_t copy_kind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, uint64_t dur = 500) {
    return api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020,
                    CUPTI_DRIVER_TRACE_CBID_cuMemcpyHtoDAsync_v2, nullptr, [&](uint32_t corr) {
                      if (kind_enabled(CUPTI_ACTIVITY_KIND_MEMCPY)) queue_memcpy(bytes, copy_kind, dur, corr);
                    });
  }
  uint32_t memset_async(uint64_t bytes, uint64_t dur = 300) {
    return api_call(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaMemsetAsync_v3020,
                    CUPTI_DRIVER_TRACE_CBID_cuMemsetD8Async, nullptr, [&](uint32_t corr) {
                      if (kind_enabled(CUPTI_ACTIVITY_KIND_MEMSET)) queue_memset(bytes, dur, corr);
                    });
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
    push(&r, sizeof r, k.incomplete);
  }
  // The running kernels finished: default flushes return their buffers again.
  void complete_all() {
    std::lock_guard<std::mutex> l(mu_);
    for (Held& h : held_) h.incomplete = 0;
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
  // Any raw record (e.g. an older struct version or a kind laggard ignores), reserved in the
  // buffer CUPTI holds now (asking the registered client for one if it holds none).
  void push(const void* rec, size_t size, bool incomplete = false) {
    std::vector<uint8_t> bytes((size + 7) / 8 * 8, 0);
    std::memcpy(bytes.data(), rec, size);
    std::vector<Held> full;
    CUpti_BuffersCallbackCompleteFunc done = nullptr;
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!place(l, std::move(bytes), incomplete, &full)) return;
      done = complete_;
    }
    // CUPTI's worker hands a full buffer back at once (to whoever is registered now).
    if (done)
      for (Held& h : full) deliver(h, done);
  }
  // Reorders the records CUPTI holds (it delivers in completion order, not launch order).
  void reverse_pending() {
    std::lock_guard<std::mutex> l(mu_);
    for (Held& h : held_) std::reverse(h.records.begin(), h.records.end());
  }

 private:
  struct Held {
    uint8_t* p = nullptr;
    size_t size = 0, used = 0, count = 0, incomplete = 0;
    std::vector<std::vector<uint8_t>> records;  // written into p when the buffer is returned
  };

  template <class T>
  T read(const T& field) {
    std::lock_guard<std::mutex> l(mu_);
    return field;
  }

  void drop_subscriber() {
    handle_ = 0;
    callback_ = nullptr;
    userdata_ = nullptr;
    enabled_cbs_.clear();
    enabled_domains_.clear();
    subscriber_name_.clear();
  }

  // Reserves the record in the current buffer, asking for a new one when there is none or it is
  // full (a full one is moved to `full` for delivery). False: dropped (no buffer, counted).
  bool place(std::unique_lock<std::mutex>& l, std::vector<uint8_t> bytes, bool incomplete, std::vector<Held>* full) {
    const size_t need = 8 + bytes.size();
    for (int attempt = 0; attempt < 2; ++attempt) {
      if (!held_.empty()) {
        Held& h = held_.back();
        bool fits = h.used + need <= h.size && !(records_per_buffer && h.count >= records_per_buffer);
        if (fits) {
          h.used += need;
          ++h.count;
          h.incomplete += incomplete ? 1 : 0;
          h.records.push_back(std::move(bytes));
          return true;
        }
        if (h.count > 0 && h.incomplete == 0) {
          full->push_back(std::move(h));
          held_.pop_back();
        } else if (h.count == 0) {
          ++dropped_;  // does not fit in an empty buffer
          return false;
        }
      }
      if (!request_buffer(l)) {
        ++dropped_;
        return false;
      }
    }
    ++dropped_;
    return false;
  }

  // Asks the registered client for a buffer, outside the lock (the client may call CUPTI).
  bool request_buffer(std::unique_lock<std::mutex>& l) {
    CUpti_BuffersCallbackRequestFunc rq = request_;
    if (!rq) return false;
    ++requests_;
    uint8_t* p = nullptr;
    size_t size = 0, max = 0;
    l.unlock();
    rq(&p, &size, &max);
    l.lock();
    if (!p || size == 0) {
      ++declined_;
      if (api_version < kRejectionMinVersion) {
        std::fprintf(stderr, "fake CUPTI: a buffer request was declined (null buffer) and this CUPTI (API version %u) "
                             "is older than %u: crashing, as CUPTI before CUDA 12.9 can\n",
                     api_version, kRejectionMinVersion);
        std::abort();
      }
      return false;
    }
    Held h;
    h.p = p;
    h.size = size;
    held_.push_back(std::move(h));
    return true;
  }

  static void deliver(Held& h, CUpti_BuffersCallbackCompleteFunc done) {
    size_t off = 0;
    for (const auto& r : h.records) {
      uint64_t sz = r.size();
      std::memcpy(h.p + off, &sz, 8);
      std::memcpy(h.p + off + 8, r.data(), r.size());
      off += 8 + r.size();
    }
    done(nullptr, 0, h.p, h.size, off);
  }

  template <class Body>
  uint32_t api_call(CUpti_CallbackDomain d, CUpti_CallbackId id, CUpti_CallbackId nested, const char* symbol,
                    Body body) {
    uint32_t corr = new_correlation();
    const bool runtime = d == CUPTI_CB_DOMAIN_RUNTIME_API;
    const bool inner = runtime && nested_driver_calls;
    uint64_t t0 = now();
    api_callback(d, id, corr, CUPTI_API_ENTER, symbol);
    uint64_t t1 = now();
    if (inner) api_callback(CUPTI_CB_DOMAIN_DRIVER_API, nested, corr, CUPTI_API_ENTER, symbol);
    body(corr);
    if (inner) {
      api_callback(CUPTI_CB_DOMAIN_DRIVER_API, nested, corr, CUPTI_API_EXIT, symbol);
      api_record(CUPTI_ACTIVITY_KIND_DRIVER, nested, t1, corr);
    }
    api_callback(d, id, corr, CUPTI_API_EXIT, symbol);
    api_record(runtime ? CUPTI_ACTIVITY_KIND_RUNTIME : CUPTI_ACTIVITY_KIND_DRIVER, id, t0, corr);
    return corr;
  }

  void api_record(CUpti_ActivityKind kind, CUpti_CallbackId cbid, uint64_t start, uint32_t corr) {
    if (!kind_enabled(kind)) return;
    CUpti_ActivityAPI r{};
    r.kind = kind;
    r.cbid = cbid;
    r.start = start;
    r.end = now();
    r.processId = uint32_t(getpid());
    r.threadId = uint32_t(gettid());
    r.correlationId = corr;
    push(&r, sizeof r);
  }

  const char* intern(const std::string& s) {
    std::lock_guard<std::mutex> l(mu_);
    for (const std::string& n : names_)
      if (n == s) return n.c_str();
    names_.push_back(s);
    return names_.back().c_str();
  }

  std::mutex mu_;
  uintptr_t handle_ = 0, subscriptions_ = 0;
  std::string subscriber_name_;
  CUpti_TimestampCallbackFunc timestamp_fn_ = nullptr;
  bool device_graph_ = false, device_graph_late_ = false, cuda_initialized_ = false;
  uint64_t registrations_ = 0, dropped_queries_ = 0, flushes_ = 0, finalizes_ = 0, lost_at_finalize_ = 0;
  uint64_t requests_ = 0, declined_ = 0, resource_callbacks_ = 0;
  CUpti_CallbackFunc callback_ = nullptr;
  void* userdata_ = nullptr;
  std::set<std::pair<int, uint32_t>> enabled_cbs_;
  std::set<int> enabled_domains_;
  std::set<int> kinds_;
  CUpti_BuffersCallbackRequestFunc request_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc complete_ = nullptr;
  std::vector<Held> held_;         // buffers CUPTI holds; the last is the one being filled
  std::deque<std::string> names_;  // stable pointers, one per distinct name (as CUPTI shares them)
  size_t dropped_ = 0;
  uint32_t next_corr_ = 1;
};

}  // namespace laggard::fake
