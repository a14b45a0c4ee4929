// Native stacks of other threads, for hang reports (docs/hang-watchdog.md says why it works so).
//
// The watchdog, on its own thread, looks at each thread of the process in turn:
//
// - A thread blocked in the kernel (/proc/self/task/TID/syscall shows a system call, or "-1"
//   for a page fault) is never signalled: a signal would make poll, select, epoll_wait,
//   nanosleep or a recv with a timeout fail with EINTR even under SA_RESTART. Its user stack
//   pointer and pc come from that file and its stack is read in place (same address space,
//   process_vm_readv); reading the file and the thread's context-switch counts again afterwards
//   proves it stayed blocked meanwhile, else the read is retried.
// - A thread still running after 5 looks 1 ms apart (a thread between two waits is caught
//   blocked meanwhile) gets one real-time signal (tgkill). The handler does only what is
//   async-signal-safe: it copies the interrupted registers (ucontext) and the innermost
//   kStackCopyBytes of the stack (process_vm_readv: a fault ends the copy, not the process) and
//   the thread's open NVTX ranges into a preallocated slot, and returns. No unwinding, no
//   loader, no lock, no allocation in the handler: a thread interrupted in malloc, in dlclose
//   or in fork cannot deadlock against it.
//
// Either copy is then unwound on the watchdog thread with libunwind's remote API
// (remote_unwind.h). Threads that block the signal and are running are reported as "blocked";
// a thread that does not answer within the timeout as "timeout" (a late answer is discarded).
// The signal is the highest free real-time signal (SIGRTMAX-2 downwards, disposition SIG_DFL),
// or LAGGARD_HANG_SIGNAL; before each use the watchdog checks the handler is still its own.
//
// Frames come back with pc, module and module base; naming them (name_frames) reads symbol
// tables through the loader and runs after the report was written once (watchdog.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hang_report.h"
#include "remote_unwind.h"

namespace laggard::watch {

class StackSampler {
 public:
  // Once, on the watchdog thread: loads libunwind, chooses and installs the signal.
  // forced_signal: LAGGARD_HANG_SIGNAL (0: choose). unwinder: the LAGGARD_HANG_UNWINDER file.
  void arm(int forced_signal, int64_t epoch_offset_ns, const std::string& unwinder = "libunwind.so.8");

  int signal() const { return signal_; }
  const std::string& unwinder() const { return unwinder_status_; }

  // Before the threads of one report: the modules as mapped now.
  void begin_report();

  // Fills t.status, t.method, t.frames (pc, module, module_base) and t.sections for thread
  // t.tid; waits at most timeout_ns for a signalled thread.
  void capture(ThreadReport& t, int64_t timeout_ns);

  // Adds symbol and offset to frames (dladdr and libunwind's symbol lookup: may wait for the
  // loader lock, so only after the report was written without them).
  void name_frames(std::vector<StackFrame>& frames);

 private:
  bool handler_still_ours();
  bool choose_signal(int forced_signal);
  bool capture_in_place(ThreadReport& t, const struct SyscallState& st);
  void capture_by_signal(ThreadReport& t, int64_t timeout_ns);
  void add_frames(ThreadReport& t, const StackSnapshot& s);

  int signal_ = 0;
  std::string unwinder_status_ = "unavailable: not armed";
  int64_t epoch_offset_ns_ = 0;
  RemoteUnwinder unwinder_;
};

// Whether thread tid blocks signal sig, from /proc/self/task/TID/status (false when unknown).
bool thread_blocks_signal(uint32_t tid, int sig);

}  // namespace laggard::watch
