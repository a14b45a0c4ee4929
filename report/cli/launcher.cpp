#include "launcher.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

namespace laggard::cli {
namespace fs = std::filesystem;

namespace {

std::vector<pid_t> g_children;

void forward_signal(int sig, siginfo_t* info, void*) {
  // Ranks get the signal their launcher got, as torchrun does; we keep waiting for them.
  // A Ctrl-C from the terminal (si_code SI_KERNEL) already reached the whole foreground
  // process group, ranks included: forwarding it would deliver it twice.
  if (sig == SIGINT && info && info->si_code == SI_KERNEL) return;
  for (pid_t p : g_children) kill(p, sig);
}

std::string new_run_id() {
  auto now = std::chrono::system_clock::now();
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  localtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &tm);
  std::random_device rd;
  return fmt::format("{}-{:04x}", stamp, rd() & 0xffff);
}

std::string absolute_path(const std::string& p) {
  std::error_code ec;
  auto abs = fs::absolute(p, ec);
  return ec ? p : abs.lexically_normal().string();
}

[[noreturn]] void exec_child(const std::vector<std::string>& cmd) {
  std::vector<char*> argv;
  for (const auto& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  std::string msg = fmt::format("laggard: cannot run '{}': {}\n", cmd[0], std::strerror(errno));
  ssize_t ignored = write(STDERR_FILENO, msg.data(), msg.size());
  (void)ignored;
  _exit(127);
}

}  // namespace

std::string find_library() {
  if (const char* env = std::getenv("LAGGARD_LIB"); env && *env) {
    if (!fs::exists(env)) throw std::runtime_error(fmt::format("LAGGARD_LIB='{}' does not exist", env));
    return absolute_path(env);
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw std::runtime_error("cannot locate the laggard executable to find liblaggard.so");
  for (const char* rel : {"liblaggard.so", "../lib/liblaggard.so", "../lib/laggard/liblaggard.so"}) {
    fs::path candidate = (exe.parent_path() / rel).lexically_normal();
    if (fs::exists(candidate, ec)) return candidate.string();
  }
  throw std::runtime_error("liblaggard.so not found beside " + exe.string() + " (set LAGGARD_LIB)");
}

// The directory of laggard's sitecustomize.py (automatic PyTorch sections, docs/pytorch.md):
// $LAGGARD_PYTHON_DIR, else python/ beside the library (the build tree; lib/laggard/python when
// installed as lib/laggard/liblaggard.so), else laggard/python/ beside it (lib/liblaggard.so).
std::string find_python_dir(const std::string& lib) {
  std::error_code ec;
  if (const char* env = std::getenv("LAGGARD_PYTHON_DIR"); env && *env)
    return fs::is_regular_file(fs::path(env) / "sitecustomize.py", ec) ? absolute_path(env) : std::string();
  const fs::path dir = fs::path(lib).parent_path();
  for (const char* rel : {"python", "laggard/python"}) {
    fs::path candidate = (dir / rel).lexically_normal();
    if (fs::is_regular_file(candidate / "sitecustomize.py", ec)) return candidate.string();
  }
  return "";
}

namespace {

// PYTHONPATH with `dir` first (Python imports the first sitecustomize it finds; laggard's runs
// the one it hides). Unchanged when `dir` is already first.
void put_first_on_pythonpath(const std::string& dir) {
  std::string path = dir;
  if (const char* old = std::getenv("PYTHONPATH"); old && *old) {
    std::string rest = old;
    if (rest == dir || rest.rfind(dir + ":", 0) == 0) return;
    path += ":" + rest;
  }
  setenv("PYTHONPATH", path.c_str(), 1);
}

// The environment every rank inherits. Children of a launcher (torchrun, srun, mpirun) inherit
// it too, which is the point: no change to the job itself.
void export_capture_environment(const RunOptions& o, const std::string& lib, const std::string& out,
                                const std::string& run_id) {
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) {
    if (std::string(old).find(lib) == std::string::npos) preload += ":" + std::string(old);
    else preload = old;
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("LAGGARD_ENABLE", "1", 1);
  setenv("LAGGARD_OUT", out.c_str(), 1);
  setenv("LAGGARD_RUN_ID", run_id.c_str(), 1);
  if (!o.sections.empty()) setenv("LAGGARD_SECTIONS", o.sections.c_str(), 1);
  if (o.flush_s) setenv("LAGGARD_FLUSH_S", fmt::format("{}", *o.flush_s).c_str(), 1);
  if (!o.log.empty()) setenv("LAGGARD_LOG", o.log.c_str(), 1);
  if (std::string dir = find_python_dir(lib); !dir.empty()) put_first_on_pythonpath(dir);
  else if (o.log == "info" || o.log == "debug")
    fmt::print(stderr, "laggard: no python/ directory with sitecustomize.py beside {}: no automatic PyTorch "
                       "sections (set LAGGARD_PYTHON_DIR)\n", lib);
}

// SIGINT and SIGTERM go on to the ranks while this object lives (restored at its end).
class ForwardedSignals {
 public:
  ForwardedSignals() {
    struct sigaction fwd {};
    fwd.sa_sigaction = forward_signal;
    fwd.sa_flags = SA_SIGINFO;
    sigemptyset(&fwd.sa_mask);
    sigaction(SIGINT, &fwd, &old_int_);
    sigaction(SIGTERM, &fwd, &old_term_);
  }
  ~ForwardedSignals() { restore(); }
  ForwardedSignals(const ForwardedSignals&) = delete;
  ForwardedSignals& operator=(const ForwardedSignals&) = delete;
  void restore() const {  // also in each child before exec
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }

 private:
  struct sigaction old_int_ {}, old_term_ {};
};

void start_ranks(const RunOptions& o, const ForwardedSignals& signals) {
  const int n = o.nproc > 0 ? o.nproc : 1;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
    if (pid == 0) {
      signals.restore();
      if (o.nproc > 0) {
        std::string rank = std::to_string(i), size = std::to_string(n);
        setenv("RANK", rank.c_str(), 1);
        setenv("LOCAL_RANK", rank.c_str(), 1);
        setenv("WORLD_SIZE", size.c_str(), 1);
        setenv("LOCAL_WORLD_SIZE", size.c_str(), 1);
        setenv("GROUP_RANK", "0", 1);
      }
      exec_child(o.command);
    }
    g_children.push_back(pid);
  }
}

// Exit status: the command's own; with --nproc, the first failing rank's (128+N if killed).
void wait_for_ranks(const RunOptions& o, RunResult& result) {
  bool have_failure = false;
  for (size_t left = g_children.size(); left > 0;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    --left;
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : 1;
    if (o.nproc <= 0 && WIFSIGNALED(status)) result.term_signal = WTERMSIG(status);
    if (code != 0 && !have_failure) {
      have_failure = true;
      result.exit_code = code;
    }
  }
  g_children.clear();
}

void say_where_the_files_are(const RunOptions& o, const RunResult& result, const std::string& run_id) {
  std::error_code ec;
  size_t files = 0;
  for (auto it = fs::directory_iterator(result.run_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind("rank", 0) == 0) ++files;
  if (files) {
    fmt::print(stderr, "laggard: run {}: {} rank file(s) in {}\n", run_id, files, result.run_dir);
    if (!o.report_after) fmt::print(stderr, "laggard: next: laggard report {}\n", result.run_dir);
    return;
  }
  fmt::print(stderr,
             "laggard: run {}: no rank files were written to {} (no NVTX ranges, no rank variables such "
             "as RANK, or an unwritable directory; LAGGARD_LOG=info tells more)\n",
             run_id, result.run_dir);
}

}  // namespace

RunResult run_command(const RunOptions& o) {
  if (o.command.empty()) throw std::runtime_error("no command given; usage: laggard run [OPTIONS] -- CMD [ARGS...]");
  std::string lib = o.library.empty() ? find_library() : absolute_path(o.library);
  if (std::error_code ec; !fs::is_regular_file(lib, ec))
    throw std::runtime_error(fmt::format("--lib '{}': no such library file", o.library.empty() ? lib : o.library));
  std::string run_id;
  if (const char* given = std::getenv("LAGGARD_RUN_ID"); given && *given) run_id = given;
  else run_id = new_run_id();
  const std::string out = absolute_path(o.out_dir);
  export_capture_environment(o, lib, out, run_id);

  RunResult result;
  result.run_dir = out + "/" + run_id;
  {
    ForwardedSignals signals;
    start_ranks(o, signals);
    wait_for_ranks(o, result);
  }
  if (!o.quiet) say_where_the_files_are(o, result, run_id);
  return result;
}

}  // namespace laggard::cli
