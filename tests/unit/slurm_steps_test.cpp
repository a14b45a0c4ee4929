// laggard run and SIGTERM under srun: which steps are ours (report/cli/slurm_steps.h). The cluster
// test (tests/slurm/slurm_test.sh) sends the SIGTERM under a real Slurm.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "slurm_steps.h"

namespace laggard::cli {
namespace slurm_steps_test {

// `scontrol show step --oneliner` of Slurm 22.05, two steps of job 12 and one of job 13.
const char* kSteps =
    "StepId=12.0 UserId=0 StartTime=2025-01-01T12:00:00 TimeLimit=UNLIMITED State=RUNNING Partition=debug "
    "NodeList=vm Nodes=1 CPUs=4 Tasks=4 Name=laggard-demo Network=(null) TRES=cpu=4,mem=0,node=1 ResvPorts=(null) "
    "CPUFreqReq=Default Dist=Block SrunHost:Pid=vm:4242\n"
    "StepId=12.1 UserId=0 State=RUNNING Tasks=2 Name=other SrunHost:Pid=vm:5000\n"
    "StepId=13.0 UserId=0 State=RUNNING Tasks=2 Name=elsewhere SrunHost:Pid=login2:4242\n";

TEST(SlurmSteps, OnlyStepsOfOurSrunsOnThisHost) {
  std::vector<SrunStep> steps = steps_of_sruns(kSteps, "vm.cluster.example", {4242, 7});
  ASSERT_EQ(steps.size(), 1u);
  EXPECT_EQ(steps[0].step, "12.0");
  EXPECT_EQ(steps[0].srun_pid, 4242);
  EXPECT_EQ(steps_of_sruns(kSteps, "login2", {4242, 5000}).size(), 1u);
  EXPECT_TRUE(steps_of_sruns(kSteps, "vm", {}).empty());
  EXPECT_TRUE(steps_of_sruns("", "vm", {4242}).empty());
  EXPECT_TRUE(steps_of_sruns("No job steps in the system\n", "vm", {4242}).empty());
  EXPECT_TRUE(steps_of_sruns("StepId=1.0 SrunHost:Pid=vm:42x\nStepId=1.1 SrunHost:Pid=vm\n", "vm", {42}).empty());
}

TEST(SlurmSteps, DescendantsReachGrandchildren) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  if (child == 0) {  // a child that starts a grandchild, then waits to be killed
    close(ready[0]);
    pid_t grandchild = fork();
    if (grandchild == 0) pause();
    ssize_t ignored = write(ready[1], &grandchild, sizeof grandchild);
    (void)ignored;
    pause();
  }
  close(ready[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(read(ready[0], &grandchild, sizeof grandchild), static_cast<ssize_t>(sizeof grandchild));
  close(ready[0]);
  std::set<long> found = descendants_of(static_cast<long>(getpid()));
  EXPECT_TRUE(found.count(child));
  EXPECT_TRUE(found.count(grandchild));
  EXPECT_FALSE(found.count(static_cast<long>(getpid())));
  kill(grandchild, SIGKILL);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

}  // namespace slurm_steps_test
}  // namespace laggard::cli
