// Host safety, third round (issue 24): real programs under LD_PRELOAD, each doing what an
// adversarial run found harmful, checked against the same program without laggard.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <set>
#include <thread>

#include "harness.h"

namespace laggard::test {
namespace host_safety_round3_test {

namespace fs = std::filesystem;

const std::string kHostileApp = kBin + "/laggard-hostile-app";
const std::string kStress = kBin + "/laggard-watchdog-stress";
constexpr const char* kImage = "0a1b2c3d";  // LAGGARD_TEST_IMAGE_ID: names known in advance

class Round3 : public Scratch {
 protected:
  std::string run_dir() const { return out() + "/r3"; }
  ProcessOptions preloaded() const {
    return single_rank(out(), "r3");
  }
  static ProcessOptions plain() {
    ProcessOptions o = clean_env();
    o.env["RANK"] = "0";
    return o;
  }
  std::vector<fs::path> files_starting(const std::string& prefix) const {
    std::vector<fs::path> found;
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir(), ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().filename().string().rfind(prefix, 0) == 0) found.push_back(it->path());
    std::sort(found.begin(), found.end());
    return found;
  }
  // Runs `laggard-hostile-app MODE` without laggard (it must print `expected`) and with it (the
  // same output, within 60 s: killed at the timeout means it hung); the rank's sections.
  nlohmann::json sections_after_unchanged_run(const std::string& mode, const std::string& expected) {
    ProcessOptions with_laggard = preloaded();
    with_laggard.timeout_s = 60;
    ProcessResult with = run_process({kHostileApp, mode}, with_laggard);
    ProcessResult without = run_process({kHostileApp, mode}, plain());
    EXPECT_EQ(without.out, expected) << without.err;
    EXPECT_EQ(with.exit_code, 0) << with.err;
    EXPECT_EQ(with.out, without.out) << with.err;
    nlohmann::json rep = report();
    EXPECT_EQ(rep["ranks"].size(), 1u) << rep.dump();
    return rep["ranks"].size() == 1 ? rep["ranks"][0]["sections"] : nlohmann::json::object();
  }
  static std::string problem(const nlohmann::json& rep, const std::string& kind) {
    for (const auto& p : rep["problems"])
      if (p["kind"] == kind) return p["message"];
    return "";
  }
};

// ---- item 4: the application's SIGINT handler keeps its flags ----

TEST_F(Round3, TheSecondCtrlCKillsTheProcessAsWithoutLaggard) {
  ProcessResult with = run_process({kHostileApp, "second-ctrl-c"}, preloaded());
  ProcessResult without = run_process({kHostileApp, "second-ctrl-c"}, plain());
  ASSERT_EQ(without.term_signal, SIGINT);
  EXPECT_EQ(with.term_signal, SIGINT) << with.out;  // was: survived, exit 0
  EXPECT_EQ(with.out, without.out);  // sa_mask and SA_NODEFER as the application set them
  EXPECT_NE(with.out.find("SIGUSR1 blocked 1, SIGINT blocked 0, reset to default 1"), std::string::npos) << with.out;
}

// ---- item 5: waits inside a stalled range are never cut short ----

TEST_F(Round3, WaitsInsideAStalledRangeNeverFailWithEintr) {
  ProcessOptions o = preloaded();
  o.env["LAGGARD_HANG_S"] = "0.2";
  o.env["LAGGARD_HANG_REPEAT_S"] = "0.1";
  ProcessResult with = run_process({kHostileApp, "wait-in-range", "500"}, o);
  EXPECT_EQ(with.exit_code, 0) << with.out << with.err;  // was 1: poll returned EINTR
  EXPECT_NE(with.out.find("waits done: 0 EINTR"), std::string::npos) << with.out;
  std::vector<fs::path> hangs = files_starting("hang-");
  ASSERT_GE(hangs.size(), 2u) << with.err;  // the watchdog did look, repeatedly, during the waits
  nlohmann::json j = nlohmann::json::parse(read_file(hangs[0]));
  for (const auto& t : j["threads"])
    if (t["main"] == true) {
      EXPECT_EQ(t["method"], "in_place");
      EXPECT_EQ(t["sections"][0]["name"], "checkpoint");
      EXPECT_FALSE(t["frames"].empty());
    }
}

// ---- issue 26 item 9: the watchdog never waits for a GPU call ----

TEST_F(Round3, AHangReportIsWrittenWhileTheFlushThreadIsStuckInNvml) {
  ProcessOptions o = preloaded();
  o.env["LD_LIBRARY_PATH"] = kBin + "/fake-nvml";
  o.env["FAKE_NVML_HANG_INIT"] = "1";  // the flush thread's first NVML call never returns
  o.env["LAGGARD_HANG_S"] = "0.2";
  ProcessResult with = run_process({kHostileApp, "wait-in-range", "200"}, o);
  EXPECT_EQ(with.exit_code, 0) << with.err;
  ASSERT_FALSE(files_starting("hang-").empty()) << with.err;  // was: none, the watchdog ticked on the flush thread
}

// ---- item 2: hang reports through the one safe-write path ----

TEST_F(Round3, AFifoAtTheHangReportsTempNameNeitherBlocksNorIsOpened) {
  fs::create_directories(run_dir());
  std::string go = dir + "/go";
  ProcessOptions o = preloaded();
  o.env["LAGGARD_HANG_S"] = "0.2";
  o.env["LAGGARD_TEST_IMAGE_ID"] = kImage;
  Running p = start_process({kHostileApp, "wait-in-range", "300", go}, o);
  std::string name = "hang-rank00000-" + std::to_string(p.pid) + "-" + kImage + "-0000.json";
  ASSERT_EQ(mkfifo((run_dir() + "/." + name + ".tmp").c_str(), 0600), 0);
  ASSERT_EQ(mkfifo((run_dir() + "/" + name + ".tmp").c_str(), 0600), 0);  // the old temp name
  std::ofstream(go) << "";
  ProcessResult r = wait_process(p, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(run_dir() + "/" + name))) << r.err;
  nlohmann::json rep = report();
  EXPECT_EQ(problem(rep, "incomplete_rank"), "");  // was: "killed, crashed or still running"
}

TEST_F(Round3, ASymlinkedRunDirectoryGetsNoHangReport) {
  fs::create_directories(out());
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", run_dir());
  ProcessOptions o = preloaded();
  o.env["LAGGARD_HANG_S"] = "0.2";
  ProcessResult with = run_process({kHostileApp, "wait-in-range", "200"}, o);
  ProcessResult without = run_process({kHostileApp, "wait-in-range", "200"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_TRUE(fs::is_empty(dir + "/elsewhere"));
  EXPECT_NE(with.err.find("symbolic link"), std::string::npos) << with.err;
}

// ---- item 3: every process image its own files ----

TEST_F(Round3, ARankThatExecsItselfKeepsBothImagesApart) {
  // The first image runs 30 x 10 ms: longer than a flush (0.1 s), so it has written before its
  // exec (an exec, like SIGKILL, loses what was not flushed); the second image runs 60 ranges.
  ProcessResult with = run_process({kHostileApp, "exec-self", "30", "60"}, preloaded());
  ProcessResult without = run_process({kHostileApp, "exec-self", "30", "60"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  std::vector<fs::path> files = files_starting("rank00000-");
  ASSERT_EQ(files.size(), 2u);  // was 1: the second image replaced the first one's file
  std::set<std::string> sections;
  for (const fs::path& f : files) {
    nlohmann::json j = rank_file_json(f);
    EXPECT_EQ(j["image"].get<std::string>().size(), 8u);
    for (const auto& w : j["windows"])
      for (const auto& s : w["sections"]) sections.insert(s["name"]);
  }
  EXPECT_EQ(sections, (std::set<std::string>{"first_image", "child_step"}));
  nlohmann::json rep = report();
  ASSERT_EQ(rep["ranks"].size(), 1u);
  // One image stands for the rank, whole; the other is listed, never merged into it.
  EXPECT_EQ(rep["ranks"][0]["sections"]["child_step"]["count"], 60);
  EXPECT_FALSE(rep["ranks"][0]["sections"].contains("first_image"));
  EXPECT_NE(problem(rep, "duplicate_rank").find("exec()ed itself"), std::string::npos) << rep["problems"].dump();
}

// ---- item 10: never the application's last descriptor ----

TEST_F(Round3, AnApplicationAtItsDescriptorLimitNeverFailsAnOpen) {
  ProcessOptions o = preloaded();
  o.env["LAGGARD_FLUSH_S"] = "0.05";  // many flushes while the application holds all but one
  ProcessResult with = run_process({kHostileApp, "fd-limit", "1500"}, o);
  EXPECT_EQ(with.exit_code, 0) << with.out << with.err;  // was 1 in some runs: laggard took the last one
  EXPECT_NE(with.out.find("failed: 0"), std::string::npos) << with.out;
  int opens = 0;
  ASSERT_EQ(std::sscanf(with.out.c_str(), "opens at the limit: %d", &opens), 1) << with.out;
  nlohmann::json rep = report();
  ASSERT_EQ(rep["ranks"].size(), 1u);
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], opens + 1);  // written once descriptors were free
}

// ---- a process forked while NVTX attaches laggard (a child hung in Cupti.ForksDuring...) ----

TEST_F(Round3, AChildForkedWhileNvtxAttachesLaggardDoesNotHang) {
  // NVTX marks an instance as initialising while it attaches the tool, and its other calls spin
  // until that is done (nvtxInitOnce, nvtx3/nvtxDetail/nvtxInit.h): a child forked in between
  // spun forever (5 runs of 5 while capture started inside the attach).
  // Under ASan, LeakSanitizer's exit check would change the children's exit codes, which are the point.
  // Ten runs of about 50 ms: a child also hung on the guard of an object laggard made on first
  // use while a parent's thread was making it (about 1 run in 30; now made at load).
  ProcessResult without = run_process({kHostileApp, "fork-in-first-nvtx-call"}, without_leak_check(plain()));
  EXPECT_EQ(without.out, "children hung: 0, exited otherwise: 0\n") << without.err;
  for (int run = 0; run < 10; ++run) {
    ProcessResult with = run_process({kHostileApp, "fork-in-first-nvtx-call"}, without_leak_check(preloaded()));
    EXPECT_EQ(with.exit_code, 0) << with.err;
    ASSERT_EQ(with.out, without.out) << "run " << run << ": " << with.err;
    fs::remove_all(run_dir());
  }
}

// ---- NVTX called from a signal handler while capture starts ----

TEST_F(Round3, NvtxCallsFromASignalHandlerWhileCaptureStartsDoNotHang) {
  // A SIGALRM handler's ranges land in the first range's call, which starts capture, on the same
  // thread: std::call_once there waited on itself forever (3 runs of 3, 2026-11-28), as a handler
  // interrupting the thread's first call or the interning of a new name would on their locks.
  const nlohmann::json sections = sections_after_unchanged_run("nvtx-in-signal-handler", "2000 ticks within 20 s: yes\n");
  EXPECT_GT(sections["step"]["count"].get<int>(), 0) << sections.dump();
  // The handler's ranges are recorded, all but those nested in capture's start (1984 of 2000 here).
  EXPECT_GT(sections["tick"]["count"].get<int>(), 1000) << sections.dump();
}

TEST_F(Round3, AThreadsFirstNvtxCallFromASignalHandlerInsideMallocDoesNotHang) {
  // Each thread's first NVTX call is a SIGUSR1 handler's, which lands inside the thread's malloc
  // more often than not: building the thread's state there allocated inside malloc, whose arena
  // lock the thread held (4 runs of 4 hung, 2026-11-28). Now the flush thread keeps states ready.
  const nlohmann::json sections = sections_after_unchanged_run("nvtx-first-call-in-signal-handler", "20 rounds done\n");
  // The main thread's, and at least one from each of the 80 threads' handlers.
  EXPECT_GE(sections["tick"]["count"].get<int>(), 81) << sections.dump();
}

// ---- smaller: a child without LD_PRELOAD still loads laggard through NVTX (docs/host-safety.md) ----

TEST_F(Round3, RemovingLdPreloadAloneLeavesLaggardInAChildLaggardEnable0TakesItOut) {
  ProcessOptions child = preloaded();
  child.env["LD_PRELOAD"] = std::nullopt;                // what a launcher "cleaning" the child does
  child.env["NVTX_INJECTION64_PATH"] = kLibrary;         // inherited: laggard set it at load
  ProcessResult loaded = run_process({kHostileApp, "steps", "3"}, child);
  EXPECT_EQ(loaded.exit_code, 0) << loaded.err;
  EXPECT_EQ(files_starting("rank00000-").size(), 1u);  // documented: NVTX loaded laggard
  fs::remove_all(run_dir());
  child.env["LAGGARD_ENABLE"] = "0";
  ProcessResult inert = run_process({kHostileApp, "steps", "3"}, child);
  EXPECT_EQ(inert.exit_code, 0) << inert.err;
  EXPECT_EQ(inert.out, loaded.out);
  EXPECT_TRUE(files_starting("rank00000-").empty());
}

// ---- item 1: the watchdog's workload, a short slice (scripts/soak-watchdog runs hundreds) ----

TEST_F(Round3, TheWatchdogNeverDeadlocksThreadsInMallocForkDlopenAndThrow) {
  for (int run = 0; run < 3; ++run) {
    ProcessOptions o = preloaded();
    o.env["LAGGARD_HANG_S"] = "0.2";
    o.env["LAGGARD_HANG_REPEAT_S"] = "0.1";
    o.env["LAGGARD_RUN_ID"] = "r3-" + std::to_string(run);
    o.timeout_s = 60;  // a deadlock fails here instead of hanging the suite
    ProcessResult r = run_process({kStress, "1.0"}, o);
    ASSERT_EQ(r.exit_code, 0) << "run " << run << ": " << r.err;
    ASSERT_EQ(r.out.rfind("ok ", 0), 0u) << r.out;
  }
  int captured = 0, with_frames = 0;
  for (const auto& e : fs::recursive_directory_iterator(out()))
    if (e.path().filename().string().rfind("hang-", 0) == 0) {
      nlohmann::json j = nlohmann::json::parse(read_file(e.path()));
      for (const auto& t : j["threads"]) {
        captured += t["status"] == "captured";
        with_frames += !t["frames"].empty();
      }
    }
  EXPECT_GT(captured, 0);
  EXPECT_GT(with_frames, 0);
}

}  // namespace host_safety_round3_test
}  // namespace laggard::test
