// The CUPTI functions another client uses to take over the process-wide activity API, exported
// by liblaggard.so so that, when it is LD_PRELOADed, a client linked against libcupti (Kineto
// in libtorch_cuda.so, for one) calls these first. Each notes the call (activity_watch.h) and
// forwards it unchanged to the libcupti the caller would have reached, returning its result.
// Signatures from CUDA 13.0's cupti_activity.h. laggard's own CUPTI calls go through dlsym on
// its own libcupti handle and never pass here.
#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "activity_watch.h"
#include "cupti_loader.h"

namespace laggard::cupti {
namespace {

// The caller's file name, for the log ("libtorch_cuda.so").
const char* caller_name(void* return_address) {
  Dl_info info{};
  if (!dladdr(return_address, &info) || !info.dli_fname) return nullptr;
  const char* slash = std::strrchr(info.dli_fname, '/');
  return slash ? slash + 1 : info.dli_fname;
}

void* own_symbol(const char* name) {
  Dl_info info{};
  void* self = reinterpret_cast<void*>(&own_symbol);
  if (!dladdr(self, &info) || !info.dli_fbase) return nullptr;
  void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  void* f = h ? dlsym(h, name) : nullptr;
  if (h) dlclose(h);
  return f;
}

// The next definition after liblaggard in the global scope (a libcupti the caller is linked
// against); else the first loaded libcupti that has it (one loaded RTLD_LOCAL).
void* resolve(const char* name) {
  if (void* f = dlsym(RTLD_NEXT, name)) return f;
  void* mine = own_symbol(name);
  for (const std::string& path : loaded_cupti_paths()) {
    void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) continue;
    void* f = dlsym(h, name);
    dlclose(h);  // balances NOLOAD's reference; the library stays loaded
    if (f && f != mine) return f;
  }
  return nullptr;
}

template <class F>
F real(const char* name, std::atomic<F>& cache) {
  F f = cache.load(std::memory_order_acquire);
  if (!f) {
    f = reinterpret_cast<F>(resolve(name));
    cache.store(f, std::memory_order_release);
  }
  return f;
}

}  // namespace
}  // namespace laggard::cupti

using namespace laggard::cupti;

extern "C" {

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed) {
  static std::atomic<decltype(&cuptiActivityRegisterCallbacks)> fn{nullptr};
  auto f = real("cuptiActivityRegisterCallbacks", fn);
  if (!f) return CUPTI_ERROR_NOT_INITIALIZED;
  CUptiResult r = f(requested, completed);
  try {
    if (r == CUPTI_SUCCESS) note_register_callbacks(caller_name(__builtin_return_address(0)));
  } catch (...) {
  }
  return r;
}

__attribute__((visibility("default"))) CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  static std::atomic<decltype(&cuptiActivityDisable)> fn{nullptr};
  auto f = real("cuptiActivityDisable", fn);
  if (!f) return CUPTI_ERROR_NOT_INITIALIZED;
  CUptiResult r = f(kind);
  try {
    if (r == CUPTI_SUCCESS) note_disable(kind, caller_name(__builtin_return_address(0)));
  } catch (...) {
  }
  return r;
}

__attribute__((visibility("default"))) CUptiResult CUPTIAPI
cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  static std::atomic<decltype(&cuptiActivityRegisterTimestampCallback)> fn{nullptr};
  auto f = real("cuptiActivityRegisterTimestampCallback", fn);
  if (!f) return CUPTI_ERROR_NOT_INITIALIZED;
  CUptiResult r = f(callback);
  try {
    if (r == CUPTI_SUCCESS) note_timestamp_callback(caller_name(__builtin_return_address(0)));
  } catch (...) {
  }
  return r;
}

}  // extern "C"
