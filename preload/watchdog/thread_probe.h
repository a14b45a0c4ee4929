// What /proc/self/task/TID says about one thread of this process, for the hang watchdog (its own
// thread, never a signal handler). Each read is one open/read/close into a stack buffer: no
// allocation, so a thread holding a malloc arena cannot stall the watchdog here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace laggard::watch {

// /proc/self/task/TID/syscall: "running", or the system call the thread is blocked in with its
// user stack pointer and program counter ("-1 SP PC" when it is blocked outside a system call,
// e.g. in a page fault). Only a thread that is not running can be read in place.
struct SyscallState {
  bool ok = false;       // the file was read and understood
  bool running = false;  // on a CPU or runnable: no stable user registers to read
  long nr = -1;          // system call number; -1: blocked, not in a system call
  uint64_t args[6] = {};
  uint64_t sp = 0, pc = 0;
  bool same_as(const SyscallState& o) const;
};
SyscallState read_syscall_state(uint32_t tid);
// Parses the file's text (exposed for tests).
SyscallState parse_syscall_state(const char* text);

// /proc/self/task/TID/status: the blocked-signal mask and context-switch counts. A thread that
// stayed blocked between two reads has the same counts in both.
struct TaskStatus {
  bool ok = false;
  uint64_t sig_blocked = 0;
  uint64_t voluntary_switches = 0, involuntary_switches = 0;
  bool same_switches(const TaskStatus& o) const {
    return ok && o.ok && voluntary_switches == o.voluntary_switches && involuntary_switches == o.involuntary_switches;
  }
};
TaskStatus read_task_status(uint32_t tid);

// Reads /proc/self/task/TID/<file> into buf (NUL-terminated); false when it cannot.
bool read_task_file(uint32_t tid, const char* file, char* buf, size_t cap);

}  // namespace laggard::watch
