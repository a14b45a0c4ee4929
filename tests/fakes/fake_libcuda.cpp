// A fake libcuda.so.1 that also exports the CUPTI functions laggard uses, for end-to-end tests
// on machines without a GPU. Like the real driver, cuInit loads CUDA_INJECTION64_PATH and calls
// its InitializeInjection; launches go through CUPTI-style callbacks and activity records (see
// fake_cupti_core.h). Point LAGGARD_CUPTI_PATH at this file so laggard's loader picks it up.
//
// FAKE_CUDA_CLOCK_SKEW_NS shifts its "CUPTI" clock against CLOCK_REALTIME, so the tests can see
// laggard measure and apply the offset.
//
// Exit order: like libcupti, whose static destructors tear CUPTI down at exit, the fake
// registers a destructor (a function-local static, constructed at the first CUPTI call, so
// __cxa_atexit runs it before every handler registered earlier). A CUPTI call after it has run
// prints "fake CUPTI: <function> called after CUPTI's static destructors ran" and aborts, which
// is what a real process risks then.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "fake_cupti_core.h"

namespace {

laggard::fake::FakeCuptiCore& core() {
  static auto* c = [] {
    auto* c = new laggard::fake::FakeCuptiCore();
    if (const char* skew = std::getenv("FAKE_CUDA_CLOCK_SKEW_NS")) c->clock_skew_ns = std::atoll(skew);
    return c;
  }();
  return *c;
}

std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;
std::atomic<bool> g_torn_down{false};

struct Teardown {
  ~Teardown() { g_torn_down.store(true); }
};

// Every CUPTI entry point starts here.
void cupti_call(const char* fn) {
  static Teardown teardown;  // registered with __cxa_atexit at the first CUPTI call
  if (g_torn_down.load()) {
    std::fprintf(stderr, "fake CUPTI: %s called after CUPTI's static destructors ran\n", fn);
    std::abort();
  }
}
#define FAKE_CUPTI_CALL() cupti_call(__func__)

}  // namespace

extern "C" {

// ---- driver ----
CUresult CUDAAPI cuInit(unsigned int) {
  std::call_once(g_init_once, [] {
    if (const char* inj = std::getenv("CUDA_INJECTION64_PATH"); inj && *inj) {
      if (void* h = dlopen(inj, RTLD_NOW | RTLD_LOCAL)) {
        if (auto fn = reinterpret_cast<int (*)()>(dlsym(h, "InitializeInjection"))) fn();
      }
    }
    g_initialized.store(true);
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!g_initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

// ---- test hooks: a kernel launch / an async copy as the runtime would make them ----
__attribute__((visibility("default"))) unsigned fake_cuda_launch(const char* name, unsigned grid, unsigned block,
                                                                 unsigned long long dur_ns, int driver_api) {
  laggard::fake::KernelSpec k;
  k.name = name;
  k.grid[0] = grid;
  k.block[0] = block;
  k.dur_ns = dur_ns;
  if (driver_api) return core().launch(k, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  return core().launch(k);
}

__attribute__((visibility("default"))) unsigned fake_cuda_memcpy(unsigned long long bytes) {
  return core().memcpy_async(bytes);
}

// ---- CUPTI ----
CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud) {
  FAKE_CUPTI_CALL();
  return core().subscribe(s, cb, ud);
}
CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle s) {
  FAKE_CUPTI_CALL();
  return core().unsubscribe(s);
}
CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d,
                                         CUpti_CallbackId id) {
  FAKE_CUPTI_CALL();
  return core().enable_callback(en, s, d, id);
}
CUptiResult CUPTIAPI cuptiGetCallbackName(CUpti_CallbackDomain d, uint32_t id, const char** name) {
  FAKE_CUPTI_CALL();
  return core().callback_name(d, id, name);
}
CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc rq,
                                                    CUpti_BuffersCallbackCompleteFunc done) {
  FAKE_CUPTI_CALL();
  return core().register_buffers(rq, done);
}
CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind k) {
  FAKE_CUPTI_CALL();
  return core().enable_kind(k);
}
CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind k) {
  FAKE_CUPTI_CALL();
  return core().disable_kind(k);
}
CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  FAKE_CUPTI_CALL();
  return core().flush_all(flag);
}
CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buf, size_t valid, CUpti_Activity** rec) {
  FAKE_CUPTI_CALL();
  return laggard::fake::FakeCuptiCore::next_record(buf, valid, rec);
}
CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext c, uint32_t s, size_t* n) {
  FAKE_CUPTI_CALL();
  return core().dropped_records(c, s, n);
}
CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* ns) {
  FAKE_CUPTI_CALL();
  return core().timestamp(ns);
}
CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char** s) {
  FAKE_CUPTI_CALL();
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "fake CUPTI error";
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc cb, void* ud,
                                       CUpti_SubscriberParams* p) {
  FAKE_CUPTI_CALL();
  return core().subscribe_v2(s, cb, ud, p);
}
CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* v) {
  FAKE_CUPTI_CALL();
  return core().get_version(v);
}
CUptiResult CUPTIAPI cuptiActivityEnableDeviceGraph(uint8_t enable) {
  FAKE_CUPTI_CALL();
  return core().enable_device_graph(enable);
}
CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc fn) {
  FAKE_CUPTI_CALL();
  return core().register_timestamp_callback(fn);
}

// ---- test hook: how many records the app's own "profiler" buffers received ----
__attribute__((visibility("default"))) unsigned long long fake_cuda_records_in(unsigned char* buffer,
                                                                               unsigned long long valid) {
  CUpti_Activity* rec = nullptr;
  unsigned long long n = 0;
  while (laggard::fake::FakeCuptiCore::next_record(buffer, valid, &rec) == CUPTI_SUCCESS) ++n;
  return n;
}

// ---- test hook: whether a CUPTI client has switched kernel records on (laggard attached) ----
__attribute__((visibility("default"))) int fake_cuda_kernel_records_enabled() {
  return core().kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? 1 : 0;
}

}  // extern "C"
