#include "private_fds.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include "log.h"

#ifndef SYS_close_range
#define SYS_close_range 436  // the same number on every architecture Linux added it to (5.9)
#endif

// ThreadSanitizer models one descriptor table per process: this thread's numbers, its own,
// collide with the application's there and every read of a schedstat at fd 4 "races" with an
// open of the application's fd 4 (false reports, tests/unit: NvtxHostile, NcclDriver under
// TSan). Its memory accesses are left out of the model instead; every job is handed over and
// back under the callers' mutex, so what it touches is ordered anyway.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_ignore_thread_begin();
#define LAGGARD_TSAN_IGNORE_THIS_THREAD() __tsan_ignore_thread_begin()
#else
#define LAGGARD_TSAN_IGNORE_THIS_THREAD() ((void)0)
#endif

namespace laggard {
namespace {

enum class Mode : uint8_t { not_started, private_table, on_caller };

// Never freed: the flush thread may still read while static destructors run, and the thread
// waits on these until the process ends.
struct PrivateFdThread {
  std::mutex callers;  // one job at a time
  std::mutex mu;
  std::condition_variable cv;
  Mode mode = Mode::not_started;  // under mu
  const std::function<void()>* job = nullptr;  // under mu: set by a caller, cleared when done
  std::exception_ptr thrown;                   // under mu: what the job threw, for its caller
  std::atomic<pid_t> tid{0};
  // The process that started it: a forked child has no such thread, and its locks may have been
  // held by a parent's thread at fork, so the child never takes them.
  std::atomic<pid_t> started_in{0};
};

PrivateFdThread& state() {
  static PrivateFdThread* s = new PrivateFdThread();
  return *s;
}

// At load, before the application can have threads: a child forked while a parent's thread made
// it on first use would wait forever on its initialisation guard (see safe_write.cpp).
[[gnu::constructor]] void make_state_at_load() { state(); }

thread_local bool t_on_private_thread = false;

// An empty table of its own, or false with the shared one untouched. close_range with
// CLOSE_RANGE_UNSHARE over 0..~0U: the kernel makes a new table holding the descriptors below
// 0, i.e. none, then closes the range in it (fs/file.c, __close_range) -- it never closes a
// descriptor of the shared table. The table is shared (the caller that started this thread
// waits for its answer), so the kernel always makes the copy. Checked: the first open of an
// empty table is 0. Descriptors 0-2 then hold /dev/null, read-only: a stray write to stderr here
// (this table has none of the application's) fails instead of landing in a file opened for a job.
bool take_private_table() {
  if (::syscall(SYS_close_range, 0U, ~0U, CLOSE_RANGE_UNSHARE) != 0) return false;
  for (int expected = 0; expected < 3; ++expected)
    if (::open("/dev/null", O_RDONLY) != expected) return false;
  return true;
}

void serve(PrivateFdThread* s) {
  t_on_private_thread = true;
  pthread_setname_np(pthread_self(), "laggard-files");  // prctl: no file opened; a hang report shows it by name
  const bool isolated = take_private_table();
  if (isolated) {
    LAGGARD_TSAN_IGNORE_THIS_THREAD();
    s->tid.store(static_cast<pid_t>(::gettid()));  // before the caller hears of it
  }
  {
    std::lock_guard<std::mutex> lock(s->mu);
    s->mode = isolated ? Mode::private_table : Mode::on_caller;
  }
  s->cv.notify_all();
  if (!isolated) return;  // the jobs run on their callers
  for (;;) {
    const std::function<void()>* job = nullptr;
    {
      std::unique_lock<std::mutex> lock(s->mu);
      s->cv.wait(lock, [s] { return s->job != nullptr; });
      job = s->job;
    }
    std::exception_ptr thrown;
    try {
      (*job)();  // without mu: a job may ask private_fds_isolated()
    } catch (...) {
      thrown = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(s->mu);
      s->thrown = thrown;
      s->job = nullptr;
    }
    s->cv.notify_all();
  }
}

bool in_forked_child(const PrivateFdThread& s) {
  const pid_t started_in = s.started_in.load();
  return started_in != 0 && started_in != ::getpid();
}

// Starts the thread, with every signal blocked (the application's signals go to its own
// threads), and waits until it knows whether it has a table of its own. Under s.mu.
void start(PrivateFdThread& s, std::unique_lock<std::mutex>& lock) {
  s.started_in.store(::getpid());
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev);
  try {
    std::thread(serve, &s).detach();
  } catch (...) {
    s.mode = Mode::on_caller;
  }
  pthread_sigmask(SIG_SETMASK, &prev, nullptr);
  s.cv.wait(lock, [&s] { return s.mode != Mode::not_started; });
  if (s.mode == Mode::on_caller)
    log_info("no private descriptor table for laggard's reads (close_range: Linux 5.9); they take the application's lowest free descriptors for a moment");
}

}  // namespace

void run_with_private_fds(const std::function<void()>& job) {
  PrivateFdThread& s = state();
  if (t_on_private_thread || in_forked_child(s)) return job();
  std::lock_guard<std::mutex> one_job(s.callers);
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.mode == Mode::not_started) start(s, lock);
  if (s.mode != Mode::private_table) {
    lock.unlock();
    return job();
  }
  s.job = &job;
  s.cv.notify_all();
  s.cv.wait(lock, [&s] { return s.job == nullptr; });
  if (std::exception_ptr thrown = std::exchange(s.thrown, nullptr)) std::rethrow_exception(thrown);
}

pid_t private_fds_thread_id() {
  PrivateFdThread& s = state();
  return in_forked_child(s) ? 0 : s.tid.load();
}

bool private_fds_isolated() {
  PrivateFdThread& s = state();
  if (in_forked_child(s)) return false;
  std::lock_guard<std::mutex> lock(s.mu);
  return s.mode == Mode::private_table;
}

bool on_private_fds_thread() { return t_on_private_thread; }

}  // namespace laggard
