#include "watchdog.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "clock.h"
#include "config.h"
#include "log.h"
#include "name_table.h"
#include "private_fds.h"
#include "thread_registry.h"
#include "safe_write.h"
#include "thread_probe.h"
#include "writer.h"

namespace laggard::watch {
namespace {

std::atomic<CollectiveProvider> g_provider{nullptr};

bool parse_seconds(const char* v, double min, double max, double* out) {
  if (!v || !*v) return false;
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v, &end);
  if (errno || !end || *end || !std::isfinite(d) || d < min || d > max) return false;
  *out = d;
  return true;
}

std::vector<uint32_t> list_threads() {
  std::vector<uint32_t> tids;
  DIR* d = opendir("/proc/self/task");
  if (!d) return tids;
  while (dirent* e = readdir(d)) {
    long long tid = 0;
    if (parse_int(e->d_name, 1, 0xffffffffLL, &tid)) tids.push_back(static_cast<uint32_t>(tid));
  }
  closedir(d);
  std::sort(tids.begin(), tids.end());
  return tids;
}

std::string thread_name(uint32_t tid) {
  char buf[64];
  if (!read_task_file(tid, "comm", buf, sizeof buf)) return "";
  std::string name(buf);
  if (!name.empty() && name.back() == '\n') name.pop_back();
  return sanitize_utf8(name);
}

}  // namespace

HangConfig parse_hang_config(const Env& env, std::vector<std::string>* warnings) {
  HangConfig c;
  auto bad = [&](const char* var, const char* v, const char* expected, const char* fallback) {
    warnings->push_back(std::string(var) + "='" + v + "' is not valid (" + expected + "); using " + fallback);
  };
  if (const char* v = env("LAGGARD_HANG_S"); v && *v) {
    if (std::strcmp(v, "0") == 0 || std::strcmp(v, "off") == 0) c.hang_s = 0;
    else if (!parse_seconds(v, 0.1, 1e7, &c.hang_s)) bad("LAGGARD_HANG_S", v, "seconds >= 0.1, or 0/off", "off");
  }
  if (const char* v = env("LAGGARD_HANG_REPEAT_S"); v && *v)
    if (!parse_seconds(v, 0.1, 1e7, &c.repeat_s)) bad("LAGGARD_HANG_REPEAT_S", v, "seconds >= 0.1", "300");
  if (const char* v = env("LAGGARD_HANG_SIGNAL"); v && *v) {
    long long sig = 0;
    if (parse_int(v, SIGRTMIN, SIGRTMAX, &sig)) c.signal = static_cast<int>(sig);
    else bad("LAGGARD_HANG_SIGNAL", v, "a real-time signal number, SIGRTMIN..SIGRTMAX", "the highest free one");
  }
  if (const char* v = env("LAGGARD_HANG_UNWINDER"); v && *v) c.unwinder = v;
  return c;
}

bool StallClock::due(uint64_t progress, int64_t now) {
  if (!seen_ || progress != progress_) {
    seen_ = true;
    progress_ = progress;
    last_change_ = now;
    last_report_ = -1;  // a new stall reports again
    return false;
  }
  if (now - last_change_ < hang_ns_) return false;
  if (last_report_ >= 0 && now - last_report_ < repeat_ns_) return false;
  last_report_ = now;
  return true;
}

void set_collective_provider(CollectiveProvider provider) { g_provider.store(provider); }

std::string python_note(long pid) {
  if (!dlsym(RTLD_DEFAULT, "Py_IsInitialized")) return "";
  // Reading another thread's Python frames needs the GIL, which a hung thread may hold.
  return "Python stacks are not captured in-process (taking the GIL from a hung process could deadlock); "
         "run: py-spy dump --native --pid " + std::to_string(pid);
}

Watchdog::Watchdog(const HangConfig& cfg, RankInfo rank, int64_t start_mono_ns)
    : cfg_(cfg),
      rank_(std::move(rank)),
      clock_(static_cast<int64_t>(cfg.hang_s * 1e9), static_cast<int64_t>(cfg.repeat_s * 1e9), start_mono_ns) {}

void Watchdog::tick(int64_t now, const std::atomic<bool>* stop) {
  if (!clock_.due(total_progress(), now)) return;
  // A report reads /proc (two descriptors at a time) and writes a file: never with the
  // application's last descriptors (issue 24).
  if (!fd_room(3)) {
    log_warn("hang watchdog: no report now, the application is at its file descriptor limit");
    return;
  }
  HangReport r = build_report(now, stop);
  if (stop && stop->load()) return;
  // Written first with addresses only: naming takes the loader lock, which a hung thread may
  // hold for good; the report must exist even then.
  std::string err = write(r);
  if (!err.empty()) {
    log_warn("hang watchdog: %s", err.c_str());
    return;
  }
  next_index();
  log_warn("no progress for %.1f s: hang report %s written", (now - clock_.last_progress_mono()) / 1e9,
           hang_report_name(rank_.rank, rank_.pid, rank_.image, r.index).c_str());
  if (stop && stop->load()) return;
  name_frames(r);
  if (!(stop && stop->load())) (void)write(r);
}

void Watchdog::arm() {
  if (armed_) return;
  sampler_.arm(cfg_.signal, rank_.epoch_offset_ns, cfg_.unwinder);
  armed_ = true;
}

HangReport Watchdog::build_report(int64_t now, const std::atomic<bool>* stop) {
  arm();
  HangReport r;
  r.run_id = rank_.run_id;
  r.rank = rank_.rank;
  r.local_rank = rank_.local_rank;
  r.world_size = rank_.world_size;
  r.host = rank_.host;
  r.pid = rank_.pid;
  r.image = rank_.image;
  r.index = written_;
  r.written_ns = now + rank_.epoch_offset_ns;
  r.last_progress_ns = clock_.last_progress_mono() + rank_.epoch_offset_ns;
  r.hang_s = cfg_.hang_s;
  r.unwinder = sampler_.unwinder();
  r.python = rank_.python;
  sampler_.begin_report();
  const uint32_t self = static_cast<uint32_t>(::syscall(SYS_gettid));
  for (uint32_t tid : list_threads()) {
    if (stop && stop->load()) break;
    ThreadReport t;
    t.tid = tid;
    t.name = thread_name(tid);
    t.main = static_cast<long>(tid) == rank_.pid;
    if (tid == self) t.status = "watchdog";
    else sampler_.capture(t, static_cast<int64_t>(cfg_.thread_timeout_s * 1e9));
    r.threads.push_back(std::move(t));
  }
  r.signal = sampler_.signal();
  if (CollectiveProvider p = g_provider.load()) r.collectives = p();
  return r;
}

void Watchdog::name_frames(HangReport& r) {
  for (ThreadReport& t : r.threads) sampler_.name_frames(t.frames);
}

// Through the one safe-write path (files/safe_write.h): the run directory verified, the temp file
// created O_EXCL|O_NOFOLLOW beside it, renamed, and synced: a hang report is often the last thing
// a job leaves before it is killed.
// On the private-table thread (private_fds.h), as the windows: the temp file takes no descriptor
// number of the application's.
std::string Watchdog::write(const HangReport& r) {
  const std::string text = render_hang_report(r);
  std::string err;
  run_with_private_fds([&] {
    RunDirFd dir(rank_.run_dir);
    err = dir.ok() ? dir.write_atomically(hang_report_name(r.rank, r.pid, r.image, r.index), text, Durability::synced)
                   : dir.error();
  });
  return err;
}

}  // namespace laggard::watch
