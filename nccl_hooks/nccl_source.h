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
// the profiler, or null when this process does not capture NCCL.
Profiler* profiler_for_init();

}  // namespace laggard::nccl
