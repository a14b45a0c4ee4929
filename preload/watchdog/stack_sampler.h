// Native stacks of other threads, for hang reports.
//
// Method: the watchdog thread sends one real-time signal to one thread at a time (tgkill). The
// handler, running on that thread, unwinds from the interrupted context with libunwind's local
// unwinder (unw_init_local2 / unw_step / unw_get_proc_name are documented signal-safe for the
// local address space) into a preallocated slot, copies the thread's open NVTX ranges, and
// marks the slot done. The watchdog waits a bounded time per thread; a thread that does not
// answer is reported as "timeout" and a late answer is discarded (the slot's generation no
// longer matches). Threads that block the signal (SigBlk in /proc/self/task/TID/status) are not
// signalled at all. The signal is the highest free real-time signal (SIGRTMAX-2 downwards,
// whose disposition is SIG_DFL, i.e. unused by the app), or LAGGARD_HANG_SIGNAL; before each
// capture the watchdog checks the handler is still ours and never sends a signal it does not
// handle (an unhandled real-time signal would terminate the process).
//
// libunwind (Debian's libunwind8, libunwind.so.8) is dlopen'ed: a process without it runs on,
// and its hang reports carry open sections and collectives without native frames.
#pragma once

#include <cstdint>
#include <string>

#include "hang_report.h"

namespace laggard::watch {

class StackSampler {
 public:
  // Once, on the watchdog thread: loads libunwind, chooses and installs the signal.
  // forced_signal: LAGGARD_HANG_SIGNAL (0: choose). Returns the unwinder status for reports.
  // unwinder: the libunwind file to dlopen.
  void arm(int forced_signal, int64_t epoch_offset_ns, const std::string& unwinder = "libunwind.so.8");

  int signal() const { return signal_; }
  const std::string& unwinder() const { return unwinder_; }

  // Fills t.status, t.frames and t.sections for thread t.tid; waits at most timeout_ns.
  void capture(ThreadReport& t, int64_t timeout_ns);

 private:
  bool handler_still_ours();
  bool choose_signal(int forced_signal);

  int signal_ = 0;
  std::string unwinder_ = "unavailable: not armed";
  int64_t epoch_offset_ns_ = 0;
};

// Whether thread tid blocks signal sig, from /proc/self/task/TID/status (false when unknown).
bool thread_blocks_signal(uint32_t tid, int sig);

}  // namespace laggard::watch
