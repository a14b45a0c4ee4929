// What the benchmark programs share: google-benchmark's main, plus a `--memory N` mode that runs
// N iterations of a workload and prints the peak RSS (memory goals are checked there, not in
// timed tests).
#pragma once

#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace laggard::bench {

// Peak resident set size of this process (VmHWM), in KiB; -1 if unknown.
inline long peak_rss_kb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

// `prog --memory N` runs memory_mode(N); anything else runs the registered benchmarks.
inline int main(int argc, char** argv, int (*memory_mode)(long)) {
  if (argc == 3 && std::strcmp(argv[1], "--memory") == 0) return memory_mode(std::atol(argv[2]));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

}  // namespace laggard::bench
