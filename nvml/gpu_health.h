// GPU health telemetry through NVML: SM and memory clocks, temperature, power, clocks-event
// (throttle) reasons and volatile uncorrected ECC errors of the GPU(s) this rank uses, sampled
// about once a second on the flush thread and summarized per window (min/median/max).
// libnvidia-ml.so.1 is dlopen'ed; without it nothing is sampled and one info line says so.
//
// Which GPU: CUDA and NVML number GPUs differently (CUDA fastest first unless
// CUDA_DEVICE_ORDER=PCI_BUS_ID, renumbered by CUDA_VISIBLE_DEVICES; NVML by PCI bus, all GPUs;
// a MIG instance is a CUDA device but not an NVML GPU). Once CUDA is initialized the rank's CUDA
// device is found through the driver and matched by PCI bus id (a MIG instance gives its GPU's),
// else by UUID (choose_cuda_device). Before that, choose_devices guesses from
// CUDA_VISIBLE_DEVICES: a UUID is exact; an index is exact only with CUDA_DEVICE_ORDER=PCI_BUS_ID
// or a single GPU, else provisional until CUDA tells.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpu_health_window.h"
#include "nvml_api.h"

namespace laggard::nvml {

// A CUDA device as the driver describes it.
struct CudaDevice {
  std::string pci_bus_id;  // cuDeviceGetPCIBusId: "domain:bus:device.function"
  std::string uuid;        // cuDeviceGetUuid_v2, as NVML writes it ("GPU-..." / "MIG-..."), may be ""
};

// The device CUDA gives this rank (ordinal local_rank modulo the visible count), asked of a
// libcuda.so.1 already loaded and initialized in this process; false when there is none. Never
// loads or initializes the driver. `driver_loaded` (optional): whether the driver is loaded at
// all (initialized or not). `library`: another file (tests).
bool cuda_device_of_rank(int local_rank, CudaDevice* out, const char* library = "libcuda.so.1",
                         bool* driver_loaded = nullptr);

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" from cuDeviceGetUuid's 16 bytes (NVML's form).
std::string nvml_uuid(const unsigned char bytes[16], bool mig = false);

class GpuHealth {
 public:
  // library: file to dlopen (tests); "" = "libnvidia-ml.so.1". Returns "" or why not.
  std::string load(const std::string& library = "");
  // A guess before CUDA is initialized: CUDA_VISIBLE_DEVICES (indices or UUIDs) and the local
  // rank, as CUDA numbers them: the visible one at local_rank modulo the visible count.
  void choose_devices(const char* cuda_visible_devices, int local_rank);
  // The rank's CUDA device, from the driver: by PCI bus id, else UUID. False if NVML has no match
  // (the previous choice stays).
  bool choose_cuda_device(const CudaDevice& device);
  bool active() const { return !devices_.empty(); }
  bool exact() const { return exact_; }  // the choice cannot be wrong (see the top of this file)

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
  bool use(nvmlDevice_t handle);  // the one device sampled from now on; a MIG handle gives its GPU's
  int nvml_index(nvmlDevice_t handle) const;

  void* lib_ = nullptr;
  GetCountFn get_count_ = nullptr;
  GetHandleByIndexFn by_index_ = nullptr;
  GetHandleByUuidFn by_uuid_ = nullptr;
  GetHandleByPciBusIdFn by_pci_ = nullptr;
  GetParentOfMigFn parent_of_mig_ = nullptr;
  GetUuidFn get_uuid_ = nullptr;
  GetClockInfoFn clock_ = nullptr;
  GetTemperatureFn temperature_ = nullptr;
  GetPowerUsageFn power_ = nullptr;
  GetReasonsFn reasons_ = nullptr;
  GetTotalEccErrorsFn ecc_ = nullptr;
  std::vector<Device> devices_;
  bool exact_ = false;
};

HealthStat summarize(std::vector<double> values);

}  // namespace laggard::nvml
