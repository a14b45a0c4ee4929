#include "launcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "slurm_steps.h"

namespace laggard::cli {
namespace fs = std::filesystem;

namespace {

std::vector<pid_t> g_children;

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

// ---- the run id (issue 28: one run per launch) ----
// `laggard run` names its launch; a launch inside it (an srun step, an mpirun, a torchrun
// restart) adds its own part, so that each gets its own run directory: <id>, <id>.slurm-12.0,
// <id>.slurm-12.1, ... The ranks build the rest (preload/config/rank_identity.cpp, docs/slurm.md).
// A LAGGARD_RUN_ID given to laggard run is the user's own: every rank takes it as it is.
struct RunName {
  std::string id;
  bool exact = false;  // LAGGARD_RUN_ID: the one directory <id>; else <id> and every <id>.*
};

RunName choose_run_name() {
  if (const char* given = std::getenv("LAGGARD_RUN_ID"); given && *given) return {given, true};
  std::string id = new_run_id();
  // Inside another `laggard run`: under its name, so that it finds this run's files too.
  if (const char* outer = std::getenv("LAGGARD_RUN_PREFIX"); outer && *outer) id = std::string(outer) + "." + id;
  return {id, false};
}

void export_run_name(const RunName& run) { setenv(run.exact ? "LAGGARD_RUN_ID" : "LAGGARD_RUN_PREFIX", run.id.c_str(), 1); }

// This launch's run directories that exist, the last written last.
std::vector<std::string> run_dirs_of(const std::string& out, const RunName& run) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator(out, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    bool ours = name == run.id || (!run.exact && name.rfind(run.id + ".", 0) == 0);
    if (ours && it->is_directory(ec)) found.emplace_back(fs::last_write_time(it->path(), ec), it->path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> dirs;
  for (auto& f : found) dirs.push_back(std::move(f.second));
  return dirs;
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
                                const RunName& run) {
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) {
    if (std::string(old).find(lib) == std::string::npos) preload += ":" + std::string(old);
    else preload = old;
  }
  setenv("LD_PRELOAD", preload.c_str(), 1);
  setenv("LAGGARD_ENABLE", "1", 1);
  setenv("LAGGARD_OUT", out.c_str(), 1);
  export_run_name(run);
  if (!o.sections.empty()) setenv("LAGGARD_SECTIONS", o.sections.c_str(), 1);
  if (o.flush_s) setenv("LAGGARD_FLUSH_S", fmt::format("{}", *o.flush_s).c_str(), 1);
  if (!o.log.empty()) setenv("LAGGARD_LOG", o.log.c_str(), 1);
  if (std::string dir = find_python_dir(lib); !dir.empty()) put_first_on_pythonpath(dir);
  else if (o.log == "info" || o.log == "debug")
    fmt::print(stderr, "laggard: no python/ directory with sitecustomize.py beside {}: no automatic PyTorch "
                       "sections (set LAGGARD_PYTHON_DIR)\n", lib);
}

// ---- signals while the ranks run ----
// SIGINT, SIGTERM and SIGCHLD arrive through a signalfd (blocked meanwhile, unblocked again in
// every child before exec), so that a SIGTERM can be handled in plain code: it may need to run
// scontrol and scancel (slurm_steps.h).
class SignalInbox {
 public:
  SignalInbox() {
    sigemptyset(&set_);
    for (int sig : {SIGINT, SIGTERM, SIGCHLD}) sigaddset(&set_, sig);
    sigprocmask(SIG_BLOCK, &set_, &old_mask_);
    fd_ = signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd_ < 0) {
      sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
      throw std::runtime_error(fmt::format("signalfd failed: {}", std::strerror(errno)));
    }
  }
  ~SignalInbox() {
    // A SIGINT/SIGTERM that came as the last rank ended was meant for the ranks: unblocking it
    // must not kill laggard run before it says where the files are.
    for (signalfd_siginfo si; read(fd_, &si, sizeof si) == static_cast<ssize_t>(sizeof si);) {
    }
    close(fd_);
    sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalInbox(const SignalInbox&) = delete;
  SignalInbox& operator=(const SignalInbox&) = delete;

  void restore_in_child() const { sigprocmask(SIG_SETMASK, &old_mask_, nullptr); }

  // Blocks until one of the three signals comes.
  signalfd_siginfo next() const {
    signalfd_siginfo si{};
    while (read(fd_, &si, sizeof si) != static_cast<ssize_t>(sizeof si)) {
      pollfd p{fd_, POLLIN, 0};
      poll(&p, 1, -1);
    }
    return si;
  }

 private:
  sigset_t set_{}, old_mask_{};
  int fd_ = -1;
};

// Ranks get the signal their launcher got, as torchrun does. A Ctrl-C from the terminal
// (si_code SI_KERNEL) already reached the whole foreground process group, ranks included:
// forwarding it would deliver it twice.
void pass_on_sigint(const signalfd_siginfo& si) {
  if (si.ssi_code == SI_KERNEL) return;
  for (pid_t p : g_children) kill(p, SIGINT);
}

// SIGTERM goes to the ranks too, except through srun, which would turn it into SIGKILL: the
// tasks of every step our sruns started get it from Slurm instead, and those sruns end with
// their tasks (slurm_steps.h).
void pass_on_sigterm() {
  std::set<long> sruns = terminate_our_srun_steps();
  for (pid_t p : g_children)
    if (!sruns.count(static_cast<long>(p))) kill(p, SIGTERM);
}

void start_ranks(const RunOptions& o, const SignalInbox& signals) {
  const int n = o.nproc > 0 ? o.nproc : 1;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) throw std::runtime_error(fmt::format("fork failed: {}", std::strerror(errno)));
    if (pid == 0) {
      signals.restore_in_child();
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
void wait_for_ranks(const RunOptions& o, RunResult& result, const SignalInbox& signals) {
  bool have_failure = false;
  for (size_t left = g_children.size(); left > 0;) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR) continue;
    if (pid < 0) break;  // no child left (ECHILD)
    if (pid == 0) {      // all still running: wait for a signal (SIGCHLD included)
      signalfd_siginfo si = signals.next();
      if (si.ssi_signo == SIGINT) pass_on_sigint(si);
      if (si.ssi_signo == SIGTERM) pass_on_sigterm();
      continue;
    }
    if (std::find(g_children.begin(), g_children.end(), pid) == g_children.end()) continue;
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

size_t count_rank_files_in(const std::string& dir) {
  std::error_code ec;
  size_t files = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->path().filename().string().rfind("rank", 0) == 0) ++files;
  return files;
}

// What keeps Slurm jobs from writing, when the command is a Slurm one (docs/slurm.md).
std::string slurm_hint(const RunOptions& o) {
  const std::string program = fs::path(o.command[0]).filename().string();
  if (program != "srun" && program != "sbatch" && program != "salloc") return "";
  return "; under Slurm: --export=NONE (sbatch, #SBATCH or srun) keeps LD_PRELOAD from the tasks, and only "
         "tasks of srun steps are ranks, not the batch script itself";
}

void say_where_the_files_are(const RunOptions& o, const RunResult& result) {
  bool any = false;
  for (const std::string& dir : result.run_dirs) {
    size_t files = count_rank_files_in(dir);
    if (!files) continue;
    any = true;
    fmt::print(stderr, "laggard: run {}: {} rank file(s) in {}\n", fs::path(dir).filename().string(), files, dir);
    if (!o.report_after) fmt::print(stderr, "laggard: next: laggard report {}\n", dir);
  }
  if (any) return;
  fmt::print(stderr,
             "laggard: run {}: no rank files were written to {} (no NVTX ranges, no rank variables such "
             "as RANK, or an unwritable directory{}; LAGGARD_LOG=info tells more)\n",
             fs::path(result.run_dir).filename().string(), result.run_dir, slurm_hint(o));
}

}  // namespace

RunResult run_command(const RunOptions& o) {
  if (o.command.empty()) throw std::runtime_error("no command given; usage: laggard run [OPTIONS] -- CMD [ARGS...]");
  std::string lib = o.library.empty() ? find_library() : absolute_path(o.library);
  if (std::error_code ec; !fs::is_regular_file(lib, ec))
    throw std::runtime_error(fmt::format("--lib '{}': no such library file", o.library.empty() ? lib : o.library));
  const RunName run = choose_run_name();
  const std::string out = absolute_path(o.out_dir);
  export_capture_environment(o, lib, out, run);

  RunResult result;
  {
    SignalInbox signals;
    start_ranks(o, signals);
    wait_for_ranks(o, result, signals);
  }
  result.run_dirs = run_dirs_of(out, run);
  result.run_dir = result.run_dirs.empty() ? out + "/" + run.id : result.run_dirs.back();
  if (!o.quiet) say_where_the_files_are(o, result);
  return result;
}

}  // namespace laggard::cli
