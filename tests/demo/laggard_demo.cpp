// laggard-demo: a CPU-only stand-in for a training loop, instrumented with NVTX the way real
// jobs are (push/pop, nested ranges, a start/end range that crosses threads, a named domain
// with a registered string), with knobs to make one rank slow in one section.
//
//   laggard-demo [--steps N] [--step-ms MS] [--slow-rank R] [--slow-section NAME]
//                [--slow-factor F] [--slow-steps A:B] [--slow SECTION:FACTOR[:A:B]]...
//                [--jitter J] [--crash-rank R --crash-step S] [--fork-child] [--handle-sigterm]
//                [--stall MS[:A:B]]
//                [--until-file PATH] [--help]
//
// --slow (repeatable) slows one more section of --slow-rank by FACTOR, in steps [A, B) when given,
// so one rank can be slow in several sections at once.
//
// --stall makes --slow-rank's step itself (outside every sub-section) MS longer, in steps [A, B)
// when given: a hiccup of the step, as when the OS deschedules the process (issue 30).
//
// --fork-child forks a child after the first step that uses NVTX and exits (as data-loader
// workers do); --handle-sigterm installs the app's own SIGTERM handler, which ends the loop.
//
// --until-file PATH keeps stepping after --steps until PATH exists (checked once a step; at most
// 100,000 steps), so a test can end the run when what it waits for has happened, whatever the load.
//
// "Work" is sleeping, so timings stay stable on a loaded 2-core CI machine.
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rank_identity.h"

namespace {

// One slowdown of the slow rank: a section (or its parent, or "step"), a factor, steps [from, to).
struct Slowdown {
  std::string section;
  double factor = 1.5;
  int from = 0, to = 1 << 30;
};

struct Options {
  std::vector<Slowdown> slow;  // --slow entries
  int steps = 40;
  double step_ms = 25;
  int slow_rank = -1;
  std::string slow_section;
  double slow_factor = 1.5;
  int slow_from = 0, slow_to = 1 << 30;  // steps [from, to) are slowed
  int crash_rank = -1, crash_step = -1;
  double jitter = 0.02;
  Slowdown stall{"", 0};  // --stall: factor holds the milliseconds
  bool fork_child = false;
  bool handle_sigterm = false;
  std::string until_file;
};

volatile sig_atomic_t g_sigterm = 0;
void on_sigterm(int) { g_sigterm = 1; }

constexpr const char* kUsage =
    "Usage: laggard-demo [OPTIONS]\n"
    "A CPU-only stand-in for a training loop with NVTX sections (step > data_load, forward > attention, mlp,\n"
    "backward, demo:optimizer); run it under `laggard run`. Work is sleeping.\n"
    "  --steps N                 steps to run (default 40)\n"
    "  --step-ms MS              milliseconds per step (default 25)\n"
    "  --slow-rank R             the rank to slow down\n"
    "  --slow-section NAME       its section to slow (a parent slows everything inside it; default: all)\n"
    "  --slow-factor F           by this factor (default 1.5)\n"
    "  --slow-steps A:B          only in steps [A, B)\n"
    "  --slow SECTION:F[:A:B]    one more slowdown of the slow rank (repeatable)\n"
    "  --jitter J                random +-J of every piece of work (default 0.02)\n"
    "  --crash-rank R --crash-step S   rank R kills itself (SIGKILL) at step S\n"
    "  --fork-child              fork a child that uses NVTX after the first step\n"
    "  --handle-sigterm          install the app's own SIGTERM handler, which ends the loop\n"
    "  --until-file PATH         after --steps, keep stepping until PATH exists\n"
    "  -h, --help                this text\n"
    "Example: laggard run --nproc 4 --report -- laggard-demo --slow-rank 2 --slow-section backward\n";

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "laggard-demo: %s\n(laggard-demo --help lists the options)\n", msg);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--steps") o.steps = std::atoi(next());
    else if (a == "--step-ms") o.step_ms = std::atof(next());
    else if (a == "--slow-rank") o.slow_rank = std::atoi(next());
    else if (a == "--slow-section") o.slow_section = next();
    else if (a == "--slow-factor") o.slow_factor = std::atof(next());
    else if (a == "--slow-steps") {
      if (std::sscanf(next(), "%d:%d", &o.slow_from, &o.slow_to) != 2) usage("--slow-steps wants A:B");
    } else if (a == "--slow") {
      std::string v = next();
      Slowdown d;
      const size_t colon = v.find(':');
      if (colon == std::string::npos || colon == 0) usage("--slow wants SECTION:FACTOR[:A:B]");
      d.section = v.substr(0, colon);
      int n = std::sscanf(v.c_str() + colon + 1, "%lf:%d:%d", &d.factor, &d.from, &d.to);
      if ((n != 1 && n != 3) || d.factor <= 0) usage("--slow wants SECTION:FACTOR[:A:B]");
      o.slow.push_back(d);
    } else if (a == "--stall") {
      const int n = std::sscanf(next(), "%lf:%d:%d", &o.stall.factor, &o.stall.from, &o.stall.to);
      if ((n != 1 && n != 3) || o.stall.factor < 0) usage("--stall wants MS[:A:B]");
    } else if (a == "--crash-rank") o.crash_rank = std::atoi(next());
    else if (a == "--crash-step") o.crash_step = std::atoi(next());
    else if (a == "--jitter") o.jitter = std::atof(next());
    else if (a == "--fork-child") o.fork_child = true;
    else if (a == "--handle-sigterm") o.handle_sigterm = true;
    else if (a == "--until-file") o.until_file = next();
    else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else usage(("unknown option " + a).c_str());
  }
  if (o.steps <= 0 || o.step_ms <= 0 || o.slow_factor <= 0) usage("steps, step-ms and slow-factor must be > 0");
  if (o.slow.empty() || !o.slow_section.empty())
    o.slow.push_back({o.slow_section, o.slow_factor, o.slow_from, o.slow_to});
  return o;
}

class Worker {
 public:
  Worker(const Options& o, int rank) : o_(o), rank_(rank), rng_(1234u + rank) {}

  // Sleeps this section's share of a step, scaled when this rank/section/step is the slow one
  // (naming a parent section, e.g. "forward" or "step", slows everything inside it).
  void work(const char* section, double share, int step, const char* parent = "step") {
    double ms = o_.step_ms * share;
    for (const Slowdown& d : o_.slow) {
      const std::string& s = d.section;
      bool slow = rank_ == o_.slow_rank && step >= d.from && step < d.to &&
                  (s.empty() || s == section || s == std::string("demo:") + section || s == parent ||
                  s == "step");
      if (slow) ms *= d.factor;
    }
    std::uniform_real_distribution<double> j(1 - o_.jitter, 1 + o_.jitter);
    ms *= j(rng_);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  }

 private:
  const Options& o_;
  int rank_;
  std::mt19937 rng_;
};

// A loader thread prepares each batch; the range it starts is ended by the main thread when
// the batch is taken, as with prefetching data loaders.
class Loader {
 public:
  Loader(Worker& w) : w_(w), t_([this] { run(); }) {}
  ~Loader() {
    {
      std::lock_guard<std::mutex> l(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    t_.join();
  }
  nvtxRangeId_t next_batch(int step) {
    std::unique_lock<std::mutex> l(mu_);
    want_ = step;
    cv_.notify_all();
    cv_.wait(l, [&] { return ready_ == step; });
    return range_;
  }

 private:
  void run() {
    std::unique_lock<std::mutex> l(mu_);
    while (true) {
      cv_.wait(l, [&] { return quit_ || want_ > ready_; });
      if (quit_) return;
      int step = want_;
      l.unlock();
      nvtxRangeId_t id = nvtxRangeStartA("data_load");
      w_.work("data_load", 0.10, step);
      l.lock();
      range_ = id;
      ready_ = step;
      cv_.notify_all();
    }
  }
  Worker& w_;
  std::mutex mu_;
  std::condition_variable cv_;
  int want_ = -1, ready_ = -1;
  bool quit_ = false;
  nvtxRangeId_t range_ = 0;
  std::thread t_;
};

// A forked child ends with exit(), so laggard's atexit handler runs in it too and must stay
// inert. Under LeakSanitizer it ends with _exit(), as Python's fork-based workers do
// (multiprocessing/popen_fork.py: os._exit after the target): LSan cannot check a child forked
// from a threaded process. The parent's threads are gone there, so it prints "Running thread N
// was not suspended. False leaks are possible." for each and reports what only their TLS held
// (glibc's thread_local destructor list entries) as leaked.
[[noreturn]] void end_forked_child() {
#if defined(__SANITIZE_ADDRESS__)
  std::fflush(nullptr);
  _exit(0);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
  std::fflush(nullptr);
  _exit(0);
#endif
#endif
  std::exit(0);
}

// The rank laggard records for this process (RANK, SLURM_PROCID in an srun step, OMPI_COMM_WORLD_RANK,
// ...: the same code), so --slow-rank 2 slows the process the report calls rank 2 under any
// launcher; 0 where laggard sees no rank.
int own_rank() {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  laggard::RankResult r = laggard::detect_rank(laggard::process_env(), host, static_cast<long>(getppid()));
  return r.identity ? r.identity->rank : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  if (o.handle_sigterm) {
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, nullptr);
  }
  const int rank = own_rank();

  nvtxDomainHandle_t domain = nvtxDomainCreateA("demo");
  nvtxStringHandle_t optimizer_name = nvtxDomainRegisterStringA(domain, "optimizer");
  nvtxEventAttributes_t opt_attr{};
  opt_attr.version = NVTX_VERSION;
  opt_attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  opt_attr.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  opt_attr.message.registered = optimizer_name;
  nvtxEventAttributes_t mlp_attr{};
  mlp_attr.version = NVTX_VERSION;
  mlp_attr.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  mlp_attr.messageType = NVTX_MESSAGE_TYPE_ASCII;
  mlp_attr.message.ascii = "mlp";

  Worker w(o, rank);
  Loader loader(w);
  // --until-file: past --steps, one more step while the file is absent (at most 100,000 in all).
  auto more_steps = [&](int step) {
    if (step < o.steps) return true;
    return !o.until_file.empty() && step < 100'000 && access(o.until_file.c_str(), F_OK) != 0;
  };
  int step = 0;
  for (; more_steps(step); ++step) {
    if (rank == o.crash_rank && step == o.crash_step) raise(SIGKILL);
    if (g_sigterm) {
      std::printf("laggard-demo rank %d: stopped by SIGTERM at step %d\n", rank, step);
      return 0;
    }
    if (o.fork_child && step == 1) {
      std::fflush(stdout);
      pid_t child = fork();
      if (child == 0) {
        nvtxRangePushA("child_work");
        nvtxRangePop();
        end_forked_child();
      }
      int status = 0;
      waitpid(child, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "laggard-demo: forked child failed\n");
        return 1;
      }
    }
    nvtxRangePushA("step");
    if (rank == o.slow_rank && o.stall.factor > 0 && step >= o.stall.from && step < o.stall.to)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.stall.factor));
    nvtxRangeEnd(loader.next_batch(step));

    nvtxRangePushA("forward");
    nvtxRangePushW(L"attention");
    w.work("attention", 0.15, step, "forward");
    nvtxRangePop();
    nvtxRangePushEx(&mlp_attr);
    w.work("mlp", 0.15, step, "forward");
    nvtxRangePop();
    nvtxRangePop();

    nvtxRangePushA("backward");
    w.work("backward", 0.40, step);
    nvtxRangePop();

    nvtxDomainRangePushEx(domain, &opt_attr);
    w.work("optimizer", 0.10, step);
    nvtxDomainRangePop(domain);
    nvtxRangePop();  // step
  }
  std::printf("laggard-demo rank %d: %d steps done\n", rank, step);
  return 0;
}
