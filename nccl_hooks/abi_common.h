// The parts of NCCL's profiler-plugin interface shared by every version laggard speaks (v4, v5,
// v6). laggard's own declarations, written from NCCL's published interface and checked with
// static_asserts against the sizes and offsets NCCL's headers give on x86-64 Linux (LP64);
// nothing here includes NCCL. Enums NCCL passes by value are plain ints at the ABI level.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace laggard::nccl::abi {

// ncclResult_t: only success is ever returned to NCCL (see plugin_tables.cpp for why).
using Result = int;
constexpr Result kSuccess = 0;

// ncclDebugLogger_t. The level is an int-sized enum.
using DebugLogger = void (*)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// Event type bits (descriptor `type` and the activation mask).
enum : uint64_t {
  kGroup = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kProxyOp = 1u << 3,
  kProxyStep = 1u << 4,
  kProxyCtrl = 1u << 5,
  kKernelCh = 1u << 6,
  kNetPlugin = 1u << 7,
  kGroupApi = 1u << 8,      // v5+
  kCollApi = 1u << 9,       // v5+
  kP2pApi = 1u << 10,       // v5+
  kKernelLaunch = 1u << 11, // v5+
  kCeColl = 1u << 12,       // v6+
  kCeSync = 1u << 13,       // v6+
  kCeBatch = 1u << 14,      // v6+
};

// The one state laggard reads: a kernel channel finished; args->kernelCh.pTimer is the GPU stop
// timestamp. Every other state is ignored (and its args never read: they may be NULL).
constexpr int kStateKernelChStop = 22;

// Descriptor union members that have the same layout in v4, v5 and v6.
struct ProxyOpDescr {
  pid_t pid;
  uint8_t channelId;
  int peer;
  int nSteps;
  int chunkSize;
  int isSend;
};
struct ProxyStepDescr {
  int step;
};
struct KernelChDescr {
  uint8_t channelId;
  uint64_t pTimer;  // GPU %globaltimer (ns) when the channel started
};
struct NetPluginDescr {
  int64_t id;
  void* data;
};

// recordEventState's args (v4, v5 and v6 alike). Read only for the state that defines the member.
union StateArgs {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;  // GPU %globaltimer (ns) when the channel stopped
  } kernelCh;
};

static_assert(sizeof(pid_t) == 4 && sizeof(bool) == 1 && sizeof(int) == 4 && sizeof(void*) == 8,
              "laggard's NCCL profiler ABI declarations assume x86-64/aarch64 LP64 Linux");
static_assert(sizeof(ProxyOpDescr) == 24 && offsetof(ProxyOpDescr, channelId) == 4 &&
              offsetof(ProxyOpDescr, isSend) == 20);
static_assert(sizeof(KernelChDescr) == 16 && offsetof(KernelChDescr, pTimer) == 8);
static_assert(sizeof(StateArgs) == 8);

}  // namespace laggard::nccl::abi
