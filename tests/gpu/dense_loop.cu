// A kernel-dense loop for bench/gpu-overhead: each step launches K short kernels inside an NVTX
// "step" range and waits for them; prints the median and mean step time over the timed steps.
//
//   laggard-dense-loop [--steps N] [--warmup W] [--kernels K] [--spin-us US]
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

__global__ void tiny_kernel(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

int main(int argc, char** argv) {
  int steps = 500, warmup = 50, kernels = 100;
  double spin_us = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else if (a == "--warmup") warmup = std::atoi(argv[i + 1]);
    else if (a == "--kernels") kernels = std::atoi(argv[i + 1]);
    else if (a == "--spin-us") spin_us = std::atof(argv[i + 1]);
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  int khz = 0;
  if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0) != cudaSuccess) {
    std::fprintf(stderr, "no CUDA device\n");
    return 1;
  }
  const long long cycles = static_cast<long long>(spin_us * khz / 1000.0);
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  std::vector<double> us;
  for (int step = 0; step < warmup + steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    nvtxRangePushA("step");
    for (int k = 0; k < kernels; ++k) tiny_kernel<<<1, 32, 0, s>>>(cycles);
    cudaStreamSynchronize(s);
    nvtxRangePop();
    auto t1 = std::chrono::steady_clock::now();
    if (step >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  if (cudaGetLastError() != cudaSuccess) return 1;
  std::vector<double> sorted = us;
  std::sort(sorted.begin(), sorted.end());
  double median = sorted[sorted.size() / 2];
  double mean = std::accumulate(us.begin(), us.end(), 0.0) / us.size();
  std::printf("{\"kernels_per_step\": %d, \"spin_us\": %g, \"steps\": %d, \"median_step_us\": %.2f, "
              "\"mean_step_us\": %.2f}\n",
              kernels, spin_us, steps, median, mean);
  return 0;
}
