// ROOM files/ -- laggard's files opened without taking a number from the application's
// descriptor table.
//
// open(2) hands out the lowest free number of the process's one table. A file the flush thread
// opened for a moment (each NVTX thread's schedstat 20 times a second, /proc/self/task, the
// control file 4 times a second) took a number the application could be about to get: an
// application that closed its descriptors and then made a pipe got 4 and 5 instead of 3 and 4
// (tests/integration/host_safety_test.cpp, AnApplicationThatClosesItsFdsKeepsItsDataAndCpu,
// once in a CI run; strace showed the flush thread holding fds 3 and 4 on /proc/self/task and a
// schedstat).
//
// Such opens run here instead (every read and write of capture's: the CPU-wait /proc files, the
// control file, the windows' segments, hang reports), on one thread of laggard's whose table is
// its own: its first act is close_range(0, ~0U, CLOSE_RANGE_UNSHARE) (Linux 5.9; fs/file.c
// __close_range copies none of the descriptors of a range that reaches the table's end, so it
// holds none of the application's files open, not even for a moment). What it opens never
// appears in the application's table, never counts against its limit, and the application
// cannot close it. Where the kernel refuses (older than 5.9, a seccomp filter), the jobs run on
// the caller, as before, and private_fds_isolated() says so.
//
// A descriptor opened here is a number of this table only: kept, it serves later jobs (the run
// directory and segment RunDirFd keeps, one set per table in safe_write.cpp), never another thread.
#pragma once

#include <sys/types.h>

#include <functional>

namespace laggard {

// Runs job on the private-table thread and returns when it is done; what it throws is thrown
// again here, as if it had run on the caller.
// Laggard's flush thread and its start only: it blocks, takes a lock and may start a thread.
// In a forked child, and when the thread cannot start or cannot have a table of its own, job
// runs on the caller.
void run_with_private_fds(const std::function<void()>& job);

// The private-table thread's id, 0 before it started and in a forked child (laggard's own
// thread: the CPU-wait sums leave it out).
pid_t private_fds_thread_id();

// Whether jobs run with a table of their own (false before the first job, and in a forked child).
bool private_fds_isolated();

// Whether the calling thread is the private-table one (safe_write.cpp keeps its long-lived
// descriptors per table).
bool on_private_fds_thread();

}  // namespace laggard
