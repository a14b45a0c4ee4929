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

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>

#include "capture.h"
#include "clock.h"
#include "pause_state.h"
#include "range_stack.h"
#include "source.h"
#include "thread_registry.h"
#include "tsc_clock.h"

extern "C" void* __dso_handle;

namespace laggard {

std::atomic<Capture*> g_capture{nullptr};

namespace nvtx {
namespace {

constexpr size_t kMaxMessage = 512;  // longer messages are cut (names, not payloads)
constexpr int kCacheSlots = 256;
constexpr int kPtrSlots = 128;

struct Domain {
  std::string name;
};

// Domains live for the process: handles given to the app must stay valid forever.
std::mutex g_domains_mu;
std::deque<Domain>& domains() {
  static auto* d = new std::deque<Domain>();
  return *d;
}
// At load, as every object laggard keeps for the process (see files/safe_write.cpp): never a
// guard a forked child could find held.
[[gnu::constructor]] void make_domains_at_load() { domains(); }

// The main thread's innermost open kept section, for work launched by threads that hold no
// range themselves: PyTorch runs backward on autograd threads while the training loop's
// main thread sits inside its "backward" range.
std::atomic<uint32_t> g_main_section{kNoName};

struct ThreadState {
  ThreadBuffer* buf = nullptr;
  uint32_t tid = 0;
  bool is_main = false;
  IdBlock ids;
  RangeStack stack;
  watch::ThreadSlot* watch = nullptr;  // progress counter and open stack for the hang watchdog
  struct Slot {
    uint64_t hash = 0;
    const void* domain = nullptr;
    const NameEntry* entry = nullptr;
  } cache[kCacheSlots];
  // In front of `cache` (issue 29): by the message's address, checked against the entry's text
  // in one pass (same_text), so a name passed from the same place needs no strnlen, no hash
  // and no memcmp call. The text is always compared: the buffer may hold another name now.
  struct PtrSlot {
    const char* ptr = nullptr;
    const void* domain = nullptr;
    const NameEntry* entry = nullptr;
    uint64_t tail = 0;  // the entry's last n % 8 bytes and its terminating NUL, zero-padded
  } by_ptr[kPtrSlots];
};

// The thread's state; trivially destructible, so that reading it is one %fs-relative load:
// a thread_local with a destructor makes the compiler guard every access with a "destructor
// registered" flag of its own, in the general-dynamic TLS model, i.e. a __tls_get_addr call
// on every NVTX call (issue 29). The destructor is registered by hand on the thread's first call
// instead (guard_exit, register_exit below).
struct ThreadGuard {
  ThreadState* state;
  bool dead;
};
// initial-exec: a plain %fs-relative access on every NVTX call instead of a __tls_get_addr call;
// glibc reserves static TLS for libraries loaded later (dlopen by NVTX) and this is 16 bytes.
thread_local ThreadGuard t_guard __attribute__((tls_model("initial-exec"))) = {nullptr, false};

// Frees the thread's state when the thread ends and tells the recorder to drain it once more.
// Runs as a pthread key's destructor, or with the main thread's thread_local destructors.
void guard_exit(void* p) {
  ThreadGuard& g = *static_cast<ThreadGuard*>(p);
  if (ThreadState* state = g.state) {
    watch::release_slot(state->watch);
    state->buf->exited.store(true, std::memory_order_release);
    delete state;
    g.state = nullptr;
  }
  g.dead = true;
}

// Set while this thread is in one of the slow paths that take a lock and allocate: its first call,
// interning a name new to it, a domain or string registration (start/end ranges take none). A call that
// finds it set was made by a signal handler that interrupted that path on this thread; it must
// not take the same lock again (it would wait on itself forever), so it records nothing.
thread_local bool t_in_slow_path __attribute__((tls_model("initial-exec"))) = false;
class SlowPath {
 public:
  SlowPath() : nested_(t_in_slow_path) { t_in_slow_path = true; }
  ~SlowPath() { t_in_slow_path = nested_; }
  SlowPath(const SlowPath&) = delete;
  SlowPath& operator=(const SlowPath&) = delete;
  // A signal handler's call inside the same thread's slow path: skip it.
  bool nested() const { return nested_; }

 private:
  const bool nested_;
};

// ---- a thread's first call without allocation or lock (docs/host-safety.md, signal handlers) ----
// The flush thread keeps ready-made states, each with its buffer registered with the recorder,
// in these slots; a thread's first call takes one with an atomic exchange and registers its exit
// with a pthread key. An application's signal handler whose NVTX call is its thread's first,
// interrupting that thread's malloc, then never allocates inside malloc (glibc's arena lock is
// held: it would wait on itself). A thread that finds the slots empty (more new threads than
// slots within one drain tick, 50 ms) builds its own state, as before.
constexpr int kSpareStates = 16;
std::atomic<ThreadState*> g_spare_states[kSpareStates];

// Flush thread only (the one filler, so a slot found empty stays empty until it fills it).
void stock_spare_states() {
  Capture* cap = g_capture.load(std::memory_order_acquire);
  if (!cap) return;
  for (std::atomic<ThreadState*>& slot : g_spare_states) {
    if (slot.load(std::memory_order_relaxed)) continue;
    auto* ts = new ThreadState();
    ts->buf = cap->recorder->register_thread(0);  // the buffer's tid is not read; the state's is
    slot.store(ts, std::memory_order_release);
  }
}

ThreadState* take_spare_state() {
  for (std::atomic<ThreadState*>& slot : g_spare_states)
    if (slot.load(std::memory_order_relaxed))
      if (ThreadState* ts = slot.exchange(nullptr, std::memory_order_acquire)) return ts;
  return nullptr;
}

// A thread's exit, through a pthread key: pthread_setspecific stores into the thread's own first
// block for keys below 32 and allocates nothing (glibc nptl/pthread_setspecific.c,
// PTHREAD_KEY_2NDLEVEL_SIZE), where __cxa_thread_atexit callocs and takes the loader's lock. Its
// destructor runs after the thread's thread_local destructors. The main thread keeps
// __cxa_thread_atexit: exit() runs those before laggard's atexit handler, which then counts the
// ranges it left open; exit() runs no key destructors.
pthread_key_t g_exit_key;
const bool g_exit_key_ok = [] {
  if (pthread_key_create(&g_exit_key, guard_exit) != 0) return false;
  if (g_exit_key < 32) return true;
  pthread_key_delete(g_exit_key);
  return false;
}();

void register_exit(ThreadGuard& g, bool is_main) {
  if (!is_main && g_exit_key_ok && pthread_setspecific(g_exit_key, &g) == 0) return;
  abi::__cxa_thread_atexit(guard_exit, &g, &__dso_handle);
}

__attribute__((noinline)) ThreadState* new_thread_state(Capture* cap) {
  ThreadGuard& g = t_guard;
  if (g.dead) return nullptr;  // NVTX called from a thread_local destructor after ours ran
  const SlowPath slow;
  if (slow.nested()) return nullptr;
  ThreadState* ts = take_spare_state();
  if (!ts) ts = new ThreadState();
  ts->tid = static_cast<uint32_t>(::syscall(SYS_gettid));
  ts->is_main = ts->tid == static_cast<uint32_t>(::getpid());
  if (!ts->buf) ts->buf = cap->recorder->register_thread(ts->tid);
  ts->watch = watch::claim_slot(ts->tid, &ts->stack);
  register_exit(g, ts->is_main);
  g.state = ts;
  return ts;
}

const bool g_spares_registered = [] {
  SourceHooks hooks{"nvtx thread states"};
  hooks.on_tick = stock_spare_states;
  register_source(hooks);
  return true;
}();

// Capture starts on the process's first NVTX range or domain call, not inside NVTX's attach
// (nvtx_injection.cpp says why): the capture, started first if this is that call; null while
// inert. Out of line: taken once, and again only while capture is off.
// A thread waits up to kActivationWaitNs for another thread's activation (normally well under
// a millisecond); a range it pushes after that goes unrecorded rather than wait longer inside a
// call the application may make from a signal handler.
constexpr int64_t kActivationWaitNs = 5'000'000'000;
__attribute__((noinline, cold)) Capture* capture_after_starting() {
  return activate_capture(kActivationWaitNs) ? g_capture.load(std::memory_order_acquire) : nullptr;
}

__attribute__((always_inline)) inline Capture* active_capture() {
  Capture* cap = g_capture.load(std::memory_order_acquire);
  return __builtin_expect(cap != nullptr, 1) ? cap : capture_after_starting();
}

__attribute__((always_inline)) inline ThreadState* thread_state(Capture* cap) {
  ThreadState* ts = t_guard.state;
  if (__builtin_expect(ts != nullptr, 1)) return ts;
  return new_thread_state(cap);
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
// What a signal handler's range gets when it needs a new name while its thread was interning one
// (SlowPath): not kept, so its pop is counted as filtered, and nesting stays balanced.
const NameEntry kSkippedRange{kNoName, false, false, nullptr, "", "", "(skipped in a signal handler)"};

__attribute__((noinline)) const NameEntry* lookup_text(Capture* cap, ThreadState* ts, const void* domain, const char* msg) {
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
  const SlowPath slow;
  if (slow.nested()) return &kSkippedRange;
  const NameEntry* e = intern(cap, domain, std::string_view(msg, n));
  slot = {h, domain, e};
  return e;
}

inline size_t ptr_slot(const char* msg, const void* domain) {
  return static_cast<size_t>(((reinterpret_cast<uintptr_t>(msg) ^ reinterpret_cast<uintptr_t>(domain)) *
                              0x9e3779b97f4a7c15ull) >> 57);  // 7 bits: kPtrSlots
}

// The bytes an entry's text ends with, as same_text() compares them: for a text of n bytes,
// its last n % 8 and (when n < kMaxMessage, so the caller's string ended there) the NUL.
inline uint64_t tail_word(const std::string& m) {
  size_t k = m.size() & ~size_t{7};
  uint64_t w = 0;
  std::memcpy(&w, m.data() + k, m.size() - k);  // little-endian: byte j of the string in bits 8j..
  return w;
}
inline uint64_t tail_mask(size_t n) {
  size_t bytes = (n & 7) + (n < kMaxMessage ? 1 : 0);  // 0..8
  return bytes >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * bytes)) - 1;
}

// Whether the NUL-terminated string msg (read up to strnlen(msg, kMaxMessage)) is the entry's
// text m, in one pass. Reads msg 8 bytes at a time where the 8 bytes lie in one page: msg[k] is
// readable whenever msg[0..k) matched m's bytes (none of them NUL), so the page is mapped; the
// bytes past msg's end that the load may take are masked off or make it differ (as glibc's
// strlen reads). Sanitized builds compare byte by byte instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LAGGARD_BYTEWISE_TEXT 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define LAGGARD_BYTEWISE_TEXT 1
#endif
#endif
__attribute__((always_inline)) inline bool same_text(const char* msg, const std::string& m, uint64_t tail) {
  const size_t n = m.size();
#ifdef LAGGARD_BYTEWISE_TEXT
  (void)tail;
  for (size_t k = 0; k < n; ++k)
    if (msg[k] != m[k]) return false;
  return n >= kMaxMessage || msg[n] == '\0';
#else
  auto load = [](const char* p, uint64_t* w) {
    if ((reinterpret_cast<uintptr_t>(p) & 4095) > 4096 - 8) return false;  // would cross a page
    std::memcpy(w, p, 8);
    return true;
  };
  const char* c = m.data();
  size_t k = 0;
  uint64_t a, b;
  for (; k + 8 <= n; k += 8) {
    if (__builtin_expect(!load(msg + k, &a), 0)) {
      for (size_t j = k; j < n; ++j)
        if (msg[j] != c[j]) return false;
      return n >= kMaxMessage || msg[n] == '\0';
    }
    std::memcpy(&b, c + k, 8);
    if (a != b) return false;
  }
  const uint64_t mask = tail_mask(n);
  if (!mask) return true;
  if (__builtin_expect(!load(msg + k, &a), 0)) {
    for (size_t j = k; j < n; ++j)
      if (msg[j] != c[j]) return false;
    return n >= kMaxMessage || msg[n] == '\0';
  }
  return (a & mask) == tail;
#endif
}

__attribute__((always_inline)) inline const NameEntry* lookup(Capture* cap, ThreadState* ts, const void* domain,
                                                              const char* msg) {
  if (__builtin_expect(msg == nullptr, 0)) return lookup_text(cap, ts, domain, msg);
  ThreadState::PtrSlot& p = ts->by_ptr[ptr_slot(msg, domain)];
  if (__builtin_expect(p.ptr == msg && p.domain == domain && same_text(msg, p.entry->message, p.tail), 1))
    return p.entry;
  const NameEntry* e = lookup_text(cap, ts, domain, msg);
  if (__builtin_expect(e != &kSkippedRange, 1)) p = ThreadState::PtrSlot{msg, domain, e, tail_word(e->message)};
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

// Mirrors what the flush thread reads. Rare events are mirrored only when the operation says
// it changed them, so the common path touches few lines and loads nothing back.
__attribute__((always_inline)) inline void sync_depth(ThreadState* ts) {
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  if (ts->is_main) {
    // Read by other threads (current_section()): stored only when it changes, so an unchanged
    // value does not take their copy of the line away.
    const uint32_t section = ts->stack.innermost_kept();
    if (g_main_section.load(std::memory_order_relaxed) != section)
      g_main_section.store(section, std::memory_order_relaxed);
  }
}

// Paused by `laggard ctl`: only what keeps the nesting balanced and the hang watchdog informed.
__attribute__((noinline)) int paused_push(ThreadState* ts, const void* domain, uint32_t epoch) {
  int level = ts->stack.push_stamp(&kPausedRange, domain, TscClock::Stamp{0, false}, epoch);
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  if (__builtin_expect(level >= RangeStack::kMaxDepth, 0))
    ts->buf->stack_overflow.store(ts->stack.overflowed(), std::memory_order_relaxed);
  return level;
}

__attribute__((noinline)) int paused_pop(ThreadState* ts, const void* domain, uint32_t epoch) {
  const RangeStack::Done d = ts->stack.close(domain, epoch);
  watch::note_progress(ts->watch);
  ts->buf->open_depth.store(ts->stack.depth(), std::memory_order_relaxed);
  if (__builtin_expect(d.what == RangeStack::Closed::unbalanced, 0))
    ts->buf->unbalanced_pop.store(ts->stack.unbalanced(), std::memory_order_relaxed);
  return d.level;
}

template <class Lookup>
__attribute__((always_inline)) inline int push_impl(const void* domain, Lookup&& find) noexcept {
  try {
    Capture* cap = active_capture();
    if (__builtin_expect(!cap, 0)) return NVTX_NO_PUSH_POP_TRACKING;
    ThreadState* ts = thread_state(cap);
    if (__builtin_expect(!ts, 0)) return NVTX_NO_PUSH_POP_TRACKING;
    uint32_t epoch = pause_epoch();
    if (__builtin_expect(paused_epoch(epoch), 0)) return paused_push(ts, domain, epoch);
    const NameEntry* e = find(cap, ts);
    int level = ts->stack.push_stamp(e, domain, g_range_clock.stamp(), epoch);
    sync_depth(ts);
    if (__builtin_expect(level >= RangeStack::kMaxDepth, 0))
      ts->buf->stack_overflow.store(ts->stack.overflowed(), std::memory_order_relaxed);
    return level;
  } catch (...) {
    return NVTX_NO_PUSH_POP_TRACKING;
  }
}

// A kept range closed at `end` (the pop's stamp): its duration from the stamp its push took (one
// multiply while the line is on at both), its start in ns only when the occurrence is sampled.
__attribute__((always_inline)) inline void record(ThreadState* ts, const RangeStack::Done& d, TscClock::Stamp now) {
  if (__builtin_expect(d.start.ticks && now.ticks, 1)) {
    ts->buf->add(d.name_id, d.parent_id, ts->tid, static_cast<uint16_t>(d.level),
                 g_range_clock.ticks_to_ns(now.value - d.start.value),
                 [&] { return g_range_clock.to_ns(d.start.value); });
    return;
  }
  // The line was off at one end (the first fit, or the counter given up): both ends in ns.
  const int64_t end = g_range_clock.stamp_ns(now);
  const int64_t start = g_range_clock.stamp_ns(d.start);
  ts->buf->add(d.name_id, d.parent_id, ts->tid, static_cast<uint16_t>(d.level), end > start ? end - start : 0,
               [start] { return start; });
}

__attribute__((always_inline)) inline int pop_impl(const void* domain) noexcept {
  try {
    Capture* cap = active_capture();
    if (__builtin_expect(!cap, 0)) return NVTX_NO_PUSH_POP_TRACKING;
    ThreadState* ts = thread_state(cap);
    if (__builtin_expect(!ts, 0)) return NVTX_NO_PUSH_POP_TRACKING;
    uint32_t epoch = pause_epoch();
    if (__builtin_expect(paused_epoch(epoch), 0)) return paused_pop(ts, domain, epoch);
    // Read first, as before: the range ends when the pop is called, and the counter's latency
    // overlaps the bookkeeping below.
    const TscClock::Stamp now = g_range_clock.stamp();
    const RangeStack::Done d = ts->stack.close(domain, epoch);
    if (__builtin_expect(d.what == RangeStack::Closed::kept, 1)) {
      record(ts, d, now);
    } else if (d.what == RangeStack::Closed::unbalanced) {
      ts->buf->unbalanced_pop.store(ts->stack.unbalanced(), std::memory_order_relaxed);
    } else if (d.what == RangeStack::Closed::filtered) {
      ts->buf->filtered.store(ts->stack.filtered(), std::memory_order_relaxed);
    }
    sync_depth(ts);
    return d.level;
  } catch (...) {
    return NVTX_NO_PUSH_POP_TRACKING;
  }
}

template <class Lookup>
nvtxRangeId_t start_impl(Lookup&& find) noexcept {
  try {
    Capture* cap = active_capture();
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
    Capture* cap = active_capture();
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
    if (!active_capture()) return nullptr;
    const SlowPath slow;
    if (slow.nested()) return nullptr;  // as NVTX without a tool
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
    Capture* cap = active_capture();
    if (!cap) return nullptr;
    const SlowPath slow;
    if (slow.nested()) return nullptr;
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
