// Issue 30 on the README's CPU demo (4 real processes under `laggard run`): a hiccup of the slow
// rank's step no longer hides its injected backward; every window says how long the rank's threads
// waited for a CPU; two CPU hogs are named as contention, not as mystery slow ranks; and
// `--nvrx-compatible` gives NVRx's own reports. bench-free: the 20-run soak is scripts/contention-soak.
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <thread>

#include "harness.h"

namespace laggard::test {
namespace contention_test {

const std::vector<std::string> kDemo = {"--steps", "40", "--step-ms", "25", "--slow-rank", "2", "--slow-section",
                                        "backward", "--slow-factor", "1.5"};

const nlohmann::json* finding(const nlohmann::json& findings, int rank, const std::string& section,
                              const std::string& kind) {
  for (const auto& f : findings)
    if (f["rank"] == rank && f["section"] == section && f["kind"] == kind) return &f;
  return nullptr;
}

std::string dump(const nlohmann::json& findings) {
  std::string s;
  for (const auto& f : findings) s += "[" + f["cause"].get<std::string>() + "] " + f["summary"].get<std::string>() + "\n";
  return s;
}

// A busy loop pinned to one CPU, ended by SIGKILL when the test is done with it.
class Hog {
 public:
  explicit Hog(int cpu) {
    pid_ = fork();
    if (pid_ == 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      sched_setaffinity(0, sizeof set, &set);  // a machine with one CPU: it just runs anywhere
      volatile unsigned long spins = 0;  // volatile: the loop is not optimized away
      for (;;) spins = spins + 1;
    }
  }
  ~Hog() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  Hog(const Hog&) = delete;
  Hog& operator=(const Hog&) = delete;

 private:
  pid_t pid_ = -1;
};

class Issue30Demo : public Scratch {};

// The README demo with a 40 ms hiccup of rank 2's step (outside every sub-section) in steps 0-6:
// the step's transient used to be kept and the whole-run backward below it dropped.
TEST_F(Issue30Demo, AStepHiccupDoesNotHideTheInjectedBackward) {
  std::vector<std::string> args = kDemo;
  args.insert(args.end(), {"--stall", "40:0:7"});
  ProcessResult run = run_demo(4, args, 0.25);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // The injected fault is found however busy the machine. The hiccup's size and NVRx's per-window
  // ranking are judged only when no other work wanted the CPUs during the run (PSI, as in
  // straggler_test.cpp): a rank kept from its core for a few ms in the 7 hiccup steps changes both,
  // and the report is right to say so. Under ASan in CI, beside the nice-19 builds, 1 run in 2 CI
  // runs lost the hiccup; beside another test's pinned hogs, 3 in 26 runs failed one magnitude each
  // (reports of those files identical before and after issue 29's report changes).
  const bool quiet = !last_run_contended;
  const nlohmann::json rep = report();
  const nlohmann::json& f = rep["verdict"]["findings"];
  const nlohmann::json* fault = finding(f, 2, "backward", "persistent");
  ASSERT_NE(fault, nullptr) << dump(f);
  EXPECT_NE((*fault)["cause"], "cpu_contention") << dump(f);
  const nlohmann::json* hiccup = finding(f, 2, "step", "transient");
  if (quiet) {
    ASSERT_NE(hiccup, nullptr) << dump(f);
    EXPECT_EQ((*hiccup)["first_step"], 0) << dump(f);
    EXPECT_NEAR((*hiccup)["evidence"]["explained_by_backward_ms"].get<double>(), 5.0, 1.5) << dump(f);
  }
  // Every window but the first (the baseline) says how long the threads waited for a CPU: the main
  // thread and the loader thread (laggard's flush thread is left out; the loader has ended by the
  // last window), and the NVTX threads' wait tick by tick.
  int measured = 0;
  for (const auto& file : rank_files()) {
    const nlohmann::json j = rank_file_json(file);
    const auto& windows = j["windows"];
    for (size_t i = 0; i < windows.size(); ++i) {
      const auto& w = windows[i];
      if (!w.contains("cpu_wait")) {
        EXPECT_EQ(w["index"], 0) << file;
        continue;
      }
      ++measured;
      EXPECT_GE(w["cpu_wait"]["threads"].get<int>(), i + 1 < windows.size() ? 2 : 1) << file;
      EXPECT_GE(w["cpu_wait"]["run_ns"].get<int64_t>(), 0) << file;
      EXPECT_TRUE(w["cpu_wait"].contains("nvtx")) << file;
    }
  }
  EXPECT_GT(measured, 8) << "windows with cpu_wait";
  EXPECT_TRUE(fault->at("evidence").contains("cpu_wait_extra_ms")) << dump(f);

  // NVRx's own reports on the same files: every 10 iterations, backward's relative score 10/15.
  const nlohmann::json nvrx = report({"--nvrx-compatible", "--nvrx-every", "10"})["nvrx"];
  ASSERT_TRUE(nvrx["available"].get<bool>()) << nvrx.dump();
  ASSERT_EQ(nvrx["reports"].size(), 4u) << nvrx.dump();  // after iterations 0, 10, 20, 30
  for (const auto& r : nvrx["reports"]) {
    const auto& slow = r["stragglers"]["straggler_sections_relative"];
    ASSERT_TRUE(slow.contains("backward")) << r.dump();
    bool rank2 = false;
    for (const auto& e : slow["backward"]) rank2 |= e["rank"] == 2;
    EXPECT_TRUE(rank2) << r.dump();
    if (!quiet) continue;
    EXPECT_EQ(slow["backward"][0]["rank"], 2) << r.dump();
    EXPECT_NEAR(r["section_relative_perf_scores"]["backward"]["2"].get<double>(), 1 / 1.5, 0.08) << r.dump();
  }
  ProcessResult text = run_process({kLaggard, "report", out(), "--nvrx-compatible", "--nvrx-every", "10"}, clean_env());
  EXPECT_NE(text.out.find("NVRx-compatible reports"), std::string::npos) << text.out;
  if (quiet) {
    EXPECT_NE(text.out.find("section backward relative: rank 2"), std::string::npos) << text.out;
  }
}

double load_average() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

// Two busy loops, one pinned to each of the first two CPUs, beside the demo (one run of
// scripts/contention-soak): the threads' wait is measured tick by tick and every finding says how
// long its rank waited. On a machine not otherwise loaded, the injected fault is named with its
// own cause and every other finding is the hogs' effect, named as contention. On one already
// loaded beyond its CPUs (CI beside other builds), each 10 ms sleep of the demo already wakes
// several ms late before the hogs start, and a 5 ms fault can drown: the soak script measures
// that case over 20 runs; here only the measurement is checked then.
TEST_F(Issue30Demo, TwoCpuHogsAreNamedAsContention) {
  const bool loaded = load_average() > double(std::max(2u, std::thread::hardware_concurrency()));
  {
    Hog a(0), b(1);
    ProcessResult run = run_demo(4, kDemo, 0.25);
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  int64_t waited = 0;
  for (const auto& file : rank_files()) {
    const nlohmann::json j = rank_file_json(file);
    for (const auto& w : j["windows"])
      if (w.contains("cpu_wait")) {
        waited += w["cpu_wait"]["wait_ns"].get<int64_t>();
        if (w["index"] > 0) {
          EXPECT_TRUE(w["cpu_wait"].contains("nvtx")) << file << " window " << w["index"];
        }
      }
  }
  EXPECT_GT(waited, 0) << "two busy loops on the CPUs and no wait measured";
  const nlohmann::json f = report()["verdict"]["findings"];
  for (const auto& x : f) EXPECT_TRUE(x["evidence"].contains("cpu_wait_extra_ms")) << dump(f);
  if (loaded) {
    std::cerr << "load average above the CPUs before the hogs: the verdict's checks are left to "
                 "scripts/contention-soak\n" << dump(f);
    return;
  }
  const nlohmann::json* fault = finding(f, 2, "backward", "persistent");
  ASSERT_NE(fault, nullptr) << dump(f);
  EXPECT_NE((*fault)["cause"], "cpu_contention") << dump(f);
  for (const auto& x : f) {
    if (x["rank"] == 2 && (x["section"] == "backward" || x["section"] == "step")) continue;
    EXPECT_EQ(x["cause"], "cpu_contention") << dump(f);
  }
}

}  // namespace contention_test
}  // namespace laggard::test
