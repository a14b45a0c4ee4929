// The part of NVML (libnvidia-ml.so.1) laggard uses, declared here because the CUDA toolkit in
// /usr/local/cuda/include ships no nvml.h and libnvidia-ml is never linked (dlopen only).
// Modeled on NVIDIA's nvml.h (NVML API, "Copyright 1993-2024 NVIDIA Corporation", as mirrored in
// github.com/XuehaiPan/nvml-dev): the _v2 entry points nvml.h maps the plain names to, the enum
// values and the clocks-event (throttle) reason bits, unchanged.
#pragma once

#include <cstdint>

namespace laggard::nvml {

using nvmlReturn_t = int;
constexpr nvmlReturn_t NVML_SUCCESS = 0;

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

// nvmlClockType_t
constexpr int NVML_CLOCK_SM = 1;
constexpr int NVML_CLOCK_MEM = 2;
// nvmlTemperatureSensors_t
constexpr int NVML_TEMPERATURE_GPU = 0;
// nvmlMemoryErrorType_t / nvmlEccCounterType_t
constexpr int NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1;
constexpr int NVML_VOLATILE_ECC = 0;
constexpr unsigned NVML_DEVICE_UUID_BUFFER_SIZE = 80;

// nvmlClocksEventReason* (formerly nvmlClocksThrottleReason*) bits.
constexpr uint64_t kReasonGpuIdle = 0x1;
constexpr uint64_t kReasonApplicationsClocksSetting = 0x2;
constexpr uint64_t kReasonSwPowerCap = 0x4;
constexpr uint64_t kReasonHwSlowdown = 0x8;
constexpr uint64_t kReasonSyncBoost = 0x10;
constexpr uint64_t kReasonSwThermalSlowdown = 0x20;
constexpr uint64_t kReasonHwThermalSlowdown = 0x40;
constexpr uint64_t kReasonHwPowerBrakeSlowdown = 0x80;
constexpr uint64_t kReasonDisplayClockSetting = 0x100;
// The reasons that mean the GPU runs slower than it could for reasons of power, heat or hardware.
constexpr uint64_t kSlowdownReasons = kReasonSwPowerCap | kReasonHwSlowdown | kReasonSwThermalSlowdown |
                                      kReasonHwThermalSlowdown | kReasonHwPowerBrakeSlowdown;

using InitFn = nvmlReturn_t (*)();                                              // nvmlInit_v2
using ShutdownFn = nvmlReturn_t (*)();                                          // nvmlShutdown
using GetCountFn = nvmlReturn_t (*)(unsigned int*);                             // nvmlDeviceGetCount_v2
using GetHandleByIndexFn = nvmlReturn_t (*)(unsigned int, nvmlDevice_t*);       // nvmlDeviceGetHandleByIndex_v2
using GetHandleByUuidFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);         // nvmlDeviceGetHandleByUUID
using GetUuidFn = nvmlReturn_t (*)(nvmlDevice_t, char*, unsigned int);          // nvmlDeviceGetUUID
using GetHandleByPciBusIdFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);    // nvmlDeviceGetHandleByPciBusId_v2
using GetParentOfMigFn = nvmlReturn_t (*)(nvmlDevice_t, nvmlDevice_t*);        // nvmlDeviceGetDeviceHandleFromMigDeviceHandle
using GetClockInfoFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);      // nvmlDeviceGetClockInfo
using GetTemperatureFn = nvmlReturn_t (*)(nvmlDevice_t, int, unsigned int*);    // nvmlDeviceGetTemperature
using GetPowerUsageFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*);          // nvmlDeviceGetPowerUsage (mW)
using GetReasonsFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned long long*);       // nvmlDeviceGetCurrentClocksEventReasons
using GetTotalEccErrorsFn = nvmlReturn_t (*)(nvmlDevice_t, int, int, unsigned long long*);  // nvmlDeviceGetTotalEccErrors

}  // namespace laggard::nvml
