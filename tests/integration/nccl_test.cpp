// End to end without a GPU: 4 ranks of laggard-fake-nccl (which loads the profiler plugin as
// NCCL does) under `laggard run --nproc 4`, then `laggard report`. One rank reaches every
// collective late; the others' step times are the same as its own, the collectives are not.
#include <chrono>
#include <set>

#include "harness.h"

namespace laggard::test {
namespace {

namespace fs = std::filesystem;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class NcclEndToEnd : public Scratch {
 protected:
  ProcessResult run_fake(int nproc, const std::vector<std::string>& args,
                         const std::map<std::string, std::optional<std::string>>& env = {}) {
    std::vector<std::string> argv = {kLaggard, "run", "--nproc", std::to_string(nproc), "--flush-s", "0.2",
                                     "--out", out(), "--", kFakeNccl, "--base-ns", std::to_string(now_ns())};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions o = clean_env();
    for (const auto& [k, v] : env) o.env[k] = v;
    return run_process(argv, o);
  }

  static std::set<int> comm_stragglers(const nlohmann::json& rep) {
    std::set<int> ranks;
    for (const auto& s : rep["stragglers"])
      if (s["scope"] == "comm") ranks.insert(s["rank"].get<int>());
    return ranks;
  }

  void expect_late_rank_blamed(const nlohmann::json& rep, int late, int steps) {
    const auto& comm = rep["comm"];
    EXPECT_EQ(comm["collectives"], steps) << comm.dump();
    EXPECT_EQ(comm["incomplete"], 0) << comm.dump();
    ASSERT_EQ(comm["ranks"].size(), 4u);
    double blame_late = comm["ranks"][late]["blame_ms"].get<double>();
    for (const auto& r : comm["ranks"]) {
      if (r["rank"] == late) {
        EXPECT_EQ(r["last_count"], steps);
        EXPECT_LT(r["waited_ms"].get<double>(), 0.01 * steps);
      } else {
        EXPECT_EQ(r["last_count"], 0);
        EXPECT_GT(r["waited_ms"].get<double>(), 2.5 * steps);  // ~3 ms per collective
        EXPECT_LT(r["blame_ms"].get<double>(), 0.01 * blame_late);
      }
    }
    EXPECT_EQ(comm_stragglers(rep), std::set<int>{late}) << rep["stragglers"].dump();
    ASSERT_EQ(comm["communicators"].size(), 1u);
    EXPECT_EQ(comm["communicators"][0]["name"], "world");
    EXPECT_EQ(comm["communicators"][0]["ranks"], nlohmann::json({0, 1, 2, 3}));
  }
};

TEST_F(NcclEndToEnd, LateRankIsBlamedAndNothingIsLostWithoutFinalize) {
  ProcessResult run = run_fake(4, {"--steps", "60", "--late-rank", "2", "--late-ms", "3"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("warning"), std::string::npos) << run.err;
  EXPECT_NE(run.out.find("plugin 'laggard' init rc=0 mask=0x46 context=set"), std::string::npos) << run.out;
  nlohmann::json rep = report();
  expect_late_rank_blamed(rep, 2, 60);
  EXPECT_EQ(rep["comm"]["p2p"], 4 * 6);
  ASSERT_FALSE(rep["comm"]["worst_waits"].empty());
  EXPECT_EQ(rep["comm"]["worst_waits"][0]["last_ranks"], nlohmann::json({2}));
  EXPECT_EQ(rep["comm"]["ranks"][0]["p2p_ops"], 6);
  for (const auto& f : rank_files()) {
    std::string text = read_file(f.string());
    EXPECT_NE(text.find("\"nccl\":\"on\""), std::string::npos) << f;
    EXPECT_NE(text.find("\"schema_version\":4"), std::string::npos) << f;
  }
  // The text report names it too.
  ProcessResult text = run_process({kLaggard, "report", out()}, clean_env());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("NCCL collectives: 60 matched"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("comm world"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("last_arrival"), std::string::npos) << text.out;
  ProcessResult gate = run_process({kLaggard, "report", out(), "--fail-on-stragglers"}, clean_env());
  EXPECT_EQ(gate.exit_code, 3);
}

TEST_F(NcclEndToEnd, HealthyRunHasNoCommStraggler) {
  ProcessResult run = run_fake(4, {"--steps", "40"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  nlohmann::json rep = report();
  EXPECT_EQ(rep["comm"]["collectives"], 40);
  EXPECT_TRUE(comm_stragglers(rep).empty()) << rep["stragglers"].dump();
  EXPECT_TRUE(rep["problems"].empty()) << rep["problems"].dump();
}

// Which NCCL_PROFILER_PLUGIN values reach the plugin, by NCCL loader version.
TEST_F(NcclEndToEnd, TheSonameWorksWithTheOldestAndNewestLoaders) {
  for (const char* loader : {"2.27.3", "2.28"}) {
    fs::remove_all(out());
    ProcessResult run = run_fake(4, {"--steps", "30", "--late-rank", "1", "--loader", loader});
    ASSERT_EQ(run.exit_code, 0) << loader << run.err;
    expect_late_rank_blamed(report(), 1, 30);
  }
}

TEST_F(NcclEndToEnd, EachInterfaceVersionWorks) {
  for (const char* abi : {"4", "5", "6"}) {
    fs::remove_all(out());
    ProcessResult run = run_fake(4, {"--steps", "30", "--late-rank", "3", "--abi", abi});
    ASSERT_EQ(run.exit_code, 0) << abi << run.err;
    expect_late_rank_blamed(report(), 3, 30);
  }
}

TEST_F(NcclEndToEnd, PresetValuesThatMeanLaggardAreKeptSilently) {
  // STATIC_PLUGIN finds the preloaded library's tables; an absolute path to it is the same file.
  for (std::string value : {std::string("STATIC_PLUGIN"), fs::canonical(kLibrary).string()}) {
    fs::remove_all(out());
    ProcessResult run = run_fake(4, {"--steps", "30", "--late-rank", "0"}, {{"NCCL_PROFILER_PLUGIN", value}});
    ASSERT_EQ(run.exit_code, 0) << value << run.err;
    EXPECT_EQ(run.err.find("warning"), std::string::npos) << run.err;
    expect_late_rank_blamed(report(), 0, 30);
  }
}

TEST_F(NcclEndToEnd, AnotherProfilerPluginIsLeftAloneWithOneWarningPerRank) {
  ProcessResult run = run_fake(2, {"--steps", "5"},
                               {{"NCCL_PROFILER_PLUGIN", "/nonexistent/libnccl-profiler-inspector.so"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  size_t warnings = 0;
  for (size_t p = run.err.find("NCCL_PROFILER_PLUGIN is already set"); p != std::string::npos;
       p = run.err.find("NCCL_PROFILER_PLUGIN is already set", p + 1))
    ++warnings;
  EXPECT_EQ(warnings, 2u) << run.err;
  EXPECT_NE(run.out.find("no profiler plugin (NCCL_PROFILER_PLUGIN=/nonexistent/libnccl-profiler-inspector.so)"),
            std::string::npos)
      << run.out;
}

TEST_F(NcclEndToEnd, SwitchedOffItStaysOutOfNccl) {
  ProcessResult run = run_fake(2, {"--steps", "5"}, {{"LAGGARD_NCCL", "0"}});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("no profiler plugin (NCCL_PROFILER_PLUGIN=(unset))"), std::string::npos) << run.out;
  EXPECT_TRUE(rank_files().empty());
  // Named explicitly anyway: NCCL loads it, init keeps every event off.
  ProcessResult forced = run_fake(2, {"--steps", "5"}, {{"LAGGARD_NCCL", "0"}, {"NCCL_PROFILER_PLUGIN", "liblaggard.so"}});
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("init rc=0 mask=0x0 context=null"), std::string::npos) << forced.out;
  // Disabled altogether: the variable is not even set.
  ProcessOptions o = clean_env();
  o.env["LD_PRELOAD"] = kLibrary;
  o.env["RANK"] = "0";
  o.env["LAGGARD_ENABLE"] = "0";
  ProcessResult env_dump = run_process({"/usr/bin/env"}, o);
  EXPECT_EQ(env_dump.out.find("NCCL_PROFILER_PLUGIN"), std::string::npos) << env_dump.out;
  o.env["LAGGARD_ENABLE"] = "1";
  env_dump = run_process({"/usr/bin/env"}, o);
  EXPECT_NE(env_dump.out.find("NCCL_PROFILER_PLUGIN=liblaggard.so\n"), std::string::npos) << env_dump.out;
}

TEST_F(NcclEndToEnd, ProcessWithoutRankKeepsNcclEventsOff) {
  ProcessOptions o = clean_env();
  o.env["LD_PRELOAD"] = kLibrary;
  o.env["LAGGARD_OUT"] = out();
  ProcessResult r = run_process({kFakeNccl, "--base-ns", std::to_string(now_ns()), "--steps", "3"}, o);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("init rc=0 mask=0x0 context=null"), std::string::npos) << r.out;
  EXPECT_TRUE(rank_files().empty());
}

}  // namespace
}  // namespace laggard::test
