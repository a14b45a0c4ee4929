#include <gtest/gtest.h>

#include "rank_identity.h"

namespace laggard {
namespace rank_identity_test {

RankResult detect(std::map<std::string, std::string> vars) { return detect_rank(map_env(vars), "node7", 4242); }

TEST(RankIdentity, NoLauncherVariablesMeansNotARank) {
  RankResult r = detect({{"PATH", "/bin"}, {"LOCAL_RANK", "0"}});
  EXPECT_FALSE(r.identity.has_value());
}

TEST(RankIdentity, Torchrun) {
  RankResult r = detect({{"RANK", "5"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "8"}, {"TORCHELASTIC_RUN_ID", "job42"}});
  ASSERT_TRUE(r.identity);
  EXPECT_EQ(r.identity->rank, 5);
  EXPECT_EQ(r.identity->local_rank, 1);
  EXPECT_EQ(r.identity->world_size, 8);
  EXPECT_EQ(r.identity->rank_source, "RANK");
  EXPECT_EQ(r.identity->run_id, "job42");
}

TEST(RankIdentity, TorchrunRestartsAreSeparateRuns) {
  RankResult r = detect({{"RANK", "0"}, {"TORCHELASTIC_RUN_ID", "job42"}, {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_EQ(r.identity->run_id, "job42.restart2");
}

TEST(RankIdentity, TorchrunDefaultRunIdIsIgnored) {
  RankResult r = detect({{"RANK", "0"}, {"TORCHELASTIC_RUN_ID", "none"}, {"SLURM_JOB_ID", "991"}, {"SLURM_STEP_ID", "3"}});
  EXPECT_EQ(r.identity->run_id, "slurm-991.3");
}

TEST(RankIdentity, Slurm) {
  RankResult r = detect({{"SLURM_PROCID", "12"}, {"SLURM_LOCALID", "4"}, {"SLURM_NTASKS", "16"}, {"SLURM_JOB_ID", "77"},
                         {"SLURM_STEP_ID", "0"}});
  ASSERT_TRUE(r.identity);
  EXPECT_EQ(r.identity->rank, 12);
  EXPECT_EQ(r.identity->local_rank, 4);
  EXPECT_EQ(r.identity->world_size, 16);
  EXPECT_EQ(r.identity->rank_source, "SLURM_PROCID");
  EXPECT_EQ(r.identity->run_id, "slurm-77.0");
  EXPECT_EQ(r.identity->run_id_source, "SLURM_JOB_ID + SLURM_STEP_ID");
}

// What slurmstepd gives the batch script (seen under Slurm 22.05): SLURM_PROCID and SLURM_NTASKS,
// no step id. It, and srun or mpirun started from it, are launchers, not rank 0.
std::map<std::string, std::string> batch_script() {
  return {{"SLURM_JOB_ID", "77"}, {"SLURM_PROCID", "0"}, {"SLURM_LOCALID", "0"}, {"SLURM_NTASKS", "4"}};
}

TEST(RankIdentity, SlurmBatchScriptIsNotARank) {
  EXPECT_FALSE(detect(batch_script()).identity.has_value());
  for (const char* special : {"4294967290", "4294967291", "4294967292", "4294967293", "-5", "batch"}) {
    auto vars = batch_script();
    vars["SLURM_STEP_ID"] = special;  // the interactive, batch, extern and pending steps
    EXPECT_FALSE(detect(vars).identity.has_value()) << special;
  }
  auto old_name = batch_script();
  old_name["SLURM_STEPID"] = "3";  // the older spelling alone still makes a step
  ASSERT_TRUE(detect(old_name).identity.has_value());
  EXPECT_EQ(detect(old_name).identity->run_id, "slurm-77.3");
}

TEST(RankIdentity, RanksStartedInTheBatchScriptTakeNoWorldFromIt) {
  auto vars = batch_script();
  vars["LAGGARD_RANK"] = "2";  // the batch script's SLURM_NTASKS is not this launch's world
  ASSERT_TRUE(detect(vars).identity.has_value());
  EXPECT_EQ(detect(vars).identity->world_size, -1);
}

TEST(RankIdentity, OneRunPerLaunchInsideLaggardRun) {
  // laggard run -- sbatch: the job's two srun steps are two runs under laggard run's id.
  std::map<std::string, std::string> step = {{"SLURM_PROCID", "1"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"},
                                             {"LAGGARD_RUN_PREFIX", "20250101-120000-abcd"}};
  EXPECT_EQ(detect(step).identity->run_id, "20250101-120000-abcd.slurm-77.0");
  EXPECT_EQ(detect(step).identity->run_id_source, "LAGGARD_RUN_PREFIX + SLURM_JOB_ID + SLURM_STEP_ID");
  step["SLURM_STEP_ID"] = "1";
  EXPECT_EQ(detect(step).identity->run_id, "20250101-120000-abcd.slurm-77.1");
  // laggard run --nproc 4: no launcher inside, the id alone.
  RankResult local = detect({{"RANK", "3"}, {"LAGGARD_RUN_PREFIX", "20250101-120000-abcd"}});
  EXPECT_EQ(local.identity->run_id, "20250101-120000-abcd");
  // A LAGGARD_RUN_ID of the user's own is kept as it is, whatever runs inside.
  step["LAGGARD_RUN_ID"] = "mine";
  EXPECT_EQ(detect(step).identity->run_id, "mine");
}

TEST(RankIdentity, TwoMpirunsInOneBatchJobAreTwoRuns) {
  // Open MPI's mpirun in the batch script: its ranks have no step of their own; its job id
  // tells the launches apart, and is the same on nodes whose ranks came through an srun step.
  auto first = batch_script();
  first["OMPI_COMM_WORLD_RANK"] = "1";
  first["OMPI_MCA_ess_base_jobid"] = "3456237569";
  EXPECT_EQ(detect(first).identity->run_id, "slurm-77.ompi-3456237569");
  first["SLURM_STEP_ID"] = "0";  // a rank on another node, started by orted in an srun step
  EXPECT_EQ(detect(first).identity->run_id, "slurm-77.ompi-3456237569");
  auto second = batch_script();
  second["OMPI_COMM_WORLD_RANK"] = "1";
  second["OMPI_MCA_ess_base_jobid"] = "3456303105";
  EXPECT_EQ(detect(second).identity->run_id, "slurm-77.ompi-3456303105");
  // A launcher naming nothing (torchrun's default rendezvous) in the batch script: its pid does.
  auto torch = batch_script();
  torch["RANK"] = "0";
  torch["TORCHELASTIC_RUN_ID"] = "none";
  EXPECT_EQ(detect(torch).identity->run_id, "slurm-77.local-node7-4242");
}

TEST(RankIdentity, SrunPmixNamespaceIsTheStep) {
  RankResult r = detect({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "slurm.pmix.77.4"}, {"SLURM_PROCID", "2"},
                         {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "4"}});
  EXPECT_EQ(r.identity->run_id, "slurm-77.4");
}

TEST(RankIdentity, RequeuesAndElasticRestartsAreNewRuns) {
  std::map<std::string, std::string> step = {{"SLURM_PROCID", "0"}, {"SLURM_JOB_ID", "77"}, {"SLURM_STEP_ID", "0"}};
  EXPECT_EQ(detect(step).identity->run_id, "slurm-77.0");
  step["SLURM_RESTART_COUNT"] = "0";
  EXPECT_EQ(detect(step).identity->run_id, "slurm-77.0");
  step["SLURM_RESTART_COUNT"] = "2";
  EXPECT_EQ(detect(step).identity->run_id, "slurm-77.0.requeue2");
  EXPECT_EQ(detect(step).identity->run_id_source, "SLURM_JOB_ID + SLURM_STEP_ID + SLURM_RESTART_COUNT");
  // torchrun inside the step: its restarts keep the step (and torchrun's agent pid).
  step["RANK"] = "5";
  step["TORCHELASTIC_RUN_ID"] = "77";
  step["TORCHELASTIC_RESTART_COUNT"] = "1";
  EXPECT_EQ(detect(step).identity->run_id, "slurm-77.0.requeue2.restart1");
  RankResult local = detect({{"RANK", "0"}, {"TORCHELASTIC_RUN_ID", "none"}, {"TORCHELASTIC_RESTART_COUNT", "3"}});
  EXPECT_EQ(local.identity->run_id, "local-node7-4242.restart3");
  RankResult garbage = detect({{"RANK", "0"}, {"TORCHELASTIC_RUN_ID", "j"}, {"TORCHELASTIC_RESTART_COUNT", "x"}});
  EXPECT_EQ(garbage.identity->run_id, "j");
}

TEST(RankIdentity, OpenMpiAndPmi) {
  RankResult ompi = detect({{"OMPI_COMM_WORLD_RANK", "3"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "3"}, {"OMPI_COMM_WORLD_SIZE", "4"}});
  EXPECT_EQ(ompi.identity->rank, 3);
  EXPECT_EQ(ompi.identity->world_size, 4);
  RankResult pmi = detect({{"PMI_RANK", "2"}, {"PMI_SIZE", "3"}});
  EXPECT_EQ(pmi.identity->rank, 2);
  EXPECT_EQ(pmi.identity->rank_source, "PMI_RANK");
  RankResult pmix = detect({{"PMIX_RANK", "1"}, {"PMIX_NAMESPACE", "ns/1"}});
  EXPECT_EQ(pmix.identity->rank, 1);
  EXPECT_EQ(pmix.identity->run_id, "pmix-ns_1");  // sanitized for a directory name
}

TEST(RankIdentity, TorchrunWinsOverSlurmItRunsIn) {
  RankResult r = detect({{"RANK", "9"}, {"SLURM_PROCID", "1"}, {"WORLD_SIZE", "16"}});
  EXPECT_EQ(r.identity->rank, 9);
  EXPECT_EQ(r.identity->world_size, 16);
}

TEST(RankIdentity, OverrideTakesRestFromLauncher) {
  RankResult r = detect({{"LAGGARD_RANK", "6"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"},
                         {"SLURM_STEP_ID", "2"}});
  EXPECT_EQ(r.identity->rank, 6);
  EXPECT_EQ(r.identity->rank_source, "LAGGARD_RANK");
  EXPECT_EQ(r.identity->world_size, 8);
  EXPECT_EQ(r.identity->local_rank, 0);
}

TEST(RankIdentity, BadValuesWarnAndFallThrough) {
  RankResult r = detect({{"RANK", "abc"}, {"SLURM_PROCID", "2"}, {"SLURM_STEP_ID", "0"}});
  ASSERT_TRUE(r.identity);
  EXPECT_EQ(r.identity->rank, 2);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("RANK='abc'"), std::string::npos);
}

TEST(RankIdentity, RankOutsideWorldSize) {
  RankResult r = detect({{"RANK", "8"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(r.identity->world_size, -1);
  EXPECT_EQ(r.warnings.size(), 1u);
}

TEST(RankIdentity, FallbackRunIdUsesHostAndParent) {
  RankResult r = detect({{"RANK", "0"}});
  EXPECT_EQ(r.identity->run_id, "local-node7-4242");
  RankResult given = detect({{"RANK", "0"}, {"LAGGARD_RUN_ID", "../../etc"}});
  EXPECT_EQ(given.identity->run_id, ".._.._etc");
}

TEST(RankIdentity, SanitizeNeverEmpty) {
  EXPECT_EQ(sanitize_for_path(""), "run");
  EXPECT_EQ(sanitize_for_path(".."), "run");
  EXPECT_EQ(sanitize_for_path("a b/c"), "a_b_c");
}

}  // namespace
}  // namespace laggard
