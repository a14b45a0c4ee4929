// Cost of a new thread under laggard (issue 24, "smaller"): N threads, one after another, each
// making one NVTX push/pop and exiting. bench/thread-churn runs it with and without liblaggard.
//
//   laggard-bench-thread-churn [THREADS]   (default 20000)
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

int main(int argc, char** argv) {
  int threads = argc > 1 ? std::atoi(argv[1]) : 20000;
  nvtxRangePushA("main");
  for (int i = 0; i < threads; ++i)
    std::thread([] {
      nvtxRangePushA("work");
      nvtxRangePop();
    }).join();
  nvtxRangePop();
  std::printf("%d threads\n", threads);
  return 0;
}
