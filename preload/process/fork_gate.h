#pragma once
// Keeps the application's forks out while laggard does something a child must not inherit half-done.
//
// glibc's fork() resets in the child only the locks it knows about (malloc's, stdio's, the dynamic
// loader's: posix/fork.c, glibc 2.36); the lock of the exit-handler list (__exit_funcs_lock,
// stdlib/cxa_atexit.c) is copied as it is. A child forked while another thread is inside atexit()
// or __cxa_atexit() finds it held by a thread it does not have and waits in exit() for ever.
// The same holds for the lock dl_iterate_phdr takes (dl_load_write_lock): a child forked while
// another thread walks the loaded objects hangs in its own next walk or in dlopen of a new library
// (a DataLoader worker importing a module), as a test program showed on Debian 12's glibc 2.36.
// A program does that at its own times; laggard would do it at times the program did not choose:
// registering its exit handlers when capture starts (on the thread of the first NVTX call),
// loading CUPTI, NVML or RE2, whose constructors register theirs, and walking the loaded objects
// (looking for libcuda at every flush tick). So those steps run inside a ForkGate, and laggard's
// fork-prepare handler waits for open gates to close.
#include <dlfcn.h>

#include <cstdint>

namespace laggard {

// While one is alive, a fork by another thread waits (at most kForkWaitLimitNs) until it is gone.
// Nested gates on one thread are one gate; one opened by a fork handler of the forking thread
// keeps nothing out. Not for signal handlers.
class ForkGate {
 public:
  ForkGate();
  ~ForkGate();
  ForkGate(const ForkGate&) = delete;
  ForkGate& operator=(const ForkGate&) = delete;

 private:
  bool counted_;  // this gate is the one its thread counts in the open gates
};

// A fork waits this long at most: past it, a gate holder may itself be waiting for the forking
// thread (a library constructor calling pthread_atfork, whose lock fork holds while it prepares).
constexpr int64_t kForkWaitLimitNs = 1'000'000'000;

// dlopen inside a ForkGate: for a library that may not be loaded yet (its constructors run).
void* load_library(const char* path, int flags);

// glibc (2.34+, dlfcn/dlerror.c) keeps each thread's last dl error (a dlopen or dlsym that missed)
// in a heap block that only the thread's teardown frees. laggard's own detached threads (flush,
// watchdog) may still be tearing down when the process exits, and LeakSanitizer's exit check,
// which no longer scans their TLS by then, reports the block as leaked. Reading the error twice
// frees it: the first read marks it delivered, the second releases it. On laggard's threads only,
// where nothing reads the error after: an application thread's error is the application's.
void release_dl_error_state();

// Forks that had to wait for a gate, and those that gave up waiting (for the tests).
struct ForkGateCounts {
  long waited = 0;
  long gave_up = 0;
};
ForkGateCounts fork_gate_counts();

}  // namespace laggard
