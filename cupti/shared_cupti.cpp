#include "shared_cupti.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "gpu_capture.h"

namespace laggard::cupti {
namespace {

struct Shared {
  std::mutex mu;  // calls are rare (a profiler starting, stopping, a buffer a megabyte): a mutex is fine
  Tenancy t;
  CUpti_SubscriberHandle foreign_handle = nullptr;
  CUpti_BuffersCallbackRequestFunc requested = nullptr;  // the other client's, latest registration
  CUpti_BuffersCallbackCompleteFunc completed = nullptr;
  bool had_kinds = false;  // it switched a kind on since it registered
  struct Supplied {
    uint8_t* buffer;
    CUpti_BuffersCallbackCompleteFunc completed;
  };
  std::vector<Supplied> supplied;  // its buffers CUPTI holds, and where each goes back
  std::vector<uint8_t*> orphans;   // buffers lent with no capture to own them
  std::string library;             // laggard's libcupti
  std::atomic<GpuCapture*> tenant{nullptr};
};

constexpr size_t kOrphanBytes = 64 * 1024;

Shared& shared() {
  static auto* s = new Shared();  // never destroyed: CUPTI may call back during exit
  return *s;
}
// At load, as every object laggard keeps for the process (preload/files/safe_write.cpp): never a
// guard a forked child could find held.
[[gnu::constructor]] void make_shared_at_load() { shared(); }

std::string name_or(const char* caller) { return caller && *caller ? caller : "another CUPTI client"; }

}  // namespace

Tenancy tenancy() {
  Shared& s = shared();
  std::lock_guard<std::mutex> l(s.mu);
  Tenancy t = s.t;
  t.foreign_buffers = s.supplied.size();
  return t;
}

void reset_tenancy() {
  Shared& s = shared();
  std::lock_guard<std::mutex> l(s.mu);
  s.t = Tenancy{};
  s.foreign_handle = nullptr;
  s.requested = nullptr;
  s.completed = nullptr;
  s.had_kinds = false;
  s.supplied.clear();
}

void set_laggard_cupti_library(const std::string& path) {
  Shared& s = shared();
  std::lock_guard<std::mutex> l(s.mu);
  s.library = path;
}

std::string laggard_cupti_library() {
  Shared& s = shared();
  std::lock_guard<std::mutex> l(s.mu);
  return s.library;
}

void set_tenant(GpuCapture* capture) { shared().tenant.store(capture, std::memory_order_release); }
void clear_tenant(GpuCapture* capture) { shared().tenant.compare_exchange_strong(capture, nullptr); }
GpuCapture* tenant() { return shared().tenant.load(std::memory_order_acquire); }

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  if (!buffer || !size || !max_records) return;
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;
  try {
    Shared& s = shared();
    CUpti_BuffersCallbackRequestFunc theirs = nullptr;
    CUpti_BuffersCallbackCompleteFunc back = nullptr;
    {
      std::lock_guard<std::mutex> l(s.mu);
      if (s.t.foreign_activity) {
        theirs = s.requested;
        back = s.completed;
      }
    }
    if (theirs) {
      theirs(buffer, size, max_records);
      if (*buffer) {
        std::lock_guard<std::mutex> l(s.mu);
        s.supplied.push_back({*buffer, back});
      }
      return;
    }
    if (GpuCapture* cap = tenant()) {
      *buffer = cap->buffer_for_cupti(size);
      return;
    }
    if (auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, kOrphanBytes))) {
      std::lock_guard<std::mutex> l(s.mu);
      s.orphans.push_back(b);
      *buffer = b;
      *size = kOrphanBytes;
    }
  } catch (...) {
  }
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream, uint8_t* buffer, size_t size, size_t valid_size) {
  if (!buffer) return;
  GpuCapture* cap = tenant();
  if (cap && cap->owns_buffer(buffer)) {
    cap->own_buffer_completed(context, stream, buffer, valid_size);
    return;
  }
  Shared& s = shared();
  CUpti_BuffersCallbackCompleteFunc back = nullptr;
  try {
    std::lock_guard<std::mutex> l(s.mu);
    if (auto it = std::find(s.orphans.begin(), s.orphans.end(), buffer); it != s.orphans.end()) {
      s.orphans.erase(it);
      std::free(buffer);
      return;
    }
    back = s.completed;  // a buffer CUPTI had before laggard routed: CUPTI would give it to the latest
    for (size_t i = 0; i < s.supplied.size(); ++i)
      if (s.supplied[i].buffer == buffer) {
        back = s.supplied[i].completed;
        s.supplied[i] = s.supplied.back();
        s.supplied.pop_back();
        break;
      }
  } catch (...) {
  }
  if (cap) cap->read_foreign_buffer(buffer, valid_size);
  if (back) back(context, stream, buffer, size, valid_size);
}

bool finish_release(bool force) {
  Shared& s = shared();
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (!s.t.release_pending) return !s.t.foreign_activity;
    if (!s.supplied.empty() && !force) return false;
  }
  GpuCapture* cap = tenant();
  if (force && cap) cap->flush_forced();  // CUPTI hands the other client its buffers back
  {
    std::lock_guard<std::mutex> l(s.mu);
    if (!s.t.release_pending) return !s.t.foreign_activity;
    s.supplied.clear();  // whatever CUPTI did not return after a forced flush it no longer holds
    s.t.release_pending = false;
    ++s.t.releases;
  }
  if (cap) cap->take_activity_back();
  return true;
}

namespace foreign {

CUptiResult subscribe(decltype(&cuptiSubscribe) real, CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                      void* userdata, const char* caller) {
  GpuCapture* cap = tenant();
  const bool gave = cap && cap->give_subscriber();
  CUptiResult r = real(subscriber, callback, userdata);
  if (r == CUPTI_SUCCESS) {
    Shared& s = shared();
    std::lock_guard<std::mutex> l(s.mu);
    s.t.foreign_subscriber = true;
    s.t.subscriber = name_or(caller);
    s.foreign_handle = subscriber ? *subscriber : nullptr;
    ++s.t.subscribes;
  } else if (gave) {
    cap->take_subscriber_back();  // refused anyway (a third client): as it would be without laggard
  }
  return r;
}

CUptiResult subscribe_v2(decltype(&cuptiSubscribe_v2) real, CUpti_SubscriberHandle* subscriber,
                         CUpti_CallbackFunc callback, void* userdata, CUpti_SubscriberParams* params,
                         const char* caller) {
  GpuCapture* cap = tenant();
  const bool gave = cap && cap->give_subscriber();
  CUptiResult r = real(subscriber, callback, userdata, params);
  if (r == CUPTI_SUCCESS) {
    Shared& s = shared();
    std::lock_guard<std::mutex> l(s.mu);
    s.t.foreign_subscriber = true;
    s.t.subscriber = params && params->subscriberName ? std::string(params->subscriberName) + " (" + name_or(caller) + ")"
                                                      : name_or(caller);
    s.foreign_handle = subscriber ? *subscriber : nullptr;
    ++s.t.subscribes;
  } else if (gave) {
    cap->take_subscriber_back();
  }
  return r;
}

// May run inside a CUPTI callback (Kineto unsubscribes in an API exit callback): notes only;
// laggard subscribes again from its flush thread.
CUptiResult unsubscribe(decltype(&cuptiUnsubscribe) real, CUpti_SubscriberHandle subscriber, const char*) {
  CUptiResult r = real(subscriber);
  if (r == CUPTI_SUCCESS) {
    Shared& s = shared();
    std::lock_guard<std::mutex> l(s.mu);
    if (subscriber == s.foreign_handle) {
      s.t.foreign_subscriber = false;
      s.foreign_handle = nullptr;
    }
  }
  return r;
}

// Also inside a callback (CuptiCallbackApi.cpp:94-104): notes only, no CUPTI call.
CUptiResult finalize(decltype(&cuptiFinalize) real, const char* caller) {
  GpuCapture* cap = tenant();
  if (cap) cap->cupti_finalized(name_or(caller));  // before: laggard's handles die with the call
  CUptiResult r = real();
  Shared& s = shared();
  std::lock_guard<std::mutex> l(s.mu);
  s.t.foreign_subscriber = false;
  s.t.foreign_activity = false;
  s.t.release_pending = false;
  s.t.foreign_kinds.reset();
  s.foreign_handle = nullptr;
  s.supplied.clear();  // CUPTI does not return the buffers it held
  ++s.t.finalizes;
  return r;
}

CUptiResult register_callbacks(decltype(&cuptiActivityRegisterCallbacks) real, CUpti_BuffersCallbackRequestFunc requested,
                               CUpti_BuffersCallbackCompleteFunc completed, const char* caller) {
  if (!requested || !completed) return real(requested, completed);  // CUPTI's own answer
  Shared& s = shared();
  auto take = [&] {
    std::lock_guard<std::mutex> l(s.mu);
    s.requested = requested;
    s.completed = completed;
    s.t.foreign_activity = true;
    s.t.release_pending = false;
    s.t.activity = name_or(caller);
    s.had_kinds = s.t.foreign_kinds.any();
    ++s.t.takes;
  };
  GpuCapture* cap = tenant();
  if (cap && cap->routes_buffers()) {
    cap->give_activity(take);  // laggard's callbacks stay registered and route to the other client
    return CUPTI_SUCCESS;
  }
  CUptiResult r = real(requested, completed);
  if (r == CUPTI_SUCCESS) take();
  return r;
}

CUptiResult enable(decltype(&cuptiActivityEnable) real, CUpti_ActivityKind kind, const char*) {
  CUptiResult r = real(kind);
  if (r != CUPTI_SUCCESS || size_t(kind) >= kKindSlots) return r;
  Shared& s = shared();
  {
    std::lock_guard<std::mutex> l(s.mu);
    s.t.foreign_kinds.set(size_t(kind));
    if (s.t.foreign_activity) s.had_kinds = true;
  }
  if (GpuCapture* cap = tenant()) cap->foreign_kind_changed(kind, true);
  return r;
}

CUptiResult disable(decltype(&cuptiActivityDisable) real, CUpti_ActivityKind kind, const char*) {
  CUptiResult r = real(kind);
  if (r != CUPTI_SUCCESS || size_t(kind) >= kKindSlots) return r;
  Shared& s = shared();
  bool released = false;
  {
    std::lock_guard<std::mutex> l(s.mu);
    s.t.foreign_kinds.reset(size_t(kind));
    if (s.t.foreign_activity && s.had_kinds && s.t.foreign_kinds.none()) {
      s.t.foreign_activity = false;  // new buffers are laggard's; its own come back with its flush
      s.t.release_pending = true;
      released = true;
    }
  }
  if (GpuCapture* cap = tenant()) cap->foreign_kind_changed(kind, false);
  if (released) finish_release(false);
  return r;
}

CUptiResult flush_all(decltype(&cuptiActivityFlushAll) real, uint32_t flag, const char*) {
  CUptiResult r = real(flag);
  finish_release(false);
  return r;
}

CUptiResult timestamp_callback(decltype(&cuptiActivityRegisterTimestampCallback) real,
                               CUpti_TimestampCallbackFunc callback, const char* caller) {
  CUptiResult r = real(callback);
  if (r == CUPTI_SUCCESS) {
    Shared& s = shared();
    std::lock_guard<std::mutex> l(s.mu);
    ++s.t.timestamp_callbacks;
    s.t.timestamp_owner = name_or(caller);
  }
  return r;
}

}  // namespace foreign
}  // namespace laggard::cupti
