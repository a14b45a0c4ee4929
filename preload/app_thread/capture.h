// The state NVTX callbacks use while capture is on, and the switch that turns capture on.
// Kept apart from lifecycle.cpp so the hot path depends on nothing but these pointers.
#pragma once

#include <atomic>

#include "name_table.h"
#include "recorder.h"
#include "start_end_table.h"

namespace laggard {

struct Capture {
  NameTable* names;
  Recorder* recorder;
  StartEndTable* start_end;
};

// Null while inert: before activation, in a forked child, after the final flush began, or
// when laggard is disabled. Callbacks check it first (activating capture on the first call)
// and do nothing when null.
extern std::atomic<Capture*> g_capture;

// Called by the first NVTX range or domain call, CUDA and NCCL hooks. Starts capture for this
// process on first call (rank detection, flush thread, exit and signal hooks). Returns whether
// capture is on. A caller while another thread activates waits up to max_wait_ns for it (NVTX
// calls, which an application may make from a signal handler, wait a bounded time; false when
// it ran out); a call on the activating thread itself (a signal handler nested in activation)
// returns false at once.
constexpr int64_t kWaitAsLongAsItTakes = -1;
bool activate_capture(int64_t max_wait_ns = kWaitAsLongAsItTakes);

// Whether activate_capture may still turn capture on: not disabled or off, not a forked child,
// and the process has a rank identity now. Cheap (the environment only): for
// InitializeInjectionNvtx2, which leaves NVTX a no-op where this is false.
bool capture_may_start();

// Writes the final window and stops capture, as the exit handler does; safe to call again.
// For sources that register an exit handler of their own after loading a library whose
// static destructors must run after laggard's last flush (cupti/cupti_source.cpp).
void finish_capture_at_exit();

// Innermost open kept section of the calling thread; for a thread with none open, the main
// thread's (PyTorch launches backward kernels from autograd threads while the main thread is
// inside "backward"). kNoName if neither has one. For attributing work launched from this
// thread (CUPTI).
uint32_t current_section();

}  // namespace laggard
