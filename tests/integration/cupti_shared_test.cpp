// Issue 26 end to end, without a GPU: the fake app plays torch.profiler with Kineto's real call
// order (tests/fakes/fake_kineto.h) through the fake libcuda's CUPTI, once alone and once under
// liblaggard. The profiler must get exactly what it gets alone; laggard records every launch or
// counts it as missed, and the report says what it missed. Also: an unseen CUPTI client that
// leaves (retry), and GPU health on the GPU CUDA gives the rank.
#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

#include "harness.h"

namespace laggard::test {
namespace cupti_shared_test {

namespace fs = std::filesystem;
using nlohmann::json;

struct Profiled {
  ProcessResult r;
  unsigned long long records = 0, kernels = 0, unknown_buffers = 0;
  int cpu_only = -1, cycles = 0;
  unsigned long long launched = 0;  // every kernel, NCCL kernel and copy the app launched
};

// laggard's own account, over every window of every file (late statistics included).
struct Account {
  uint64_t captured = 0, missed = 0, shared_windows = 0;
};

class CuptiShared : public Scratch {
 protected:
  ProcessOptions env(bool laggard) {
    ProcessOptions o = single_rank(out(), "shared");
    if (!laggard) o.env["LD_PRELOAD"] = std::nullopt;
    o.env["LAGGARD_CUPTI_PATH"] = kFakeCuda;
    return o;
  }
  std::string run_dir() const { return out() + "/shared"; }

  Profiled app(const std::vector<std::string>& args, const ProcessOptions& o) {
    std::vector<std::string> argv = {kFakeCudaApp, "--cuda", kFakeCuda, "--step-ms", "2", "--kernels", "2"};
    argv.insert(argv.end(), args.begin(), args.end());
    Profiled p;
    p.r = run_process(argv, o);
    EXPECT_EQ(p.r.exit_code, 0) << p.r.err;
    size_t at = p.r.out.find("profiler records=");
    if (at != std::string::npos)
      std::sscanf(p.r.out.c_str() + at, "profiler records=%llu kernels=%llu unknown_buffers=%llu cpu_only=%d cycles=%d",
                  &p.records, &p.kernels, &p.unknown_buffers, &p.cpu_only, &p.cycles);
    unsigned long long f = 0, b = 0, n = 0, s = 0, m = 0;
    at = p.r.out.find("launched ");
    if (at != std::string::npos &&
        std::sscanf(p.r.out.c_str() + at, "launched fwd_gemm=%llu bwd_gemm=%llu nccl=%llu stray_kernel=%llu memcpy=%llu",
                    &f, &b, &n, &s, &m) == 5)
      p.launched = f + b + n + s + m;
    return p;
  }

  Account account() {
    Account a;
    for (const fs::path& f : rank_files()) {
      if (f.filename().string().rfind("rank", 0) != 0) continue;
      json j = rank_file_json(f);
      for (const json& w : j["windows"]) {
        if (!w.contains("gpu")) continue;
        const json& g = w["gpu"];
        for (const json& k : g["kernels"]) a.captured += k["count"].get<uint64_t>();
        for (const json& l : g.value("late", json::array()))
          for (const json& k : l["kernels"]) a.captured += k["count"].get<uint64_t>();
        a.missed += g.value("missed_launches", uint64_t(0));
        a.shared_windows += g.contains("shared");
      }
    }
    return a;
  }

  // The same run alone and under laggard: the profiler's records must be equal; laggard's
  // captured + missed must be every launch.
  void same_as_alone(const std::vector<std::string>& args, ProcessOptions with = {}, bool laggard_whole = true) {
    SCOPED_TRACE(::testing::PrintToString(args));
    fs::remove_all(out());
    Profiled alone = app(args, env(false));
    ASSERT_GT(alone.records, 0u) << alone.r.out;
    fs::remove_all(out());
    ProcessOptions o = env(true);
    for (auto& [k, v] : with.env) o.env[k] = v;
    Profiled shared = app(args, o);
    EXPECT_EQ(shared.records, alone.records) << shared.r.out << shared.r.err;
    EXPECT_EQ(shared.kernels, alone.kernels);
    EXPECT_EQ(shared.cpu_only, alone.cpu_only);
    EXPECT_EQ(shared.cycles, alone.cycles);
    EXPECT_EQ(shared.unknown_buffers, 0u);  // no buffer of laggard's ever reached the profiler
    Account a = account();
    EXPECT_GT(a.shared_windows, 0u);
    if (laggard_whole) {
      EXPECT_EQ(a.captured + a.missed, shared.launched) << shared.r.err;
    }
  }
};

// Both Kineto generations, twenty scheduled cycles of torch.profiler(activities=[CPU, CUDA]), and
// CPU-only sessions (activities=[CPU]) whose launches laggard cannot record, counted.
TEST_F(CuptiShared, TheProfilerGetsWhatItGetsAloneAndLaggardAccountsForEveryLaunch) {
  for (const char* gen : {"lazy", "eager"}) {
    same_as_alone({"--steps", "84", "--profiler", gen, "--profiler-schedule", "1:1:2:20"});
    same_as_alone({"--steps", "16", "--profiler", gen, "--profiler-schedule", "1:1:2:3", "--profiler-cpu-only"});
  }
}

// LAGGARD_PROFILING_INTERVAL=2 and `laggard ctl pause` / `resume` in the middle of the
// profiler's cycles: laggard switches off only what it switched on.
TEST_F(CuptiShared, SamplingAndCtlPauseNeverCostTheProfilerARecord) {
  ProcessOptions with;
  with.env["LAGGARD_PROFILING_INTERVAL"] = "2";
  const std::string ctl = kLaggard + " ctl " + run_dir();
  same_as_alone({"--steps", "84", "--step-ms", "5", "--profiler-schedule", "1:1:2:20", "--run-at", "10:" + ctl + " pause",
                 "--run-at", "50:" + ctl + " resume"},
                with, false);
}

// What laggard missed inside the profiler's windows is in the report: a gpu_shared problem with
// the count, the rank's CUPTI status, the text report's notes.
TEST_F(CuptiShared, TheReportSaysWhatLaggardMissedWhileTheProfilerHeldCupti) {
  Profiled p = app({"--steps", "12", "--step-ms", "20", "--profiler-schedule", "2:1:2:2", "--profiler-cpu-only"}, env(true));
  Account a = account();
  ASSERT_GT(a.missed, 0u);
  EXPECT_EQ(a.captured + a.missed, p.launched);
  json rep = report();
  bool problem = false;
  for (const json& pr : rep["problems"])
    if (pr["kind"] == "gpu_shared") {
      problem = true;
      EXPECT_NE(pr["message"].get<std::string>().find(std::to_string(a.missed) + " launches not recorded"),
                std::string::npos)
          << pr;
    }
  EXPECT_TRUE(problem) << rep["problems"].dump();
  const json& g = rep["gpu"]["ranks"][0];
  EXPECT_EQ(g["missed_launches"], a.missed);
  EXPECT_EQ(g["cupti"].get<std::string>().rfind("shared in ", 0), 0u) << g["cupti"];
  ProcessResult text = run_process({kLaggard, "report", out()}, clean_env());
  EXPECT_NE(text.out.find(std::to_string(a.missed) + " launches not recorded"), std::string::npos) << text.out;
}

// Items 6 and 7: a subscriber laggard cannot see (Nsight Systems, injected) holds CUPTI at
// cuInit and leaves after the first step's launches: one warning naming the library file,
// laggard tries again and captures from then on.
TEST_F(CuptiShared, AnUnseenSubscriberIsWaitedForAndLaggardAttachesWhenItLeaves) {
  ProcessOptions o = env(true);
  o.env["FAKE_CUPTI_NSIGHT"] = "6";
  Profiled p = app({"--steps", "80", "--step-ms", "40"}, o);
  EXPECT_NE(p.r.err.find("GPU kernels are not captured yet: " + fs::canonical(kFakeCuda).string() +
                         ": another CUPTI client (CUPTI for Nsight Systems) is attached"),
            std::string::npos)
      << p.r.err;
  EXPECT_EQ(std::count(p.r.err.begin(), p.r.err.end(), '\n'), 1) << p.r.err;
  Account a = account();
  EXPECT_GT(a.captured, 0u);
  EXPECT_LT(a.captured, p.launched);  // not the launches before it left
  std::vector<std::string> statuses;
  for (const fs::path& f : rank_files())
    if (f.filename().string().rfind("rank", 0) == 0) statuses.push_back(rank_file_json(f)["capture"]["cupti"]);
  ASSERT_FALSE(statuses.empty());
  EXPECT_EQ(statuses.back(), "on");
}

// Item 8: CUDA numbers GPUs fastest first (here the reverse of PCI order) and renumbers them
// under CUDA_VISIBLE_DEVICES; NVML numbers them by PCI bus. GPU health samples the GPU CUDA gives
// the rank, found by PCI bus id; a MIG instance's GPU for a MIG device.
TEST_F(CuptiShared, GpuHealthSamplesTheGpuCudaGivesTheRank) {
  struct Case {
    std::map<std::string, std::string> env;
    int nvml_index;
  };
  const Case cases[] = {
      {{{"LOCAL_RANK", "1"}}, 2},                                      // CUDA's 1 in order 3,2,1,0: GPU 2
      {{{"LOCAL_RANK", "1"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}}, 1},
      {{{"LOCAL_RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "2,0"}}, 1},     // visible 2 of fastest-first 3,2,1,0
      {{{"LOCAL_RANK", "0"}, {"CUDA_VISIBLE_DEVICES", "MIG-fake-3-0"}}, 3},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::PrintToString(c.env));
    fs::remove_all(out());
    ProcessOptions o = env(true);
    o.env["LD_LIBRARY_PATH"] = kBin + "/fake-nvml";
    o.env["FAKE_NVML_GPUS"] = "4";
    o.env["FAKE_CUDA_GPUS"] = "4";
    o.env["FAKE_CUDA_FASTEST"] = "3,2,1,0";
    for (const auto& [k, v] : c.env) o.env[k] = v;
    Profiled p = app({"--steps", "40", "--step-ms", "30"}, o);
    int windows = 0;
    for (const fs::path& f : rank_files()) {
      if (f.filename().string().rfind("rank", 0) != 0) continue;
      const json file = rank_file_json(f);
      for (const json& w : file["windows"])
        if (w.contains("gpu_health")) {
          ++windows;
          EXPECT_EQ(w["gpu_health"]["devices"][0]["index"], c.nvml_index) << w["gpu_health"];
        }
    }
    EXPECT_GE(windows, 2);
  }
}

// Item 9: NVML calls take no timeout; a slow one makes sampling back off (said once), and the
// windows keep their pace.
TEST_F(CuptiShared, ASlowNvmlSampleMakesSamplingBackOff) {
  ProcessOptions o = env(true);
  o.env["LD_LIBRARY_PATH"] = kBin + "/fake-nvml";
  o.env["FAKE_NVML_GPUS"] = "1";
  o.env["FAKE_NVML_DELAY_MS"] = "150";  // two clock queries a sample: 300 ms
  Profiled p = app({"--steps", "30", "--step-ms", "40"}, o);
  EXPECT_NE(p.r.err.find("GPU health: one NVML sample took"), std::string::npos) << p.r.err;
  EXPECT_EQ(std::count(p.r.err.begin(), p.r.err.end(), '\n'), 1) << p.r.err;
}

}  // namespace cupti_shared_test
}  // namespace laggard::test
