// laggard-fake-cuda-app: a training-loop stand-in that "uses CUDA" through the fake libcuda.so.1
// (tests/fakes/fake_libcuda.cpp), for end-to-end GPU-capture tests on machines without a GPU.
// It initializes the driver the way a CUDA program does (cuInit), launches a known number of
// kernels inside NVTX sections and prints what it launched.
//
//   laggard-fake-cuda-app --cuda PATH [--steps N] [--step-ms MS] [--kernels K] [--outside M]
//                         [--slow-rank R --slow-factor F] [--no-nvtx] [--no-init]
//                         [--nvtx-first] [--autograd-thread] [--late-library PATH]
//                         [--fork-thread N] [--stall-ms MS] [--wait-attached S]
//                         [--profiler-steps A:B | --profiler-schedule W:U:A:R] [--profiler eager|lazy]
//                         [--profiler-cpu-only] [--profiler-teardown] [--profiler-buffer-kb KB]
//                         [--profiler-max-kb KB] [--run-at S:COMMAND]...
//
// Per step: step { forward { K x fwd_gemm, 1 memcpy } backward { K x bwd_gemm, 1 NCCL kernel } }
// then M x stray_kernel outside any section. bwd_gemm runs F times longer on rank R.
// --nvtx-first marks an "init" range before cuInit (laggard then starts with NVTX, not CUDA).
// --autograd-thread launches the backward kernels from a second thread that holds no NVTX range
// while the main thread waits inside "backward", as PyTorch's autograd engine does.
//
// torch.profiler stand-in: Kineto's CUPTI calls in Kineto's order (tests/fakes/fake_kineto.h,
// which cites the Kineto lines), reached by symbol lookup as libtorch_cuda.so reaches libcupti
// (dlsym(RTLD_DEFAULT): a preloaded liblaggard's definitions first, as the dynamic linker binds):
//   --profiler-steps A:B         one profiling cycle: prepared at step A, stopped and processed at B
//   --profiler-schedule W:U:A:R  torch.profiler.schedule(wait=W, warmup=U, active=A, repeat=R)
//   --profiler eager|lazy        Kineto before 7a3ba363 (subscribes at the first use) or after (default)
//   --profiler-cpu-only          activities=[CPU]: no kernel, copy or set records
//   --profiler-teardown          TEARDOWN_CUPTI=1: cuptiFinalize at each new cycle
//   --profiler-buffer-kb / --profiler-max-kb  its buffer size (default 64) and limit (default 131072)
// Prints "profiler records=N kernels=K unknown_buffers=U cpu_only=C cycles=Y" at the end.
// --run-at S:COMMAND runs COMMAND (sh -c) before step S and waits for it (e.g. `laggard ctl DIR pause`).
// --wait-attached S: after cuInit, wait (at most S seconds) until a CUPTI client has switched kernel
// records on, so a test of a late attach waits for the attach, not for a guessed time.
// --late-library PATH dlopens PATH halfway through the steps (a second libcupti appearing late).
// --fork-thread N: a second thread forks N times while the steps run (from once NVTX is
// initialized), as a DataLoader starting workers does; each child marks one NVTX range (no CUDA: a
// forked child may not use it) and exits. A child still alive 10 s later counts as hung (killed).
// Prints "forks=N hung=H bad=B".
// --stall-ms MS: each step ends MS ms asleep inside "stall", so a hang watchdog with a shorter
// limit fires (and signals every thread) while the fork thread forks.
#include <cupti.h>
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_kineto.h"

namespace {

// ---- the torch.profiler stand-in (see --profiler-*) ----
template <class F>
F cupti_fn(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  if (!f) {
    std::fprintf(stderr, "laggard-fake-cuda-app: no %s\n", name);
    std::exit(2);
  }
  return f;
}

laggard::fake::KinetoCupti cupti_by_symbol() {
  laggard::fake::KinetoCupti c;
  c.subscribe = cupti_fn<decltype(&cuptiSubscribe)>("cuptiSubscribe");
  c.unsubscribe = cupti_fn<decltype(&cuptiUnsubscribe)>("cuptiUnsubscribe");
  c.finalize = cupti_fn<decltype(&cuptiFinalize)>("cuptiFinalize");
  c.enable_callback = cupti_fn<decltype(&cuptiEnableCallback)>("cuptiEnableCallback");
  c.get_version = cupti_fn<decltype(&cuptiGetVersion)>("cuptiGetVersion");
  c.register_callbacks = cupti_fn<decltype(&cuptiActivityRegisterCallbacks)>("cuptiActivityRegisterCallbacks");
  c.enable = cupti_fn<decltype(&cuptiActivityEnable)>("cuptiActivityEnable");
  c.disable = cupti_fn<decltype(&cuptiActivityDisable)>("cuptiActivityDisable");
  c.flush_all = cupti_fn<decltype(&cuptiActivityFlushAll)>("cuptiActivityFlushAll");
  c.next_record = cupti_fn<decltype(&cuptiActivityGetNextRecord)>("cuptiActivityGetNextRecord");
  c.register_timestamp_callback =
      cupti_fn<decltype(&cuptiActivityRegisterTimestampCallback)>("cuptiActivityRegisterTimestampCallback");
  return c;
}

// torch.profiler.schedule(wait, warmup, active, repeat) over the steps (torch/profiler/profiler.py:
// each cycle is wait + warmup + active steps; prepareTrace when warmup begins, startTrace when
// active begins, stopTrace + processTrace after the last active step).
struct Schedule {
  int wait = 0, warmup = 0, active = 0, repeat = 0;
  enum Action { none, prepare, start, prepare_and_start };
  int cycle_len() const { return wait + warmup + active; }
  Action before(int step) const {
    if (active <= 0 || cycle_len() == 0 || step / cycle_len() >= repeat) return none;
    int at = step % cycle_len();
    if (at == wait && warmup > 0) return prepare;
    if (at == wait + warmup) return warmup > 0 ? start : prepare_and_start;
    return none;
  }
  bool stops_after(int step) const {
    return active > 0 && cycle_len() > 0 && step / cycle_len() < repeat && step % cycle_len() == cycle_len() - 1;
  }
};

struct Profiler {
  std::unique_ptr<laggard::fake::FakeKineto> kineto;
  Schedule schedule;
  bool gpu = true;
  int cycles = 0;

  void before_step(int step) {
    if (!kineto) return;
    switch (schedule.before(step)) {
      case Schedule::prepare: kineto->prepare(gpu); break;
      case Schedule::start: kineto->start(); break;
      case Schedule::prepare_and_start: kineto->prepare(gpu), kineto->start(); break;
      case Schedule::none: break;
    }
  }
  void after_step(int step) {
    if (!kineto || !schedule.stops_after(step)) return;
    kineto->stop();
    kineto->process();
    ++cycles;
  }
};

using Launch = unsigned (*)(const char*, unsigned, unsigned, unsigned long long, int);
using Memcpy = unsigned (*)(unsigned long long);
using Init = int (*)(unsigned);

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "laggard-fake-cuda-app: %s\n", msg);
  std::exit(2);
}

}  // namespace

// --fork-thread: fork `n` times; returns {hung, bad exit} children.
std::pair<int, int> fork_children(int n) {
  int hung = 0, bad = 0;
  for (int i = 0; i < n; ++i) {
    pid_t pid = fork();
    if (pid < 0) {
      ++bad;
      continue;
    }
    if (pid == 0) {
      nvtxRangePushA("child");
      nvtxRangePop();
      std::exit(7);  // atexit handlers run, laggard's among them
    }
    int status = 0;
    bool done = false;
    for (int waited_ms = 0; waited_ms < 10'000 && !done; waited_ms += 2) {
      done = waitpid(pid, &status, WNOHANG) == pid;
      if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    if (!done) {
      ++hung;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 7) {
      ++bad;
    }
  }
  return {hung, bad};
}

int main(int argc, char** argv) {
  std::string cuda;
  int steps = 6, kernels = 4, outside = 1, slow_rank = -1;
  double step_ms = 30, slow_factor = 1, wait_attached_s = 0;
  bool nvtx = true, init = true, nvtx_first = false, autograd_thread = false;
  Profiler profiler;
  bool want_profiler = false;
  laggard::fake::KinetoOptions kopt;
  std::vector<std::pair<int, std::string>> run_at;
  std::string late_library;
  int fork_count = 0;
  double stall_ms = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--cuda") cuda = next();
    else if (a == "--steps") steps = std::atoi(next());
    else if (a == "--step-ms") step_ms = std::atof(next());
    else if (a == "--kernels") kernels = std::atoi(next());
    else if (a == "--outside") outside = std::atoi(next());
    else if (a == "--slow-rank") slow_rank = std::atoi(next());
    else if (a == "--slow-factor") slow_factor = std::atof(next());
    else if (a == "--wait-attached") wait_attached_s = std::atof(next());
    else if (a == "--no-nvtx") nvtx = false;
    else if (a == "--no-init") init = false;
    else if (a == "--nvtx-first") nvtx_first = true;
    else if (a == "--autograd-thread") autograd_thread = true;
    else if (a == "--late-library") late_library = next();
    else if (a == "--fork-thread") fork_count = std::atoi(next());
    else if (a == "--stall-ms") stall_ms = std::atof(next());
    else if (a == "--profiler-steps") {
      int from = 0, to = 0;
      if (std::sscanf(next(), "%d:%d", &from, &to) != 2 || to <= from) usage("--profiler-steps A:B");
      profiler.schedule = {from, 0, to - from, 1};
      want_profiler = true;
    } else if (a == "--profiler-schedule") {
      Schedule& sc = profiler.schedule;
      if (std::sscanf(next(), "%d:%d:%d:%d", &sc.wait, &sc.warmup, &sc.active, &sc.repeat) != 4)
        usage("--profiler-schedule W:U:A:R");
      want_profiler = true;
    } else if (a == "--profiler") {
      std::string g = next();
      if (g != "eager" && g != "lazy") usage("--profiler eager|lazy");
      kopt.generation = g == "eager" ? laggard::fake::KinetoGeneration::eager_subscribe : laggard::fake::KinetoGeneration::lazy;
    } else if (a == "--profiler-cpu-only") profiler.gpu = false;
    else if (a == "--profiler-teardown") kopt.teardown = true;
    else if (a == "--profiler-buffer-kb") kopt.buffer_bytes = size_t(std::atol(next())) * 1024;
    else if (a == "--profiler-max-kb") kopt.max_buffer_bytes = std::atoll(next()) * 1024;
    else if (a == "--run-at") {
      std::string v = next();
      size_t colon = v.find(':');
      if (colon == std::string::npos) usage("--run-at S:COMMAND");
      run_at.emplace_back(std::atoi(v.substr(0, colon).c_str()), v.substr(colon + 1));
    }
    else usage(("unknown option " + a).c_str());
  }
  if (cuda.empty()) usage("--cuda PATH is required");
  void* h = dlopen(cuda.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!h) usage(dlerror());
  auto cu_init = reinterpret_cast<Init>(dlsym(h, "cuInit"));
  auto launch = reinterpret_cast<Launch>(dlsym(h, "fake_cuda_launch"));
  auto copy = reinterpret_cast<Memcpy>(dlsym(h, "fake_cuda_memcpy"));
  if (!cu_init || !launch || !copy) usage("not the fake libcuda");
  if (nvtx_first) {
    nvtxRangePushA("init");
    nvtxRangePop();
  }
  if (init) cu_init(0);
  if (want_profiler) profiler.kineto = std::make_unique<laggard::fake::FakeKineto>(cupti_by_symbol(), kopt);
  if (wait_attached_s > 0) {
    auto enabled = reinterpret_cast<int (*)()>(dlsym(h, "fake_cuda_kernel_records_enabled"));
    if (!enabled) usage("not the fake libcuda");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_attached_s);
    while (!enabled() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }

  const char* rank_env = std::getenv("RANK");
  int rank = rank_env ? std::atoi(rank_env) : 0;
  double bwd_factor = rank == slow_rank ? slow_factor : 1.0;
  auto push = [&](const char* name) {
    if (nvtx) nvtxRangePushA(name);
  };
  auto pop = [&] {
    if (nvtx) nvtxRangePop();
  };
  long fwd = 0, bwd = 0, nccl = 0, stray = 0, copies = 0;
  std::pair<int, int> fork_result{0, 0};
  std::thread forker;
  if (fork_count > 0) {
    // NVTX's own init done before the forks start: a fork inside it is NVTX's race, with or without
    // a tool (nvtxInitOnce); laggard's part of it is hostile_app fork-in-first-nvtx-call's test.
    nvtxInitialize(nullptr);
    forker = std::thread([&] { fork_result = fork_children(fork_count); });
  }
  for (int s = 0; s < steps; ++s) {
    for (const auto& [at, command] : run_at)
      if (at == s && std::system(command.c_str()) != 0) std::fprintf(stderr, "laggard-fake-cuda-app: '%s' failed\n", command.c_str());
    profiler.before_step(s);
    if (s == steps / 2 && !late_library.empty() && !dlopen(late_library.c_str(), RTLD_NOW | RTLD_LOCAL))
      usage(dlerror());
    push("step");
    push("forward");
    for (int k = 0; k < kernels; ++k, ++fwd) launch("fwd_gemm", 64, 256, 100'000, 0);
    copy(1 << 20);
    ++copies;
    pop();
    push("backward");
    auto backward = [&] {
      for (int k = 0; k < kernels; ++k, ++bwd)
        launch("bwd_gemm", 128, 256, static_cast<unsigned long long>(200'000 * bwd_factor), 1);
    };
    if (autograd_thread) std::thread(backward).join();
    else backward();
    launch("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 1, 64, 50'000, 0);
    ++nccl;
    pop();
    pop();
    for (int k = 0; k < outside; ++k, ++stray) launch("stray_kernel", 1, 32, 10'000, 0);
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(step_ms));
    profiler.after_step(s);
    if (stall_ms > 0) {
      push("stall");
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(stall_ms));
      pop();
    }
  }
  if (forker.joinable()) forker.join();
  std::printf("launched fwd_gemm=%ld bwd_gemm=%ld nccl=%ld stray_kernel=%ld memcpy=%ld\n", fwd, bwd, nccl, stray,
              copies);
  if (profiler.kineto)
    std::printf("profiler records=%llu kernels=%llu unknown_buffers=%llu cpu_only=%d cycles=%d\n",
                (unsigned long long)profiler.kineto->records(), (unsigned long long)profiler.kineto->kernel_records(),
                (unsigned long long)profiler.kineto->unknown_buffers(), profiler.kineto->cpu_only() ? 1 : 0,
                profiler.cycles);
  if (fork_count > 0) std::printf("forks=%d hung=%d bad=%d\n", fork_count, fork_result.first, fork_result.second);
  return 0;
}
