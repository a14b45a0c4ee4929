#include "subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

namespace laggard {
namespace {

[[noreturn]] void exec_with_quiet_stdio(const std::vector<std::string>& argv, int stdout_fd) {
  int devnull = open("/dev/null", O_RDWR);
  if (devnull >= 0) {
    dup2(devnull, 0);
    dup2(stdout_fd >= 0 ? stdout_fd : devnull, 1);
    dup2(devnull, 2);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);  // a caller that takes signals through a signalfd blocks them
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  _exit(127);
}

}  // namespace

int run_program(const std::vector<std::string>& argv, std::string* out) {
  if (argv.empty()) return -1;
  int pipe_fds[2] = {-1, -1};
  if (out && pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) exec_with_quiet_stdio(argv, pipe_fds[1]);
  if (out) close(pipe_fds[1]);
  if (pid < 0) {
    if (out) close(pipe_fds[0]);
    return -1;
  }
  if (out) {
    char buf[4096];
    for (ssize_t n; (n = read(pipe_fds[0], buf, sizeof buf)) != 0;) {
      if (n > 0) out->append(buf, static_cast<size_t>(n));
      else if (errno != EINTR) break;
    }
    close(pipe_fds[0]);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

}  // namespace laggard
