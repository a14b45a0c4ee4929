// The fork gate (preload/process/fork_gate.h): a child forked while another thread registers an
// exit handler, or walks the loaded objects, inside a gate can still exit or walk them; a fork
// waits for a gate another thread holds and goes on once it closes, does not wait for its own
// thread's gate, and gives up after the limit.
//
// Without the gate the first two tests' children hang, on their first fork here: glibc's fork
// copies the exit list's lock (__exit_funcs_lock, stdlib/cxa_atexit.c) and dl_iterate_phdr's,
// held by the other thread, and the child's own atexit() or dl_iterate_phdr() waits for ever
// (gdb: __lll_lock_wait_private).
#include <link.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>

#include <gtest/gtest.h>

#include "clock.h"
#include "fork_gate.h"

namespace laggard {
namespace fork_gate_test {

void registered_and_never_run_early() {}

// Waits up to 5 s for the child; true when it exited with status 0, false when it hung (killed).
bool child_exited_cleanly(pid_t pid) {
  const int64_t deadline = mono_ns() + 5'000'000'000LL;
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (mono_ns() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return false;
    }
    usleep(200);
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// The child takes the exit list's lock as exit() would, without running the parent's handlers.
pid_t fork_a_child_that_registers_an_exit_handler() {
  pid_t pid = fork();
  if (pid == 0) {
    std::atexit(registered_and_never_run_early);
    _exit(0);
  }
  return pid;
}

TEST(ForkGate, AChildForkedWhileAnotherThreadRegistersExitHandlersInAGateCanExit) {
  const ForkGateCounts before = fork_gate_counts();
  std::atomic<bool> stop{false};
  std::atomic<long> registered{0};
  std::atomic<bool> forks_done{false};
  std::thread registering([&] {
    // 64 at a time in one gate, so a fork nearly always meets an open one; capped so the exit list
    // stays ~13 MB (32 B an entry): 400,000 take 20-40 ms here, 4-55 forks.
    while (!stop.load(std::memory_order_relaxed) && registered.load(std::memory_order_relaxed) < 400'000) {
      ForkGate no_fork_while;
      for (int i = 0; i < 64; ++i) std::atexit(registered_and_never_run_early);
      registered.fetch_add(64, std::memory_order_relaxed);
    }
    stop = true;
    // Alive until the last fork: a thread ended but not joined is a "thread leak" to TSan's
    // check at a child's _exit.
    while (!forks_done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (registered.load() == 0) std::this_thread::yield();
  int forks = 0, hung_or_failed = 0;
  for (; forks < 100 && !stop.load(); ++forks) {
    pid_t pid = fork_a_child_that_registers_an_exit_handler();
    ASSERT_GE(pid, 0);
    if (!child_exited_cleanly(pid)) ++hung_or_failed;
  }
  stop = true;
  forks_done = true;
  registering.join();
  const ForkGateCounts after = fork_gate_counts();
  std::printf("%d forks while %ld exit handlers were registered\n", forks, registered.load());
  EXPECT_EQ(hung_or_failed, 0) << "of " << forks << " children, while " << registered.load()
                               << " exit handlers were registered";
  if (forks >= 10) {  // fewer on a loaded machine; each nearly always meets an open gate
    EXPECT_GT(after.waited, before.waited) << "no fork met an open gate: the race was not exercised";
  }
  EXPECT_EQ(after.gave_up, before.gave_up);
}

int count_object(dl_phdr_info*, size_t, void* n) {
  ++*static_cast<long*>(n);
  return 0;
}

TEST(ForkGate, AChildForkedWhileAnotherThreadWalksTheLoadedObjectsInAGateCanWalkThem) {
  // dl_iterate_phdr's lock is not reset in a child either (glibc 2.36): laggard walks the loaded
  // objects at every flush tick, looking for libcuda (cupti_loader.cpp driver_mapped).
  const ForkGateCounts before = fork_gate_counts();
  std::atomic<bool> stop{false};
  std::atomic<long> walks{0};
  std::thread walking([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      ForkGate no_fork_while;
      long objects = 0;
      for (int i = 0; i < 16; ++i) dl_iterate_phdr(count_object, &objects);
      walks.fetch_add(1, std::memory_order_relaxed);
    }
  });
  while (walks.load() == 0) std::this_thread::yield();
  int hung_or_failed = 0;
  for (int forks = 0; forks < 50; ++forks) {
    pid_t pid = fork();
    if (pid == 0) {
      long objects = 0;
      dl_iterate_phdr(count_object, &objects);
      _exit(objects > 0 ? 0 : 1);
    }
    ASSERT_GE(pid, 0);
    if (!child_exited_cleanly(pid)) ++hung_or_failed;
  }
  stop = true;
  walking.join();
  EXPECT_EQ(hung_or_failed, 0);
  EXPECT_GT(fork_gate_counts().waited, before.waited) << "no fork met an open gate: the race was not exercised";
  EXPECT_EQ(fork_gate_counts().gave_up, before.gave_up);
}

TEST(ForkGate, AForkWaitsForAnotherThreadsGateAndGoesOnWhenItCloses) {
  std::atomic<bool> open{false}, forked{false};
  std::atomic<int64_t> closed_at{0};
  std::thread holder([&] {
    {
      ForkGate gate;
      open = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      closed_at = mono_ns();
    }
    while (!forked.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // TSan, as above
  });
  while (!open.load()) std::this_thread::yield();
  const ForkGateCounts before = fork_gate_counts();
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  const int64_t forked_at = mono_ns();
  forked = true;
  holder.join();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(child_exited_cleanly(pid));
  ASSERT_NE(closed_at.load(), 0) << "fork returned before the gate closed";
  EXPECT_GE(forked_at, closed_at.load());
  EXPECT_EQ(fork_gate_counts().waited, before.waited + 1);
  EXPECT_EQ(fork_gate_counts().gave_up, before.gave_up);
}

TEST(ForkGate, AForkDoesNotWaitForItsOwnThreadsGate) {
  // As from a signal handler that interrupted the thread inside its gate: waiting would be for ever.
  const ForkGateCounts before = fork_gate_counts();
  pid_t pid;
  {
    ForkGate outer;
    ForkGate nested;
    pid = fork();
    if (pid == 0) {
      ForkGate in_child;  // the child has this thread's gates only: nothing to wait for
      _exit(0);
    }
  }
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(child_exited_cleanly(pid));
  EXPECT_EQ(fork_gate_counts().waited, before.waited);
  EXPECT_EQ(fork_gate_counts().gave_up, before.gave_up);
}

TEST(ForkGate, AForkGivesUpWaitingAfterTheLimit) {
  // The holder may itself wait for the forking thread (a constructor calling pthread_atfork while
  // fork holds that lock): past the limit the fork goes on rather than hang the program.
  std::atomic<bool> open{false}, release{false};
  std::thread holder([&] {
    ForkGate gate;
    open = true;
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  while (!open.load()) std::this_thread::yield();
  const ForkGateCounts before = fork_gate_counts();
  const int64_t start = mono_ns();
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  const int64_t waited_ns = mono_ns() - start;
  release = true;
  holder.join();
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(child_exited_cleanly(pid));
  EXPECT_GE(waited_ns, kForkWaitLimitNs);
  EXPECT_EQ(fork_gate_counts().gave_up, before.gave_up + 1);
  // The gate still works for the next fork: closed now, so nothing waits.
  pid = fork();
  if (pid == 0) _exit(0);
  EXPECT_TRUE(child_exited_cleanly(pid));
  EXPECT_EQ(fork_gate_counts().waited, before.waited + 1);
}

}  // namespace fork_gate_test
}  // namespace laggard
