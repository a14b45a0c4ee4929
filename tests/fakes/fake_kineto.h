// torch.profiler's CUPTI client, Kineto (pytorch/kineto, libkineto), reduced to the CUPTI calls
// it makes and the order it makes them in, for tests of laggard sharing a process with it. Every
// step cites the Kineto source it follows. Two generations:
//
//   eager (before commit 7a3ba363, "Remove eager CUPTI resource callback subscription", i.e. every
//          PyTorch release before it): libkineto_init, at the first profiler use, subscribes to
//          CUPTI for the context-created callback; refused, the whole profiler is CPU-only:
//            init.cpp@7a3ba363^:82-101   setupCuptiInitCallback: initCallbackApi, enable RESOURCE_CONTEXT_CREATED
//            init.cpp@7a3ba363^:142-145  if (!cpuOnly) { success = setupCuptiInitCallback(); cpuOnly = !success; }
//            CuptiCallbackApi.cpp@7a3ba363^:161-175  initCallbackApi = cuptiSubscribe(&subscriber_, switchboard, nullptr)
//   lazy  (7a3ba363 and later): no subscriber; CUPTI is checked at the first enableGpuTracing:
//            CuptiActivityProfiler.cpp@7a3ba363:105-126  call_once(isAvailable = cuptiGetVersion ok), else CPU-only
//
// One torch.profiler cycle (torch.profiler.schedule: warmup -> active -> stop; repeat), as driven
// by PyTorch's prepareTrace / startTrace / stopTrace (torch/csrc/profiler/kineto_shim.cpp):
//   prepare  GenericActivityProfiler::configure (GenericActivityProfiler.cpp@7a3ba363:469-519):
//            resetTraceData -> clearGpuActivities -> CuptiActivityApi::clearActivities
//              (CuptiActivityApi.cpp@114171df:252-273: FlushAll(0) only if Kineto has buffers out,
//               then the ready buffers are thrown away);
//            then, unless CPU-only, enableGpuTracing (CuptiActivityProfiler.cpp@7a3ba363:105-126):
//              configureCuptiTimestampSource (CuptiTimestamp.cpp@7a3ba363:28-49: a TSC timestamp
//              callback on Linux with CUDA >= 11.6), enableCuptiActivities
//              (CuptiActivityApi.cpp@baea3804:327-408): cuptiGetVersion -> canRejectBuffer_,
//              cuptiActivityRegisterCallbacks, cuptiActivityEnable for each selected kind in
//              ActivityType order (a std::set): MEMCPY, MEMSET, CONCURRENT_KERNEL,
//              EXTERNAL_CORRELATION, RUNTIME, DRIVER, OVERHEAD.
//   start    startTraceInternal (GenericActivityProfiler.cpp@7a3ba363:617-625): no CUPTI call.
//   stop     stopTraceInternal (GenericActivityProfiler.cpp@7a3ba363:627-636): disableGpuTracing ->
//            disableCuptiActivities (CuptiActivityApi.cpp@baea3804:410-441), kinds off, in the same
//            order. The buffer callbacks stay registered; Kineto never unregisters them.
//   process  processTraceInternal -> processGpuActivities (CuptiActivityProfiler.cpp@7a3ba363:189-191)
//            -> activityBuffers (CuptiActivityApi.cpp@baea3804:183-218): FlushAll(FORCED) only if
//            Kineto has buffers out, then every ready buffer's records are processed.
// PyTorch selects the kinds: activities=[CPU] gives kCpuTypes (EXTERNAL_CORRELATION, CUDA_RUNTIME,
// CUDA_DRIVER reach CUPTI), [CPU, CUDA] adds kCudaTypes (kineto_shim.cpp, kCpuTypes / kCudaTypes).
//
// Buffers (CuptiActivityApi.cpp@baea3804): bufferRequested (150-181) allocates kBufSize up to
// maxGpuBufferCount_ (= 1 + max size / kBufSize, 117-119); past it, stopCollection, and a null
// buffer only if canRejectBuffer_ (cuptiVersion >= 27, line 340); before baea3804 always null
// (CuptiActivityApi.cpp@7a3ba363:155-168). bufferCompleted (280-308) drops a buffer it did not
// allocate ("bufferCompleted called with unknown buffer", 288-293, at 114171df 292-296) and, when
// collection stopped and it cannot reject, frees the buffer without keeping its records (295-299).
//
// TEARDOWN_CUPTI=1 (CuptiActivityApi.cpp@baea3804:443-503, CuptiCallbackApi.cpp:94-104): forced
// flush, then cuptiUnsubscribe and cuptiFinalize (in an API exit callback), then the callbacks are
// subscribed again (reenableCuptiCallbacks_, lines 39-57). Modelled in teardown().
//
// CUPTI is reached through a table of functions: the fake app binds it by symbol lookup (a
// preloaded liblaggard's definitions first, as the dynamic linker binds libtorch_cuda.so's),
// unit tests bind it to laggard's handling of foreign calls in front of the fake CUPTI.
// Buffer callbacks carry no user data, so one FakeKineto at a time (Kineto is a singleton too).
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace laggard::fake {

struct KinetoCupti {
  std::function<CUptiResult(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*)> subscribe;
  std::function<CUptiResult(CUpti_SubscriberHandle)> unsubscribe;
  std::function<CUptiResult()> finalize;
  std::function<CUptiResult(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId)> enable_callback;
  std::function<CUptiResult(uint32_t*)> get_version;
  std::function<CUptiResult(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc)> register_callbacks;
  std::function<CUptiResult(CUpti_ActivityKind)> enable;
  std::function<CUptiResult(CUpti_ActivityKind)> disable;
  std::function<CUptiResult(uint32_t)> flush_all;
  std::function<CUptiResult(uint8_t*, size_t, CUpti_Activity**)> next_record;
  std::function<CUptiResult(CUpti_TimestampCallbackFunc)> register_timestamp_callback;
};

enum class KinetoGeneration { eager_subscribe, lazy };

struct KinetoOptions {
  KinetoGeneration generation = KinetoGeneration::lazy;
  bool rejects_by_version = true;  // baea3804 and later: null buffers only from CUPTI API v27
  size_t buffer_bytes = 64 * 1024; // kBufSize is 4 MiB (CuptiActivityApi.cpp:27); smaller keeps tests small
  int64_t max_buffer_bytes = 128 * 1024 * 1024;  // activitiesMaxGpuBufferSize, default 128 MiB
  bool tsc_clock = true;           // getTSCTimestampFlag: a TSC timestamp callback
  bool teardown = false;           // TEARDOWN_CUPTI=1
};

class FakeKineto {
 public:
  FakeKineto(KinetoCupti cupti, KinetoOptions opt) : cupti_(std::move(cupti)), opt_(opt) {
    current() = this;
    max_buffers_ = 1 + opt_.max_buffer_bytes / int64_t(opt_.buffer_bytes);  // setMaxBufferSize, :117-119
  }
  ~FakeKineto() { current() = nullptr; }
  FakeKineto(const FakeKineto&) = delete;
  FakeKineto& operator=(const FakeKineto&) = delete;

  // libkineto_init (prepareTrace calls it at the first profiler use).
  void init() {
    if (initialized_) return;
    initialized_ = true;
    if (opt_.generation != KinetoGeneration::eager_subscribe) return;
    // init.cpp@7a3ba363^:142-145 -> setupCuptiInitCallback (82-101).
    subscribed_ = cupti_.subscribe(&subscriber_, &FakeKineto::switchboard, nullptr) == CUPTI_SUCCESS;
    if (subscribed_)
      subscribed_ = cupti_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE,
                                           CUPTI_CBID_RESOURCE_CONTEXT_CREATED) == CUPTI_SUCCESS;
    cpu_only_ = !subscribed_;
  }

  // torch.profiler entering warmup (or its first active step): prepareTrace -> configure.
  void prepare(bool gpu_activities) {
    init();
    kinds_ = gpu_activities ? std::vector<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET,
                                                                CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                                                CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                                                CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER,
                                                                CUPTI_ACTIVITY_KIND_OVERHEAD}
                            : std::vector<CUpti_ActivityKind>{CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION,
                                                                CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
    if (cpu_only_) return;  // GenericActivityProfiler::resetTraceData/configure: if (!cpuOnly_)
    clear_activities();
    if (opt_.teardown && tracing_enabled_) teardown();  // onResetTraceData -> teardownContext
    enable_gpu_tracing();
  }
  void start() {}  // startTraceInternal: no CUPTI call
  void stop() {
    if (cpu_only_ || !cupti_available_) return;
    for (CUpti_ActivityKind k : kinds_) cupti_.disable(k);  // disableCuptiActivities
  }
  // processTrace: returns the records of this cycle.
  uint64_t process() {
    if (cpu_only_ || !cupti_available_) return 0;
    uint64_t n = 0, kernels = 0;
    for (auto& [p, buf] : activity_buffers())
      for (CUpti_Activity* r = nullptr; cupti_.next_record(p, buf.valid, &r) == CUPTI_SUCCESS;) {
        ++n;
        kernels += r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
      }
    records_ += n;
    kernel_records_ += kernels;
    return n;
  }
  // One whole cycle with `work` run while active (warmup steps left out).
  template <class Work>
  uint64_t cycle(bool gpu_activities, Work work) {
    prepare(gpu_activities);
    start();
    work();
    stop();
    return process();
  }

  // TEARDOWN_CUPTI=1: CuptiActivityApi::teardownContext (baea3804:443-503), run synchronously
  // here: a subscriber if Kineto has none (457-465: initCallbackApi), forced flush (477-478),
  // cuptiUnsubscribe + cuptiFinalize (in an API exit callback, CuptiCallbackApi.cpp:94-104), then
  // subscribed again, now (reenableCuptiCallbacks_, 39-57, 495-498) or at the next
  // enableCuptiActivities (lazy re-init, 330-334): either way Kineto holds a subscriber after it.
  void teardown() {
    if (!subscribed_) subscribed_ = cupti_.subscribe(&subscriber_, &FakeKineto::switchboard, nullptr) == CUPTI_SUCCESS;
    if (!subscribed_) return;  // "CUPTI Callback failed to init, skipping teardown"
    cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    cupti_.unsubscribe(subscriber_);
    cupti_.finalize();
    ++teardowns_;
    tracing_enabled_ = false;
    subscribed_ = cupti_.subscribe(&subscriber_, &FakeKineto::switchboard, nullptr) == CUPTI_SUCCESS;
    if (subscribed_ && opt_.generation == KinetoGeneration::eager_subscribe)
      cupti_.enable_callback(1, subscriber_, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED);
  }

  bool cpu_only() const { return cpu_only_; }
  bool subscribed() const { return subscribed_; }
  uint64_t records() const { return records_; }
  uint64_t kernel_records() const { return kernel_records_; }
  uint64_t unknown_buffers() const { return unknown_buffers_.load(); }
  uint64_t declined() const { return declined_.load(); }
  bool stopped_collection() const { return stop_collection_.load(); }
  uint64_t context_callbacks() const { return context_callbacks_.load(); }
  uint64_t teardowns() const { return teardowns_; }
  static CUpti_BuffersCallbackRequestFunc request_fn() { return &FakeKineto::requested; }
  static CUpti_BuffersCallbackCompleteFunc complete_fn() { return &FakeKineto::completed; }

 private:
  struct Buffer {
    std::unique_ptr<uint8_t[], void (*)(void*)> data{nullptr, &std::free};
    size_t valid = 0;
  };

  static FakeKineto*& current() {
    static FakeKineto* k = nullptr;
    return k;
  }
  static void CUPTIAPI switchboard(void*, CUpti_CallbackDomain d, CUpti_CallbackId id, const void*) {
    if (FakeKineto* self = current(); self && d == CUPTI_CB_DOMAIN_RESOURCE && id == CUPTI_CBID_RESOURCE_CONTEXT_CREATED)
      ++self->context_callbacks_;
  }
  static uint64_t CUPTIAPI tsc() {  // getApproximateTime(): a 2.5 GHz TSC
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>((double(ts.tv_sec) * 1e9 + double(ts.tv_nsec)) * 2.5);
  }

  // CuptiActivityProfiler::enableGpuTracing (7a3ba363:105-126) and enableCuptiActivities.
  void enable_gpu_tracing() {
    if (!availability_checked_) {  // std::call_once(cuptiInitializationOnce_, ...)
      availability_checked_ = true;
      uint32_t v = 0;
      cupti_available_ = opt_.generation == KinetoGeneration::eager_subscribe || cupti_.get_version(&v) == CUPTI_SUCCESS;
      if (!cupti_available_) cpu_only_ = true;
    }
    if (!cupti_available_) return;
    if (opt_.tsc_clock) cupti_.register_timestamp_callback(&FakeKineto::tsc);
    uint32_t version = 0;
    cupti_.get_version(&version);
    {
      std::lock_guard<std::mutex> l(mu_);
      can_reject_ = !opt_.rejects_by_version || version >= 27;  // baea3804:336-343
      stop_collection_ = false;
    }
    cupti_.register_callbacks(&FakeKineto::requested, &FakeKineto::completed);
    for (CUpti_ActivityKind k : kinds_) cupti_.enable(k);
    tracing_enabled_ = true;
  }

  // CuptiActivityApi::clearActivities (114171df:252-273).
  void clear_activities() {
    bool out;
    {
      std::lock_guard<std::mutex> l(mu_);
      out = !allocated_.empty();
      if (!out) ready_.clear();
    }
    if (!out) return;
    cupti_.flush_all(0);
    std::lock_guard<std::mutex> l(mu_);
    ready_.clear();
  }

  // CuptiActivityApi::activityBuffers (baea3804:183-218).
  std::map<uint8_t*, Buffer> activity_buffers() {
    bool out;
    {
      std::lock_guard<std::mutex> l(mu_);
      out = !allocated_.empty();
    }
    if (out) cupti_.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::lock_guard<std::mutex> l(mu_);
    return std::move(ready_);
  }

  // bufferRequested (baea3804:150-181).
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records) {
    *buffer = nullptr;
    *size = 0;
    *max_records = 0;
    FakeKineto* self = current();
    if (!self) return;
    std::lock_guard<std::mutex> l(self->mu_);
    if (!self->stop_collection_ && int64_t(self->allocated_.size()) >= self->max_buffers_) self->stop_collection_ = true;
    if (self->stop_collection_ && self->can_reject_) {
      ++self->declined_;
      return;
    }
    Buffer b;
    b.data.reset(static_cast<uint8_t*>(std::aligned_alloc(8, self->opt_.buffer_bytes)));
    *buffer = b.data.get();
    *size = self->opt_.buffer_bytes;
    self->allocated_.emplace(*buffer, std::move(b));
  }
  // bufferCompleted (baea3804:280-308).
  static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
    FakeKineto* self = current();
    if (!self) return;
    std::lock_guard<std::mutex> l(self->mu_);
    auto it = self->allocated_.find(buffer);
    if (it == self->allocated_.end()) {  // "bufferCompleted called with unknown buffer"
      ++self->unknown_buffers_;
      return;
    }
    if (self->stop_collection_ && !self->can_reject_) {  // 295-299: freed, records not kept
      self->allocated_.erase(it);
      return;
    }
    it->second.valid = valid;
    self->ready_.emplace(it->first, std::move(it->second));
    self->allocated_.erase(it);
  }

  KinetoCupti cupti_;
  KinetoOptions opt_;
  int64_t max_buffers_ = 0;
  bool initialized_ = false, subscribed_ = false, cpu_only_ = false;
  bool availability_checked_ = false, cupti_available_ = true, tracing_enabled_ = false;
  CUpti_SubscriberHandle subscriber_ = nullptr;
  std::vector<CUpti_ActivityKind> kinds_;
  std::mutex mu_;  // CuptiActivityApi::mutex_
  std::map<uint8_t*, Buffer> allocated_, ready_;
  bool can_reject_ = false;
  std::atomic<bool> stop_collection_{false};
  std::atomic<uint64_t> unknown_buffers_{0}, declined_{0}, context_callbacks_{0};
  uint64_t records_ = 0, kernel_records_ = 0, teardowns_ = 0;
};

}  // namespace laggard::fake
