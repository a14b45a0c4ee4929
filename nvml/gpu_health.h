// GPU health telemetry through NVML: SM and memory clocks, temperature, power, clocks-event
// (throttle) reasons and volatile uncorrected ECC errors of the GPU(s) this rank uses, sampled
// about once a second on the flush thread and summarized per window (min/median/max).
// libnvidia-ml.so.1 is dlopen'ed; without it nothing is sampled and one info line says so.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpu_health_window.h"
#include "nvml_api.h"

namespace laggard::nvml {

class GpuHealth {
 public:
  // library: file to dlopen (tests); "" = "libnvidia-ml.so.1". Returns "" or why not.
  std::string load(const std::string& library = "");
  // Which devices: CUDA_VISIBLE_DEVICES (indices or UUIDs) and the local rank, as CUDA numbers
  // them: the rank's device is the visible one at local_rank modulo the visible count.
  void choose_devices(const char* cuda_visible_devices, int local_rank);
  bool active() const { return !devices_.empty(); }

  void sample();                 // one sample of every chosen device
  GpuHealthWindow take_window(); // the samples since the last call, summarized

 private:
  struct Device {
    int index;
    nvmlDevice_t handle;
    std::string uuid;
    std::vector<double> sm, mem, temp, power;
    uint64_t reasons = 0;
    int samples = 0, slowdown = 0;
    int64_t ecc = -1, ecc_at_window_start = -1;
  };

  template <class F> F sym(const char* name);

  void* lib_ = nullptr;
  GetCountFn get_count_ = nullptr;
  GetHandleByIndexFn by_index_ = nullptr;
  GetHandleByUuidFn by_uuid_ = nullptr;
  GetUuidFn get_uuid_ = nullptr;
  GetClockInfoFn clock_ = nullptr;
  GetTemperatureFn temperature_ = nullptr;
  GetPowerUsageFn power_ = nullptr;
  GetReasonsFn reasons_ = nullptr;
  GetTotalEccErrorsFn ecc_ = nullptr;
  std::vector<Device> devices_;
};

HealthStat summarize(std::vector<double> values);

}  // namespace laggard::nvml
