// laggard-hostile-app: an application that does what real hosts do and laggard must survive
// (issue 10). Prints the same output with and without laggard unless laggard interferes.
//
//   laggard-hostile-app close-fds        closes every fd >= 3 after its first NVTX call, then
//                                        uses fds 3 and 4 itself (a pipe) and checks its data
//   laggard-hostile-app exec-child N M   N "parent_step" ranges, then fork + exec itself as
//                                        `steps M` (inheriting LD_PRELOAD and RANK), waits
//   laggard-hostile-app steps M          M "child_step" ranges
//   laggard-hostile-app wait-for FILE N  waits until FILE exists, then N "step" ranges
#include <fcntl.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

void sleep_ms(int ms) {
  timespec t{ms / 1000, (ms % 1000) * 1'000'000L};
  while (nanosleep(&t, &t) != 0) {
  }
}

void ranges(const char* name, int n, int ms) {
  for (int i = 0; i < n; ++i) {
    nvtxRangePushA(name);
    sleep_ms(ms);
    nvtxRangePop();
  }
}

double cpu_ms() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int g_exit_pipe_rd = -1;

// Runs after laggard's own exit handler (registered later, at the first NVTX call): by then
// nothing may have been written into the application's pipe.
void check_exit_pipe() {
  char buf[16];
  ssize_t n = read(g_exit_pipe_rd, buf, sizeof buf);
  std::printf("bytes found in my pipe at exit: %zd\n", n < 0 ? 0 : n);
  std::fflush(stdout);
}

void close_fds_from_3() {
  for (int fd = 3; fd < 1024; ++fd) close(fd);
}

int close_fds() {
  close_fds_from_3();  // start as a fresh process does (whatever a test harness leaked): laggard's fds come first
  std::atexit(check_exit_pipe);
  ranges("step", 3, 20);
  sleep_ms(150);  // laggard's flush thread is running now
  close_fds_from_3();
  ranges("step", 2, 20);

  // The application's own pipe lands on fds 3 and 4.
  int p[2];
  if (pipe2(p, O_NONBLOCK) != 0) return 1;
  std::printf("my pipe is fds %d and %d\n", p[0], p[1]);
  const char msg[] = "hello world\n";  // 12 bytes
  if (write(p[1], msg, 12) != 12) return 1;
  sleep_ms(500);  // several flush intervals
  char buf[64];
  ssize_t got = read(p[0], buf, sizeof buf);
  std::printf("read back %zd of 12 bytes\n", got < 0 ? 0 : got);

  // With nothing at fds 3 and 4, laggard must not spin.
  close(p[0]);
  close(p[1]);
  double before = cpu_ms();
  sleep_ms(1000);
  double used = cpu_ms() - before;  // laggard's idle flush thread: well under 10 ms
  std::printf("cpu while idle: %s\n", used < 50 ? "low" : "HIGH");
  if (used >= 50) std::fprintf(stderr, "cpu used while idle: %.0f ms\n", used);

  if (pipe2(p, O_NONBLOCK) != 0) return 1;
  g_exit_pipe_rd = p[0];
  ranges("step", 2, 20);
  return 0;
}

int exec_child(const char* self, int parent_steps, const char* child_steps) {
  ranges("parent_step", parent_steps, 10);
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    execl(self, self, "steps", child_steps, static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ranges("parent_step", 1, 10);
  std::printf("parent done, child status %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "close-fds") return close_fds();
  if (mode == "exec-child" && argc == 4) return exec_child(argv[0], std::atoi(argv[2]), argv[3]);
  if (mode == "steps" && argc == 3) {
    ranges("child_step", std::atoi(argv[2]), 5);
    std::printf("child did %s steps\n", argv[2]);
    return 0;
  }
  if (mode == "wait-for" && argc == 4) {
    while (access(argv[2], F_OK) != 0) sleep_ms(10);
    ranges("step", std::atoi(argv[3]), 10);
    std::printf("%s steps done\n", argv[3]);
    return 0;
  }
  std::fprintf(stderr, "usage: laggard-hostile-app close-fds | exec-child N M | steps M | wait-for FILE N\n");
  return 2;
}
