// Process lifecycle: what happens at load, at the first NVTX call, on every flush interval,
// on SIGTERM/SIGINT, at fork and at exit. Load time only reads the environment and sets
// NVTX_INJECTION64_PATH and NCCL_PROFILER_PLUGIN (and, in srun, SLURM_EXPORT_ENV: see
// slurm_export.h); everything else waits until the process actually uses NVTX or NCCL.
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "capture.h"
#include "clock.h"
#include "thread_aggregates.h"
#include "tsc_clock.h"
#include "config.h"
#include "fork_gate.h"
#include "log.h"
#include "pause_control.h"
#include "plugin_env.h"
#include "process_image.h"
#include "rank_identity.h"
#include "slurm_export.h"
#include "source.h"
#include "writer.h"

namespace laggard {
namespace {

constexpr int64_t kDrainTickNs = 50'000'000;      // drain thread buffers 20x a second
constexpr int kSignals[] = {SIGTERM, SIGINT};

struct Runtime {
  Config cfg;
  std::string self_path;
  bool nvtx_injected = false;   // we own NVTX_INJECTION64_PATH in this process
  std::string nvtx_status;
  std::string nccl_status;      // NCCL_PROFILER_PLUGIN: "on" or "off: why"

  RankIdentity id;
  std::string host;
  FileInfo info;
  std::unique_ptr<NameTable> names;
  std::unique_ptr<Recorder> recorder;
  std::unique_ptr<StartEndTable> start_end;
  std::unique_ptr<SegmentWriter> writer;
  std::unique_ptr<PauseControl> pause;  // `laggard ctl` (flush thread only after activation)
  Capture capture{};
  DropCounters totals;
  uint64_t seen_evicted = 0;
  int64_t flush_interval_ns = 0;

  // The flush thread sleeps on this futex word; wake() bumps it. No file descriptor: an
  // application that closes every fd >= 3 (daemons, launchers) cannot take it away, and the
  // library never reads or writes a descriptor that has become the application's.
  std::atomic<uint32_t> wake_word{0};
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
                "the futex word is the atomic's storage");
  // What exit and SIGTERM/SIGINT may still wait for flushes, in total (LAGGARD_EXIT_WAIT_S):
  // a hung output file system delays the application by at most this much.
  std::atomic<int64_t> exit_wait_left_ns{0};
  std::atomic<bool> stop{false};
  std::atomic<int> pending_signal{0};
  std::atomic<uint64_t> flush_requested{0};
  std::atomic<uint64_t> flush_done{0};
  std::mutex done_mu;
  std::condition_variable done_cv;
  bool finished = false;
  bool warned_write = false;
};

Runtime* g_rt = nullptr;               // never freed: callbacks may run during exit

std::vector<SourceHooks>& sources() {
  static auto* s = new std::vector<SourceHooks>();  // never destroyed: used during exit
  return *s;
}
std::atomic<int> g_state{0};           // 0 idle, 1 active, 2 inert for good
// Activation runs once, on the first caller's thread. Not std::call_once: an application's signal
// handler that calls NVTX on the thread that is activating would wait on itself forever (a SIGALRM
// handler interrupting activation's membarrier did, 2026-11-28), and a caller on another thread
// that waits without bound may be a handler holding what the activating thread needs (a lock of
// malloc it interrupted).
enum Activation : int { kNotActivated, kActivating, kActivated };
std::atomic<int> g_activation{kNotActivated};
thread_local bool t_activating __attribute__((tls_model("initial-exec"))) = false;
std::atomic<bool> g_forked_child{false};
struct sigaction g_old_actions[65];

std::string own_path() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_path), &info) || !info.dli_fname) return "";
  char buf[PATH_MAX];
  return realpath(info.dli_fname, buf) ? std::string(buf) : std::string(info.dli_fname);
}

bool same_file(const char* a, const std::string& b) {
  struct stat sa, sb;
  return a && !b.empty() && stat(a, &sa) == 0 && stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

std::string hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown-host";
  return buf;
}

// This process's arguments after its name, from /proc/self/cmdline; empty if unreadable.
std::vector<std::string> own_arguments() {
  std::string all;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0 && all.size() < (1u << 20);) all.append(buf, static_cast<size_t>(n));
  close(fd);
  std::vector<std::string> args;
  for (size_t start = 0; start < all.size();) {
    size_t end = all.find('\0', start);
    if (end == std::string::npos) end = all.size();
    args.push_back(all.substr(start, end - start));
    start = end + 1;
  }
  if (!args.empty()) args.erase(args.begin());
  return args;
}

// srun and sbatch run under LD_PRELOAD like everything in a batch script: srun passes laggard's
// variables to its tasks even under --export=NONE, and an --export on either one's command line
// that drops them gets one warning (slurm_export.h).
void pass_capture_through_slurm_export() {
  const std::string program = program_invocation_short_name;
  if (program != "srun" && program != "sbatch") return;
  const int saved_errno = errno;
  std::vector<std::string> ours;
  for (char** e = environ; e && *e; ++e) {
    std::string name(*e, strcspn(*e, "="));
    if (name == "LD_PRELOAD") ours.insert(ours.begin(), name);
    else if (name.rfind("LAGGARD_", 0) == 0) ours.push_back(name);
  }
  SlurmExportPlan plan = plan_slurm_export(program, process_env(), own_arguments(), ours);
  if (!plan.warning.empty()) log_warn("%s", plan.warning.c_str());
  if (!plan.var.empty() && setenv(plan.var.c_str(), plan.value.c_str(), 1) == 0)
    log_info("%s did not pass LD_PRELOAD on (#SBATCH --export=NONE?); now %s=%s", program.c_str(), plan.var.c_str(),
             plan.value.c_str());
  errno = saved_errno;
}

std::string absolute(const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return path;
  return std::string(cwd) + "/" + path;
}

// ---- flushing (flush thread only) ----

// The NVTX range clock's line is refitted at every window close (tsc_clock.h).
void calibrate_range_clock() {
  if (const char* change = g_range_clock.calibrate(TscClock::measure())) log_info("NVTX range clock: %s", change);
}

// Activation, before the first range is recorded: a provisional line through the first point
// (taken when activation began) and one taken now, waiting at most kProvisionalWaitNs for the two
// to lie far enough apart (issue 29: until the first fit, 100 ms later, every range read
// clock_gettime twice).
void start_range_clock() {
  const int64_t deadline = mono_ns() + TscClock::kProvisionalWaitNs;
  while (g_range_clock.provisional_wanted()) {
    if (const char* state = g_range_clock.provisional(TscClock::measure())) {
      log_debug("NVTX range clock: %s", state);
      return;
    }
    if (mono_ns() >= deadline) return;
  }
}

void flush(Runtime& rt, bool final, int signal) {
  DropCounters extra;
  uint64_t ev = rt.start_end->evicted();
  extra.start_end_evicted = ev - rt.seen_evicted;
  rt.seen_evicted = ev;
  calibrate_range_clock();
  WindowSnapshot w = rt.recorder->close_window(mono_ns(), extra);
  w.paused = rt.pause->take_spans(w.start_ns, w.end_ns);
  for (const SourceHooks& src : sources()) {
    try {
      if (src.on_window) src.on_window(w, final);
    } catch (...) {
      log_debug("source %s failed to close its window", src.name);
    }
  }
  if (final) {
    // Drained above, so the threads' open depths are final too.
    w.dropped.unclosed_at_exit += rt.recorder->open_ranges() + rt.start_end->open_count();
  }
  rt.totals += w.dropped;
  std::string err = rt.writer->write(w, rt.totals, final, signal);
  if (!err.empty()) {
    if (!rt.warned_write) {
      rt.warned_write = true;
      log_warn("%s; capture goes on and every flush retries", err.c_str());
    } else {
      log_debug("%s", err.c_str());
    }
  } else if (rt.warned_write) {
    rt.warned_write = false;
    log_warn("writing works again: %s", rt.writer->current_path().c_str());
  }
}

// Sleeps up to wait_ns, or until wake() is called. A spurious or early return only means one
// more pass of the loop, which rechecks everything.
void sleep_until_woken(Runtime& rt, int64_t wait_ns) {
  uint32_t seen = rt.wake_word.load(std::memory_order_acquire);
  if (rt.stop.load(std::memory_order_acquire) || rt.flush_requested.load() != rt.flush_done.load()) return;
  timespec timeout{static_cast<time_t>(wait_ns / 1'000'000'000), static_cast<long>(wait_ns % 1'000'000'000) + 1};
  if (timeout.tv_nsec >= 1'000'000'000) {
    timeout.tv_sec += 1;
    timeout.tv_nsec -= 1'000'000'000;
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&rt.wake_word), FUTEX_WAIT_PRIVATE, seen, &timeout, nullptr, 0);
}

// Reads `laggard ctl`'s control file now and then and tells the sources when capture switched.
void poll_pause(Runtime& rt) {
  if (!rt.pause->poll(mono_ns(), mono_ns)) return;
  bool paused = rt.pause->paused();
  for (const SourceHooks& src : sources()) {
    try {
      if (src.on_pause) src.on_pause(paused);
    } catch (...) {
      log_debug("source %s failed to switch capture", src.name);
    }
  }
}

void flush_thread(Runtime* rt) {
  // By name in top -H, py-spy, gdb and hang reports. For its own thread glibc uses prctl: no file opened.
  pthread_setname_np(pthread_self(), "laggard-flush");
  int64_t next = mono_ns() + rt->flush_interval_ns;
  uint64_t served = 0;
  while (!rt->stop.load(std::memory_order_acquire)) {
    int64_t now = mono_ns();
    int64_t wait_ns = std::min(kDrainTickNs, std::max<int64_t>(0, next - now));
    sleep_until_woken(*rt, wait_ns);
    if (rt->stop.load(std::memory_order_acquire)) break;
    uint64_t requested = rt->flush_requested.load(std::memory_order_acquire);
    now = mono_ns();
    try {
      poll_pause(*rt);
      if (requested != served) {
        flush(*rt, false, rt->pending_signal.load());
        served = requested;
        rt->flush_done.store(served, std::memory_order_release);
      } else if (now >= next) {
        flush(*rt, false, 0);
      } else {
        rt->recorder->drain();
        if (g_range_clock.first_fit_due(now)) calibrate_range_clock();
      }
      for (const SourceHooks& src : sources())
        if (src.on_tick) src.on_tick();
    } catch (...) {
      // Keep running: losing one window beats taking the host down.
    }
    while (next <= now) next += rt->flush_interval_ns;
  }
  try {
    flush(*rt, true, 0);
  } catch (...) {
  }
  release_dl_error_state();
  std::lock_guard<std::mutex> lock(rt->done_mu);
  rt->finished = true;
  rt->done_cv.notify_all();
}

// Async-signal-safe: an atomic add and one system call.
void wake(Runtime& rt) {
  rt.wake_word.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&rt.wake_word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Takes up to max_ns from the exit-wait budget; returns what was granted.
int64_t take_exit_wait(Runtime& rt, int64_t max_ns) {
  int64_t left = rt.exit_wait_left_ns.load();
  int64_t grant = 0;
  do {
    grant = std::min(left, max_ns);
    if (grant <= 0) return 0;
  } while (!rt.exit_wait_left_ns.compare_exchange_weak(left, left - grant));
  return grant;
}

// ---- exit, signals, fork ----

void finish() {
  if (g_forked_child.load() || g_state.load() != 1) return;
  Runtime* rt = g_rt;
  if (rt->stop.exchange(true)) return;
  wake(*rt);
  int64_t budget_ns = rt->exit_wait_left_ns.load();
  auto start = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(rt->done_mu);
  rt->done_cv.wait_for(lock, std::chrono::nanoseconds(std::max<int64_t>(0, budget_ns)), [rt] { return rt->finished; });
  take_exit_wait(*rt, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
  // The final window is written; later NVTX calls (other threads, static destructors) are
  // ignored rather than racing with a process that is tearing down.
  g_capture.store(nullptr, std::memory_order_release);
}

// Runs the application's own disposition, as the kernel would have without laggard. The kernel
// already applied the application's sa_mask, SA_NODEFER and SA_RESETHAND on the way in: laggard's
// handler is installed with the application's flags and mask (install_signal_handlers).
void chain_signal(int sig, siginfo_t* info, void* ctx) {
  const struct sigaction& old = g_old_actions[sig];
  if (old.sa_flags & SA_SIGINFO) {
    if (old.sa_sigaction) old.sa_sigaction(sig, info, ctx);
  } else if (old.sa_handler == SIG_IGN) {
  } else if (old.sa_handler == SIG_DFL) {
    // Die exactly as without laggard: default action, same signal, same exit status.
    sigaction(sig, &old, nullptr);
    raise(sig);  // blocked while in this handler; delivered when it returns
  } else {
    old.sa_handler(sig);
  }
}

void on_signal(int sig, siginfo_t* info, void* ctx) {
  int saved_errno = errno;
  Runtime* rt = g_rt;
  if (rt && g_state.load() == 1 && !g_forked_child.load() && !rt->stop.load()) {
    // Only async-signal-safe work here: the flush thread writes, this thread waits briefly.
    // The wait is bounded (LAGGARD_EXIT_WAIT_S in total): this thread may have been interrupted
    // holding a lock the flush thread then needs (a malloc arena, the loader lock, a thread's
    // first-NVTX-call registration), and the flush cannot finish until the handler returns.
    // Then the final flush is lost, never the application's signal.
    rt->pending_signal.store(sig);
    ThreadAggregates::owners_may_be_stopped();  // this thread may be inside an NVTX call
    uint64_t req = rt->flush_requested.fetch_add(1) + 1;
    wake(*rt);
    constexpr int64_t kStepNs = 5'000'000;
    timespec step{0, kStepNs};
    while (rt->flush_done.load() < req && take_exit_wait(*rt, kStepNs) > 0) nanosleep(&step, nullptr);
  }
  chain_signal(sig, info, ctx);
  errno = saved_errno;
}

// For an application handler without SA_SIGINFO: laggard's then has the very same flags, so even
// sigaction() after an SA_RESETHAND delivery reads what it would without laggard.
void on_signal_plain(int sig) { on_signal(sig, nullptr, nullptr); }

void install_signal_handlers() {
  for (int sig : kSignals) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0) continue;
    if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN) continue;  // app ignores it
    g_old_actions[sig] = old;
    // The application's mask and flags (SA_RESETHAND, SA_NODEFER, SA_RESTART, SA_ONSTACK): the
    // kernel then resets, blocks, restarts and switches stacks exactly as it would for the
    // application's handler, and chain_signal calls that handler in the state it expects.
    // The default action (SIG_DFL) keeps SA_RESTART: the process dies right after the flush.
    struct sigaction sa {};
    sa.sa_mask = old.sa_mask;
    bool app_handler = (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL;
    sa.sa_flags = app_handler ? old.sa_flags & (SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART | SA_ONSTACK)
                              : SA_SIGINFO | SA_RESTART;
    if (sa.sa_flags & SA_SIGINFO) sa.sa_sigaction = on_signal;
    else sa.sa_handler = on_signal_plain;
    sigaction(sig, &sa, nullptr);
  }
}

void on_fork_child() {
  // A forked child (e.g. a data-loader worker) is not the rank: it inherits RANK but must not
  // write that rank's files. The flush thread does not exist here anyway.
  g_forked_child.store(true);
  g_capture.store(nullptr, std::memory_order_release);
  forget_descriptors_after_fork();  // the parent's run directory and segment are not the child's
  for (const SourceHooks& src : sources())
    if (src.on_fork_child) src.on_fork_child();
}

void on_atexit() {
  try {
    finish();
  } catch (...) {
  }
}

// ---- activation ----

void activate() {
  Runtime& rt = *g_rt;
  Env env = process_env();
  RankResult rank = detect_rank(env, rt.host, static_cast<long>(getppid()));
  if (!rank.identity) {
    log_debug("no rank identity (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK, ...): not capturing");
    g_state.store(2);
    return;
  }
  for (const std::string& w : rank.warnings) log_warn("%s", w.c_str());
  rt.id = *rank.identity;
  char tag[32];
  std::snprintf(tag, sizeof tag, "rank %d", rt.id.rank);
  set_log_tag(tag);

  log_debug("NVTX range clock: %s", g_range_clock.configure(rt.cfg.clock, counter_is_invariant()));
  g_range_clock.calibrate(TscClock::measure());
  int64_t start_mono = mono_ns();
  int64_t offset = measure_epoch_offset_ns();
  rt.flush_interval_ns = static_cast<int64_t>(rt.cfg.flush_s * 1e9);
  rt.names = std::make_unique<NameTable>(rt.cfg.sections);
  rt.recorder = std::make_unique<Recorder>(*rt.names, rt.cfg.max_occurrences, offset, start_mono);
  rt.start_end = std::make_unique<StartEndTable>();

  FileInfo& fi = rt.info;
  fi.run_id = rt.id.run_id;
  fi.run_id_source = rt.id.run_id_source;
  fi.rank = rt.id.rank;
  fi.local_rank = rt.id.local_rank;
  fi.world_size = rt.id.world_size;
  fi.rank_source = rt.id.rank_source;
  fi.host = rt.host;
  fi.pid = static_cast<long>(getpid());
  fi.ppid = static_cast<long>(getppid());
  ProcessImage image = this_process_image(env);
  fi.image = image.id;
  fi.started_ticks = image.started_ticks;
  fi.process_start_ns = start_mono + offset;
  fi.epoch_offset_ns = offset;
  fi.flush_s = rt.cfg.flush_s;
  fi.sections_filter = rt.cfg.sections;
  fi.max_occurrences = rt.cfg.max_occurrences;
  fi.nvtx_status = rt.nvtx_injected ? "on" : "off: NVTX_INJECTION64_PATH belongs to another tool";
  fi.cupti_enabled = rt.cfg.cupti;
  fi.profiling_interval = rt.cfg.profiling_interval;
  fi.nccl_status = rt.nccl_status;
  rt.writer = std::make_unique<SegmentWriter>(absolute(rt.cfg.out_dir) + "/" + fi.run_id, fi,
                                              rt.cfg.windows_per_file);
  if (rt.cfg.binary_files) rt.writer->set_format(FileFormat::binary);

  rt.exit_wait_left_ns.store(static_cast<int64_t>(rt.cfg.exit_wait_s * 1e9));
  // Before the first range: a rank that starts into a paused run starts paused.
  rt.pause = std::make_unique<PauseControl>(rt.writer->run_dir(), offset);
  rt.pause->poll(mono_ns(), mono_ns);

  start_range_clock();  // before the flush thread, which calibrates the clock from then on
  // Start the flush thread with every signal blocked, so signals go to the app's threads.
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  try {
    std::thread(flush_thread, g_rt).detach();
  } catch (...) {
    pthread_sigmask(SIG_SETMASK, &prev, nullptr);
    log_warn("cannot start the flush thread; not capturing");
    g_state.store(2);
    return;
  }
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);

  rt.capture = Capture{rt.names.get(), rt.recorder.get(), rt.start_end.get()};
  g_capture.store(&rt.capture, std::memory_order_release);
  g_state.store(1);
  {
    ForkGate no_fork_while;  // fork_gate.h: a child must not inherit the exit list's lock
    std::atexit(on_atexit);
  }
  install_signal_handlers();
  for (const SourceHooks& src : sources()) {
    try {
      if (src.on_activate) src.on_activate();
    } catch (...) {
      log_warn("capture source %s failed to start; it stays off", src.name);
    }
  }
  log_info("capturing NVTX as rank %d of %d (run %s) into %s", rt.id.rank, rt.id.world_size,
           rt.id.run_id.c_str(), rt.writer->run_dir().c_str());
}

__attribute__((constructor)) void on_load() {
  try {
    ConfigResult cr = parse_config(process_env());
    set_log_level(cr.config.log);
    if (!cr.config.enabled) {
      g_state.store(2);
      return;
    }
    auto* rt = new Runtime();
    rt->cfg = cr.config;
    rt->host = hostname();
    rt->self_path = own_path();
    // Warn only where it matters: processes that are ranks. A launcher stays silent.
    bool is_rank = detect_rank(process_env(), rt->host, 0).identity.has_value();
    if (is_rank)
      for (const std::string& w : cr.warnings) log_warn("%s", w.c_str());
    else
      pass_capture_through_slurm_export();

    const char* current = std::getenv("NVTX_INJECTION64_PATH");
    if (!current || !*current) {
      rt->nvtx_injected = !rt->self_path.empty() &&
                          setenv("NVTX_INJECTION64_PATH", rt->self_path.c_str(), 1) == 0;
    } else if (same_file(current, rt->self_path)) {
      rt->nvtx_injected = true;  // inherited from a parent that runs laggard too
    } else if (is_rank) {
      log_warn("NVTX_INJECTION64_PATH is already set to '%s' (another NVTX tool?); "
               "laggard leaves it alone and will not capture NVTX ranges", current);
    }
    rt->nccl_status = nccl::offer_plugin_at_load(rt->cfg, rt->self_path, is_rank);
    g_rt = rt;
    pthread_atfork(nullptr, nullptr, on_fork_child);
  } catch (...) {
    g_state.store(2);
  }
}

__attribute__((destructor)) void on_unload() { on_atexit(); }

}  // namespace

void register_source(const SourceHooks& hooks) { sources().push_back(hooks); }

const FileInfo* active_file_info() { return g_state.load() == 1 && g_rt ? &g_rt->info : nullptr; }
std::string active_run_dir() { return g_state.load() == 1 && g_rt ? g_rt->writer->run_dir() : std::string(); }
void finish_capture_at_exit() { on_atexit(); }

namespace {
// Capture can never start in this process (image): a forked child, not loaded, disabled or off.
bool never_captures() { return g_forked_child.load() || !g_rt || g_state.load() == 2; }

// Waits for another thread's activation, polling with nanosleep (async-signal-safe, as
// clock_gettime is): false when it has not finished within max_wait_ns.
bool wait_for_activation(int64_t max_wait_ns) {
  const int64_t deadline = max_wait_ns == kWaitAsLongAsItTakes ? INT64_MAX : mono_ns() + max_wait_ns;
  const timespec poll_every{0, 200'000};
  while (g_activation.load(std::memory_order_acquire) != kActivated) {
    if (mono_ns() >= deadline) return false;
    nanosleep(&poll_every, nullptr);
  }
  return true;
}

// Whether activation has run (here or on another thread). False on the activating thread itself
// (only a signal handler can call in then) and when another thread's took longer than max_wait_ns.
bool activation_done(int64_t max_wait_ns) {
  if (g_activation.load(std::memory_order_acquire) == kActivated) return true;
  if (t_activating) return false;
  int expected = kNotActivated;
  if (!g_activation.compare_exchange_strong(expected, kActivating, std::memory_order_acq_rel))
    return wait_for_activation(max_wait_ns);
  t_activating = true;
  try {
    activate();
  } catch (...) {
    g_state.store(2);
  }
  t_activating = false;
  g_activation.store(kActivated, std::memory_order_release);
  return true;
}
}  // namespace

bool activate_capture(int64_t max_wait_ns) {
  if (never_captures()) return false;
  return activation_done(max_wait_ns) && g_state.load() == 1;
}

bool capture_may_start() {
  if (never_captures()) return false;
  return g_state.load() == 1 ||
         detect_rank(process_env(), g_rt->host, static_cast<long>(getppid())).identity.has_value();
}

}  // namespace laggard
