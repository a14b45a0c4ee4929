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
  RankResult r = detect({{"SLURM_PROCID", "12"}, {"SLURM_LOCALID", "4"}, {"SLURM_NTASKS", "16"}, {"SLURM_JOB_ID", "77"}});
  ASSERT_TRUE(r.identity);
  EXPECT_EQ(r.identity->rank, 12);
  EXPECT_EQ(r.identity->local_rank, 4);
  EXPECT_EQ(r.identity->world_size, 16);
  EXPECT_EQ(r.identity->rank_source, "SLURM_PROCID");
  EXPECT_EQ(r.identity->run_id, "slurm-77");
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
  RankResult r = detect({{"LAGGARD_RANK", "6"}, {"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "8"}, {"SLURM_LOCALID", "0"}});
  EXPECT_EQ(r.identity->rank, 6);
  EXPECT_EQ(r.identity->rank_source, "LAGGARD_RANK");
  EXPECT_EQ(r.identity->world_size, 8);
  EXPECT_EQ(r.identity->local_rank, 0);
}

TEST(RankIdentity, BadValuesWarnAndFallThrough) {
  RankResult r = detect({{"RANK", "abc"}, {"SLURM_PROCID", "2"}});
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
