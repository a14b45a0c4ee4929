#include "gpu_health.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace laggard::nvml {

template <class F>
F GpuHealth::sym(const char* name) {
  return reinterpret_cast<F>(dlsym(lib_, name));
}

std::string GpuHealth::load(const std::string& library) {
  const std::string file = library.empty() ? "libnvidia-ml.so.1" : library;
  lib_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return file + " not found";
  auto init = sym<InitFn>("nvmlInit_v2");
  get_count_ = sym<GetCountFn>("nvmlDeviceGetCount_v2");
  by_index_ = sym<GetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  by_uuid_ = sym<GetHandleByUuidFn>("nvmlDeviceGetHandleByUUID");
  get_uuid_ = sym<GetUuidFn>("nvmlDeviceGetUUID");
  clock_ = sym<GetClockInfoFn>("nvmlDeviceGetClockInfo");
  temperature_ = sym<GetTemperatureFn>("nvmlDeviceGetTemperature");
  power_ = sym<GetPowerUsageFn>("nvmlDeviceGetPowerUsage");
  reasons_ = sym<GetReasonsFn>("nvmlDeviceGetCurrentClocksEventReasons");
  if (!reasons_) reasons_ = sym<GetReasonsFn>("nvmlDeviceGetCurrentClocksThrottleReasons");  // before NVML 12.2
  ecc_ = sym<GetTotalEccErrorsFn>("nvmlDeviceGetTotalEccErrors");
  if (!init || !get_count_ || !by_index_) return file + " lacks nvmlInit_v2 or nvmlDeviceGetHandleByIndex_v2";
  if (nvmlReturn_t rc = init(); rc != NVML_SUCCESS) return "nvmlInit_v2 failed (" + std::to_string(rc) + ")";
  return "";
}

void GpuHealth::choose_devices(const char* visible, int local_rank) {
  unsigned count = 0;
  if (!get_count_ || get_count_(&count) != NVML_SUCCESS || count == 0) return;
  std::vector<std::string> ids;
  if (visible) {
    std::stringstream in(visible);
    for (std::string id; std::getline(in, id, ',');)
      if (!id.empty()) ids.push_back(id);
  } else {
    for (unsigned i = 0; i < count; ++i) ids.push_back(std::to_string(i));
  }
  if (ids.empty()) return;  // CUDA_VISIBLE_DEVICES="": this process sees no GPU
  const std::string& id = ids[static_cast<size_t>(std::max(local_rank, 0)) % ids.size()];
  Device d{};
  d.index = -1;
  char* end = nullptr;
  long index = std::strtol(id.c_str(), &end, 10);
  if (end && *end == '\0' && index >= 0 && static_cast<unsigned>(index) < count) {
    if (by_index_(static_cast<unsigned>(index), &d.handle) == NVML_SUCCESS) d.index = static_cast<int>(index);
  } else if (by_uuid_ && by_uuid_(id.c_str(), &d.handle) == NVML_SUCCESS) {
    d.index = 0;
    for (unsigned i = 0; i < count; ++i) {  // NVML's index of that device, for the file
      nvmlDevice_t h = nullptr;
      if (by_index_(i, &h) == NVML_SUCCESS && h == d.handle) d.index = static_cast<int>(i);
    }
  }
  if (d.index < 0) return;
  char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  if (get_uuid_ && get_uuid_(d.handle, uuid, sizeof uuid) == NVML_SUCCESS) d.uuid = uuid;
  devices_.push_back(std::move(d));
}

void GpuHealth::sample() {
  for (Device& d : devices_) {
    unsigned v = 0;
    if (clock_ && clock_(d.handle, NVML_CLOCK_SM, &v) == NVML_SUCCESS) d.sm.push_back(v);
    if (clock_ && clock_(d.handle, NVML_CLOCK_MEM, &v) == NVML_SUCCESS) d.mem.push_back(v);
    if (temperature_ && temperature_(d.handle, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS) d.temp.push_back(v);
    if (power_ && power_(d.handle, &v) == NVML_SUCCESS) d.power.push_back(v / 1000.0);
    unsigned long long reasons = 0;
    if (reasons_ && reasons_(d.handle, &reasons) == NVML_SUCCESS) {
      d.reasons |= reasons;
      if (reasons & kSlowdownReasons) ++d.slowdown;
    }
    unsigned long long ecc = 0;
    if (ecc_ && ecc_(d.handle, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &ecc) == NVML_SUCCESS) {
      d.ecc = static_cast<int64_t>(ecc);
      if (d.ecc_at_window_start < 0) d.ecc_at_window_start = d.ecc;
    }
    ++d.samples;
  }
}

HealthStat summarize(std::vector<double> v) {
  HealthStat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.present = true;
  s.min = v.front();
  s.max = v.back();
  size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  return s;
}

GpuHealthWindow GpuHealth::take_window() {
  GpuHealthWindow w;
  w.present = !devices_.empty();
  for (Device& d : devices_) {
    GpuHealthDevice out;
    out.index = d.index;
    out.uuid = d.uuid;
    out.samples = d.samples;
    out.sm_clock_mhz = summarize(std::move(d.sm));
    out.mem_clock_mhz = summarize(std::move(d.mem));
    out.temperature_c = summarize(std::move(d.temp));
    out.power_w = summarize(std::move(d.power));
    out.reasons_seen = d.reasons;
    out.slowdown_samples = d.slowdown;
    out.ecc_uncorrected = d.ecc;
    out.ecc_uncorrected_new = d.ecc >= 0 && d.ecc_at_window_start >= 0 ? d.ecc - d.ecc_at_window_start : 0;
    w.devices.push_back(std::move(out));
    d.sm.clear();
    d.mem.clear();
    d.temp.clear();
    d.power.clear();
    d.reasons = 0;
    d.samples = d.slowdown = 0;
    d.ecc_at_window_start = d.ecc;
  }
  return w;
}

}  // namespace laggard::nvml
