// Sharing this process's CUPTI with another client (torch.profiler's Kineto, a second tool):
// laggard steps aside and keeps count. The design and its reasons are in docs/cupti.md.
//
// CUPTI has one subscriber per process (before CUPTI 13.2 / driver r610) and one process-wide
// activity API: one pair of buffer callbacks, one set of enabled kinds (cupti_activity.h,
// cupti_callbacks.h, CUDA 13.0). liblaggard.so, LD_PRELOADed, defines the CUPTI functions another
// client uses to claim either (cupti_interpose.cpp), so a client linked against libcupti calls
// laggard first; each call comes here with the function it would have reached:
//
//  - cuptiSubscribe(_v2): laggard gives its subscriber up first, so the other client gets it as it
//    would alone (Kineto before 7a3ba363 otherwise turns the whole profiler CPU-only). Without it,
//    laggard's kernels go unattributed (counted, and said per window); laggard subscribes again
//    once the other client unsubscribes.
//  - cuptiActivityRegisterCallbacks: laggard's own callbacks stay registered with CUPTI and route:
//    while the other client holds the activity API, CUPTI's buffer requests go to it, and every
//    buffer goes back to the client that supplied it (Kineto drops buffers it did not allocate,
//    CuptiActivityApi.cpp:292-296 at 114171df, which would lose laggard's buffer and its records
//    at each profiler start). laggard switches off the kinds only it had on (else their records
//    would land in the other client's buffers), and reads the kernel, copy and set records of
//    the other client's buffers on their way back, changing nothing.
//  - cuptiActivityEnable/Disable: the other client's kinds are noted; laggard never switches off a
//    kind the other client has on. When the other client has switched off its last kind and its
//    buffers are back (its own flush), laggard takes the activity API back.
//  - cuptiActivityFlushAll: forwarded; afterwards a pending hand-back completes.
//  - cuptiFinalize: CUPTI is torn down for everyone; laggard attaches again from its flush thread.
//  - cuptiActivityRegisterTimestampCallback: noted (the clock check names the client).
// Clients that bind libcupti otherwise (a static CUPTI, dlsym on their own handle, Nsight's
// injection) are not seen: laggard's own attach is then refused (retried later), or its windows
// are marked starved.
#pragma once

#include <cupti.h>

#include <bitset>
#include <cstdint>
#include <string>

namespace laggard::cupti {

class GpuCapture;

// Activity kinds are small integers (cupti_activity.h: CUPTI_ACTIVITY_KIND_COUNT is below 128).
constexpr size_t kKindSlots = 128;
using KindSet = std::bitset<kKindSlots>;
inline bool has_kind(const KindSet& s, CUpti_ActivityKind k) { return size_t(k) < kKindSlots && s.test(size_t(k)); }

// What other clients do with this process's CUPTI, as the interposers saw it (a copy).
struct Tenancy {
  bool foreign_subscriber = false;  // another client holds CUPTI's one subscriber
  std::string subscriber;           // ... its library ("libtorch_cuda.so")
  bool foreign_activity = false;    // another client holds the activity API: buffers go to it
  bool release_pending = false;     // it switched its last kind off; its buffers are not all back
  std::string activity;             // the library that registered its buffer callbacks
  KindSet foreign_kinds;            // kinds another client switched on and not off again
  uint64_t foreign_buffers = 0;     // its buffers CUPTI holds
  uint64_t takes = 0, releases = 0, subscribes = 0, finalizes = 0;
  uint64_t timestamp_callbacks = 0;
  std::string timestamp_owner;      // the library that installed a timestamp callback
};
Tenancy tenancy();
void reset_tenancy();  // tests

// The capture that owns laggard's buffers and is told when another client comes and goes.
void set_tenant(GpuCapture* capture);
void clear_tenant(GpuCapture* capture);  // only if it is `capture`
GpuCapture* tenant();

// The realpath of the libcupti laggard loaded ("" before): another client's calls are handled
// only when they reach that one.
void set_laggard_cupti_library(const std::string& path);
std::string laggard_cupti_library();

// The buffer callbacks laggard registers with CUPTI (see the top of this file). With no capture
// to ask (its attach failed after registering, or it was destroyed), a request still gets a
// buffer, freed when it comes back: CUPTI before API version 27 must never be refused one.
void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid_size);

// The other client switched its last kind off and its buffers are back: the activity API is
// laggard's again (true), or not yet (false). `force` (the flush thread, after a while): hand
// its buffers back with a forced flush first.
bool finish_release(bool force);

// Another client's CUPTI calls, as the interposers hand them over: `real` is the function the
// caller would have reached, `caller` its library file name (may be null).
namespace foreign {
CUptiResult subscribe(decltype(&cuptiSubscribe) real, CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                      void* userdata, const char* caller);
CUptiResult subscribe_v2(decltype(&cuptiSubscribe_v2) real, CUpti_SubscriberHandle* subscriber,
                         CUpti_CallbackFunc callback, void* userdata, CUpti_SubscriberParams* params,
                         const char* caller);
CUptiResult unsubscribe(decltype(&cuptiUnsubscribe) real, CUpti_SubscriberHandle subscriber, const char* caller);
CUptiResult finalize(decltype(&cuptiFinalize) real, const char* caller);
CUptiResult register_callbacks(decltype(&cuptiActivityRegisterCallbacks) real, CUpti_BuffersCallbackRequestFunc requested,
                               CUpti_BuffersCallbackCompleteFunc completed, const char* caller);
CUptiResult enable(decltype(&cuptiActivityEnable) real, CUpti_ActivityKind kind, const char* caller);
CUptiResult disable(decltype(&cuptiActivityDisable) real, CUpti_ActivityKind kind, const char* caller);
CUptiResult flush_all(decltype(&cuptiActivityFlushAll) real, uint32_t flag, const char* caller);
CUptiResult timestamp_callback(decltype(&cuptiActivityRegisterTimestampCallback) real,
                               CUpti_TimestampCallbackFunc callback, const char* caller);
}  // namespace foreign

}  // namespace laggard::cupti
