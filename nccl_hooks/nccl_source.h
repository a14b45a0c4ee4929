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

// A communicator's context for NCCL's init (null: not captured). Checks /dev/shm's free space
// for the communicator's proxy ops pools first and switches kernel events off for good when it
// is short (plugin_env.h, decide_kernel_events).
void* add_comm_for_init(Profiler& p, int table_version, uint64_t hash, const char* name, int nnodes, int nranks,
                        int rank);

// Free space of /dev/shm in bytes (what an unprivileged process may still use), -1 when it
// cannot be told.
int64_t dev_shm_free_bytes();

// The CUDA device current on the calling thread (cuCtxGetDevice of an already loaded libcuda),
// -1 when there is none.
int cuda_current_device();

}  // namespace laggard::nccl
