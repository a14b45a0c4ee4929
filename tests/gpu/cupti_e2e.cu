// GPU end-to-end program for laggard's CUPTI capture (scripts/gpu-e2e-cupti). Launches a known
// number of kernels in named NVTX sections, from two threads, directly and through a CUDA graph,
// and prints exactly what it launched as one JSON line, so the script can compare it with what
// laggard recorded. One rank can be made slower in one section.
//
//   laggard-cupti-e2e [--steps N] [--kernels K] [--slow-rank R] [--slow-section forward|backward]
//                     [--slow-factor F] [--spin-us US]
//
// Per step, main thread: step { forward { K fwd_kernel } backward { K bwd_kernel, 1 memset }
// graph { 1 graph launch of 3 graph_kernel } } then 2 stray_kernel outside any section.
// Side thread (own stream), per step: side { K side_kernel }.
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#define CHECK(x)                                                                        \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

__device__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {
  }
}
__global__ void fwd_kernel(long long cycles) { spin(cycles); }
__global__ void bwd_kernel(long long cycles) { spin(cycles); }
__global__ void graph_kernel(long long cycles) { spin(cycles); }
__global__ void side_kernel(long long cycles) { spin(cycles); }
__global__ void stray_kernel(long long cycles) { spin(cycles); }

int main(int argc, char** argv) {
  int steps = 20, kernels = 8, slow_rank = -1;
  double slow_factor = 2.0, spin_us = 50;
  std::string slow_section = "backward";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "missing value after %s\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--steps") steps = std::atoi(next());
    else if (a == "--kernels") kernels = std::atoi(next());
    else if (a == "--slow-rank") slow_rank = std::atoi(next());
    else if (a == "--slow-section") slow_section = next();
    else if (a == "--slow-factor") slow_factor = std::atof(next());
    else if (a == "--spin-us") spin_us = std::atof(next());
    else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  const char* rank_env = std::getenv("RANK");
  int rank = rank_env ? std::atoi(rank_env) : 0;

  int clock_khz = 0;
  CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  const long long base = static_cast<long long>(spin_us * clock_khz / 1000.0);  // cycles per spin_us
  auto cycles = [&](const char* section) {
    return rank == slow_rank && slow_section == section ? static_cast<long long>(base * slow_factor) : base;
  };

  cudaStream_t main_stream, side_stream;
  CHECK(cudaStreamCreateWithFlags(&main_stream, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&side_stream, cudaStreamNonBlocking));
  void* scratch = nullptr;
  CHECK(cudaMalloc(&scratch, 1 << 20));

  // A graph of three kernels, captured once, launched every step.
  cudaGraph_t graph;
  cudaGraphExec_t graph_exec;
  CHECK(cudaStreamBeginCapture(main_stream, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < 3; ++i) graph_kernel<<<32, 128, 0, main_stream>>>(base / 4);
  CHECK(cudaStreamEndCapture(main_stream, &graph));
  CHECK(cudaGraphInstantiate(&graph_exec, graph, 0));

  std::atomic<long> side_launched{0};
  std::thread side([&] {
    for (int s = 0; s < steps; ++s) {
      nvtxRangePushA("side");
      for (int k = 0; k < kernels; ++k) {
        side_kernel<<<16, 64, 0, side_stream>>>(base / 2);
        side_launched.fetch_add(1);
      }
      nvtxRangePop();
      CHECK(cudaStreamSynchronize(side_stream));
    }
  });

  long fwd = 0, bwd = 0, graph_k = 0, stray = 0, memsets = 0;
  for (int s = 0; s < steps; ++s) {
    nvtxRangePushA("step");
    nvtxRangePushA("forward");
    for (int k = 0; k < kernels; ++k, ++fwd) fwd_kernel<<<64, 256, 0, main_stream>>>(cycles("forward"));
    CHECK(cudaStreamSynchronize(main_stream));  // so the NVTX range covers the GPU work too
    nvtxRangePop();
    nvtxRangePushA("backward");
    for (int k = 0; k < kernels; ++k, ++bwd) bwd_kernel<<<128, 256, 0, main_stream>>>(cycles("backward"));
    CHECK(cudaMemsetAsync(scratch, 0, 1 << 20, main_stream));
    ++memsets;
    CHECK(cudaStreamSynchronize(main_stream));
    nvtxRangePop();
    nvtxRangePushA("graph");
    CHECK(cudaGraphLaunch(graph_exec, main_stream));
    graph_k += 3;
    CHECK(cudaStreamSynchronize(main_stream));
    nvtxRangePop();
    nvtxRangePop();
    for (int k = 0; k < 2; ++k, ++stray) stray_kernel<<<1, 32, 0, main_stream>>>(base / 10);
    CHECK(cudaStreamSynchronize(main_stream));
  }
  side.join();
  CHECK(cudaDeviceSynchronize());
  std::printf(
      "{\"rank\": %d, \"launched\": {\"forward/fwd_kernel\": %ld, \"backward/bwd_kernel\": %ld, "
      "\"graph/graph_kernel\": %ld, \"side/side_kernel\": %ld, \"(no section)/stray_kernel\": %ld, "
      "\"backward/[memset]\": %ld}}\n",
      rank, fwd, bwd, graph_k, side_launched.load(), stray, memsets);
  return 0;
}
