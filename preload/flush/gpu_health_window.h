// GPU health over one window (NVML, nvml/): what the writer puts under a window's "gpu_health".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace laggard {

struct HealthStat {
  bool present = false;  // at least one sample
  double min = 0, median = 0, max = 0;
};

struct GpuHealthDevice {
  int index = -1;                 // NVML device index
  std::string uuid;
  int samples = 0;
  HealthStat sm_clock_mhz, mem_clock_mhz, temperature_c, power_w;
  uint64_t reasons_seen = 0;      // OR of the clocks-event (throttle) reasons of all samples
  int slowdown_samples = 0;       // samples with a power, thermal or hardware slowdown reason
  int64_t ecc_uncorrected = -1;   // volatile uncorrected ECC errors at the last sample; -1: unknown
  int64_t ecc_uncorrected_new = 0;  // increase during the window
};

struct GpuHealthWindow {
  bool present = false;
  std::vector<GpuHealthDevice> devices;
};

}  // namespace laggard
