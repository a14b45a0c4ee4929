// parallel_for (report/analyze/parallel.h): every index once, on threads kept from call to call,
// whatever calls it from where: inside another's f, beside another on a second thread, after a
// failure, in a forked child.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "parallel.h"

namespace laggard::report {
namespace {

std::atomic<int> threads_seen{0};
thread_local bool counted = false;

void note_thread() {
  if (!counted) counted = true, ++threads_seen;
}

// f(i) ran exactly once for every i.
void expect_each_once(const std::vector<std::atomic<int>>& runs) {
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].load(), 1) << i;
}

TEST(ParallelFor, EveryIndexRunsOnceOnThreadsKeptFromCallToCall) {
  const int before = threads_seen.load();
  for (size_t call = 0; call < 100; ++call) {
    std::vector<std::atomic<int>> runs(call % 17);
    parallel_for(runs.size(), [&](size_t i) {
      note_thread();
      usleep(100);  // long enough for every thread of the call to take a share
      ++runs[i];
    });
    expect_each_once(runs);
  }
  // The caller and at most one kept thread per other core; a thread per call would be hundreds.
  EXPECT_LE(threads_seen.load() - before, int(analysis_threads())) << "threads started anew for each call";
}

TEST(ParallelFor, CallsInsideAndBesideEachOtherRunEverything) {
  std::vector<std::atomic<int>> outer(8), inner(8 * 16), beside(64);
  auto other = run_beside([&] {
    for (int round = 0; round < 50; ++round)
      parallel_for(beside.size(), [&](size_t i) { beside[i] += round == 0; });
    return 0;
  });
  parallel_for(outer.size(), [&](size_t o) {
    ++outer[o];
    parallel_for(16, [&](size_t i) { ++inner[o * 16 + i]; });
  });
  other.get();
  expect_each_once(outer);
  expect_each_once(inner);
  expect_each_once(beside);
}

TEST(ParallelFor, AFailureOnAnyThreadIsRethrownAndTheNextCallRuns) {
  for (size_t bad : {size_t{0}, size_t{7}, size_t{99}}) {
    EXPECT_THROW(parallel_for(100, [&](size_t i) {
                   if (i == bad) throw std::runtime_error("bad index");
                 }),
                 std::runtime_error);
    std::vector<std::atomic<int>> runs(100);
    parallel_for(runs.size(), [&](size_t i) { ++runs[i]; });
    expect_each_once(runs);
  }
}

TEST(ParallelFor, AForkedChildRunsItsOwnCalls) {
#if defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "ThreadSanitizer refuses new threads after a multi-threaded fork";
#else
  parallel_for(4, [](size_t) {});  // the kept threads exist in the parent, not in the child
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    alarm(20);  // a child waiting for the parent's threads would hang: fail it instead
    std::vector<std::atomic<int>> runs(32);
    parallel_for(runs.size(), [&](size_t i) { ++runs[i]; });
    for (auto& r : runs)
      if (r.load() != 1) _exit(1);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
#endif
}

}  // namespace
}  // namespace laggard::report
