// laggard-gen-synthetic: writes a synthetic run (N ranks x K kernels x S steps, NVTX sections,
// GPU kernels, NCCL all-reduces, several hosts, injected stragglers) in laggard's real file
// format, through the capture side's own writer. Deterministic from --seed: the same arguments
// give byte-identical files. Used by tests/integration/gen_synthetic_test.cpp and bench/scale.
#include <sys/resource.h>

#include <CLI/CLI.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <thread>

#include "simulate.h"
#include "windows.h"

namespace fs = std::filesystem;
using laggard::gen::Job;
using laggard::gen::RankTotals;
using laggard::gen::Spec;

namespace {

// Refuses to mix a new run into existing files: an empty or new directory only.
std::string prepare_out(const std::string& out) {
  std::error_code ec;
  if (fs::exists(out, ec) && !fs::is_empty(out, ec)) return out + " is not empty: give a new or empty directory";
  fs::create_directories(out, ec);
  return ec ? "cannot create " + out + ": " + ec.message() : "";
}

// Ranks are independent once the Job knows every step's all-reduce end: `jobs` threads take
// ranks in turn; each rank's files are the same whichever thread writes them.
std::string write_ranks(const Job& job, const std::string& out, int jobs, RankTotals* sum) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::string first_error;
  auto worker = [&] {
    for (int r; (r = next++) < job.spec().ranks;) {
      RankTotals t;
      std::string err = laggard::gen::write_rank(job, r, out, &t);
      std::lock_guard lock(mu);
      sum->records += t.records;
      sum->windows += t.windows;
      if (!err.empty() && first_error.empty()) first_error = "rank " + std::to_string(r) + ": " + err;
    }
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < jobs; ++i) threads.emplace_back(worker);
  worker();
  for (auto& t : threads) t.join();
  return first_error;
}

uint64_t bytes_under(const std::string& dir) {
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file()) bytes += e.file_size();
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  Spec spec;
  std::string out;
  std::vector<std::string> stragglers;
  int jobs = 1;
  CLI::App app{"Writes a synthetic laggard run in the real file format (deterministic from --seed)"};
  app.add_option("--out", out, "new or empty directory for the rank files")->required();
  app.add_option("--ranks", spec.ranks, "ranks (N)")->capture_default_str();
  app.add_option("--kernels", spec.kernels, "compute kernels per step (K), split over fwd/bwd/opt")->capture_default_str();
  app.add_option("--steps", spec.steps, "training steps (S)")->capture_default_str();
  app.add_option("--ranks-per-host", spec.ranks_per_host, "ranks on each host (node0000, node0001, ...)")
      ->capture_default_str();
  app.add_option("--steps-per-window", spec.steps_per_window, "steps per capture window (flush)")->capture_default_str();
  app.add_option("--seed", spec.seed, "seed of every duration and noise")->capture_default_str();
  app.add_option("--jitter", spec.jitter, "relative noise on every duration")->capture_default_str();
  app.add_flag("--summaries-only", spec.summaries_only,
               "window summaries only: no per-kernel GPU records and no NVTX occurrences (statistics stay)");
  app.add_option("--straggler", stragglers,
                 "rank=N[,section=fwd|bwd|opt][,factor=X][,delay_ms=X][,steps=A:B] (repeatable): factor slows the "
                 "rank's compute kernels (in the section, else all: a slow GPU); delay_ms makes it launch the "
                 "all-reduce late");
  std::string format = "binary";
  app.add_option("--format", format,
                 "binary: schema v5 appended frames, as LAGGARD_FILE_FORMAT=binary writes them; json: JSON segments")
      ->check(CLI::IsMember({"binary", "json"}))
      ->capture_default_str();
  app.add_option("--jobs", jobs, "threads writing ranks (the files do not depend on it)")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  spec.binary = format == "binary";

  for (const std::string& s : stragglers) {
    std::string error;
    auto st = laggard::gen::parse_straggler(s, &error);
    if (!st) {
      std::fprintf(stderr, "laggard-gen-synthetic: %s\n", error.c_str());
      return 2;
    }
    spec.stragglers.push_back(*st);
  }
  if (std::string err = laggard::gen::check_spec(spec); !err.empty()) {
    std::fprintf(stderr, "laggard-gen-synthetic: %s\n", err.c_str());
    return 2;
  }
  if (std::string err = prepare_out(out); !err.empty()) {
    std::fprintf(stderr, "laggard-gen-synthetic: %s\n", err.c_str());
    return 1;
  }

  auto t0 = std::chrono::steady_clock::now();
  Job job(spec);
  RankTotals sum;
  if (std::string err = write_ranks(job, out, std::max(1, jobs), &sum); !err.empty()) {
    std::fprintf(stderr, "laggard-gen-synthetic: %s\n", err.c_str());
    return 1;
  }
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Machine-readable summary on stdout (bench/scale reads it).
  std::printf("ranks=%d kernels=%d steps=%d windows=%llu records=%llu bytes=%llu wall_s=%.2f\n", spec.ranks,
              spec.kernels, spec.steps, static_cast<unsigned long long>(sum.windows),
              static_cast<unsigned long long>(sum.records), static_cast<unsigned long long>(bytes_under(out)), wall);
  return 0;
}
