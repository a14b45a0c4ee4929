// End to end: 4 real demo processes under `laggard run --nproc 4`, then `laggard report`.
#include <set>

#include "harness.h"

namespace laggard::test {
namespace straggler_test {

using EndToEnd = Scratch;

// The stragglers of ranks other than `injected` that a test cannot excuse. On a machine that kept the demo waiting for a CPU
// (last_run_contended) a sleeping rank wakes late for several steps at a time, and its own history
// rightly flags that (seen at load 10 on 2 cores: ranks 0 and 3 beside the injected one, in about
// half the runs); only such individual (transient) findings are excused there, never a whole-run
// relative one. On a quiet machine nothing but the injected rank may be flagged.
std::vector<nlohmann::json> unexpected_stragglers(const nlohmann::json& rep, const std::set<int>& injected,
                                                  bool contended) {
  std::vector<nlohmann::json> out;
  for (const auto& s : rep["stragglers"])
    if (!injected.count(s["rank"].get<int>()) && !(contended && s["metric"] == "individual")) out.push_back(s);
  return out;
}

bool has_straggler(const nlohmann::json& rep, int rank, const std::string& section, const std::string& metric) {
  for (const auto& s : rep["stragglers"])
    if (s["rank"] == rank && s["section"] == section && s["metric"] == metric && s["scope"] == "section") return true;
  return false;
}

TEST_F(EndToEnd, SlowRankAndSectionAreReported) {
  ProcessResult run = run_demo(4, {"--steps", "40", "--slow-rank", "2", "--slow-section", "backward",
                                   "--slow-factor", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json rep = report();
  EXPECT_TRUE(rep["problems"].empty()) << rep["problems"].dump();
  EXPECT_EQ(rep["world_size"], 4);
  ASSERT_EQ(rep["ranks"].size(), 4u);
  EXPECT_TRUE(has_straggler(rep, 2, "backward", "relative")) << rep["stragglers"].dump();
  EXPECT_TRUE(unexpected_stragglers(rep, {2}, last_run_contended).empty()) << rep["stragglers"].dump();
  const auto& bwd = rep["ranks"][2]["sections"]["backward"];
  EXPECT_LT(bwd["relative_score"].get<double>(), 0.6);
  EXPECT_GT(rep["ranks"][0]["sections"]["backward"]["relative_score"].get<double>(), 0.9);
  EXPECT_EQ(bwd["count"], 40);
}

TEST_F(EndToEnd, HealthyRunHasNoStragglersAndEverySection) {
  ProcessResult run = run_demo(4, {"--steps", "40"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json rep = report();
  EXPECT_TRUE(unexpected_stragglers(rep, {}, last_run_contended).empty()) << rep["stragglers"].dump();
  EXPECT_TRUE(rep["problems"].empty()) << rep["problems"].dump();
  ASSERT_EQ(rep["ranks"].size(), 4u);
  for (const auto& r : rep["ranks"]) {
    EXPECT_TRUE(r["final"].get<bool>());
    for (const char* s : {"step", "forward", "attention", "mlp", "backward", "demo:optimizer", "data_load"}) {
      ASSERT_TRUE(r["sections"].contains(s)) << s;
      EXPECT_EQ(r["sections"][s]["count"], 40) << s;
    }
  }
  std::map<std::string, std::string> parents;
  for (const auto& s : rep["sections"]) parents[s["name"]] = s["parent"].is_null() ? "" : s["parent"].get<std::string>();
  EXPECT_EQ(parents["attention"], "forward");
  EXPECT_EQ(parents["forward"], "step");
  EXPECT_EQ(parents["demo:optimizer"], "");  // pushed inside "step", of another domain: never its child (issue 25)
  EXPECT_EQ(parents["step"], "");
}

TEST_F(EndToEnd, TransientSlowdownIsAnIndividualStraggler) {
  // Rank 1's backward doubles for the last 10 of 40 steps: its own history flags it, while
  // its whole-run median (and so its relative score) stays normal.
  ProcessResult run = run_demo(4, {"--steps", "40", "--slow-rank", "1", "--slow-section", "backward",
                                   "--slow-factor", "2", "--slow-steps", "30:40"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json rep = report();
  EXPECT_TRUE(has_straggler(rep, 1, "backward", "individual")) << rep["stragglers"].dump();
  EXPECT_FALSE(has_straggler(rep, 1, "backward", "relative")) << rep["stragglers"].dump();
  EXPECT_TRUE(unexpected_stragglers(rep, {1}, last_run_contended).empty()) << rep["stragglers"].dump();
}

TEST_F(EndToEnd, KilledRankKeepsItsFlushedDataAndIsListed) {
  ProcessResult run = run_demo(4, {"--steps", "40", "--crash-rank", "2", "--crash-step", "25"});
  EXPECT_EQ(run.exit_code, 128 + SIGKILL) << run.err;  // laggard run passes the failure on
  nlohmann::json rep = report();
  ASSERT_EQ(rep["ranks"].size(), 4u);
  const auto& r2 = rep["ranks"][2];
  EXPECT_FALSE(r2["final"].get<bool>());
  int steps = r2["sections"]["step"]["count"].get<int>();
  EXPECT_GT(steps, 0);
  EXPECT_LE(steps, 25);
  EXPECT_EQ(rep["ranks"][1]["sections"]["step"]["count"], 40);
  bool listed = false;
  for (const auto& p : rep["problems"]) listed |= p["kind"] == "incomplete_rank" && p["rank"] == 2;
  EXPECT_TRUE(listed) << rep["problems"].dump();
}

TEST_F(EndToEnd, TextReportNamesTheStraggler) {
  ProcessResult run = run_demo(2, {"--steps", "20", "--slow-rank", "1", "--slow-section", "forward",
                                   "--slow-factor", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  ProcessResult text = run_process({kLaggard, "report", out()}, clean_env());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("Stragglers"), std::string::npos);
  EXPECT_NE(text.out.find("forward"), std::string::npos);
  EXPECT_EQ(text.out.find("Stragglers (score below 0.75 relative / 0.75 individual): none"), std::string::npos);
  ProcessResult gate = run_process({kLaggard, "report", out(), "--fail-on-stragglers"}, clean_env());
  EXPECT_EQ(gate.exit_code, 3);
}

TEST_F(EndToEnd, RunWithReportFlagPrintsTheReport) {
  std::vector<std::string> argv = {kLaggard, "run", "--nproc", "2", "--flush-s", "0.2", "--out", out(),
                                   "--report", "--", kDemo, "--steps", "5"};
  ProcessResult r = run_process(argv, clean_env());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("laggard report: run"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("rank file(s) in"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace laggard::test

namespace laggard::test {
namespace straggler_test {

TEST_F(EndToEnd, ReportCutsAndDiffOfTwoRuns) {
  ASSERT_EQ(run_demo(4, {"--steps", "12"}).exit_code, 0);
  std::string first_run;
  for (const auto& e : std::filesystem::directory_iterator(out())) first_run = e.path().string();
  ASSERT_EQ(run_demo(4, {"--steps", "12", "--slow-rank", "1", "--slow-section", "backward", "--slow-factor", "3"})
                .exit_code,
            0);
  // The newest run is the slow one; a cut to ranks 2-3 hides rank 1's problem.
  nlohmann::json all = report();
  EXPECT_EQ(all["other_runs"].size(), 1u);
  EXPECT_FALSE(all["stragglers"].empty());
  EXPECT_EQ(all["verdict"]["findings"][0]["rank"], 1);
  EXPECT_EQ(all["steps"]["count"], 12);
  nlohmann::json cut = report({"--ranks", "2-3"});
  EXPECT_EQ(cut["ranks"].size(), 2u);
  // 12 steps of 2 ranks: on a contended machine a true delay of rank 2 or 3 in most steps can move a
  // short section's whole-run median too (seen once in 40 runs at load 9), so there only rank 1's
  // problem must be gone; on a quiet machine every straggler.
  for (const auto& s : cut["stragglers"]) {
    EXPECT_NE(s["rank"], 1) << cut["stragglers"].dump();
  }
  if (!last_run_contended) {
    EXPECT_TRUE(cut["stragglers"].empty()) << cut["stragglers"].dump();
  }
  nlohmann::json steps = report({"--steps", "3:5"});
  EXPECT_EQ(steps["steps"]["count"], 3);
  ProcessResult bad = run_process({kLaggard, "report", out(), "--ranks", "x"}, clean_env());
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad rank list"), std::string::npos);

  std::string second_run;
  for (const auto& e : std::filesystem::directory_iterator(out()))
    if (e.path().string() != first_run) second_run = e.path().string();
  // Sleep-based sections on a busy machine move by 10-15 % between two runs by themselves: the
  // threshold sits between that noise and the injected +50 %.
  ProcessResult diff =
      run_process({kLaggard, "diff", first_run, second_run, "--format", "json", "--threshold", "0.3"}, clean_env());
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  nlohmann::json d = nlohmann::json::parse(diff.out);
  std::map<std::string, std::string> status;
  for (const auto& e : d["sections"]) status[e["name"]] = e["status"];
  EXPECT_EQ(status["backward"], "changed");  // rank 1 of 4 tripled: +50 % total time per rank
  EXPECT_EQ(status["attention"], "same");
  ProcessResult text = run_process({kLaggard, "diff", first_run, second_run}, clean_env());
  EXPECT_NE(text.out.find("NVTX sections"), std::string::npos) << text.out;

  std::string trace_file = dir + "/trace.json";
  ProcessResult trace = run_process({kLaggard, "trace", out(), "--ranks", "1", "-o", trace_file}, clean_env());
  ASSERT_EQ(trace.exit_code, 0) << trace.err;
  nlohmann::json t = nlohmann::json::parse(read_file(trace_file));
  std::set<int> pids;
  for (const auto& e : t["traceEvents"]) pids.insert(e["pid"].get<int>());
  EXPECT_EQ(pids, std::set<int>{1});
  EXPECT_GT(t["traceEvents"].size(), 12u * 7);  // 12 steps x 7 sections at least

  // A rank the run does not have: an error, and no empty trace (issue 10 item 10).
  std::string none_file = dir + "/none.json";
  ProcessResult none = run_process({kLaggard, "trace", out(), "--ranks", "9", "-o", none_file}, clean_env());
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("the run has no rank 9 (it has ranks 0-3)"), std::string::npos) << none.err;
  EXPECT_FALSE(std::filesystem::exists(none_file));

  // --steps bounds the trace; arrows lead from launches (none in this CPU-only demo: no arrows).
  std::string steps_file = dir + "/steps.json";
  ProcessResult two = run_process({kLaggard, "trace", out(), "--steps", "3:4", "-o", steps_file}, clean_env());
  ASSERT_EQ(two.exit_code, 0) << two.err;
  nlohmann::json ts = nlohmann::json::parse(read_file(steps_file));
  size_t steps_in = 0;
  for (const auto& e : ts["traceEvents"])
    if (e["name"] == "step" && e["ph"] == "X") ++steps_in;
  EXPECT_EQ(steps_in, 4u * 2);  // 4 ranks x steps 3-4

  // --format csv: one file per table in the directory -o names (issue 15).
  std::string csv_dir = dir + "/csv";
  ProcessResult csv = run_process({kLaggard, "report", out(), "--format", "csv", "-o", csv_dir}, clean_env());
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  std::string stragglers = read_file(csv_dir + "/stragglers.csv");
  EXPECT_EQ(stragglers.rfind("rank,host,scope,section,metric,score,threshold,whole_run,windows\n", 0), 0u) << stragglers;
  EXPECT_NE(stragglers.find("\n1,"), std::string::npos) << stragglers;  // the slow rank
}

}  // namespace
}  // namespace laggard::test
