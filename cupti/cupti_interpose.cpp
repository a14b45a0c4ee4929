// The CUPTI functions another client uses to claim the subscriber or the activity API, exported
// by liblaggard.so so that, when it is LD_PRELOADed, a client linked against libcupti (Kineto in
// libtorch_cuda.so, for one) calls these first. Each finds the function the caller would have
// reached and hands the call to shared_cupti.cpp (foreign::), which steps laggard aside and
// forwards it. Signatures from CUDA 13.0's cupti_callbacks.h and cupti_activity.h. laggard's own
// CUPTI calls go through dlsym on its own libcupti handle and never pass here.
//
// Which function the caller would have reached: first the caller's own dependencies (dlsym on
// its handle searches the object and what it was linked against, not the preloaded libraries),
// so a libtorch_cuda.so linked against a pip wheel's libcupti reaches that one even when another
// libcupti is global; then the next definition after liblaggard in the global scope; then any
// libcupti loaded in the process. A call that reaches a different libcupti from the one laggard
// uses (two copies keep separate state) is forwarded untouched.
#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <cstring>
#include <string>

#include "cupti_loader.h"
#include "shared_cupti.h"

namespace laggard::cupti {
namespace {

const char* file_name(const char* path) {
  const char* slash = path ? std::strrchr(path, '/') : nullptr;
  return slash ? slash + 1 : path;
}

// The caller's file name, for notes and the report ("libtorch_cuda.so").
const char* caller_name(void* return_address) {
  Dl_info info{};
  if (!dladdr(return_address, &info) || !info.dli_fname) return nullptr;
  return file_name(info.dli_fname);
}

void* own_symbol(const char* name) {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_symbol), &info) || !info.dli_fname) return nullptr;
  void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  void* f = h ? dlsym(h, name) : nullptr;
  if (h) dlclose(h);
  return f;
}

// dlsym on the handle of the object holding `address` (its own scope: it and its dependencies).
void* in_callers_scope(const char* name, void* address, void* mine) {
  Dl_info info{};
  if (!dladdr(address, &info) || !info.dli_fname || !*info.dli_fname) return nullptr;
  void* h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!h) return nullptr;
  void* f = dlsym(h, name);
  dlclose(h);  // balances NOLOAD's reference
  return f != mine ? f : nullptr;
}

void* resolve(const char* name, void* return_address) {
  void* mine = own_symbol(name);
  if (void* f = in_callers_scope(name, return_address, mine)) return f;
  if (void* f = dlsym(RTLD_NEXT, name); f && f != mine) return f;
  for (const std::string& path : loaded_cupti_paths()) {
    void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
    if (!h) continue;
    void* f = dlsym(h, name);
    dlclose(h);
    if (f && f != mine) return f;
  }
  return nullptr;
}

// Whether `fn` lives in the libcupti laggard uses (or laggard has loaded none yet).
bool in_laggards_cupti(void* fn) {
  const std::string ours = laggard_cupti_library();
  if (ours.empty()) return true;
  Dl_info info{};
  if (!dladdr(fn, &info) || !info.dli_fname) return false;
  char buf[PATH_MAX];
  const char* real = realpath(info.dli_fname, buf);
  return real && ours == real;
}

bool same_object(void* a, void* b) {
  Dl_info ia{}, ib{};
  return dladdr(a, &ia) && dladdr(b, &ib) && ia.dli_fbase == ib.dli_fbase;
}

struct Resolved {
  void* fn;
  bool ours;  // another client's call on laggard's libcupti: handled; else forwarded untouched
};

Resolved find(const char* name, void* return_address) {
  void* fn = resolve(name, return_address);
  // libcupti calling its own exported function through its PLT is no other client.
  return {fn, fn && !same_object(fn, return_address) && in_laggards_cupti(fn)};
}

}  // namespace
}  // namespace laggard::cupti

using namespace laggard::cupti;

// One exported function per intercepted CUPTI call: resolve, then hand to foreign:: (or forward
// untouched to another copy of CUPTI). No exception leaves: the handlers catch their own.
#define LAGGARD_INTERPOSE(name, params, args)                                                  \
  extern "C" __attribute__((visibility("default"))) CUptiResult CUPTIAPI name params {         \
    void* ret = __builtin_return_address(0);                                                   \
    Resolved r = find(#name, ret);                                                             \
    if (!r.fn) return CUPTI_ERROR_NOT_INITIALIZED;                                             \
    auto real = reinterpret_cast<decltype(&::name)>(r.fn);                                     \
    if (!r.ours) return real args;                                                             \
    try {                                                                                      \
      return LAGGARD_FOREIGN_##name(real, caller_name(ret));                                   \
    } catch (...) {                                                                            \
      return CUPTI_ERROR_UNKNOWN;                                                              \
    }                                                                                          \
  }

#define LAGGARD_FOREIGN_cuptiSubscribe(real, caller) foreign::subscribe(real, subscriber, callback, userdata, caller)
LAGGARD_INTERPOSE(cuptiSubscribe, (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void* userdata),
                  (subscriber, callback, userdata))

#define LAGGARD_FOREIGN_cuptiSubscribe_v2(real, caller) \
  foreign::subscribe_v2(real, subscriber, callback, userdata, params, caller)
LAGGARD_INTERPOSE(cuptiSubscribe_v2,
                  (CUpti_SubscriberHandle * subscriber, CUpti_CallbackFunc callback, void* userdata,
                   CUpti_SubscriberParams* params),
                  (subscriber, callback, userdata, params))

#define LAGGARD_FOREIGN_cuptiUnsubscribe(real, caller) foreign::unsubscribe(real, subscriber, caller)
LAGGARD_INTERPOSE(cuptiUnsubscribe, (CUpti_SubscriberHandle subscriber), (subscriber))

#define LAGGARD_FOREIGN_cuptiFinalize(real, caller) foreign::finalize(real, caller)
LAGGARD_INTERPOSE(cuptiFinalize, (), ())

#define LAGGARD_FOREIGN_cuptiActivityRegisterCallbacks(real, caller) \
  foreign::register_callbacks(real, requested, completed, caller)
LAGGARD_INTERPOSE(cuptiActivityRegisterCallbacks,
                  (CUpti_BuffersCallbackRequestFunc requested, CUpti_BuffersCallbackCompleteFunc completed),
                  (requested, completed))

#define LAGGARD_FOREIGN_cuptiActivityEnable(real, caller) foreign::enable(real, kind, caller)
LAGGARD_INTERPOSE(cuptiActivityEnable, (CUpti_ActivityKind kind), (kind))

#define LAGGARD_FOREIGN_cuptiActivityDisable(real, caller) foreign::disable(real, kind, caller)
LAGGARD_INTERPOSE(cuptiActivityDisable, (CUpti_ActivityKind kind), (kind))

#define LAGGARD_FOREIGN_cuptiActivityFlushAll(real, caller) foreign::flush_all(real, flag, caller)
LAGGARD_INTERPOSE(cuptiActivityFlushAll, (uint32_t flag), (flag))

#define LAGGARD_FOREIGN_cuptiActivityRegisterTimestampCallback(real, caller) \
  foreign::timestamp_callback(real, callback, caller)
LAGGARD_INTERPOSE(cuptiActivityRegisterTimestampCallback, (CUpti_TimestampCallbackFunc callback), (callback))
