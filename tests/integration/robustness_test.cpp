// The host application must behave exactly as without laggard, whatever goes wrong around it.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "harness.h"

namespace laggard::test {
namespace robustness_test {

namespace fs = std::filesystem;

class Robustness : public Scratch {
 protected:
  // The demo as rank 0 of 1 with liblaggard preloaded directly (no `laggard run`).
  ProcessOptions preloaded(const std::string& out_dir) {
    return single_rank(out_dir, "robust");
  }
  static int lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

  // Waits until rank 0 has flushed a window with at least one section.
  bool wait_for_flush(double timeout_s) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& f : rank_files())
        if (rank_file_text(f).find("\"name\":\"step\"") != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }
};

TEST_F(Robustness, OutputAndExitCodeAreUnchanged) {
  ProcessOptions plain = clean_env();
  plain.env["RANK"] = "0";
  ProcessResult without = run_process({kDemo, "--steps", "5"}, plain);
  ProcessResult with = run_process({kDemo, "--steps", "5"}, preloaded(out()));
  EXPECT_EQ(without.exit_code, 0);
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(with.err, "");
  EXPECT_EQ(rank_files().size(), 1u);
}

TEST_F(Robustness, UnwritableOutputDirectoryWarnsOnceAndChangesNothing) {
  std::ofstream(dir + "/not-a-dir") << "x";
  ProcessResult r = run_process({kDemo, "--steps", "10"}, preloaded(dir + "/not-a-dir/out"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("10 steps done"), std::string::npos);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("warning"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not-a-dir"), std::string::npos) << r.err;
}

TEST_F(Robustness, UnwritableDirectoryThroughLaggardRunStillExitsZero) {
  std::ofstream(dir + "/file") << "x";
  ProcessResult r = run_process({kLaggard, "run", "--nproc", "2", "--out", dir + "/file/out", "--", kDemo,
                                 "--steps", "5"}, clean_env());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no rank files were written"), std::string::npos) << r.err;
}

TEST_F(Robustness, BadEnvironmentValueWarnsOnceAndUsesTheDefault) {
  ProcessOptions o = preloaded(out());
  o.env["LAGGARD_FLUSH_S"] = "soon";
  ProcessResult r = run_process({kDemo, "--steps", "5"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("LAGGARD_FLUSH_S='soon'"), std::string::npos) << r.err;
  ASSERT_EQ(rank_files().size(), 1u);  // written at exit, with the default interval
  EXPECT_NE(rank_file_text(rank_files()[0]).find("\"flush_s\":10"), std::string::npos);
}

TEST_F(Robustness, ProcessWithoutRankWritesNothing) {
  ProcessOptions o = preloaded(out());
  o.env["RANK"] = std::nullopt;
  ProcessResult r = run_process({kDemo, "--steps", "3"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(rank_files().empty());
}

TEST_F(Robustness, DisabledLibraryIsInert) {
  ProcessOptions o = preloaded(out());
  o.env["LAGGARD_ENABLE"] = "0";
  ProcessResult env_dump = run_process({"/usr/bin/env"}, o);
  EXPECT_EQ(env_dump.out.find("NVTX_INJECTION64_PATH"), std::string::npos);
  ProcessResult r = run_process({kDemo, "--steps", "3"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
  EXPECT_TRUE(rank_files().empty());
  // Enabled, the constructor points NVTX at the library itself.
  ProcessResult on = run_process({"/usr/bin/env"}, preloaded(out()));
  EXPECT_NE(on.out.find("NVTX_INJECTION64_PATH=" + fs::canonical(kLibrary).string()), std::string::npos);
}

TEST_F(Robustness, AnotherNvtxToolIsLeftAlone) {
  ProcessOptions o = preloaded(out());
  o.env["NVTX_INJECTION64_PATH"] = "/nonexistent/libnsys-injection.so";
  ProcessResult r = run_process({kDemo, "--steps", "3"}, o);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("NVTX_INJECTION64_PATH is already set"), std::string::npos) << r.err;
  EXPECT_TRUE(rank_files().empty());
}

TEST_F(Robustness, SigtermFlushesThenDiesOfSigterm) {
  Running p = start_process({kDemo, "--steps", "100000", "--step-ms", "10"}, preloaded(out()));
  ASSERT_TRUE(wait_for_flush(20));
  kill(p.pid, SIGTERM);
  ProcessResult r = wait_process(p, 30);
  EXPECT_EQ(r.term_signal, SIGTERM);  // as without laggard
  ASSERT_EQ(rank_files().size(), 1u);
  std::string file = rank_file_text(rank_files()[0]);
  EXPECT_NE(file.find("\"signal\":15"), std::string::npos);
  nlohmann::json rep = report();
  bool listed = false;
  for (const auto& pr : rep["problems"])
    listed |= pr["kind"] == "incomplete_rank" && pr["message"].get<std::string>().find("SIGTERM") != std::string::npos;
  EXPECT_TRUE(listed) << rep["problems"].dump();
}

TEST_F(Robustness, ApplicationSigtermHandlerStillRuns) {
  Running p = start_process({kDemo, "--steps", "100000", "--step-ms", "10", "--handle-sigterm"}, preloaded(out()));
  ASSERT_TRUE(wait_for_flush(20));
  kill(p.pid, SIGTERM);
  ProcessResult r = wait_process(p, 30);
  EXPECT_EQ(r.term_signal, 0);
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("stopped by SIGTERM"), std::string::npos) << r.out;
  nlohmann::json rep = report();
  EXPECT_TRUE(rep["ranks"][0]["final"].get<bool>());  // it exited normally afterwards
}

TEST_F(Robustness, ForkedChildIsNotTheRank) {
  ProcessResult r = run_process({kDemo, "--steps", "5", "--fork-child"}, preloaded(out()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  ASSERT_EQ(rank_files().size(), 1u);
  nlohmann::json rep = report();
  EXPECT_FALSE(rep["ranks"][0]["sections"].contains("child_work"));
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 5);
}

TEST_F(Robustness, SectionFilter) {
  ProcessOptions o = preloaded(out());
  o.env["LAGGARD_SECTIONS"] = "^(step|backward)$";
  ASSERT_EQ(run_process({kDemo, "--steps", "4"}, o).exit_code, 0);
  nlohmann::json rep = report();
  std::set<std::string> names;
  for (auto& [k, v] : rep["ranks"][0]["sections"].items()) names.insert(k);
  EXPECT_EQ(names, (std::set<std::string>{"step", "backward"}));
}

TEST_F(Robustness, LaggardRunPassesExitStatusThrough) {
  ProcessOptions o = clean_env();
  EXPECT_EQ(run_process({kLaggard, "run", "--quiet", "--out", out(), "--", "sh", "-c", "exit 7"}, o).exit_code, 7);
  ProcessResult killed = run_process({kLaggard, "run", "--quiet", "--out", out(), "--", "sh", "-c", "kill -TERM $$"}, o);
  EXPECT_EQ(killed.term_signal, SIGTERM);
  EXPECT_EQ(run_process({kLaggard, "run", "--quiet", "--out", out(), "--", "/nonexistent/cmd"}, o).exit_code, 127);
  EXPECT_EQ(run_process({kLaggard, "run", "--out", out()}, o).exit_code, 2);
  EXPECT_EQ(run_process({kLaggard, "run", "--quiet", "--nproc", "3", "--out", out(), "--", "sh", "-c",
                         "[ \"$RANK\" = 1 ] && exit 5; exit 0"}, o).exit_code, 5);
}

TEST_F(Robustness, LaggardRunPrependsToLdPreload) {
  ProcessOptions o = clean_env();
  o.env["LD_PRELOAD"] = "libc.so.6";
  ProcessResult r = run_process({kLaggard, "run", "--quiet", "--out", out(), "--", "sh", "-c",
                                 "echo $LD_PRELOAD; echo $LAGGARD_RUN_PREFIX"}, o);
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), fs::canonical(kLibrary).string() + ":libc.so.6");
  EXPECT_GT(r.out.size(), r.out.find('\n') + 2);  // a run id was exported (each launch inside adds its part)
}

TEST_F(Robustness, ReportOfNothingIsAClearError) {
  ProcessResult r = run_process({kLaggard, "report", dir}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no laggard rank files"), std::string::npos) << r.err;
  ProcessResult missing = run_process({kLaggard, "report", dir + "/nope"}, clean_env());
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("not a directory"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace laggard::test

namespace laggard::test {
namespace robustness_test {

// The library must load into any process: no vendor libraries, no C++ runtime of its own to
// clash with the host's, and nothing exported but the entry points tools look up by name.
TEST(Library, LinksNoVendorLibrariesAndExportsOnlyEntryPoints) {
  ProcessResult deps = run_process({"readelf", "-d", kLibrary});
  ASSERT_EQ(deps.exit_code, 0) << deps.err;
  for (const char* banned : {"libcuda", "libcupti", "libnccl", "libnvToolsExt", "libstdc++", "libgcc_s",
                             "libunwind", "libnvidia-ml"})  // the last two: dlopen only (hang reports, NVML)
    EXPECT_EQ(deps.out.find(banned), std::string::npos) << banned << "\n" << deps.out;
  ProcessResult syms = run_process({"readelf", "--dyn-syms", "-W", kLibrary});
  ASSERT_EQ(syms.exit_code, 0);
  std::istringstream lines(syms.out);
  std::string line;
  std::set<std::string> exported;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::string num, value, size, type, bind, vis, ndx, name;
    if (!(f >> num >> value >> size >> type >> bind >> vis >> ndx >> name)) continue;
    if (ndx != "UND" && (bind == "GLOBAL" || bind == "WEAK" || bind == "UNIQUE") && type == "FUNC")
      exported.insert(name.substr(0, name.find('@')));
  }
  EXPECT_TRUE(exported.count("InitializeInjectionNvtx2"));
  EXPECT_TRUE(exported.count("InitializeInjection"));  // the CUDA driver's injection hook
  // Another CUPTI client's calls laggard steps aside for (cupti_interpose.cpp, docs/cupti.md).
  const std::set<std::string> cupti = {"cuptiSubscribe", "cuptiSubscribe_v2", "cuptiUnsubscribe", "cuptiFinalize",
                                       "cuptiActivityRegisterCallbacks", "cuptiActivityEnable", "cuptiActivityDisable",
                                       "cuptiActivityFlushAll", "cuptiActivityRegisterTimestampCallback"};
  for (const auto& s : exported)
    EXPECT_TRUE(s == "InitializeInjectionNvtx2" || s == "InitializeInjection" || s.rfind("ncclProfiler_v", 0) == 0 ||
                cupti.count(s))
        << s;
}

}  // namespace
}  // namespace laggard::test
