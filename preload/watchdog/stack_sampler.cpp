#include "stack_sampler.h"

#include <cxxabi.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "log.h"
#include "range_stack.h"
#include "thread_registry.h"

#ifdef LAGGARD_HAVE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace laggard::watch {
namespace {

constexpr int kMaxFrames = 64;
constexpr int kNameLen = 192;
constexpr int kMaxSections = 32;
constexpr int kRequests = 4;  // a slot whose handler never finished is not reused

enum : uint64_t { kIdle = 0, kRequested = 1, kWriting = 2, kDone = 3, kAbandoned = 4 };

// Filled by the signal handler on the target thread; read by the watchdog after kDone.
struct Request {
  std::atomic<uint64_t> word{0};  // generation << 3 | state
  std::atomic<uint32_t> tid{0};
  int nframes = 0;
  uint64_t pc[kMaxFrames];
  int nsections = 0;
  RangeStack::OpenRange sections[kMaxSections];
};

Request g_requests[kRequests];
std::atomic<Request*> g_active{nullptr};
std::atomic<int> g_signal{0};

#ifdef LAGGARD_HAVE_LIBUNWIND
#define LAGGARD_STR2(x) #x
#define LAGGARD_STR(x) LAGGARD_STR2(x)
struct Unwind {
  int (*init_local2)(unw_cursor_t*, unw_context_t*, int) = nullptr;
  int (*step)(unw_cursor_t*) = nullptr;
  int (*get_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t*) = nullptr;
  int (*get_proc_name)(unw_cursor_t*, char*, size_t, unw_word_t*) = nullptr;
  int (*set_reg)(unw_cursor_t*, unw_regnum_t, unw_word_t) = nullptr;
  int (*getcontext)(unw_context_t*) = nullptr;
};
Unwind g_unw;  // set in arm(), before the handler is installed; cleared when libunwind is missing
#endif

uint32_t gettid_raw() { return static_cast<uint32_t>(::syscall(SYS_gettid)); }

// The procedure containing `ip` and the offset into it, by libunwind's symbol-table lookup (it
// finds static functions dladdr cannot): a cursor on this thread moved to `ip`. Not in a signal
// handler (see fill_request). "" when unknown.
std::string proc_name(uint64_t ip, uint64_t* offset) {
#ifdef LAGGARD_HAVE_LIBUNWIND
  if (!g_unw.set_reg) return "";
  unw_context_t ctx;
  unw_cursor_t cursor;
  if (g_unw.getcontext(&ctx) != 0 || g_unw.init_local2(&cursor, &ctx, 0) != 0) return "";
  if (g_unw.set_reg(&cursor, UNW_REG_IP, ip) != 0) return "";
  char name[kNameLen] = {};
  unw_word_t off = 0;
  if (g_unw.get_proc_name(&cursor, name, sizeof name, &off) != 0 && !name[0]) return "";
  name[kNameLen - 1] = '\0';
  *offset = off;
  return name;
#else
  (void)ip;
  (void)offset;
  return "";
#endif
}

// Signal context only: everything below writes into *r and reads this thread's own state. Only
// addresses: naming them (unw_get_proc_name) reads ELF symbol tables and may call malloc, which
// deadlocks a thread interrupted inside malloc (ThreadSanitizer: signal-unsafe call in a handler).
// The watchdog thread names them afterwards (proc_name).
void fill_request(Request* r, void* ucontext) {
  r->nframes = 0;
#ifdef LAGGARD_HAVE_LIBUNWIND
  unw_cursor_t cursor;
  if (g_unw.init_local2 &&
      g_unw.init_local2(&cursor, static_cast<unw_context_t*>(ucontext), UNW_INIT_SIGNAL_FRAME) == 0) {
    do {
      unw_word_t ip = 0;
      if (g_unw.get_reg(&cursor, UNW_REG_IP, &ip) != 0 || ip == 0) break;
      r->pc[r->nframes++] = ip;
    } while (r->nframes < kMaxFrames && g_unw.step(&cursor) > 0);
  }
#else
  (void)ucontext;
#endif
  r->nsections = 0;
  if (const ThreadSlot* s = find_slot(r->tid.load(std::memory_order_relaxed)))
    if (const RangeStack* st = s->stack.load(std::memory_order_acquire))
      r->nsections = st->snapshot(r->sections, kMaxSections);
}

void on_stack_signal(int, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  // Only our own tgkill counts; anything else sending this signal is ignored rather than
  // taking the default action (which would end the process).
  if (info && info->si_code == SI_TKILL && info->si_pid == getpid()) {
    Request* r = g_active.load(std::memory_order_acquire);
    if (r) {
      uint64_t w = r->word.load(std::memory_order_acquire);
      if ((w & 7) == kRequested && r->tid.load(std::memory_order_relaxed) == gettid_raw() &&
          r->word.compare_exchange_strong(w, (w & ~uint64_t{7}) | kWriting, std::memory_order_acq_rel)) {
        fill_request(r, ucontext);
        r->word.store((w & ~uint64_t{7}) | kDone, std::memory_order_release);
      }
    }
  }
  errno = saved_errno;
}

bool is_ours(const struct sigaction& sa) {
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_stack_signal;
}

bool is_unused(const struct sigaction& sa) {
  return !(sa.sa_flags & SA_SIGINFO) && sa.sa_handler == SIG_DFL;
}

bool install(int sig) {
  struct sigaction old {};
  if (sigaction(sig, nullptr, &old) != 0) return false;
  if (is_ours(old)) return true;
  if (!is_unused(old)) return false;
  struct sigaction sa {};
  sa.sa_sigaction = on_stack_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigfillset(&sa.sa_mask);  // nothing else runs on top of the unwinder
  return sigaction(sig, &sa, nullptr) == 0;
}

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

// The file each pc lies in and that file's load base, from /proc/self/maps.
struct Mapping {
  uint64_t start, end;
  std::string path;
  uint64_t base;
};

std::vector<Mapping> read_maps() {
  std::vector<Mapping> maps;
  std::map<std::string, uint64_t> base;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    unsigned long long start = 0, end = 0, offset = 0;
    char perms[8] = {};
    int path_at = 0;
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &start, &end, perms, &offset, &path_at) < 4)
      continue;
    if (path_at <= 0 || static_cast<size_t>(path_at) >= line.size() || line[path_at] != '/') continue;
    std::string path = line.substr(path_at);
    auto [it, added] = base.emplace(path, start - offset);
    if (!added && start - offset < it->second) it->second = start - offset;
    maps.push_back(Mapping{start, end, path, 0});
  }
  for (Mapping& m : maps) m.base = base[m.path];
  return maps;
}

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (status != 0 || !d) return name;
  std::string s(d);
  std::free(d);
  return s;
}

std::string section_name(const NameEntry* e) { return e ? e->display : std::string("?"); }

}  // namespace

bool thread_blocks_signal(uint32_t tid, int sig) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%u/status", tid);
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("SigBlk:", 0) != 0) continue;
    unsigned long long mask = std::strtoull(line.c_str() + 7, nullptr, 16);
    return sig >= 1 && sig <= 64 && (mask >> (sig - 1) & 1);
  }
  return false;
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
#ifdef LAGGARD_HAVE_LIBUNWIND
  void* h = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  g_unw = Unwind{};
  if (!h) {
    unwinder_ = "unavailable: " + library + " not found (install libunwind8)";
  } else {
    Unwind u;
    u.init_local2 = reinterpret_cast<decltype(u.init_local2)>(dlsym(h, LAGGARD_STR(unw_init_local2)));
    u.step = reinterpret_cast<decltype(u.step)>(dlsym(h, LAGGARD_STR(unw_step)));
    u.get_reg = reinterpret_cast<decltype(u.get_reg)>(dlsym(h, LAGGARD_STR(unw_get_reg)));
    u.get_proc_name = reinterpret_cast<decltype(u.get_proc_name)>(dlsym(h, LAGGARD_STR(unw_get_proc_name)));
    u.getcontext = reinterpret_cast<decltype(u.getcontext)>(dlsym(h, LAGGARD_STR(unw_tdep_getcontext)));
    u.set_reg = reinterpret_cast<decltype(u.set_reg)>(dlsym(h, LAGGARD_STR(unw_set_reg)));  // optional: names
    if (!u.init_local2 || !u.step || !u.get_reg || !u.get_proc_name || !u.getcontext) {
      unwinder_ = "unavailable: " + library + " lacks unw_init_local2 (need libunwind >= 1.3)";
    } else {
      g_unw = u;
      unwinder_ = "libunwind";
      // Warm up here, not in a handler: the first unwind initializes libunwind's caches.
      unw_context_t ctx;
      unw_cursor_t cursor;
      if (u.getcontext(&ctx) == 0 && u.init_local2(&cursor, &ctx, 0) == 0)
        for (int i = 0; i < 8 && u.step(&cursor) > 0; ++i) {
        }
    }
  }
#else
  (void)library;
  unwinder_ = "unavailable: laggard was built without libunwind headers";
#endif
  (void)forced_signal;
  if (!choose_signal(forced_signal)) log_warn("hang watchdog: no free real-time signal; reports carry no native stacks");
  g_signal.store(signal_, std::memory_order_release);
}

bool StackSampler::handler_still_ours() {
  if (!signal_) return false;
  struct sigaction now {};
  if (sigaction(signal_, nullptr, &now) == 0 && is_ours(now)) return true;
  // The application took our signal after we chose it: leave it alone and pick another.
  log_warn("hang watchdog: the application installed its own handler for signal %d; choosing another", signal_);
  signal_ = 0;
  if (!choose_signal(0)) return false;
  g_signal.store(signal_, std::memory_order_release);
  return true;
}

void StackSampler::capture(ThreadReport& t, int64_t timeout_ns) {
  if (unwinder_ != "libunwind") t.status = "no_unwinder";
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
  if ((w & 7) == kRequested &&
      r->word.compare_exchange_strong(w, gen << 3 | kAbandoned, std::memory_order_acq_rel)) {
    t.status = "timeout";
    return;
  }
  if ((w & 7) != kDone) {  // the handler is still unwinding: leave this slot to it for good
    t.status = "timeout";
    return;
  }
  if (t.status.empty()) t.status = "captured";
  std::vector<Mapping> maps = read_maps();
  for (int i = 0; i < r->nframes; ++i) {
    StackFrame f;
    f.pc = r->pc[i];
    uint64_t lookup = i == 0 ? f.pc : f.pc - 1;  // a return address may lie past its call's function
    for (const Mapping& m : maps)
      if (lookup >= m.start && lookup < m.end) {
        f.module = m.path;
        f.module_base = m.base;
        break;
      }
    uint64_t offset = 0;
    if (std::string name = proc_name(lookup, &offset); !name.empty()) {
      f.symbol = demangle(name.c_str());
      f.offset = offset + (f.pc - lookup);
    } else {
      Dl_info info{};
      if (dladdr(reinterpret_cast<void*>(lookup), &info) && info.dli_sname) {
        f.symbol = demangle(info.dli_sname);
        f.offset = f.pc - reinterpret_cast<uint64_t>(info.dli_saddr);
      }
    }
    t.frames.push_back(std::move(f));
  }
  for (int i = 0; i < r->nsections; ++i)
    t.sections.push_back(OpenSection{section_name(r->sections[i].name), r->sections[i].start_ns + epoch_offset_ns_});
  r->word.store(gen << 3 | kIdle, std::memory_order_release);
}

}  // namespace laggard::watch
