// The report's order statistics (report/analyze/stats.cpp) on the sizes the analyses ask for: the
// jitter analysis' cross-rank medians (one value per rank: 96, 960), the breakdown's per-rank
// medians and percentiles of launch delays (45,000 at 903 kernels x 50 steps). std::nth_element, what
// median_in_place called up to 2048 values before issue 29's branchless quickselect, runs beside it;
// BM_Copy is the copy of the input each of them times too.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "bench_main.h"
#include "stats.h"

namespace {

// Kernel durations across ranks: about 20 us with a 2 % spread, whole nanoseconds, a slow rank in fifty.
std::vector<std::vector<double>> durations(size_t n) {
  std::mt19937_64 rng(29);
  std::normal_distribution<double> spread(20'000, 400);
  std::vector<std::vector<double>> sets(std::max<size_t>(64, 200'000 / n), std::vector<double>(n));
  for (std::vector<double>& set : sets)
    for (double& x : set) x = std::round(spread(rng) * (rng() % 50 == 0 ? 3 : 1));
  return sets;
}

template <class Median>
void run(benchmark::State& state, Median median) {
  const std::vector<std::vector<double>> sets = durations(size_t(state.range(0)));
  std::vector<double> scratch;
  size_t i = 0;
  for (auto _ : state) {
    scratch = sets[i++ % sets.size()];  // a copy of a few KB: pausing the timer would cost more
    benchmark::DoNotOptimize(median(scratch));
  }
}

void BM_MedianInPlace(benchmark::State& state) {
  run(state, [](std::vector<double>& v) { return laggard::report::median_in_place(v); });
}

void BM_NthElement(benchmark::State& state) {
  run(state, [](std::vector<double>& v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  });
}

void BM_Copy(benchmark::State& state) {
  run(state, [](std::vector<double>& v) { return v[0]; });
}

BENCHMARK(BM_MedianInPlace)->Arg(96)->Arg(960)->Arg(4096)->Arg(45'000);
BENCHMARK(BM_NthElement)->Arg(96)->Arg(960)->Arg(4096)->Arg(45'000);
BENCHMARK(BM_Copy)->Arg(96)->Arg(960)->Arg(4096)->Arg(45'000);

int no_memory_mode(long) { return 2; }

}  // namespace

int main(int argc, char** argv) { return laggard::bench::main(argc, argv, no_memory_mode); }
