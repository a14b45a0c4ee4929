#include "gpu_health.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "fork_gate.h"

namespace laggard::nvml {

template <class F>
F GpuHealth::sym(const char* name) {
  return reinterpret_cast<F>(dlsym(lib_, name));
}

std::string GpuHealth::load(const std::string& library) {
  const std::string file = library.empty() ? "libnvidia-ml.so.1" : library;
  lib_ = load_library(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) return file + " not found";
  auto init = sym<InitFn>("nvmlInit_v2");
  get_count_ = sym<GetCountFn>("nvmlDeviceGetCount_v2");
  by_index_ = sym<GetHandleByIndexFn>("nvmlDeviceGetHandleByIndex_v2");
  by_uuid_ = sym<GetHandleByUuidFn>("nvmlDeviceGetHandleByUUID");
  by_pci_ = sym<GetHandleByPciBusIdFn>("nvmlDeviceGetHandleByPciBusId_v2");
  parent_of_mig_ = sym<GetParentOfMigFn>("nvmlDeviceGetDeviceHandleFromMigDeviceHandle");
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

int GpuHealth::nvml_index(nvmlDevice_t handle) const {
  unsigned count = 0;
  if (!get_count_ || get_count_(&count) != NVML_SUCCESS) return -1;
  for (unsigned i = 0; i < count; ++i) {
    nvmlDevice_t h = nullptr;
    if (by_index_(i, &h) == NVML_SUCCESS && h == handle) return static_cast<int>(i);
  }
  return -1;
}

bool GpuHealth::use(nvmlDevice_t handle) {
  int index = nvml_index(handle);
  nvmlDevice_t parent = nullptr;
  // A MIG instance's handle is not among NVML's GPUs and answers no clock or power query: its GPU's.
  if (index < 0 && parent_of_mig_ && parent_of_mig_(handle, &parent) == NVML_SUCCESS) {
    handle = parent;
    index = nvml_index(handle);
  }
  if (index < 0) return false;
  Device d{};
  d.index = index;
  d.handle = handle;
  char uuid[NVML_DEVICE_UUID_BUFFER_SIZE] = {};
  if (get_uuid_ && get_uuid_(d.handle, uuid, sizeof uuid) == NVML_SUCCESS) d.uuid = uuid;
  devices_.clear();
  devices_.push_back(std::move(d));
  return true;
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
  char* end = nullptr;
  long index = std::strtol(id.c_str(), &end, 10);
  nvmlDevice_t h = nullptr;
  if (end && *end == '\0' && index >= 0 && static_cast<unsigned>(index) < count) {
    if (by_index_(static_cast<unsigned>(index), &h) != NVML_SUCCESS || !use(h)) return;
    // CUDA numbers fastest first unless told otherwise; NVML by PCI bus: the same GPU only then.
    const char* order = std::getenv("CUDA_DEVICE_ORDER");
    exact_ = count == 1 || (order && std::strcmp(order, "PCI_BUS_ID") == 0);
  } else if (by_uuid_ && by_uuid_(id.c_str(), &h) == NVML_SUCCESS && use(h)) {
    exact_ = true;
  }
}

bool GpuHealth::choose_cuda_device(const CudaDevice& device) {
  nvmlDevice_t h = nullptr;
  bool found = (by_pci_ && !device.pci_bus_id.empty() && by_pci_(device.pci_bus_id.c_str(), &h) == NVML_SUCCESS) ||
               (by_uuid_ && !device.uuid.empty() && by_uuid_(device.uuid.c_str(), &h) == NVML_SUCCESS);
  if (!found || !use(h)) return false;
  exact_ = true;
  return true;
}

std::string nvml_uuid(const unsigned char b[16], bool mig) {
  char out[64];
  std::snprintf(out, sizeof out, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                mig ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return out;
}

bool cuda_device_of_rank(int local_rank, CudaDevice* out, const char* library, bool* driver_loaded) {
  void* h = dlopen(library, RTLD_LAZY | RTLD_LOCAL | RTLD_NOLOAD);
  if (driver_loaded) *driver_loaded = h != nullptr;
  if (!h) return false;
  using GetCount = int (*)(int*);
  using Get = int (*)(int*, int);
  using BusId = int (*)(char*, int, int);
  using Uuid = int (*)(unsigned char*, int);
  auto count_fn = reinterpret_cast<GetCount>(dlsym(h, "cuDeviceGetCount"));
  auto get_fn = reinterpret_cast<Get>(dlsym(h, "cuDeviceGet"));
  auto bus_fn = reinterpret_cast<BusId>(dlsym(h, "cuDeviceGetPCIBusId"));
  auto uuid_fn = reinterpret_cast<Uuid>(dlsym(h, "cuDeviceGetUuid_v2"));
  if (!uuid_fn) uuid_fn = reinterpret_cast<Uuid>(dlsym(h, "cuDeviceGetUuid"));
  // Before cuInit these answer CUDA_ERROR_NOT_INITIALIZED, touching nothing.
  int count = 0, dev = 0;
  bool ok = count_fn && get_fn && count_fn(&count) == 0 && count > 0 &&
            get_fn(&dev, std::max(local_rank, 0) % count) == 0;
  if (ok) {
    char bus[64] = {};
    if (bus_fn && bus_fn(bus, sizeof bus, dev) == 0) out->pci_bus_id = bus;
    unsigned char uuid[16] = {};
    if (uuid_fn && uuid_fn(uuid, dev) == 0) out->uuid = nvml_uuid(uuid);
    ok = !out->pci_bus_id.empty() || !out->uuid.empty();
  }
  dlclose(h);  // balances NOLOAD's reference
  return ok;
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
