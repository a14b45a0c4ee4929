// The hang watchdog's parts in-process: when a report is due, its settings, and capturing other
// threads' stacks with a signal (including threads that block it and apps that own signals).
#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "name_table.h"
#include "range_stack.h"
#include "stack_sampler.h"
#include "thread_registry.h"
#include "watchdog.h"

namespace laggard::watch {
namespace watchdog_test {

constexpr int64_t kS = 1'000'000'000;

TEST(StallClock, ReportsAfterHangThenAtMostEveryRepeat) {
  StallClock c(10 * kS, 30 * kS, 0);
  EXPECT_FALSE(c.due(5, 0));
  EXPECT_FALSE(c.due(5, 9 * kS));
  EXPECT_TRUE(c.due(5, 10 * kS));
  EXPECT_FALSE(c.due(5, 20 * kS));  // repeat not yet due
  EXPECT_FALSE(c.due(5, 39 * kS));
  EXPECT_TRUE(c.due(5, 40 * kS));
  EXPECT_EQ(c.last_progress_mono(), 0);
}

TEST(StallClock, ProgressRestartsTheCountAndANewStallReportsAgain) {
  StallClock c(10 * kS, 300 * kS, 0);
  EXPECT_FALSE(c.due(1, 0));
  EXPECT_TRUE(c.due(1, 10 * kS));
  EXPECT_FALSE(c.due(2, 11 * kS));  // progress
  EXPECT_FALSE(c.due(2, 20 * kS));
  EXPECT_TRUE(c.due(2, 21 * kS));   // a new stall: no need to wait for the repeat interval
  EXPECT_EQ(c.last_progress_mono(), 11 * kS);
}

TEST(StallClock, LongSectionWithNestedProgressNeverReports) {
  StallClock c(1 * kS, 300 * kS, 0);
  for (int64_t t = 0, p = 0; t < 60 * kS; t += kS / 2, ++p) EXPECT_FALSE(c.due(p, t));
}

TEST(HangConfig, OffByDefaultAndBadValuesWarn) {
  std::vector<std::string> w;
  HangConfig c = parse_hang_config(map_env({}), &w);
  EXPECT_EQ(c.hang_s, 0);
  EXPECT_TRUE(w.empty());
  c = parse_hang_config(map_env({{"LAGGARD_HANG_S", "300"}, {"LAGGARD_HANG_REPEAT_S", "60"}}), &w);
  EXPECT_EQ(c.hang_s, 300);
  EXPECT_EQ(c.repeat_s, 60);
  c = parse_hang_config(map_env({{"LAGGARD_HANG_S", "soon"}, {"LAGGARD_HANG_SIGNAL", "9"}}), &w);
  EXPECT_EQ(c.hang_s, 0);
  EXPECT_EQ(c.signal, 0);  // SIGKILL is no real-time signal
  EXPECT_EQ(w.size(), 2u);
}

// A thread parked in a function with a name, inside an NVTX-like range, until told to go.
struct Parked {
  std::atomic<bool> go{false};
  std::atomic<uint32_t> tid{0};
  bool block_signals = false;
  NameTable names{"", 16};
  std::thread thread;

  void start() {
    thread = std::thread([this] { body(); });
    while (!tid.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void stop() {
    go.store(true);
    thread.join();
  }
  __attribute__((noinline)) void parked_in_named_function() {
    while (!go.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    asm volatile("");
  }
  void body() {
    if (block_signals) {
      sigset_t all;
      sigfillset(&all);
      pthread_sigmask(SIG_SETMASK, &all, nullptr);
    }
    RangeStack stack;
    stack.push(names.intern(nullptr, "", "data_load"), nullptr, 1);
    uint32_t me = static_cast<uint32_t>(syscall(SYS_gettid));
    ThreadSlot* slot = claim_slot(me, &stack);
    tid.store(me);
    parked_in_named_function();
    release_slot(slot);
  }
};

bool has_frame(const ThreadReport& t, const std::string& part) {
  for (const StackFrame& f : t.frames)
    if (f.symbol.find(part) != std::string::npos) return true;
  return false;
}

std::atomic<int> g_app_handler_runs{0};
void app_handler(int) { g_app_handler_runs.fetch_add(1); }

// One sampler for the whole process, as in liblaggard (its handler is process-wide).
StackSampler& sampler() {
  static StackSampler* s = [] {
    // The app owns the signal laggard would try first: laggard must pick another.
    struct sigaction sa {};
    sa.sa_handler = app_handler;
    sigaction(SIGRTMAX - 2, &sa, nullptr);
    auto* p = new StackSampler();
    p->arm(0, 0);
    return p;
  }();
  return *s;
}

TEST(StackSampler, CapturesAnotherThreadsStackAndOpenSections) {
  Parked p;
  p.start();
  ThreadReport t;
  t.tid = p.tid.load();
  sampler().capture(t, 2 * kS);
  p.stop();
  ASSERT_EQ(sampler().unwinder(), "libunwind");
  EXPECT_EQ(t.status, "captured");
  EXPECT_TRUE(has_frame(t, "parked_in_named_function")) << t.frames.size() << " frames";
  ASSERT_EQ(t.sections.size(), 1u);
  EXPECT_EQ(t.sections[0].name, "data_load");
}

TEST(StackSampler, AvoidsSignalsTheAppHandlesAndNeverRunsTheirHandlers) {
  Parked p;
  p.start();
  ThreadReport t;
  t.tid = p.tid.load();
  sampler().capture(t, 2 * kS);
  EXPECT_NE(sampler().signal(), SIGRTMAX - 2);
  // Now the app takes the signal laggard chose, after laggard installed its handler.
  int taken = sampler().signal();
  struct sigaction sa {};
  sa.sa_handler = app_handler;
  sigaction(taken, &sa, nullptr);
  ThreadReport again;
  again.tid = p.tid.load();
  sampler().capture(again, 2 * kS);
  p.stop();
  EXPECT_EQ(again.status, "captured");
  EXPECT_NE(sampler().signal(), taken);
  EXPECT_EQ(g_app_handler_runs.load(), 0);
  struct sigaction now {};
  sigaction(taken, nullptr, &now);
  EXPECT_EQ(now.sa_handler, app_handler);  // left as the app set it
}

TEST(StackSampler, ThreadThatBlocksSignalsIsReportedNotWaitedFor) {
  Parked p;
  p.block_signals = true;
  p.start();
  ThreadReport t;
  t.tid = p.tid.load();
  auto t0 = std::chrono::steady_clock::now();
  sampler().capture(t, 2 * kS);
  auto took = std::chrono::steady_clock::now() - t0;
  p.stop();
  EXPECT_EQ(t.status, "blocked");
  EXPECT_TRUE(t.frames.empty());
  EXPECT_LT(took, std::chrono::seconds(1));
}

TEST(Watchdog, WritesAReportNamingEveryThread) {
  Parked p;
  p.start();
  std::string dir = std::filesystem::temp_directory_path() / ("laggard-watchdog-" + std::to_string(getpid()));
  RankInfo ri;
  ri.run_dir = dir;
  ri.run_id = "r";
  ri.rank = 3;
  ri.world_size = 4;
  ri.pid = getpid();
  HangConfig cfg;
  cfg.hang_s = 1;
  Watchdog w(cfg, ri, 0);
  HangReport r = w.build_report(5 * kS);
  ASSERT_EQ(w.write(r), "");
  p.stop();
  std::ifstream in(dir + "/" + hang_report_name(3, getpid(), 0));
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  EXPECT_EQ(j["schema"], "laggard-hang");
  EXPECT_EQ(j["rank"], 3);
  bool found = false;
  for (const auto& t : j["threads"])
    if (t["tid"] == p.tid.load()) {
      found = true;
      ASSERT_EQ(t["status"], "captured");  // the checks below read its frames and sections
      EXPECT_EQ(t["sections"][0]["name"], "data_load");
    }
  EXPECT_TRUE(found);
  EXPECT_TRUE(j["python"].is_null());
}

}  // namespace
}  // namespace laggard::watch
