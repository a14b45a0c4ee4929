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

// Issue 26 item 8: CUDA's device for the rank, from the driver, found in NVML by PCI bus id (GPU i
// of the fake sits at bus 0x10*(i+1)); a MIG instance's bus is its GPU's. An index guessed before
// CUDA told is exact only in PCI order (CUDA_DEVICE_ORDER=PCI_BUS_ID) or with one GPU.
TEST(GpuHealth, TheRanksCudaDeviceIsFoundByPciBusIdAndAnIndexGuessIsProvisional) {
  FakeEnv env(nullptr);
  unsetenv("CUDA_DEVICE_ORDER");
  nvml::GpuHealth h;
  ASSERT_EQ(h.load(FAKE_NVML), "");
  h.choose_devices("1", 0);  // CUDA numbers fastest first: NVML's 1 may be another GPU
  EXPECT_TRUE(h.active());
  EXPECT_FALSE(h.exact());
  ASSERT_TRUE(h.choose_cuda_device({"00000000:30:00.0", ""}));
  EXPECT_TRUE(h.exact());
  h.sample();
  GpuHealthWindow w = h.take_window();
  ASSERT_EQ(w.devices.size(), 1u);
  EXPECT_EQ(w.devices[0].index, 2);
  EXPECT_EQ(w.devices[0].uuid, "GPU-fake-2");
  // No bus id NVML knows: by UUID; a MIG instance's UUID gives its GPU (NVML answers no clock
  // query for a MIG handle).
  nvml::GpuHealth m;
  ASSERT_EQ(m.load(FAKE_NVML), "");
  ASSERT_TRUE(m.choose_cuda_device({"00000000:99:00.0", "MIG-fake-3-1"}));
  m.sample();
  GpuHealthWindow mw = m.take_window();
  EXPECT_EQ(mw.devices.at(0).index, 3);
  EXPECT_EQ(mw.devices.at(0).sm_clock_mhz.median, 1980);
  nvml::GpuHealth none;
  ASSERT_EQ(none.load(FAKE_NVML), "");
  EXPECT_FALSE(none.choose_cuda_device({"00000000:99:00.0", "GPU-nonexistent"}));
  EXPECT_FALSE(none.active());
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  nvml::GpuHealth pci;
  ASSERT_EQ(pci.load(FAKE_NVML), "");
  pci.choose_devices("1", 0);
  EXPECT_TRUE(pci.exact());
  unsetenv("CUDA_DEVICE_ORDER");
  nvml::GpuHealth uuid;
  ASSERT_EQ(uuid.load(FAKE_NVML), "");
  uuid.choose_devices("MIG-fake-1-0", 0);
  EXPECT_TRUE(uuid.exact());
  uuid.sample();
  EXPECT_EQ(uuid.take_window().devices.at(0).index, 1);
}

TEST(GpuHealth, CudaUuidBytesAreWrittenAsNvmlWritesThem) {
  const unsigned char b[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
  EXPECT_EQ(nvml::nvml_uuid(b), "GPU-12345678-9abc-def0-0123-456789abcdef");
  // No driver loaded in this test process: nothing to ask, and nothing loaded by asking.
  nvml::CudaDevice d;
  EXPECT_FALSE(nvml::cuda_device_of_rank(0, &d));
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
