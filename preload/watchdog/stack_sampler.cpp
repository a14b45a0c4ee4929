#include "stack_sampler.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fork_gate.h"
#include "log.h"
#include "range_stack.h"
#include "safe_write.h"
#include "thread_probe.h"
#include "thread_registry.h"

#ifdef LAGGARD_HAVE_LIBUNWIND
#include <libunwind.h>
#endif

namespace laggard::watch {
namespace {

constexpr int kMaxFrames = 64;
constexpr int kNameLen = 192;
constexpr int kMaxSections = 32;
constexpr int kRequests = 4;       // a slot whose handler never finished is not reused
constexpr int kInPlaceTries = 5;   // a thread that keeps waking up is read again, then given up
// A thread seen running is looked at again this often, 1 ms apart, before it is signalled: one
// that is only between two waits is then read in place, and only a thread that keeps running
// (spinning, computing) gets a signal, which then lands in user code.
constexpr int kRunningLooks = 5;

enum : uint64_t { kIdle = 0, kRequested = 1, kWriting = 2, kDone = 3, kAbandoned = 4 };

// Filled by the signal handler on the target thread; read by the watchdog after kDone.
struct Request {
  std::atomic<uint64_t> word{0};  // generation << 3 | state
  std::atomic<uint32_t> tid{0};
  StackSnapshot snap;
  int nsections = 0;
  RangeStack::OpenRange sections[kMaxSections];
};

// The stack copies live in .bss: no memory is used until a hang report copies a stack.
alignas(4096) uint8_t g_stack_copies[kRequests + 1][kStackCopyBytes];
Request g_requests[kRequests];
StackSnapshot g_in_place;  // the watchdog's own copy of a blocked thread (g_stack_copies[kRequests])
std::atomic<Request*> g_active{nullptr};
std::atomic<bool> g_copy_stacks{false};  // an unwinder is loaded: stacks are worth copying

uint32_t gettid_raw() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

// ---- the signal handler (async-signal-safe only) ----

int copy_sections(uint32_t tid, RangeStack::OpenRange* out) {
  if (const ThreadSlot* s = find_slot(tid))
    if (const RangeStack* st = s->stack.load(std::memory_order_acquire)) return st->snapshot(out, kMaxSections);
  return 0;
}

void on_stack_signal(int, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  // Only our own tgkill counts; anything else sending this signal is ignored rather than
  // taking the default action (which would end the process).
  if (info && info->si_code == SI_TKILL && info->si_pid == getpid()) {
    Request* r = g_active.load(std::memory_order_acquire);
    if (r) {
      uint64_t w = r->word.load(std::memory_order_acquire);
      uint32_t me = gettid_raw();
      if ((w & 7) == kRequested && r->tid.load(std::memory_order_relaxed) == me &&
          r->word.compare_exchange_strong(w, (w & ~uint64_t{7}) | kWriting, std::memory_order_acq_rel)) {
        copy_registers(r->snap, ucontext);
        r->snap.stack_len = 0;
        if (g_copy_stacks.load(std::memory_order_relaxed)) copy_stack(r->snap, r->snap.sp());
        r->nsections = copy_sections(me, r->sections);
        r->word.store((w & ~uint64_t{7}) | kDone, std::memory_order_release);
      }
    }
  }
  errno = saved_errno;
}

bool is_ours(const struct sigaction& sa) { return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_stack_signal; }

bool is_unused(const struct sigaction& sa) { return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL; }

bool install(int sig) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0) return false;
  if (is_ours(old)) return true;
  if (!is_unused(old)) return false;
  struct sigaction sa {};
  sa.sa_sigaction = on_stack_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);  // nothing else runs on top of the copy
  return sigaction(sig, &sa, nullptr) == 0;
}

// ---- the watchdog side ----

Request* free_request() {
  for (Request& r : g_requests) {
    uint64_t state = r.word.load(std::memory_order_acquire) & 7;
    if (state == kIdle || state == kDone || state == kAbandoned) return &r;
  }
  return nullptr;  // every slot holds a handler that never finished
}

void sleep_ns(int64_t ns) {
  timespec t{static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
  nanosleep(&t, nullptr);
}

int64_t mono_now() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
}

// The open ranges of a thread that is blocked (not running): its RangeStack copied by the
// kernel, so a thread that wakes meanwhile gives stale bytes, never a fault or a data race.
int copy_sections_in_place(uint32_t tid, RangeStack::OpenRange* out) {
  const ThreadSlot* s = find_slot(tid);
  const RangeStack* st = s ? s->stack.load(std::memory_order_acquire) : nullptr;
  if (!st) return 0;
  static RangeStack copy;  // watchdog thread only; 5 KiB, not on its stack
  if (!read_memory(&copy, reinterpret_cast<uint64_t>(st), sizeof copy)) return 0;
  return copy.snapshot(out, kMaxSections);
}

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string s(d);
  std::free(d);
  return s;
}

#ifdef LAGGARD_HAVE_LIBUNWIND
#if defined(__x86_64__)
#define LAGGARD_UNW_LOCAL(f) "_ULx86_64_" f
#define LAGGARD_UNW_ARCH_FN(f) "_Ux86_64_" f
#else
#define LAGGARD_UNW_LOCAL(f) "_ULaarch64_" f
#define LAGGARD_UNW_ARCH_FN(f) "_Uaarch64_" f
#endif
// libunwind's local symbol lookup (it finds static functions dladdr cannot), for naming only.
// Bound by name: the header's unw_* macros name the remote API wherever remote_unwind.cpp
// included it first (one unity batch).
struct LocalNames {
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int) = nullptr;
  int (*get_proc_name)(unw_cursor_t*, char*, size_t, unw_word_t*) = nullptr;
  int (*set_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t) = nullptr;
  int (*getcontext)(unw_context_t*) = nullptr;
};
LocalNames g_names;

void load_local_names(const std::string& library) {
  void* h = load_library(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  LocalNames n;
  n.init_local2 = reinterpret_cast<decltype(n.init_local2)>(dlsym(h, LAGGARD_UNW_LOCAL("init_local2")));
  n.get_proc_name = reinterpret_cast<decltype(n.get_proc_name)>(dlsym(h, LAGGARD_UNW_LOCAL("get_proc_name")));
  n.set_reg = reinterpret_cast<decltype(n.set_reg)>(dlsym(h, LAGGARD_UNW_LOCAL("set_reg")));
  n.getcontext = reinterpret_cast<decltype(n.getcontext)>(dlsym(h, LAGGARD_UNW_ARCH_FN("getcontext")));
  if (n.init_local2 && n.get_proc_name && n.set_reg && n.getcontext) g_names = n;
}
#endif

// The procedure containing ip and the offset into it; "" when unknown.
std::string proc_name(uint64_t ip, uint64_t* offset) {
#ifdef LAGGARD_HAVE_LIBUNWIND
  if (!g_names.set_reg) return "";
  ForkGate no_fork_while;  // libunwind's local cursor may walk the loaded objects (fork_gate.h)
  unw_context_t ctx;
  unw_cursor_t cursor;
  if (g_names.getcontext(&ctx) != 0 || g_names.init_local2(&cursor, &ctx, 0) != 0) return "";
  if (g_names.set_reg(&cursor, UNW_REG_IP, ip) != 0) return "";
  char name[kNameLen] = {};
  unw_word_t off = 0;
  if (g_names.get_proc_name(&cursor, name, sizeof name, &off) != 0 && !name[0]) return "";
  name[kNameLen - 1] = '\0';
  *offset = off;
  return name;
#else
  (void)ip;
  (void)offset;
  return "";
#endif
}

std::string section_name(const NameEntry* e) { return e ? e->display : std::string("?"); }

}  // namespace

bool thread_blocks_signal(uint32_t tid, int sig) {
  TaskStatus s = read_task_status(tid);
  return s.ok && sig >= 1 && sig <= 64 && (s.sig_blocked >> (sig - 1) & 1);
}

bool StackSampler::choose_signal(int forced_signal) {
  if (forced_signal > 0) {
    if (install(forced_signal)) {
      signal_ = forced_signal;
      return true;
    }
    log_warn("LAGGARD_HANG_SIGNAL=%d is in use by the application; choosing another", forced_signal);
  }
  for (int sig = SIGRTMAX - 2; sig > SIGRTMIN; --sig)
    if (install(sig)) {
      signal_ = sig;
      return true;
    }
  return false;
}

void StackSampler::arm(int forced_signal, int64_t epoch_offset_ns, const std::string& library) {
  epoch_offset_ns_ = epoch_offset_ns;
  for (int i = 0; i < kRequests; ++i) g_requests[i].snap.stack = g_stack_copies[i];
  g_in_place.stack = g_stack_copies[kRequests];
  if (!prepare_memory_reads(move_fd_high))
    log_warn("hang watchdog: neither process_vm_readv nor /proc/self/mem can read this process; stacks get one frame");
  std::string err = unwinder_.load(library);
  unwinder_status_ = err.empty() ? "libunwind" : "unavailable: " + err;
#ifdef LAGGARD_HAVE_LIBUNWIND
  if (err.empty()) load_local_names(library);
#endif
  g_copy_stacks.store(err.empty(), std::memory_order_relaxed);
  if (!choose_signal(forced_signal)) log_warn("hang watchdog: no free real-time signal; running threads get no stacks");
}

bool StackSampler::handler_still_ours() {
  if (!signal_) return false;
  struct sigaction now {};
  if (sigaction(signal_, nullptr, &now) == 0 && is_ours(now)) return true;
  // The application took our signal after we chose it: leave it alone and pick another.
  log_warn("hang watchdog: the application installed its own handler for signal %d; choosing another", signal_);
  signal_ = 0;
  return choose_signal(0);
}

void StackSampler::begin_report() { unwinder_.refresh(); }

void StackSampler::add_frames(ThreadReport& t, const StackSnapshot& s) {
  uint64_t pcs[kMaxFrames];
  int n = unwinder_.unwind(s, pcs, kMaxFrames);
  for (int i = 0; i < n; ++i) {
    StackFrame f;
    f.pc = pcs[i];
    uint64_t lookup = i == 0 ? f.pc : f.pc - 1;  // a return address may lie past its call's function
    if (const Module* m = unwinder_.modules().module_of(lookup)) {
      f.module = m->path;
      f.module_base = m->base;
    }
    t.frames.push_back(std::move(f));
  }
}

bool StackSampler::capture_in_place(ThreadReport& t, const SyscallState& before) {
  TaskStatus switches_before = read_task_status(t.tid);
  if (!switches_before.ok) return false;
  StackSnapshot& s = g_in_place;
  s.known = 0;
  s.stack_len = 0;
  s.set(kRegSp, before.sp);
  s.set(kRegPc, before.pc);
  if (unwinder_.loaded()) copy_stack(s, before.sp);
  RangeStack::OpenRange sections[kMaxSections];
  int nsections = copy_sections_in_place(t.tid, sections);
  // Still blocked in the same call, and never scheduled meanwhile: the copy is consistent.
  if (!read_syscall_state(t.tid).same_as(before) || !switches_before.same_switches(read_task_status(t.tid)))
    return false;
  t.method = "in_place";
  if (t.status.empty()) t.status = "captured";
  add_frames(t, s);
  for (int i = 0; i < nsections; ++i)
    t.sections.push_back(OpenSection{section_name(sections[i].name), sections[i].start_ns + epoch_offset_ns_});
  return true;
}

void StackSampler::capture_by_signal(ThreadReport& t, int64_t timeout_ns) {
  if (!handler_still_ours()) {
    t.status = "no_signal";
    return;
  }
  if (thread_blocks_signal(t.tid, signal_)) {
    t.status = "blocked";
    return;
  }
  Request* r = free_request();
  if (!r) {
    t.status = "timeout";
    return;
  }
  uint64_t gen = (r->word.load(std::memory_order_acquire) >> 3) + 1;
  r->tid.store(t.tid, std::memory_order_relaxed);
  r->word.store(gen << 3 | kRequested, std::memory_order_release);
  g_active.store(r, std::memory_order_release);
  if (syscall(SYS_tgkill, getpid(), t.tid, signal_) != 0) {
    r->word.store(gen << 3 | kAbandoned, std::memory_order_release);
    t.status = "gone";
    return;
  }
  int64_t deadline = mono_now() + timeout_ns;
  uint64_t w = r->word.load(std::memory_order_acquire);
  while ((w & 7) != kDone && mono_now() < deadline) {
    sleep_ns(1'000'000);
    w = r->word.load(std::memory_order_acquire);
  }
  if ((w & 7) != kDone) {
    // Not started: abandoned, a late handler finds the state changed and does nothing. Still
    // copying: the slot stays the handler's for good.
    if ((w & 7) == kRequested) r->word.compare_exchange_strong(w, gen << 3 | kAbandoned, std::memory_order_acq_rel);
    t.status = "timeout";
    return;
  }
  t.method = "signal";
  if (t.status.empty()) t.status = "captured";
  add_frames(t, r->snap);
  for (int i = 0; i < r->nsections; ++i)
    t.sections.push_back(OpenSection{section_name(r->sections[i].name), r->sections[i].start_ns + epoch_offset_ns_});
  r->word.store(gen << 3 | kIdle, std::memory_order_release);
}

void StackSampler::capture(ThreadReport& t, int64_t timeout_ns) {
  if (!unwinder_.loaded()) t.status = "no_unwinder";
  int running_looks = 0;
  for (int attempt = 0; attempt < kInPlaceTries; ++attempt) {
    SyscallState st = read_syscall_state(t.tid);
    if (!st.ok) break;  // gone, or this kernel cannot say: the signal decides
    if (st.running) {
      if (++running_looks >= kRunningLooks) return capture_by_signal(t, timeout_ns);
      sleep_ns(1'000'000);
      --attempt;  // a look at a running thread is not a failed read
      continue;
    }
    if (capture_in_place(t, st)) return;
  }
  if (read_syscall_state(t.tid).ok) {
    t.status = "timeout";  // kept entering and leaving the kernel: never caught blocked or running
    return;
  }
  if (syscall(SYS_tgkill, getpid(), t.tid, 0) != 0) {
    t.status = "gone";
    return;
  }
  capture_by_signal(t, timeout_ns);  // no /proc/self/task/TID/syscall on this kernel
}

void StackSampler::name_frames(std::vector<StackFrame>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    StackFrame& f = frames[i];
    if (!f.symbol.empty()) continue;
    uint64_t lookup = i == 0 ? f.pc : f.pc - 1;
    uint64_t offset = 0;
    if (std::string name = proc_name(lookup, &offset); !name.empty()) {
      f.symbol = demangle(name.c_str());
      f.offset = offset + (f.pc - lookup);
      continue;
    }
    Dl_info info{};
    if (dladdr(reinterpret_cast<void*>(lookup), &info) && info.dli_sname) {
      f.symbol = demangle(info.dli_sname);
      f.offset = f.pc - reinterpret_cast<uint64_t>(info.dli_saddr);
    }
  }
}

}  // namespace laggard::watch
