#include "cpu_wait.h"

#include "safe_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace laggard {
namespace {

// Whole numbers only: a directory entry that is a thread id.
bool thread_id(const char* name, pid_t* tid) {
  if (*name < '1' || *name > '9') return false;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(name, &end, 10);
  if (errno || *end || v <= 0 || v > 0x3fffffff) return false;
  *tid = static_cast<pid_t>(v);
  return true;
}

// The thread's counters; false when it ended meanwhile, the kernel has no schedstat, or no fd is left.
// `tid` is a directory name under task_fd.
bool read_thread(int task_fd, const char* tid, SchedStat* out) {
  char path[48];
  size_t n = 0;
  while (tid[n] && n < 20) path[n] = tid[n], ++n;
  const char suffix[] = "/schedstat";
  for (size_t i = 0; i < sizeof suffix; ++i) path[n + i] = suffix[i];
  // Room is checked before and after every open, not once for the pass: an application filling
  // its descriptors meanwhile (tests/integration: fd-limit) lost its last one to a later thread's
  // file. A thread not read now keeps its baseline, so its wait counts in the next window.
  if (!fd_room(1)) return false;
  int fd = keep_if_room(openat(task_fd, path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (fd < 0) return false;
  char buf[96];
  ssize_t got;
  do got = read(fd, buf, sizeof buf - 1);
  while (got < 0 && errno == EINTR);
  close(fd);
  if (got <= 0) return false;
  buf[got] = '\0';
  return parse_schedstat(buf, out);
}

int64_t grown(int64_t now, int64_t before) { return now >= before ? now - before : now; }

}  // namespace

bool parse_schedstat(const char* text, SchedStat* out) {
  unsigned long long v[3];
  const char* p = text;
  for (unsigned long long& x : v) {
    while (*p == ' ') ++p;
    if (*p < '0' || *p > '9') return false;
    char* end = nullptr;
    errno = 0;
    x = std::strtoull(p, &end, 10);
    if (errno || end == p) return false;
    p = end;
  }
  if (*p != '\n' && *p != '\0' && *p != ' ') return false;
  if (v[0] > INT64_MAX || v[1] > INT64_MAX) return false;
  out->run_ns = static_cast<int64_t>(v[0]);
  out->wait_ns = static_cast<int64_t>(v[1]);
  out->timeslices = v[2];
  return true;
}

CpuWaitWindow CpuWaitSampler::sample(std::array<pid_t, 2> laggard_threads) {
  CpuWaitWindow w;
  // Two descriptors at a time (the task directory, one schedstat): never the application's last
  // (safe_write.h); a window sampled without them has no cpu_wait, as where schedstat is missing.
  if (!fd_room(2)) return w;
  int task_fd = keep_if_room(open(task_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (task_fd < 0) return w;
  DIR* dir = fdopendir(task_fd);
  if (!dir) {
    close(task_fd);
    return w;
  }
  std::unordered_map<pid_t, SchedStat> now;
  now.reserve(last_.size() + 8);
  while (dirent* e = readdir(dir)) {
    pid_t tid = 0;
    SchedStat s;
    if (!thread_id(e->d_name, &tid) || tid == laggard_threads[0] || tid == laggard_threads[1]) continue;
    auto it = last_.find(tid);
    if (!read_thread(task_fd, e->d_name, &s)) {
      if (it != last_.end()) now.emplace(tid, it->second);  // unreadable this time: keep its baseline
      continue;
    }
    now.emplace(tid, s);
    if (!primed_) continue;
    const SchedStat before = it == last_.end() ? SchedStat{} : it->second;
    const int64_t wait = grown(s.wait_ns, before.wait_ns);
    w.run_ns += grown(s.run_ns, before.run_ns);
    w.wait_ns += wait;
    w.timeslices += s.timeslices >= before.timeslices ? s.timeslices - before.timeslices : s.timeslices;
    if (wait > w.max_thread_wait_ns) w.max_thread_wait_ns = wait;
    ++w.threads;
  }
  closedir(dir);  // closes task_fd
  w.present = primed_ && w.threads > 0;
  primed_ = primed_ || !now.empty();
  last_ = std::move(now);
  return w;
}

void CpuWaitSampler::tick(const uint32_t* tids, int n, int64_t now_ns) {
  if (!fd_room(2)) return;  // as in sample()
  const int task_fd = keep_if_room(open(task_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (task_fd < 0) return;
  std::unordered_map<uint32_t, int64_t> now;
  int64_t wait = 0;
  uint32_t read = 0;
  for (int i = 0; i < n && i < kMaxTickThreads; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "%u", tids[i]);
    SchedStat s;
    auto it = tick_last_.find(tids[i]);
    if (!read_thread(task_fd, name, &s)) {
      if (it != tick_last_.end()) now.emplace(tids[i], it->second);
      continue;
    }
    now.emplace(tids[i], s.wait_ns);
    ++read;
    if (it != tick_last_.end()) wait += grown(s.wait_ns, it->second);
  }
  close(task_fd);
  tick_last_ = std::move(now);
  if (read == 0) return;
  tick_threads_ = std::max(tick_threads_, read);
  ticks_.push_back({now_ns, wait});
}

std::vector<TickWait> CpuWaitSampler::take_ticks(uint32_t* most_threads) {
  *most_threads = tick_threads_;
  tick_threads_ = 0;
  std::vector<TickWait> out;
  out.swap(ticks_);
  return out;
}

}  // namespace laggard
