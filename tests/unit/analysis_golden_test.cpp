// Golden reports: `laggard report` (JSON and text) of seeded synthetic runs must not change while
// the analyses are rewritten for speed (issue 14). Each case's whole report is compared byte for
// byte with tests/unit/golden/<case>.{json,txt}.
// A deliberate change of the output: LAGGARD_UPDATE_GOLDEN=1 ./analysis_golden_test rewrites
// the files; review their diff before committing it.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "report_command.h"
#include "synthetic_run.h"

namespace laggard {
namespace analysis_golden_test {

using synth::Fault;
using synth::Spec;

std::string golden_path(const std::string& name) { return std::string(LAGGARD_GOLDEN_DIR) + "/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Without per-kernel GPU records (only the NCCL plugin's and the kernel statistics): the NCCL
// analysis alone judges who arrives last.
void drop_gpu_records(report::RunModel& m) {
  for (report::RankData& r : m.ranks)
    for (report::CaptureWindow& w : r.windows) {
      w.gpu.clear();
      w.gpu_sampled = false;
    }
}

std::string report_of(const Spec& spec, const std::string& format, bool gpu_records) {
  report::RunModel model = synth::make_run(spec);
  if (!gpu_records) drop_gpu_records(model);
  cli::ReportOptions o;
  o.format = format;
  o.top = 8;
  std::ostringstream out, err;
  cli::report_model(model, o, out, err);
  // JSON without its indentation: the same numbers and strings, a third of the file.
  return format == "json" ? nlohmann::json::parse(out.str()).dump() + "\n" : out.str();
}

void expect_golden(const std::string& name, const Spec& spec, bool gpu_records = true) {
  for (const char* format : {"json", "text"}) {
    const std::string file = golden_path(name + (std::string(format) == "json" ? ".json" : ".txt"));
    const std::string got = report_of(spec, format, gpu_records);
    if (std::getenv("LAGGARD_UPDATE_GOLDEN")) {
      std::ofstream(file, std::ios::binary) << got;
      continue;
    }
    const std::string want = read_file(file);
    ASSERT_FALSE(want.empty()) << file << " is missing: run with LAGGARD_UPDATE_GOLDEN=1";
    EXPECT_TRUE(got == want) << name << " (" << format << ") differs from " << file;
  }
}

Spec gpu_spec() {
  Spec s;
  s.ranks = 8;
  s.steps = 20;
  s.window_s = 0.004;  // several report windows
  return s;
}

TEST(AnalysisGolden, HealthyGpuRun) { expect_golden("healthy_gpu", gpu_spec()); }

TEST(AnalysisGolden, GpuFaults) {
  Spec s = gpu_spec();
  s.faults = {{Fault::Kind::slow_gpu, 3, 1.4, 0, "backward"},
              {Fault::Kind::late_collective, 5, 1.0, 300'000, "", 6, 14},
              {Fault::Kind::host_bound, 1, 1.0, 40'000, "forward"}};
  expect_golden("gpu_faults", s);
}

TEST(AnalysisGolden, TwelveRanksLateDevice) {
  Spec s = gpu_spec();
  s.ranks = 12;
  s.steps = 16;
  s.seed = 7;
  s.faults = {{Fault::Kind::late_collective_device, 9, 1.0, 250'000},
              {Fault::Kind::slow_gpu, 2, 2.0, 0, "optimizer", 4, 11}};
  expect_golden("twelve_late_device", s);
}

TEST(AnalysisGolden, CpuOnlySections) {
  Spec s;
  s.gpu = false;
  s.ranks = 6;
  s.steps = 30;
  s.jitter = 0.02;
  s.step_gap_ns = 300'000;
  s.window_s = 0.1;
  s.kernels = {{"load", "data_load", 1'000'000},
               {"fwd", "forward", 4'000'000},
               {"bwd", "backward", 8'000'000},
               {"opt", "optimizer", 2'000'000}};
  s.faults = {{Fault::Kind::slow_gpu, 2, 1.3, 0, "backward"},
              {Fault::Kind::slow_gpu, 4, 3.0, 0, "data_load", 10, 18}};
  expect_golden("cpu_sections", s);
}

TEST(AnalysisGolden, TwoRanks) {
  Spec s = gpu_spec();
  s.ranks = 2;
  s.faults = {{Fault::Kind::slow_gpu, 1, 1.5}};
  expect_golden("two_ranks", s);
}

TEST(AnalysisGolden, NcclOnlyLateRank) {
  Spec s = gpu_spec();
  s.steps = 24;
  s.faults = {{Fault::Kind::late_collective, 6, 1.0, 1'500'000}};
  expect_golden("nccl_only", s, false);
}

}  // namespace
}  // namespace laggard
