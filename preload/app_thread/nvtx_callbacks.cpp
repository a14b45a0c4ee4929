// ROOM app_thread/ -- code here runs on the APPLICATION's threads, inside its NVTX calls.
// Allowed after a thread's first call: loads and stores to this thread's own memory, atomics,
// reading the CPU counter. Not allowed: allocation, locks, syscalls, I/O, logging, throwing
// into the caller. A thread's first call (and a name it has never seen) may take the name table's
// lock once; that is the only slow path, and it is bounded. thread_registry.h is also read by
// the watchdog's signal handler (watchdog/stack_sampler.cpp): only lock-free fixed slots there.
//
// Hot path. After a thread's first call, a push or pop is: a TLS load, a string hash and
// compare against the thread's name cache, a CPU counter read (tsc_clock.h) and a few stores into memory
// only this thread writes. No allocation, no syscall, no lock. Every entry point catches
// everything: an exception must never reach the application.
#include "nvtx_callbacks.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "capture.h"
#include "clock.h"
#include "pause_state.h"
#include "range_stack.h"
#include "thread_registry.h"
#include "tsc_clock.h"

namespace laggard {

std::atomic<Capture*> g_capture{nullptr};

namespace nvtx {
namespace {

constexpr size_t kMaxMessage = 512;  // longer messages are cut (names, not payloads)
constexpr int kCacheSlots = 256;

struct Domain {
  std::string name;
};

// Domains live for the process: handles given to the app must stay valid forever.
std::mutex g_domains_mu;
std::deque<Domain>& domains() {
  static auto* d = new std::deque<Domain>();
  return *d;
}

// The main thread's innermost open kept section, for work launched by threads that hold no
// range themselves: PyTorch runs backward on autograd threads while the training loop's
// main thread sits inside its "backward" range.
std::atomic<uint32_t> g_main_section{kNoName};

struct ThreadState {
  ThreadBuffer* buf;
  uint32_t tid;
  bool is_main;
  IdBlock ids;
  RangeStack stack;
  watch::ThreadSlot* watch = nullptr;  // progress counter and open stack for the hang watchdog
  struct Slot {
    uint64_t hash = 0;
    const void* domain = nullptr;
    const NameEntry* entry = nullptr;
  } cache[kCacheSlots];
};

// Frees the thread's state when the thread ends and tells the recorder to drain it once more.
struct ThreadGuard {
  ThreadState* state = nullptr;
  bool dead = false;
  ~ThreadGuard() {
    if (state) {
      watch::release_slot(state->watch);
      state->buf->exited.store(true, std::memory_order_release);
      delete state;
      state = nullptr;
    }
    dead = true;
  }
};
// initial-exec: a plain %fs-relative access on every NVTX call instead of a __tls_get_addr call;
// glibc reserves static TLS for libraries loaded later (dlopen by NVTX) and this is 16 bytes.
thread_local ThreadGuard t_guard __attribute__((tls_model("initial-exec")));

inline ThreadState* thread_state(Capture* cap) {
  ThreadGuard& g = t_guard;
  if (__builtin_expect(g.state != nullptr, 1)) return g.state;
  if (g.dead) return nullptr;  // NVTX called from a thread_local destructor after ours ran
  auto* ts = new ThreadState();
  ts->tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  ts->is_main = ts->tid == static_cast<uint32_t>(::getpid());
  ts->buf = cap->recorder->register_thread(ts->tid);
  ts->watch = watch::claim_slot(ts->tid, &ts->stack);
  g.state = ts;
  return ts;
}

// 8 bytes per step: names can be long (torch's emit_nvtx puts shapes in them).
inline uint64_t hash_bytes(const char* s, size_t n, const void* domain) {
  constexpr uint64_t kMul = 0x9e3779b97f4a7c15ull;
  uint64_t h = (reinterpret_cast<uintptr_t>(domain) ^ n) * kMul;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 32;
  }
  // The last 0-7 bytes in at most three loads (short names like "forward" are all tail).
  uint64_t tail = 0;
  size_t rest = n - i;
  const char* p = s + i;
  if (rest & 4) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    tail = v;
    p += 4;
  }
  if (rest & 2) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    tail = (tail << 16) | v;
    p += 2;
  }
  if (rest & 1) tail = (tail << 8) | static_cast<unsigned char>(*p);
  h = (h ^ tail) * kMul;
  return h ^ (h >> 29);
}

// Domain handles come from domain_create_*; one that does not (a hostile or stale value) is
// treated as the default domain rather than dereferenced. Slow path only (interning).
const void* known_domain(const void* domain) {
  if (!domain) return nullptr;
  std::lock_guard<std::mutex> lock(g_domains_mu);
  for (const Domain& d : domains())
    if (&d == domain) return domain;
  return nullptr;
}

const NameEntry* intern(Capture* cap, const void* domain, std::string_view msg) {
  const void* d = known_domain(domain);
  // Domain names are immutable once created, so reading one outside the lock is safe.
  std::string_view dname = d ? std::string_view(static_cast<const Domain*>(d)->name) : std::string_view();
  return cap->names->intern(d, dname, msg);
}

// NULL, "" (NVTX3's scoped_range{""}, Python nvtx.annotate() with no message) and an unknown
// message type all record as this name.
constexpr const char kUnnamed[] = "(unnamed)";

// What a range pushed or started while `laggard ctl` paused capture holds: no name lookup, no
// clock read; kept so the matching pop or end stays balanced, never recorded.
const NameEntry kPausedRange{kNoName, false, false, nullptr, "", "", "(paused)"};

const NameEntry* lookup(Capture* cap, ThreadState* ts, const void* domain, const char* msg) {
  size_t n = msg ? strnlen(msg, kMaxMessage) : 0;
  if (n == 0) {
    msg = kUnnamed;
    n = sizeof kUnnamed - 1;
  }
  uint64_t h = hash_bytes(msg, n, domain);
  ThreadState::Slot& slot = ts->cache[h & (kCacheSlots - 1)];
  // slot.entry first: an unused slot has hash 0, which a real name may hash to.
  if (slot.entry && slot.hash == h && slot.domain == domain && slot.entry->message.size() == n &&
      std::memcmp(slot.entry->message.data(), msg, n) == 0)
    return slot.entry;
  const NameEntry* e = intern(cap, domain, std::string_view(msg, n));
  slot = {h, domain, e};
  return e;
}

const NameEntry* lookup_wide(Capture* cap, ThreadState* ts, const void* domain, const wchar_t* msg) {
  char buf[kMaxMessage + 1];
  wide_to_utf8(msg, buf, sizeof buf);  // NULL gives ""
  return lookup(cap, ts, domain, buf);
}

// A registered string belongs to the domain it is used in (nvToolsExt.h: a handle is registered
// per domain, but nothing stops an app from using it in another).
const NameEntry* lookup_registered(Capture* cap, ThreadState* ts, const void* domain, nvtxStringHandle_t h) {
  const NameEntry* e = cap->names->registered(reinterpret_cast<uintptr_t>(h));
  if (!e) return lookup(cap, ts, domain, nullptr);
  if (e->domain == domain || e->folded) return e;
  char buf[kMaxMessage + 1];
  size_t n = std::min(e->message.size(), kMaxMessage);
  std::memcpy(buf, e->message.data(), n);
  buf[n] = '\0';
  return lookup(cap, ts, domain, buf);
}

const NameEntry* lookup_attr(Capture* cap, ThreadState* ts, const void* domain,
                             const nvtxEventAttributes_t* a) {
  // Fields past `size` were not provided by the caller's (older) struct version
  // (nvToolsExt.h, nvtxEventAttributes_v2: size = NVTX_EVENT_ATTRIB_STRUCT_SIZE).
  constexpr size_t kNeeded = offsetof(nvtxEventAttributes_t, message) + sizeof(a->message);
  if (!a || a->size < kNeeded) return lookup(cap, ts, domain, nullptr);
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return lookup(cap, ts, domain, a->message.ascii);
    case NVTX_MESSAGE_TYPE_UNICODE: return lookup_wide(cap, ts, domain, a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED: return lookup_registered(cap, ts, domain, a->message.registered);
    default: return lookup(cap, ts, domain, nullptr);  // NVTX_MESSAGE_UNKNOWN and future types
  }
}

// Mirrors what the flush thread reads. Rare events are mirrored only on change, and each
// call checks only what its operation can change, so the common path touches few lines.
inline void sync_depth(ThreadState* ts) {
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  if (ts->is_main) g_main_section.store(ts->stack.innermost_kept(), std::memory_order_relaxed);
}

inline void sync_after_push(ThreadState* ts) {
  sync_depth(ts);
  ThreadBuffer* b = ts->buf;
  if (__builtin_expect(b->stack_overflow.load(std::memory_order_relaxed) != ts->stack.overflowed(), 0))
    b->stack_overflow.store(ts->stack.overflowed(), std::memory_order_relaxed);
}

inline void sync_after_pop(ThreadState* ts) {
  sync_depth(ts);
  ThreadBuffer* b = ts->buf;
  if (__builtin_expect(b->unbalanced_pop.load(std::memory_order_relaxed) != ts->stack.unbalanced(), 0))
    b->unbalanced_pop.store(ts->stack.unbalanced(), std::memory_order_relaxed);
  if (__builtin_expect(b->filtered.load(std::memory_order_relaxed) != ts->stack.filtered(), 0))
    b->filtered.store(ts->stack.filtered(), std::memory_order_relaxed);
}

// Paused by `laggard ctl`: only what keeps the nesting balanced and the hang watchdog informed.
int paused_push(ThreadState* ts, const void* domain, uint32_t epoch) {
  int level = ts->stack.push(&kPausedRange, domain, 0, epoch);
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  return level;
}

int paused_pop(ThreadState* ts, const void* domain, uint32_t epoch) {
  RangeRecord r;
  bool emit = false;
  int level = ts->stack.pop(domain, 0, ts->tid, &r, &emit, epoch);
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  return level;
}

template <class Lookup>
int push_impl(const void* domain, Lookup&& find) noexcept {
  try {
    Capture* cap = g_capture.load(std::memory_order_acquire);
    if (!cap) return NVTX_NO_PUSH_POP_TRACKING;
    ThreadState* ts = thread_state(cap);
    if (!ts) return NVTX_NO_PUSH_POP_TRACKING;
    uint32_t epoch = pause_epoch();
    if (paused_epoch(epoch)) return paused_push(ts, domain, epoch);
    const NameEntry* e = find(cap, ts);
    int level = ts->stack.push(e, domain, g_range_clock.now_ns(), epoch);
    sync_after_push(ts);
    return level;
  } catch (...) {
    return NVTX_NO_PUSH_POP_TRACKING;
  }
}

int pop_impl(const void* domain) noexcept {
  try {
    Capture* cap = g_capture.load(std::memory_order_acquire);
    if (!cap) return NVTX_NO_PUSH_POP_TRACKING;
    ThreadState* ts = thread_state(cap);
    if (!ts) return NVTX_NO_PUSH_POP_TRACKING;
    RangeRecord r;
    bool emit = false;
    uint32_t epoch = pause_epoch();
    if (paused_epoch(epoch)) return paused_pop(ts, domain, epoch);
    int level = ts->stack.pop(domain, g_range_clock.now_ns(), ts->tid, &r, &emit, epoch);
    if (emit) ts->buf->add(r);
    sync_after_pop(ts);
    return level;
  } catch (...) {
    return NVTX_NO_PUSH_POP_TRACKING;
  }
}

template <class Lookup>
nvtxRangeId_t start_impl(Lookup&& find) noexcept {
  try {
    Capture* cap = g_capture.load(std::memory_order_acquire);
    if (!cap) return 0;
    ThreadState* ts = thread_state(cap);
    if (!ts) return 0;
    uint32_t epoch = pause_epoch();
    bool paused = paused_epoch(epoch);
    const NameEntry* e = paused ? &kPausedRange : find(cap, ts);
    watch::note_progress(ts->watch);
    return cap->start_end->start(e, paused ? 0 : g_range_clock.now_ns(), ts->tid, &ts->ids, epoch);
  } catch (...) {
    return 0;
  }
}

void end_impl(nvtxRangeId_t id) noexcept {
  try {
    Capture* cap = g_capture.load(std::memory_order_acquire);
    if (!cap) return;
    ThreadState* ts = thread_state(cap);
    if (!ts) return;
    watch::note_progress(ts->watch);
    RangeRecord r;
    bool emit = false, paused = false;
    uint32_t epoch = pause_epoch();
    if (!cap->start_end->end(id, paused_epoch(epoch) ? 0 : g_range_clock.now_ns(), &r, &emit, epoch, &paused))
      ThreadBuffer::bump(ts->buf->unmatched_end);
    else if (emit)
      ts->buf->add(r);
    else if (!paused)
      ThreadBuffer::bump(ts->buf->filtered);
  } catch (...) {
  }
}

}  // namespace

int push_a(const char* m) {
  return push_impl(nullptr, [m](Capture* c, ThreadState* t) { return lookup(c, t, nullptr, m); });
}
int push_w(const wchar_t* m) {
  return push_impl(nullptr, [m](Capture* c, ThreadState* t) { return lookup_wide(c, t, nullptr, m); });
}
int push_ex(const nvtxEventAttributes_t* a) {
  return push_impl(nullptr, [a](Capture* c, ThreadState* t) { return lookup_attr(c, t, nullptr, a); });
}
int pop() { return pop_impl(nullptr); }

nvtxRangeId_t start_a(const char* m) {
  return start_impl([m](Capture* c, ThreadState* t) { return lookup(c, t, nullptr, m); });
}
nvtxRangeId_t start_w(const wchar_t* m) {
  return start_impl([m](Capture* c, ThreadState* t) { return lookup_wide(c, t, nullptr, m); });
}
nvtxRangeId_t start_ex(const nvtxEventAttributes_t* a) {
  return start_impl([a](Capture* c, ThreadState* t) { return lookup_attr(c, t, nullptr, a); });
}
void end(nvtxRangeId_t id) { end_impl(id); }

int domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return push_impl(d, [d, a](Capture* c, ThreadState* t) { return lookup_attr(c, t, d, a); });
}
int domain_pop(nvtxDomainHandle_t d) { return pop_impl(d); }
nvtxRangeId_t domain_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return start_impl([d, a](Capture* c, ThreadState* t) { return lookup_attr(c, t, d, a); });
}
void domain_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end_impl(id); }

nvtxDomainHandle_t domain_create_a(const char* name) {
  try {
    // Inert (e.g. a forked child, whose copy of the lock may be held by a thread that no longer
    // exists): behave as NVTX without a tool, which returns no handle.
    if (!g_capture.load(std::memory_order_acquire)) return nullptr;
    size_t len = name ? strnlen(name, kMaxMessage) : 0;
    std::string n = sanitize_utf8(len ? std::string_view(name, len) : std::string_view(kUnnamed));
    std::lock_guard<std::mutex> lock(g_domains_mu);
    // One handle per name: two libraries creating "foo" report into the same sections.
    for (Domain& d : domains())
      if (d.name == n) return reinterpret_cast<nvtxDomainHandle_t>(&d);
    domains().push_back(Domain{std::move(n)});
    return reinterpret_cast<nvtxDomainHandle_t>(&domains().back());
  } catch (...) {
    return nullptr;
  }
}

nvtxDomainHandle_t domain_create_w(const wchar_t* name) {
  char buf[kMaxMessage + 1];
  wide_to_utf8(name, buf, sizeof buf);
  return domain_create_a(buf);
}

void domain_destroy(nvtxDomainHandle_t) {}  // handles stay valid: names refer to them

nvtxStringHandle_t domain_register_string_a(nvtxDomainHandle_t d, const char* s) {
  try {
    Capture* cap = g_capture.load(std::memory_order_acquire);
    if (!cap) return nullptr;
    size_t n = s ? strnlen(s, kMaxMessage) : 0;
    const NameEntry* e = intern(cap, d, n ? std::string_view(s, n) : std::string_view(kUnnamed));
    return reinterpret_cast<nvtxStringHandle_t>(cap->names->register_string(e));
  } catch (...) {
    return nullptr;
  }
}

nvtxStringHandle_t domain_register_string_w(nvtxDomainHandle_t d, const wchar_t* s) {
  char buf[kMaxMessage + 1];
  wide_to_utf8(s, buf, sizeof buf);
  return domain_register_string_a(d, buf);
}

}  // namespace nvtx

uint32_t current_section() {
  nvtx::ThreadState* ts = nvtx::t_guard.state;
  uint32_t own = ts ? ts->stack.innermost_kept() : kNoName;
  if (own != kNoName || (ts && ts->is_main)) return own;
  return nvtx::g_main_section.load(std::memory_order_relaxed);
}

}  // namespace laggard
