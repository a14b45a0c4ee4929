// The thread whose descriptor table is its own (preload/files/private_fds.h): what a job opens
// takes no number of the caller's table, exceptions reach the caller, many callers take turns,
// the kernel's refusal leaves jobs on the caller, and a forked child keeps its own descriptors
// at the numbers the private table used.
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "private_fds.h"
#include "refuse_syscall.h"
#include "safe_write.h"

#ifndef SYS_close_range
#define SYS_close_range 436
#endif

namespace laggard {
namespace private_fds_test {

// The lowest free number of the calling thread's table.
int lowest_free() {
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ::close(fd);
  return fd;
}

TEST(PrivateFds, WhatAJobOpensTakesNoNumberOfTheCallersTable) {
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const int lowest = lowest_free();
  int job_fd = -1, caller_pipe_in_job = 0;
  pid_t job_tid = 0;
  bool job_on_private = false;
  run_with_private_fds([&] {
    job_tid = static_cast<pid_t>(::gettid());
    job_on_private = on_private_fds_thread();
    job_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // left open
    caller_pipe_in_job = ::fcntl(pipe_fds[0], F_GETFD);
  });
  ASSERT_TRUE(private_fds_isolated()) << "close_range(CLOSE_RANGE_UNSHARE) refused here";
  EXPECT_NE(job_tid, static_cast<pid_t>(::gettid()));
  EXPECT_EQ(job_tid, private_fds_thread_id());
  EXPECT_TRUE(job_on_private);
  EXPECT_FALSE(on_private_fds_thread());
  EXPECT_EQ(job_fd, 3);  // 0-2 hold /dev/null there: an empty table otherwise
  EXPECT_EQ(lowest_free(), lowest);  // was (on the caller): the job's file took it
  if (pipe_fds[0] > 3) {
    EXPECT_EQ(caller_pipe_in_job, -1);  // the caller's files are not there
  }
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
  run_with_private_fds([&] { ::close(job_fd); });
}

// As if it had run on the caller: a writer's exception must not pass for a window written.
TEST(PrivateFds, AnExceptionIsThrownAgainOnTheCallerAndTheNextJobRuns) {
  EXPECT_THROW(run_with_private_fds([] { throw std::runtime_error("job failed"); }), std::runtime_error);
  bool ran = false;
  run_with_private_fds([&] { ran = true; });
  EXPECT_TRUE(ran);
}

TEST(PrivateFds, CallersOnManyThreadsTakeTurns) {
  std::atomic<int> inside{0}, most_inside{0}, done{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int i = 0; i < 200; ++i)
        run_with_private_fds([&] {
          const int now = ++inside;
          if (now > most_inside.load()) most_inside.store(now);
          ++done;
          --inside;
        });
    });
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(done.load(), 800);
  EXPECT_EQ(most_inside.load(), 1);
}

// Linux before 5.9, or a seccomp profile without close_range: jobs run on the caller, as before
// the private table existed. In a child, with a filter answering ENOSYS.
TEST(PrivateFds, WhereCloseRangeIsRefusedJobsRunOnTheCaller) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (!test::refuse_syscall(SYS_close_range, ENOSYS)) ::_exit(2);
    pid_t job_tid = 0;
    run_with_private_fds([&] { job_tid = static_cast<pid_t>(::gettid()); });
    if (job_tid != static_cast<pid_t>(::gettid())) ::_exit(3);
    if (private_fds_isolated() || private_fds_thread_id() != 0) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: no seccomp here, 3: the job ran elsewhere, 4: said to be isolated";
}

// The run directory kept in the private table has a number there that is some file of the
// child's own after fork: forgetting laggard's descriptors in the child must not close it.
TEST(PrivateFds, AForkedChildKeepsItsOwnFileAtTheNumberOfAPrivateDescriptor) {
  namespace fs = std::filesystem;
  const fs::path run = fs::temp_directory_path() / ("laggard-private-fds-" + std::to_string(::getpid()));
  fs::remove_all(run);
  std::string err = "not run";
  std::vector<int> kept;  // the private table's descriptors after the write, 0-2 left out
  run_with_private_fds([&] {
    RunDirFd dir(run.string());
    err = dir.ok() ? dir.append_whole("a.lgr", "frame", true) : dir.error();
  });
  run_with_private_fds([&] {
    for (int fd = 3; fd < 4096; ++fd)
      if (::fcntl(fd, F_GETFD) >= 0) kept.push_back(fd);
  });
  ASSERT_EQ(err, "");
  ASSERT_EQ(kept.size(), 2u);  // the run directory and the segment
  ASSERT_TRUE(private_fds_isolated());
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Files of the child's own at the numbers of the private table's kept descriptors.
    const int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd < 0) ::_exit(2);
    for (int fd : kept)
      if (::fcntl(fd, F_GETFD) < 0 && ::dup2(null_fd, fd) != fd) ::_exit(2);
    forget_descriptors_after_fork();
    for (int fd : kept)
      if (::fcntl(fd, F_GETFD) < 0) ::_exit(3);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: cannot open, 3: a file of the child's was closed";
  fs::remove_all(run);
}

}  // namespace private_fds_test
}  // namespace laggard
