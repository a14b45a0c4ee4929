#include "thread_probe.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace laggard::watch {

bool SyscallState::same_as(const SyscallState& o) const {
  if (!ok || !o.ok || running || o.running || nr != o.nr || sp != o.sp || pc != o.pc) return false;
  for (int i = 0; i < 6; ++i)
    if (args[i] != o.args[i]) return false;
  return true;
}

bool read_task_file(uint32_t tid, const char* file, char* buf, size_t cap) {
  if (cap == 0) return false;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%u/%s", tid, file);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  size_t got = 0;
  while (got + 1 < cap) {
    ssize_t n = ::read(fd, buf + got, cap - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  buf[got] = '\0';
  return got > 0;
}

SyscallState parse_syscall_state(const char* text) {
  SyscallState s;
  if (std::strncmp(text, "running", 7) == 0) {
    s.ok = s.running = true;
    return s;
  }
  // "NR ARG1 ... ARG6 SP PC" (hex after NR) or "-1 SP PC" (kernel fs/proc/base.c, proc_pid_syscall).
  char* end = nullptr;
  long nr = std::strtol(text, &end, 10);
  if (end == text) return s;
  uint64_t v[8];
  int n = 0;
  const char* p = end;
  while (n < 8) {
    while (*p == ' ') ++p;
    if (*p == '\0' || *p == '\n') break;
    char* e = nullptr;
    v[n] = std::strtoull(p, &e, 16);
    if (e == p) return s;
    p = e;
    ++n;
  }
  if (nr == -1 && n == 2) {
    s.sp = v[0];
    s.pc = v[1];
  } else if (nr >= 0 && n == 8) {
    std::memcpy(s.args, v, sizeof s.args);
    s.sp = v[6];
    s.pc = v[7];
  } else {
    return s;
  }
  s.nr = nr;
  s.ok = s.sp != 0 && s.pc != 0;
  return s;
}

SyscallState read_syscall_state(uint32_t tid) {
  char buf[256];
  if (!read_task_file(tid, "syscall", buf, sizeof buf)) return {};
  return parse_syscall_state(buf);
}

TaskStatus read_task_status(uint32_t tid) {
  TaskStatus t;
  char buf[4096];
  if (!read_task_file(tid, "status", buf, sizeof buf)) return t;
  int found = 0;
  for (char* line = buf; line && *line;) {
    char* next = std::strchr(line, '\n');
    if (next) *next++ = '\0';
    if (std::strncmp(line, "SigBlk:", 7) == 0) {
      t.sig_blocked = std::strtoull(line + 7, nullptr, 16);
      ++found;
    } else if (std::strncmp(line, "voluntary_ctxt_switches:", 24) == 0) {
      t.voluntary_switches = std::strtoull(line + 24, nullptr, 10);
      ++found;
    } else if (std::strncmp(line, "nonvoluntary_ctxt_switches:", 27) == 0) {
      t.involuntary_switches = std::strtoull(line + 27, nullptr, 10);
      ++found;
    }
    line = next;
  }
  t.ok = found == 3;
  return t;
}

}  // namespace laggard::watch
