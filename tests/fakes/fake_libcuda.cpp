// A fake libcuda.so.1 that also exports the CUPTI functions laggard uses, for end-to-end tests
// on machines without a GPU. Like the real driver, cuInit loads CUDA_INJECTION64_PATH and calls
// its InitializeInjection, then announces the context it creates to a subscriber that asked
// (CUPTI_CBID_RESOURCE_CONTEXT_CREATED, what Kineto before 7a3ba363 waits for); launches go
// through CUPTI-style callbacks and activity records (see fake_cupti_core.h). Point
// LAGGARD_CUPTI_PATH at this file so laggard's loader picks it up.
//
// Environment:
//   FAKE_CUDA_CLOCK_SKEW_NS  shifts its "CUPTI" clock against CLOCK_REALTIME, so the tests can see
//                            laggard measure and apply the offset
//   FAKE_CUPTI_VERSION       cuptiGetVersion's answer (default: the headers' CUPTI_API_VERSION); below
//                            27 a declined buffer request aborts the process, as such a CUPTI can
//   FAKE_CUPTI_PARTIAL_FLUSH 0: a default flush returns full buffers only (see fake_cupti_core.h)
//   FAKE_CUPTI_NSIGHT        1: a subscriber laggard cannot see holds CUPTI from the start (as
//                            Nsight Systems, injected before the application); a number N: it
//                            leaves after N launches
//   FAKE_CUDA_GPUS           physical GPUs (default 1), in PCI order; GPU i sits at bus 0x10*(i+1)
//   FAKE_CUDA_FASTEST        CUDA's default order (CUDA_DEVICE_ORDER=FASTEST_FIRST) as physical
//                            indices, e.g. "2,0,1" (default: PCI order); CUDA_DEVICE_ORDER=PCI_BUS_ID
//                            gives PCI order. CUDA_VISIBLE_DEVICES then selects from that order by
//                            index, by UUID (GPU-fake-N) or a MIG instance (MIG-fake-N-M on GPU N).
//
// Exit order: like libcupti, whose static destructors tear CUPTI down at exit, the fake
// registers a destructor (a function-local static, constructed at the first CUPTI call, so
// __cxa_atexit runs it before every handler registered earlier). A CUPTI call after it has run
// prints "fake CUPTI: <function> called after CUPTI's static destructors ran" and aborts, which
// is what a real process risks then.
#include <cuda.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "fake_cupti_core.h"

namespace {

laggard::fake::FakeCuptiCore& core() {
  static auto* c = [] {
    auto* c = new laggard::fake::FakeCuptiCore();
    if (const char* skew = std::getenv("FAKE_CUDA_CLOCK_SKEW_NS")) c->clock_skew_ns = std::atoll(skew);
    if (const char* v = std::getenv("FAKE_CUPTI_VERSION")) c->api_version = uint32_t(std::atoll(v));
    if (const char* p = std::getenv("FAKE_CUPTI_PARTIAL_FLUSH")) c->partial_on_default_flush = std::atoi(p) != 0;
    if (const char* n = std::getenv("FAKE_CUPTI_NSIGHT"); n && *n && std::strcmp(n, "0") != 0) c->refuse_subscribe = true;
    return c;
  }();
  return *c;
}

// FAKE_CUPTI_NSIGHT=N: the unseen subscriber leaves after N launches.
void count_launch_for_nsight() {
  static std::atomic<long> launches{0};
  static const long leave_after = [] {
    const char* n = std::getenv("FAKE_CUPTI_NSIGHT");
    return n ? std::atol(n) : 0;
  }();
  if (leave_after > 1 && ++launches == leave_after) core().other_subscriber_leaves();
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

// ---- devices: CUDA's numbering over the physical GPUs (see the top of this file) ----
struct Device {
  int physical;
  int mig = -1;  // a MIG instance of `physical`
};

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

std::vector<std::string> split(const char* s) {
  std::vector<std::string> out;
  std::stringstream in(s ? s : "");
  for (std::string part; std::getline(in, part, ',');) out.push_back(part);
  return out;
}

const std::vector<Device>& devices() {
  static const std::vector<Device> visible = [] {
    const int gpus = env_int("FAKE_CUDA_GPUS", 1);
    std::vector<int> order;
    const char* dev_order = std::getenv("CUDA_DEVICE_ORDER");
    if (!(dev_order && std::strcmp(dev_order, "PCI_BUS_ID") == 0))
      for (const std::string& p : split(std::getenv("FAKE_CUDA_FASTEST"))) order.push_back(std::atoi(p.c_str()));
    if (int(order.size()) != gpus) {
      order.clear();
      for (int i = 0; i < gpus; ++i) order.push_back(i);
    }
    const char* cvd = std::getenv("CUDA_VISIBLE_DEVICES");
    std::vector<Device> out;
    if (!cvd) {
      for (int p : order) out.push_back({p});
      return out;
    }
    for (const std::string& id : split(cvd)) {  // CUDA stops at the first entry it cannot use
      int a = -1, b = -1;
      if (std::sscanf(id.c_str(), "MIG-fake-%d-%d", &a, &b) == 2 && a >= 0 && a < gpus) out.push_back({a, b});
      else if (std::sscanf(id.c_str(), "GPU-fake-%d", &a) == 1 && a >= 0 && a < gpus) out.push_back({a});
      else if (char* end = nullptr; (a = int(std::strtol(id.c_str(), &end, 10))), end && *end == '\0' && !id.empty() &&
                                                                                     a >= 0 && a < gpus)
        out.push_back({order[size_t(a)]});
      else break;
    }
    return out;
  }();
  return visible;
}

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
    core().cuda_init();
    g_initialized.store(true);
    core().resource_callback(CUPTI_CBID_RESOURCE_CONTEXT_CREATED);  // the primary context
  });
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  if (!g_initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = int(devices().size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* dev, int ordinal) {
  if (!g_initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (ordinal < 0 || size_t(ordinal) >= devices().size()) return CUDA_ERROR_INVALID_DEVICE;
  *dev = ordinal;
  return CUDA_SUCCESS;
}

// "domain:bus:device.function"; a MIG instance reports its GPU's.
CUresult CUDAAPI cuDeviceGetPCIBusId(char* out, int len, CUdevice dev) {
  if (!g_initialized.load()) return CUDA_ERROR_NOT_INITIALIZED;
  if (dev < 0 || size_t(dev) >= devices().size() || !out || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(out, size_t(len), "00000000:%02X:00.0", 0x10 * (devices()[size_t(dev)].physical + 1));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = 13000;
  return CUDA_SUCCESS;
}

// The calling thread's current device, as laggard's NCCL source asks at a communicator's init.
// A program playing "one process drives several GPUs" sets it with laggard_fake_cuda_set_device
// (cudaSetDevice's part here).
thread_local int g_current_device = 0;
CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  *device = g_current_device;
  return CUDA_SUCCESS;
}
void laggard_fake_cuda_set_device(int device) { g_current_device = device; }

// ---- test hooks: a kernel launch / an async copy as the runtime would make them ----
__attribute__((visibility("default"))) unsigned fake_cuda_launch(const char* name, unsigned grid, unsigned block,
                                                                 unsigned long long dur_ns, int driver_api) {
  laggard::fake::KernelSpec k;
  k.name = name;
  k.grid[0] = grid;
  k.block[0] = block;
  k.dur_ns = dur_ns;
  count_launch_for_nsight();
  if (driver_api) return core().launch(k, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel);
  return core().launch(k);
}

__attribute__((visibility("default"))) unsigned fake_cuda_memcpy(unsigned long long bytes) {
  return core().memcpy_async(bytes);
}

// ---- CUPTI: each entry point checks the teardown, then calls the core (one table) ----
#define FAKE_CUPTI_ENTRY_POINTS(X)                                                                                  \
  X(cuptiSubscribe, (CUpti_SubscriberHandle * s, CUpti_CallbackFunc cb, void* ud), subscribe(s, cb, ud))           \
  X(cuptiSubscribe_v2, (CUpti_SubscriberHandle * s, CUpti_CallbackFunc cb, void* ud, CUpti_SubscriberParams* p),   \
    subscribe_v2(s, cb, ud, p))                                                                                    \
  X(cuptiUnsubscribe, (CUpti_SubscriberHandle s), unsubscribe(s))                                                  \
  X(cuptiFinalize, (), finalize())                                                                                 \
  X(cuptiEnableCallback, (uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d, CUpti_CallbackId id),     \
    enable_callback(en, s, d, id))                                                                                 \
  X(cuptiEnableDomain, (uint32_t en, CUpti_SubscriberHandle s, CUpti_CallbackDomain d), enable_domain(en, s, d))   \
  X(cuptiGetCallbackName, (CUpti_CallbackDomain d, uint32_t id, const char** name), callback_name(d, id, name))    \
  X(cuptiActivityRegisterCallbacks, (CUpti_BuffersCallbackRequestFunc rq, CUpti_BuffersCallbackCompleteFunc done), \
    register_buffers(rq, done))                                                                                    \
  X(cuptiActivityEnable, (CUpti_ActivityKind k), enable_kind(k))                                                   \
  X(cuptiActivityDisable, (CUpti_ActivityKind k), disable_kind(k))                                                 \
  X(cuptiActivityFlushAll, (uint32_t flag), flush_all(flag))                                                       \
  X(cuptiActivityGetNextRecord, (uint8_t * buf, size_t valid, CUpti_Activity** rec), next_record(buf, valid, rec)) \
  X(cuptiActivityGetNumDroppedRecords, (CUcontext c, uint32_t s, size_t* n), dropped_records(c, s, n))             \
  X(cuptiGetTimestamp, (uint64_t * ns), timestamp(ns))                                                             \
  X(cuptiGetVersion, (uint32_t * v), get_version(v))                                                               \
  X(cuptiActivityEnableDeviceGraph, (uint8_t enable), enable_device_graph(enable))                                 \
  X(cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc fn), register_timestamp_callback(fn))

#define FAKE_CUPTI_DEFINE(name, params, call) \
  CUptiResult CUPTIAPI name params {          \
    cupti_call(#name);                        \
    return core().call;                       \
  }
FAKE_CUPTI_ENTRY_POINTS(FAKE_CUPTI_DEFINE)
#undef FAKE_CUPTI_DEFINE

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult r, const char** s) {
  cupti_call(__func__);
  *s = r == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "fake CUPTI error";
  return CUPTI_SUCCESS;
}

// ---- test hook: whether a CUPTI client has switched kernel records on (laggard attached) ----
__attribute__((visibility("default"))) int fake_cuda_kernel_records_enabled() {
  return core().kind_enabled(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) ? 1 : 0;
}

}  // extern "C"
