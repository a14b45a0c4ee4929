// laggard-fake-cuda-app: a training-loop stand-in that "uses CUDA" through the fake libcuda.so.1
// (tests/fakes/fake_libcuda.cpp), for end-to-end GPU-capture tests on machines without a GPU.
// It initializes the driver the way a CUDA program does (cuInit), launches a known number of
// kernels inside NVTX sections and prints what it launched.
//
//   laggard-fake-cuda-app --cuda PATH [--steps N] [--step-ms MS] [--kernels K] [--outside M]
//                         [--slow-rank R --slow-factor F] [--no-nvtx] [--no-init]
//                         [--nvtx-first] [--autograd-thread] [--profiler-steps A:B] [--late-library PATH]
//                         [--fork-thread N] [--stall-ms MS] [--wait-attached S]
//
// Per step: step { forward { K x fwd_gemm, 1 memcpy } backward { K x bwd_gemm, 1 NCCL kernel } }
// then M x stray_kernel outside any section. bwd_gemm runs F times longer on rank R.
// --nvtx-first marks an "init" range before cuInit (laggard then starts with NVTX, not CUDA).
// --autograd-thread launches the backward kernels from a second thread that holds no NVTX range
// while the main thread waits inside "backward", as PyTorch's autograd engine does.
// --profiler-steps A:B plays torch.profiler running from step A to step B: at A, what Kineto does
// when it starts (a timestamp callback returning TSC-like cycles, its own activity buffers,
// kernels/copies/sets enabled); at B, what it does when it stops (flush, kinds disabled; the
// callbacks stay). Kineto is linked against libcupti, so its calls bind by symbol lookup: here
// dlsym(RTLD_DEFAULT), which finds a preloaded library's definitions first, as the dynamic
// linker would. Prints "profiler records=N" at the end.
// --wait-attached S: after cuInit, wait (at most S seconds) until a CUPTI client has switched kernel
// records on, so a test of a late attach waits for the attach, not for a guessed time.
// --late-library PATH dlopens PATH halfway through the steps (a second libcupti appearing late).
// --fork-thread N: a second thread forks N times while the steps run, as a DataLoader starting
// workers does; each child marks one NVTX range (no CUDA: a forked child may not use it) and
// exits. A child still alive 10 s later counts as hung (killed). Prints "forks=N hung=H bad=B".
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
#include <string>
#include <thread>

namespace {

// ---- the torch.profiler stand-in (see --profiler-steps) ----
using RecordsIn = unsigned long long (*)(unsigned char*, unsigned long long);
RecordsIn g_records_in = nullptr;
std::atomic<unsigned long long> g_profiler_records{0};

uint64_t CUPTIAPI profiler_cycles() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>((double(ts.tv_sec) * 1e9 + double(ts.tv_nsec)) * 2.5);  // a 2.5 GHz TSC
}
void CUPTIAPI profiler_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, 1 << 16));
  *size = 1 << 16;
  *max_records = 0;
}
void CUPTIAPI profiler_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer && g_records_in) g_profiler_records += g_records_in(buffer, valid);
  std::free(buffer);
}

template <class F>
F cupti_fn(const char* name) {
  auto f = reinterpret_cast<F>(dlsym(RTLD_DEFAULT, name));
  if (!f) {
    std::fprintf(stderr, "laggard-fake-cuda-app: no %s\n", name);
    std::exit(2);
  }
  return f;
}

constexpr CUpti_ActivityKind kProfilerKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                 CUPTI_ACTIVITY_KIND_MEMSET};

void profiler_start() {  // libkineto: configureCuptiTimestampSource, then enableCuptiActivities
  cupti_fn<decltype(&cuptiActivityRegisterTimestampCallback)>("cuptiActivityRegisterTimestampCallback")(
      &profiler_cycles);
  cupti_fn<decltype(&cuptiActivityRegisterCallbacks)>("cuptiActivityRegisterCallbacks")(&profiler_requested,
                                                                                          &profiler_completed);
  for (auto k : kProfilerKinds) cupti_fn<decltype(&cuptiActivityEnable)>("cuptiActivityEnable")(k);
}

void profiler_stop() {  // libkineto: flush, then disableCuptiActivities
  cupti_fn<decltype(&cuptiActivityFlushAll)>("cuptiActivityFlushAll")(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (auto k : kProfilerKinds) cupti_fn<decltype(&cuptiActivityDisable)>("cuptiActivityDisable")(k);
}

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
  int profiler_from = -1, profiler_to = -1;
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
      if (std::sscanf(next(), "%d:%d", &profiler_from, &profiler_to) != 2) usage("--profiler-steps A:B");
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
  g_records_in = reinterpret_cast<RecordsIn>(dlsym(h, "fake_cuda_records_in"));
  if (nvtx_first) {
    nvtxRangePushA("init");
    nvtxRangePop();
  }
  if (init) cu_init(0);
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
  if (fork_count > 0) forker = std::thread([&] { fork_result = fork_children(fork_count); });
  for (int s = 0; s < steps; ++s) {
    if (s == profiler_from) profiler_start();
    if (s == profiler_to) profiler_stop();
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
    if (stall_ms > 0) {
      push("stall");
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(stall_ms));
      pop();
    }
  }
  if (forker.joinable()) forker.join();
  std::printf("launched fwd_gemm=%ld bwd_gemm=%ld nccl=%ld stray_kernel=%ld memcpy=%ld\n", fwd, bwd, nccl, stray,
              copies);
  if (profiler_from >= 0) std::printf("profiler records=%llu\n", g_profiler_records.load());
  if (fork_count > 0) std::printf("forks=%d hung=%d bad=%d\n", fork_count, fork_result.first, fork_result.second);
  return 0;
}
