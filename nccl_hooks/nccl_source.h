// The NCCL source's place in the capture lifecycle: the one Profiler of the process, created
// when NCCL first initializes a communicator in a process that captures.
#pragma once

#include <atomic>

#include "profiler.h"

namespace laggard::nccl {

// Set once, never freed (NCCL may call in during exit); null again in a forked child.
extern std::atomic<Profiler*> g_active_profiler;

// Callbacks: the profiler, or null (not created yet, or in a forked child). Inline: it runs
// on every callback.
inline Profiler* active_profiler() { return g_active_profiler.load(std::memory_order_acquire); }

// init: activates capture for this process (NCCL may come before any NVTX call) and returns
// the profiler, or null when this process does not capture NCCL. table_version: the plugin
// table NCCL called (4, 5, 6); the first call decides whether KernelCh events are asked for.
Profiler* profiler_for_init(int table_version);

// Size of /dev/shm in bytes, -1 when it cannot be told.
int64_t dev_shm_bytes();

}  // namespace laggard::nccl
