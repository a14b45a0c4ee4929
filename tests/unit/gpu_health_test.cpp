// GPU health telemetry against the fake libnvidia-ml.so.1 (tests/fakes/fake_nvml.cpp), and the
// report's use of it: unhealthy GPUs found against the others, slow-GPU findings linked.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "gpu_health.h"
#include "health_analysis.h"

namespace laggard {
namespace gpu_health_test {

struct FakeEnv {
  explicit FakeEnv(const char* slow) {
    unsetenv("FAKE_NVML_FAIL_INIT");
    setenv("FAKE_NVML_GPUS", "4", 1);
    if (slow) setenv("FAKE_NVML_SLOW_GPU", slow, 1);
    else unsetenv("FAKE_NVML_SLOW_GPU");
  }
};

TEST(GpuHealth, SamplesTheRanksGpuAndSummarizesTheWindow) {
  FakeEnv env("1");
  nvml::GpuHealth h;
  ASSERT_EQ(h.load(FAKE_NVML), "");
  h.choose_devices(nullptr, 1);
  ASSERT_TRUE(h.active());
  for (int i = 0; i < 3; ++i) h.sample();
  GpuHealthWindow w = h.take_window();
  ASSERT_TRUE(w.present);
  ASSERT_EQ(w.devices.size(), 1u);
  const GpuHealthDevice& d = w.devices[0];
  EXPECT_EQ(d.index, 1);
  EXPECT_EQ(d.uuid, "GPU-fake-1");
  EXPECT_EQ(d.samples, 3);
  EXPECT_EQ(d.sm_clock_mhz.median, 1005);
  EXPECT_EQ(d.mem_clock_mhz.max, 2619);
  EXPECT_EQ(d.temperature_c.max, 91);
  EXPECT_DOUBLE_EQ(d.power_w.median, 400);
  EXPECT_EQ(d.reasons_seen, nvml::kReasonHwThermalSlowdown);
  EXPECT_EQ(d.slowdown_samples, 3);
  EXPECT_EQ(d.ecc_uncorrected, 3);
  EXPECT_EQ(d.ecc_uncorrected_new, 2);  // the first sample is the baseline
  h.sample();
  GpuHealthWindow next = h.take_window();
  EXPECT_EQ(next.devices[0].samples, 1);  // a window holds only its own samples
  EXPECT_EQ(next.devices[0].ecc_uncorrected_new, 1);
}

TEST(GpuHealth, FollowsCudaVisibleDevicesByIndexOrUuid) {
  FakeEnv env(nullptr);
  nvml::GpuHealth a, b, c;
  ASSERT_EQ(a.load(FAKE_NVML), "");
  a.choose_devices("3,2", 1);
  a.sample();
  EXPECT_EQ(a.take_window().devices.at(0).index, 2);
  ASSERT_EQ(b.load(FAKE_NVML), "");
  b.choose_devices("GPU-fake-3", 0);
  b.sample();
  EXPECT_EQ(b.take_window().devices.at(0).index, 3);
  ASSERT_EQ(c.load(FAKE_NVML), "");
  c.choose_devices("", 0);
  EXPECT_FALSE(c.active());
}

TEST(GpuHealth, MissingOrFailingNvmlSaysWhy) {
  FakeEnv env(nullptr);
  nvml::GpuHealth missing;
  EXPECT_NE(missing.load("/nonexistent/libnvidia-ml.so.1").find("not found"), std::string::npos);
  setenv("FAKE_NVML_FAIL_INIT", "1", 1);
  nvml::GpuHealth failing;
  EXPECT_NE(failing.load(FAKE_NVML).find("nvmlInit_v2 failed"), std::string::npos);
  unsetenv("FAKE_NVML_FAIL_INIT");
}

report::RunModel model_with_clocks(std::vector<double> sm_mhz, int throttled_rank) {
  report::RunModel m;
  for (size_t r = 0; r < sm_mhz.size(); ++r) {
    report::RankData rd;
    rd.rank = static_cast<int>(r);
    for (int w = 0; w < 3; ++w) {
      report::CaptureWindow cw;
      report::GpuHealthSample s;
      s.device = static_cast<int>(r);
      s.samples = 10;
      s.sm_clock_mhz = {true, sm_mhz[r] - 10, sm_mhz[r], sm_mhz[r] + 10};
      s.temperature_c = {true, 60, 65, 70};
      if (static_cast<int>(r) == throttled_rank) {
        s.slowdown_samples = 8;
        s.clocks_event_reasons = 0x40;
      }
      cw.gpu_health.push_back(s);
      rd.windows.push_back(cw);
    }
    m.ranks.push_back(rd);
  }
  return m;
}

TEST(HealthAnalysis, LowClocksAndThrottlingAreProblemsAndTheSlowGpuFindingIsLinked) {
  report::HealthReport h = report::analyze_gpu_health(model_with_clocks({1980, 1980, 1400, 1975}, 2));
  ASSERT_EQ(h.gpus.size(), 4u);
  EXPECT_TRUE(h.gpus[0].problems.empty());
  ASSERT_EQ(h.gpus[2].problems.size(), 2u);
  EXPECT_NE(h.gpus[2].problems[0].find("SM clock 1400 MHz"), std::string::npos);
  EXPECT_NE(h.gpus[2].problems[1].find("hw_thermal"), std::string::npos);

  report::Verdict v;
  report::Finding slow;
  slow.rank = 2;
  slow.cause = report::Cause::gpu_compute;
  report::Finding other = slow;
  other.rank = 1;
  v.findings = {slow, other};
  report::link_gpu_health(v, h);
  EXPECT_EQ(v.findings[0].cause, report::Cause::gpu_health);
  EXPECT_STREQ(report::cause_name(v.findings[0].cause), "gpu_health");
  EXPECT_EQ(v.findings[0].evidence.at("sm_clock_median_mhz"), 1400);
  EXPECT_NEAR(v.findings[0].evidence.at("slowdown_share"), 0.8, 1e-9);
  EXPECT_EQ(v.findings[1].cause, report::Cause::gpu_compute);  // its GPU is healthy
}

TEST(HealthAnalysis, UniformClocksAreHealthyAndNoTelemetryIsNotPresent) {
  EXPECT_TRUE(report::analyze_gpu_health(model_with_clocks({1980, 1960, 1975, 1990}, -1)).gpus[1].problems.empty());
  report::RunModel empty;
  empty.ranks.resize(2);
  EXPECT_FALSE(report::analyze_gpu_health(empty).present);
  EXPECT_TRUE(report::render_health_json(report::analyze_gpu_health(empty)).is_null());
}

}  // namespace
}  // namespace laggard
