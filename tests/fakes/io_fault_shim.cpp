// An LD_PRELOAD interposer for the fault-injection tests (issue 10): makes write(2) on laggard's
// temp files (names ending ".json.tmp") fail with ENOSPC, as on a full file system, or block, as
// on a hung network file system. Every other write (the application's output) is untouched.
//
//   LAGGARD_TEST_IO_FAULT=enospc|hang   the fault
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

int is_laggard_temp_file(int fd) {
  char link[64], target[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = '\0';
  size_t len = static_cast<size_t>(n);
  return len > 9 && strcmp(target + len - 9, ".json.tmp") == 0;
}

int fault_active(void) {
  const char* fault = getenv("LAGGARD_TEST_IO_FAULT");
  if (!fault || !*fault) return 0;
  const char* gate = getenv("LAGGARD_TEST_IO_WHILE");
  return !gate || access(gate, F_OK) == 0;
}

}  // namespace

extern "C" ssize_t write(int fd, const void* buf, size_t count) {
  if (fault_active() && is_laggard_temp_file(fd)) {
    if (strcmp(getenv("LAGGARD_TEST_IO_FAULT"), "hang") == 0) {
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
