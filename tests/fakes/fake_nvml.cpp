// A fake libnvidia-ml.so.1 for GPU-health tests without a GPU: the NVML entry points laggard
// uses (nvml/nvml_api.h), with the signatures of NVIDIA's nvml.h. Environment:
//   FAKE_NVML_GPUS      devices (default 4)
//   FAKE_NVML_SLOW_GPU  index of a device that runs hot and throttled: SM clock 1005 MHz instead of
//                       1980, temperature 91 C, HW thermal slowdown, one new uncorrected ECC error
//                       per sample
//   FAKE_NVML_FAIL_INIT nvmlInit_v2 fails
//   FAKE_NVML_DELAY_MS  every clock query takes this long (a GPU in trouble, a busy driver)
// GPUs are in PCI order, GPU i at bus 0x10*(i+1), as the fake libcuda.so.1 places them
// (tests/fakes/fake_libcuda.cpp); "MIG-fake-N-M" names MIG instance M of GPU N: a handle NVML
// answers no clock, temperature or power query for (NVML_ERROR_NOT_SUPPORTED), whose GPU
// nvmlDeviceGetDeviceHandleFromMigDeviceHandle gives.
//   FAKE_NVML_HANG_INIT nvmlInit_v2 never returns, as on a node whose GPU fell off the bus (Xid 79:
//                       nvidia-smi and nvmlInit block in the driver); used to show that laggard's
//                       hang watchdog does not depend on the thread that called it (issue 24)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <time.h>

namespace {
struct FakeDevice {
  int index;
  unsigned long long ecc;
  int mig = -1;  // >= 0: a MIG instance of GPU `index`
};
FakeDevice g_devices[64];
FakeDevice g_migs[64];

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}
int count() { return env_int("FAKE_NVML_GPUS", 4); }
bool slow(const FakeDevice* d) { return d->index == env_int("FAKE_NVML_SLOW_GPU", -1); }
FakeDevice* dev(void* h) { return static_cast<FakeDevice*>(h); }
constexpr int kNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
}  // namespace

extern "C" {

int nvmlInit_v2() {
  if (std::getenv("FAKE_NVML_HANG_INIT"))
    for (;;) {
      timespec t{3600, 0};
      nanosleep(&t, nullptr);
    }
  for (int i = 0; i < 64; ++i) g_devices[i] = {i, 0, -1};
  for (int i = 0; i < 64; ++i) g_migs[i] = {i, 0, 0};
  return std::getenv("FAKE_NVML_FAIL_INIT") ? 999 /* NVML_ERROR_UNKNOWN */ : 0;
}
int nvmlShutdown() { return 0; }
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = static_cast<unsigned>(count());
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** h) {
  if (static_cast<int>(i) >= count()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
  *h = &g_devices[i];
  return 0;
}
int nvmlDeviceGetUUID(void* h, char* buf, unsigned len) {
  std::snprintf(buf, len, "GPU-fake-%d", dev(h)->index);
  return 0;
}
int nvmlDeviceGetHandleByUUID(const char* uuid, void** h) {
  int i = -1, m = -1;
  if (std::sscanf(uuid, "MIG-fake-%d-%d", &i, &m) == 2 && i >= 0 && i < count()) {
    *h = &g_migs[i];
    return 0;
  }
  if (std::sscanf(uuid, "GPU-fake-%d", &i) != 1 || i < 0 || i >= count()) return 6;  // NVML_ERROR_NOT_FOUND
  *h = &g_devices[i];
  return 0;
}
int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, void** h) {
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4 || bus % 0x10) return 6;
  int i = int(bus / 0x10) - 1;
  if (domain != 0 || device != 0 || i < 0 || i >= count()) return 6;
  *h = &g_devices[i];
  return 0;
}
int nvmlDeviceGetDeviceHandleFromMigDeviceHandle(void* mig, void** h) {
  if (dev(mig)->mig < 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT: not a MIG handle
  *h = &g_devices[dev(mig)->index];
  return 0;
}
int nvmlDeviceGetClockInfo(void* h, int type, unsigned* mhz) {
  if (int ms = env_int("FAKE_NVML_DELAY_MS", 0); ms > 0) {
    timespec t{ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, nullptr);
  }
  if (dev(h)->mig >= 0) return kNotSupported;
  *mhz = type == 1 ? (slow(dev(h)) ? 1005 : 1980) : 2619;
  return 0;
}
int nvmlDeviceGetTemperature(void* h, int, unsigned* c) {
  if (dev(h)->mig >= 0) return kNotSupported;
  *c = slow(dev(h)) ? 91 : 64;
  return 0;
}
int nvmlDeviceGetPowerUsage(void* h, unsigned* mw) {
  if (dev(h)->mig >= 0) return kNotSupported;
  *mw = slow(dev(h)) ? 400000 : 550000;
  return 0;
}
int nvmlDeviceGetCurrentClocksEventReasons(void* h, unsigned long long* r) {
  *r = slow(dev(h)) ? 0x40 /* HwThermalSlowdown */ : 0;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(void* h, int, int, unsigned long long* n) {
  if (slow(dev(h))) ++dev(h)->ecc;
  *n = dev(h)->ecc;
  return 0;
}

}  // extern "C"
