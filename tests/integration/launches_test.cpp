// One run per launch (issue 28) without a Slurm cluster: launches inside `laggard run` with the
// variables Slurm and torchrun give their processes, set by hand. tests/slurm/slurm_test.sh runs
// the same under a real Slurm (it needs root).
#include <signal.h>

#include <chrono>
#include <set>
#include <thread>

#include "harness.h"

namespace laggard::test {
namespace launches_test {

using Launches = Scratch;

// Every run directory in OUT and the ranks whose files it holds.
std::map<std::string, std::set<int>> runs_in(const std::string& out) {
  std::map<std::string, std::set<int>> runs;
  std::error_code ec;
  for (const auto& d : std::filesystem::directory_iterator(out, ec))
    for (const auto& f : std::filesystem::directory_iterator(d.path())) {
      std::string name = f.path().filename().string();
      if (name.rfind("rank", 0) == 0) runs[d.path().filename().string()].insert(std::stoi(name.substr(4, 5)));
    }
  return runs;
}

// `laggard run -- sh -c SCRIPT`, the demo as $DEMO.
ProcessResult laggard_run_sh(const std::string& out, const std::string& script) {
  ProcessOptions o = clean_env();
  o.env["DEMO"] = kDemo;
  return run_process({kLaggard, "run", "--flush-s", "0.2", "--out", out, "--", "sh", "-c", script}, o);
}

TEST_F(Launches, EachLaunchInsideLaggardRunIsItsOwnRun) {
  // Two srun steps of one job, an elastic restart, and the batch script's own program.
  ProcessResult r = laggard_run_sh(out(),
      "export SLURM_JOB_ID=77 SLURM_NTASKS=2;"
      "SLURM_PROCID=0 \"$DEMO\" --steps 3 --step-ms 2;"  // the batch script itself: not rank 0
      "SLURM_STEP_ID=0 SLURM_PROCID=1 \"$DEMO\" --steps 3 --step-ms 2 &"
      "SLURM_STEP_ID=0 SLURM_PROCID=0 \"$DEMO\" --steps 3 --step-ms 2; wait;"
      "SLURM_STEP_ID=1 SLURM_PROCID=1 \"$DEMO\" --steps 3 --step-ms 2;"
      "SLURM_STEP_ID=1 SLURM_PROCID=1 SLURM_RESTART_COUNT=1 \"$DEMO\" --steps 3 --step-ms 2;"
      "unset SLURM_JOB_ID; RANK=0 TORCHELASTIC_RUN_ID=none TORCHELASTIC_RESTART_COUNT=2 \"$DEMO\" --steps 3 --step-ms 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::set<int>> runs = runs_in(out());
  ASSERT_EQ(runs.size(), 4u) << r.err;
  std::string id = runs.begin()->first.substr(0, runs.begin()->first.find('.'));
  EXPECT_EQ(runs[id + ".restart2"], std::set<int>{0});
  EXPECT_EQ(runs[id + ".slurm-77.0"], (std::set<int>{0, 1}));
  EXPECT_EQ(runs[id + ".slurm-77.1"], std::set<int>{1});  // the demo's rank is laggard's: SLURM_PROCID
  EXPECT_EQ(runs[id + ".slurm-77.1.requeue1"], std::set<int>{1});
  for (const auto& [run, ranks] : runs)
    EXPECT_NE(r.err.find("laggard: run " + run + ": " + std::to_string(ranks.size()) + " rank file(s)"),
              std::string::npos) << r.err;
}

TEST_F(Launches, TheBatchScriptWritesNothingAndWarnsNothing) {
  ProcessOptions o = clean_env();
  o.env["SLURM_JOB_ID"] = "78";
  o.env["SLURM_PROCID"] = "0";
  o.env["SLURM_NTASKS"] = "4";
  o.env["LAGGARD_WINDOWS_PER_FILE"] = "zero";  // a rank would warn about it
  ProcessResult r = run_process({kLaggard, "run", "--out", out(), "--", kDemo, "--steps", "3", "--step-ms", "2"}, o);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(runs_in(out()).empty());
  EXPECT_EQ(r.err.find("LAGGARD_WINDOWS_PER_FILE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no rank files were written"), std::string::npos) << r.err;
}

// Without srun below it, laggard run passes SIGTERM to what it started, as before issue 28 (its
// signals now come through a signalfd): every rank writes its last window on signal 15.
TEST_F(Launches, SigtermReachesEveryRankOfLaggardRun) {
  ProcessOptions o = clean_env();
  o.env["LAGGARD_FILE_FORMAT"] = "json";
  Running p = start_process({kLaggard, "run", "--nproc", "2", "--flush-s", "0.2", "--out", out(), "--", kDemo,
                             "--steps", "100000", "--step-ms", "10"}, o);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  auto both_flushed = [&] {
    std::map<std::string, std::set<int>> runs = runs_in(out());
    return runs.size() == 1 && runs.begin()->second.size() == 2;
  };
  while (!both_flushed() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(both_flushed());
  kill(p.pid, SIGTERM);
  ProcessResult r = wait_process(p, 60);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.err;  // --nproc: the first failing rank's status
  const std::string run = out() + "/" + runs_in(out()).begin()->first;
  for (const auto& f : std::filesystem::directory_iterator(run)) {
    if (f.path().filename().string().rfind("rank", 0) != 0) continue;
    EXPECT_EQ(nlohmann::json::parse(read_file(f.path().string()))["signal"], SIGTERM) << f.path();
  }
}

}  // namespace launches_test
}  // namespace laggard::test
