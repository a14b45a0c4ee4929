// A plain CUDA program for scripts/gpu-e2e-exit (issue 9 item 8): launches a few kernels and exits
// with the status given, either through return from main or exit(), with NVTX used before CUDA
// (laggard then activates, and registers its first exit handler, before it loads libcupti) or
// not at all. laggard must write its final window while CUPTI is whole and never change the exit
// status or crash the exit.
//
//   laggard-exit-e2e [--nvtx-first] [--status N] [--exit] [--kernels K] [--no-sync]
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

__global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int main(int argc, char** argv) {
  bool nvtx_first = false, use_exit = false, sync = true;
  int status = 0, kernels = 20;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--nvtx-first")) nvtx_first = true;
    else if (!std::strcmp(argv[i], "--exit")) use_exit = true;
    else if (!std::strcmp(argv[i], "--no-sync")) sync = false;
    else if (!std::strcmp(argv[i], "--status") && i + 1 < argc) status = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--kernels") && i + 1 < argc) kernels = std::atoi(argv[++i]);
  }
  if (nvtx_first) {
    nvtxRangePushA("init");
    nvtxRangePop();
  }
  nvtxRangePushA("work");
  for (int k = 0; k < kernels; ++k) spin<<<1, 32>>>(100000);
  nvtxRangePop();
  if (sync) cudaDeviceSynchronize();  // --no-sync: kernels may still run while the process exits
  std::printf("launched %d\n", kernels);
  if (use_exit) std::exit(status);
  return status;
}
