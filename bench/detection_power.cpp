// laggard-detection-power: how often the verdict names the right rank and section, by fault
// size, duration, section share, noise and rank count, and how often it names anything in a
// healthy run. Seeded synthetic trials (tests/synthetic), so every number reproduces.
//
//   laggard-detection-power [--gpu] [--ranks 4,64,960] [--noise 0,0.02,0.05] [--trials N]
//                           [--healthy N] [--big-trials N] [--big-healthy N] [--factors ..]
//                           [--durations 0,20,5] [--csv] [--show]
// --show prints the first false finding of each healthy run that had one.
//
// Each configuration runs N trials (seeds 1..N), each with a random slow rank and, for
// transients, a random start step. Ranks >= 500 use --big-trials (they take ~100x longer).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "power_trial.h"

namespace {

using laggard::synth::PowerOutcome;
using laggard::synth::PowerTrial;

struct Args {
  bool gpu = false, csv = false, show = false;
  std::vector<int> ranks = {4, 64, 960};
  std::vector<double> noise = {0, 0.02, 0.05};
  std::vector<double> factors = {1.05, 1.1, 1.2, 1.5, 2};
  std::vector<int> durations = {0, 20, 5};
  int trials = 20, healthy = 100, big_trials = 4, big_healthy = 10;
};

template <class T>
std::vector<T> list(const char* s) {
  std::vector<T> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) out.push_back(static_cast<T>(std::atof(item.c_str())));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto next = [&] {
      if (i + 1 >= argc) { std::fprintf(stderr, "missing value after %s\n", k.c_str()); std::exit(2); }
      return argv[++i];
    };
    if (k == "--gpu") a.gpu = true;
    else if (k == "--csv") a.csv = true;
    else if (k == "--show") a.show = true;
    else if (k == "--ranks") a.ranks = list<int>(next());
    else if (k == "--noise") a.noise = list<double>(next());
    else if (k == "--factors") a.factors = list<double>(next());
    else if (k == "--durations") a.durations = list<int>(next());
    else if (k == "--trials") a.trials = std::atoi(next());
    else if (k == "--healthy") a.healthy = std::atoi(next());
    else if (k == "--big-trials") a.big_trials = std::atoi(next());
    else if (k == "--big-healthy") a.big_healthy = std::atoi(next());
    else { std::fprintf(stderr, "unknown option %s\n", k.c_str()); std::exit(2); }
  }
  return a;
}

std::vector<std::string> sections(bool gpu) {
  return gpu ? std::vector<std::string>{"backward", "forward", "optimizer"}
             : std::vector<std::string>{"backward", "forward", "optimizer", "data_load"};
}

// Detection-rate totals by the fault's cost to the job.
struct Bucket {
  int trials = 0, found = 0;
};

int bucket_of(double cost) { return cost >= 0.10 ? 2 : cost >= 0.05 ? 1 : 0; }

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  const auto t0 = std::chrono::steady_clock::now();
  std::printf("# laggard detection power, %s runs, 40 steps; noise: each piece of work x uniform(1 +- noise) per "
              "step\n",
              a.gpu ? "GPU (kernels + all-reduce)" : "CPU-only (NVTX sections)");
  std::printf("# section shares of the step:");
  for (const std::string& s : sections(a.gpu))
    std::printf(" %s %.1f %%", s.c_str(), 100 * laggard::synth::section_share(a.gpu, s));
  std::printf("\n");
  if (a.csv)
    std::printf("ranks,noise,section,factor,duration,cost_pct,trials,detected_pct,exact_steps_pct,other_per_run,"
                "misplaced_per_run\n");
  for (int ranks : a.ranks)
    for (double noise : a.noise) {
      const bool big = ranks >= 500;
      const int trials = big ? a.big_trials : a.trials;
      Bucket buckets[3];
      int other = 0, misplaced = 0, runs = 0;
      for (const std::string& section : sections(a.gpu))
        for (double factor : a.factors)
          for (int duration : a.durations) {
            int found = 0, exact = 0, extra = 0, wrong_place = 0;
            double cost = 0;
            for (int i = 1; i <= trials; ++i) {
              PowerTrial t{a.gpu, ranks, 40, noise, factor, section, duration, uint64_t(i)};
              PowerOutcome o = laggard::synth::run_power_trial(t);
              found += o.found;
              exact += o.exact_steps;
              extra += o.other_findings;
              wrong_place += o.misplaced;
              if (a.show && o.other_findings)
                std::printf("#   %s x%g seed %d: %s\n", section.c_str(), factor, i, o.first_other.c_str());
              cost = o.cost_share;
            }
            Bucket& b = buckets[bucket_of(cost)];
            b.trials += trials;
            b.found += found;
            other += extra;
            misplaced += wrong_place;
            runs += trials;
            if (a.csv)
              std::printf("%d,%g,%s,%g,%d,%.1f,%d,%.0f,%.0f,%.3f,%.3f\n", ranks, noise, section.c_str(), factor,
                          duration, 100 * cost, trials, 100.0 * found / trials, 100.0 * exact / trials,
                          double(extra) / trials, double(wrong_place) / trials);
          }
      const int healthy_runs = big ? a.big_healthy : a.healthy;
      int false_findings = 0;
      for (int i = 1; i <= healthy_runs; ++i) {
        PowerTrial t{a.gpu, ranks, 40, noise, 1.0, "", 0, uint64_t(1000 + i)};
        PowerOutcome o = laggard::synth::run_power_trial(t);
        false_findings += o.other_findings;
        if (a.show && o.other_findings) std::printf("#   healthy seed %d: %s\n", 1000 + i, o.first_other.c_str());
      }
      auto pct = [](const Bucket& b) { return b.trials ? 100.0 * b.found / b.trials : 0.0; };
      std::printf("ranks %4d noise %2.0f %%: detected %5.1f %% of faults costing >= 10 %% (%d), %5.1f %% of 5-10 %% "
                  "(%d), %5.1f %% of < 5 %% (%d); false findings: %d in %d healthy runs, %d on other ranks in %d "
                  "faulty runs; %d more on the slowed rank\n",
                  ranks, 100 * noise, pct(buckets[2]), buckets[2].trials, pct(buckets[1]), buckets[1].trials,
                  pct(buckets[0]), buckets[0].trials, false_findings, healthy_runs, other, runs, misplaced);
      std::fflush(stdout);
    }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("# %.0f s\n", s);
  return 0;
}
