// The NCCL source's place in the capture lifecycle: the one Profiler of the process, created
// when NCCL first initializes a communicator in a process that captures.
#pragma once

#include "profiler.h"

namespace laggard::nccl {

// Callbacks: the profiler, or null (not created yet, or in a forked child).
Profiler* active_profiler();

// init: activates capture for this process (NCCL may come before any NVTX call) and returns
// the profiler, or null when this process does not capture NCCL.
Profiler* profiler_for_init();

}  // namespace laggard::nccl
