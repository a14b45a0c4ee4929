// laggard-watchdog-stress: the workload of issue 24, item 1. Eight threads allocate and free,
// fork, dlopen/dlclose and throw C++ exceptions while the main thread sits in one NVTX range
// that never ends -- a rank with no progress, so with LAGGARD_HANG_S=0.2
// LAGGARD_HANG_REPEAT_S=0.1 the hang watchdog takes every thread's stack every 0.1 s while they
// hold malloc arenas, the loader lock and fork's locks. A stack taken with anything but
// async-signal-safe calls in the handler deadlocks this process sooner or later (2 of 12 runs
// with libunwind's unw_step in the handler); the process must always exit 0 by itself.
//
//   laggard-watchdog-stress [SECONDS]   (default 1.5)
//
// Prints "ok <forks> <dlopens> <throws>" and exits 0.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

std::atomic<bool> g_stop{false};
std::atomic<long> g_forks{0}, g_dlopens{0}, g_throws{0};

// Libraries a Debian system has and this program does not link: dlopen loads them and dlclose
// unloads them again, both under the loader lock and both allocating.
const char* const kLibraries[] = {"libz.so.1", "libzstd.so.1", "liblzma.so.5", "libbz2.so.1.0"};

__attribute__((noinline)) void churn_malloc(unsigned seed) {
  void* blocks[32];
  for (int i = 0; i < 32; ++i) blocks[i] = std::malloc(16 + (seed * 7919u + i * 104729u) % (256 * 1024));
  for (int i = 31; i >= 0; --i) std::free(blocks[i]);
}

__attribute__((noinline)) void churn_fork() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);  // a child of a multithreaded process: only async-signal-safe calls
  if (pid > 0) {
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
    }
    g_forks.fetch_add(1);
  }
}

__attribute__((noinline)) void churn_dlopen(unsigned i) {
  if (void* h = dlopen(kLibraries[i % 4], RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    g_dlopens.fetch_add(1);
  }
}

__attribute__((noinline)) void churn_throw(unsigned i) {
  try {
    if (i % 2 == 0) throw std::runtime_error("stress");
    throw 42;
  } catch (const std::exception&) {
    g_throws.fetch_add(1);
  } catch (int) {
    g_throws.fetch_add(1);
  }
}

void worker(unsigned id) {
  for (unsigned i = 0; !g_stop.load(std::memory_order_relaxed); ++i) {
    churn_malloc(id * 131 + i);
    switch ((id + i) % 4) {
      case 0: churn_fork(); break;
      case 1: churn_dlopen(i); break;
      case 2: churn_throw(i); break;
      default: churn_malloc(i); break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = argc > 1 ? std::atof(argv[1]) : 1.5;
  nvtxRangePushA("stress");  // activates capture; never popped until the end: no progress
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < 8; ++i) threads.emplace_back(worker, i);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  g_stop.store(true);
  for (std::thread& t : threads) t.join();
  nvtxRangePop();
  std::printf("ok %ld %ld %ld\n", g_forks.load(), g_dlopens.load(), g_throws.load());
  return 0;
}
