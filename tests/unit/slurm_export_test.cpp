// srun and sbatch under LD_PRELOAD: what laggard does to their --export (preload/config/slurm_export.h).
// The cluster test (tests/slurm/slurm_test.sh) runs the same cases under a real Slurm.
#include <gtest/gtest.h>

#include "slurm_export.h"

namespace laggard {
namespace slurm_export_test {

const std::vector<std::string> kOurs = {"LD_PRELOAD", "LAGGARD_ENABLE", "LAGGARD_OUT"};

SlurmExportPlan plan(const std::string& program, std::map<std::string, std::string> env,
                     std::vector<std::string> args = {"-n", "4", "./app"}) {
  return plan_slurm_export(program, map_env(env), args, kOurs);
}

TEST(SlurmExport, SrunUnderExportNonePassesLaggardsVariables) {
  // #SBATCH --export=NONE: the job's SLURM_EXPORT_ENV; srun stops reading the list at NONE.
  SlurmExportPlan p = plan("srun", {{"SLURM_EXPORT_ENV", "NONE"}});
  EXPECT_EQ(p.var, "SLURM_EXPORT_ENV");
  EXPECT_EQ(p.value, "LD_PRELOAD,LAGGARD_ENABLE,LAGGARD_OUT,NONE");
  EXPECT_TRUE(p.warning.empty());
  // A list of names of the user's own: theirs stay, ours come first.
  EXPECT_EQ(plan("srun", {{"SLURM_EXPORT_ENV", "PATH,HOME"}}).value, "LD_PRELOAD,LAGGARD_ENABLE,LAGGARD_OUT,PATH,HOME");
  // SRUN_EXPORT_ENV wins over SLURM_EXPORT_ENV in srun: that is the one to change.
  SlurmExportPlan both = plan("srun", {{"SRUN_EXPORT_ENV", "none"}, {"SLURM_EXPORT_ENV", "ALL"}});
  EXPECT_EQ(both.var, "SRUN_EXPORT_ENV");
  EXPECT_EQ(both.value, "LD_PRELOAD,LAGGARD_ENABLE,LAGGARD_OUT,none");
}

TEST(SlurmExport, LeavesWhatAlreadyPassesLdPreloadAlone) {
  for (const char* v : {"ALL", "all", "ALL,FOO=1", "LD_PRELOAD,LAGGARD_OUT", "LD_PRELOAD=/x.so"})
    EXPECT_TRUE(plan("srun", {{"SLURM_EXPORT_ENV", v}}).var.empty()) << v;
  EXPECT_TRUE(plan("srun", {}).var.empty());                              // srun's default: ALL
  EXPECT_FALSE(plan("srun", {{"SLURM_EXPORT_ENV", "NONE,ALL"}}).var.empty());  // srun stops at NONE
  EXPECT_TRUE(plan("bash", {{"SLURM_EXPORT_ENV", "NONE"}}).var.empty());  // only srun reads it for tasks
  EXPECT_TRUE(plan_slurm_export("srun", map_env({{"SLURM_EXPORT_ENV", "NONE"}}), {}, {}).var.empty());
}

TEST(SlurmExport, CommandLineExportThatDropsLdPreloadWarns) {
  // srun's own --export wins over the environment: nothing to change, one line to say.
  SlurmExportPlan p = plan("srun", {{"SLURM_EXPORT_ENV", "NONE"}}, {"--export=NONE", "-n", "2", "./app"});
  EXPECT_TRUE(p.var.empty());
  EXPECT_NE(p.warning.find("srun --export=NONE starts the tasks without LD_PRELOAD"), std::string::npos) << p.warning;
  EXPECT_NE(plan("sbatch", {}, {"--export", "NONE", "job.sh"}).warning.find("sbatch --export=NONE"), std::string::npos);
  EXPECT_NE(plan("srun", {}, {"-n", "2", "--export=PATH", "./app"}).warning.find("--export=PATH"), std::string::npos);
  EXPECT_TRUE(plan("srun", {}, {"--export=ALL,X=1", "./app"}).warning.empty());
  EXPECT_TRUE(plan("srun", {}, {"--export=LD_PRELOAD,LAGGARD_OUT", "./app"}).warning.empty());
  // The program's own arguments are not srun's.
  EXPECT_TRUE(plan("srun", {}, {"-n", "2", "./app", "--export=NONE"}).warning.empty());
  EXPECT_TRUE(plan("srun", {}, {"--", "./app", "--export=NONE"}).warning.empty());
}

}  // namespace slurm_export_test
}  // namespace laggard
