#include "process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace laggard::test {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Running start_process(const std::vector<std::string>& argv, const ProcessOptions& opts) {
  static int counter = 0;
  Running r;
  std::string base = "/tmp/laggard-proc-" + std::to_string(getpid()) + "-" + std::to_string(counter++);
  r.out_path = base + ".out";
  r.err_path = base + ".err";
  r.pid = fork();
  if (r.pid < 0) throw std::runtime_error("fork failed");
  if (r.pid == 0) {
    int out = open(r.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(r.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    dup2(err, 2);
    for (const auto& [k, v] : opts.env) {
      if (v) setenv(k.c_str(), v->c_str(), 1);
      else unsetenv(k.c_str());
    }
    if (!opts.cwd.empty() && chdir(opts.cwd.c_str()) != 0) _exit(126);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  return r;
}

ProcessResult wait_process(const Running& r, double timeout_s) {
  ProcessResult res;
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (true) {
    pid_t p = waitpid(r.pid, &status, WNOHANG);
    if (p == r.pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(r.pid, SIGKILL);
      waitpid(r.pid, &status, 0);
      res.err = "TIMEOUT\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) res.term_signal = WTERMSIG(status);
  res.out = read_file(r.out_path);
  res.err += read_file(r.err_path);
  unlink(r.out_path.c_str());
  unlink(r.err_path.c_str());
  return res;
}

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& opts) {
  return wait_process(start_process(argv, opts), opts.timeout_s);
}

}  // namespace laggard::test
