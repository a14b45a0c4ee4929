// GPU health end to end with the fake libnvidia-ml.so.1: every rank samples its GPU, the rank
// files carry per-window telemetry, and the report flags the throttled GPU of rank 2.
#include "harness.h"

namespace laggard::test {
namespace gpu_health_e2e_test {

TEST_F(Scratch, GpuHealthFromFakeNvmlFlagsTheThrottledGpu) {
  std::vector<std::string> argv = {kLaggard, "run", "--nproc", "4", "--flush-s", "0.3", "--out", out(), "--",
                                   kDemo, "--steps", "60"};
  ProcessOptions o = clean_env();
  o.env["LD_LIBRARY_PATH"] = kBin + "/fake-nvml";
  o.env["FAKE_NVML_GPUS"] = "4";
  o.env["FAKE_NVML_SLOW_GPU"] = "2";  // LOCAL_RANK 2 uses GPU 2
  ProcessResult r = run_process(argv, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int windows_with_health = 0;
  for (const auto& f : rank_files()) {
    if (f.filename().string().rfind("rank", 0) != 0) continue;
    nlohmann::json j = rank_file_json(f);
    for (const auto& w : j["windows"])
      if (w.contains("gpu_health")) {
        ++windows_with_health;
        EXPECT_EQ(w["gpu_health"]["devices"][0]["index"], j["local_rank"]);
      }
  }
  EXPECT_GE(windows_with_health, 4);
  nlohmann::json rep = report();
  ASSERT_TRUE(rep["gpu_health"].is_array()) << rep.dump();
  ASSERT_EQ(rep["gpu_health"].size(), 4u);
  for (const auto& g : rep["gpu_health"]) {
    if (g["rank"] == 2) {
      EXPECT_EQ(g["sm_clock_median_mhz"], 1005);
      EXPECT_FALSE(g["problems"].empty());
    } else {
      EXPECT_TRUE(g["problems"].empty()) << g.dump();
    }
  }
}

}  // namespace
}  // namespace laggard::test
