// An LD_PRELOAD interposer for the fault-injection tests (issue 10): makes write(2) on laggard's
// rank files fail with ENOSPC, as on a full file system, or block, as on a hung network file
// system. Both formats: JSON segments are written to temp files (names ending ".json.tmp"),
// binary frames appended to "rank*.lgr" files. Every other write (the application's output) is
// untouched.
//
//   LAGGARD_TEST_IO_FAULT=enospc|hang|half-hang   the fault; half-hang writes the first half of
//                                       the bytes, then blocks: a SIGKILL then leaves a torn tail
//   LAGGARD_TEST_IO_WHILE=PATH          only while PATH exists (unset: always)
//
// Listed before liblaggard.so in LD_PRELOAD, its write() is the one liblaggard's calls bind to.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

int ends_with(const char* s, size_t len, const char* suffix) {
  size_t n = strlen(suffix);
  return len > n && strcmp(s + len - n, suffix) == 0;
}

int is_laggard_rank_file(int fd) {
  char link[64], target[4096];
  // The calling thread's table: laggard writes from a thread whose table is its own
  // (preload/files/private_fds.h), and /proc/self/fd lists the main thread's.
  snprintf(link, sizeof link, "/proc/thread-self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  size_t len = static_cast<size_t>(n);
  return ends_with(target, len, ".json.tmp") || ends_with(target, len, ".lgr");
}

int fault_active(void) {
  const char* fault = getenv("LAGGARD_TEST_IO_FAULT");
  if (!fault || !*fault) return 0;
  const char* gate = getenv("LAGGARD_TEST_IO_WHILE");
  return !gate || access(gate, F_OK) == 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t count) {
  if (fault_active() && is_laggard_rank_file(fd)) {
    const char* fault = getenv("LAGGARD_TEST_IO_FAULT");
    if (strcmp(fault, "half-hang") == 0 && count > 1) syscall(SYS_write, fd, buf, count / 2);
    if (strcmp(fault, "hang") == 0 || strcmp(fault, "half-hang") == 0) {
      for (;;) {
        struct timespec t = {3600, 0};
        nanosleep(&t, nullptr);
      }
    }
    errno = ENOSPC;
    return -1;
  }
  return syscall(SYS_write, fd, buf, count);
}
