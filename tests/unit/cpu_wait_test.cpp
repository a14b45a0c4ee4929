// Issue 30 item 2, capture and files: how long the rank's threads waited for a CPU, from each
// thread's /proc/self/task/<tid>/schedstat (proc(5): "time spent on the cpu", "time spent waiting
// on a runqueue", "# of timeslices run on this cpu"), per window, written as the window's optional
// `cpu_wait` in both file forms and read back by both readers.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "cpu_wait.h"
#include "file_builders.h"
#include "reader.h"
#include "reader_segment.h"
#include "temp_dir.h"
#include "writer.h"

namespace cpu_wait_test {

namespace fs = std::filesystem;
using laggard::CpuWaitSampler;
using laggard::CpuWaitWindow;
using laggard::SchedStat;
using laggard::testing::TempDir;

TEST(CpuWait, ParsesSchedstatAndRefusesAnythingElse) {
  SchedStat s;
  ASSERT_TRUE(laggard::parse_schedstat("138141547 952009991 367\n", &s));
  EXPECT_EQ(s.run_ns, 138141547);
  EXPECT_EQ(s.wait_ns, 952009991);
  EXPECT_EQ(s.timeslices, 367u);
  ASSERT_TRUE(laggard::parse_schedstat("0 0 0", &s));
  for (const char* bad : {"", "\n", "1 2\n", "a b c\n", "1 -2 3\n", "1 2 x\n", "99999999999999999999 1 1\n",
                          "18446744073709551615 1 1\n", "1,2,3\n"})
    EXPECT_FALSE(laggard::parse_schedstat(bad, &s)) << bad;
}

// A task directory of our own: one schedstat file per thread id.
struct FakeTasks {
  TempDir dir{"laggard-cpuwait"};
  void set(const std::string& tid, const std::string& text) {
    fs::create_directories(dir.path / tid);
    std::ofstream(dir.path / tid / "schedstat") << text;
  }
  void remove(const std::string& tid) { fs::remove_all(dir.path / tid); }
};

TEST(CpuWait, CountsWhatEachThreadWaitedSinceThePreviousWindow) {
  FakeTasks t;
  t.set("100", "1000 500 3\n");
  t.set("101", "2000 700 4\n");
  t.set("102", "9000 9000 9\n");  // the flush thread: left out
  t.set("105", "8000 8000 8\n");  // the private-table thread (private_fds.h): left out
  t.set("self", "1 1 1\n");        // not a thread id
  t.set("0103", "1 1 1\n");        // nor is this
  CpuWaitSampler s(t.dir.path.string());
  EXPECT_FALSE(s.sample({102, 105}).present);  // the first call takes the baseline
  t.set("100", "1500 2500 5\n");        // waited 2000 ns more
  t.set("101", "oops\n");               // unreadable now: left out of this window
  t.set("104", "300 40 1\n");           // a new thread: counts from its start
  t.set("102", "99999 99999 99\n");
  t.set("105", "88888 88888 88\n");
  CpuWaitWindow w = s.sample({102, 105});
  ASSERT_TRUE(w.present);
  EXPECT_EQ(w.threads, 2u);
  EXPECT_EQ(w.wait_ns, 2000 + 40);
  EXPECT_EQ(w.run_ns, 500 + 300);
  EXPECT_EQ(w.max_thread_wait_ns, 2000);
  EXPECT_EQ(w.timeslices, 2u + 1u);
  // A thread that ended takes its last part with it; one whose counters went back (its id
  // reused by a new thread) counts from zero.
  t.remove("104");
  t.set("100", "100 10 1\n");
  t.set("101", "2100 900 5\n");  // readable again: against its last reading (700)
  w = s.sample({102, 105});
  EXPECT_EQ(w.threads, 2u);
  EXPECT_EQ(w.wait_ns, 10 + 200);
}

// At every drain tick, the NVTX threads only: their wait since the previous tick, as one entry.
TEST(CpuWait, TicksSumTheNvtxThreadsWaitSinceThePreviousTick) {
  FakeTasks t;
  t.set("100", "1000 500 3\n");
  t.set("101", "2000 700 4\n");
  CpuWaitSampler s(t.dir.path.string());
  const uint32_t tids[] = {100, 101, 999};  // 999: gone already
  s.tick(tids, 3, 1'000);                    // baselines
  t.set("100", "1000 800 3\n");
  t.set("101", "2000 1700 4\n");
  s.tick(tids, 3, 2'000);
  t.set("100", "1000 900 3\n");
  s.tick(tids, 1, 3'000);  // only 100 now
  uint32_t threads = 0;
  std::vector<laggard::TickWait> ticks = s.take_ticks(&threads);
  ASSERT_EQ(ticks.size(), 3u);
  EXPECT_EQ(ticks[0].end_ns, 1'000);
  EXPECT_EQ(ticks[0].wait_ns, 0);
  EXPECT_EQ(ticks[1].wait_ns, 300 + 1000);
  EXPECT_EQ(ticks[2].end_ns, 3'000);
  EXPECT_EQ(ticks[2].wait_ns, 100);
  EXPECT_EQ(threads, 2u);
  EXPECT_TRUE(s.take_ticks(&threads).empty());
}

TEST(CpuWait, NoTaskDirectoryIsNotMeasuredNotZero) {
  CpuWaitSampler s("/nonexistent-laggard-task-dir");
  EXPECT_FALSE(s.sample({0, 0}).present);
  EXPECT_FALSE(s.sample({0, 0}).present);
}

// The real /proc: a thread that spins is on a CPU; one that spins beside as many spinners as there
// are CPUs waits for one (the kernel's own accounting, not a timing of ours).
TEST(CpuWait, ReadsThisProcesssThreads) {
  if (access(("/proc/self/task/" + std::to_string(gettid()) + "/schedstat").c_str(), R_OK) != 0)
    GTEST_SKIP() << "this kernel has no schedstat (CONFIG_SCHED_INFO)";
  CpuWaitSampler s;
  s.sample({gettid(), 0});
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> spins{0};
  const unsigned n = std::max(2u, std::thread::hardware_concurrency()) + 1;
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < n; ++i)
    spinners.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) spins.fetch_add(1, std::memory_order_relaxed);
    });
  CpuWaitWindow w;
  // Until the kernel has charged both on-CPU time and run-queue wait to the spinners (a condition,
  // not a sleep: on a loaded machine it takes longer). Bounded by time, not by yields: 2,000
  // yields could all return within 4 ms, before the kernel charged anything (seen when run
  // repeatedly at nice 19).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while ((!w.present || w.run_ns < 20'000'000 || w.wait_ns == 0) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    {
      CpuWaitWindow x = s.sample({gettid(), 0});
      w.present = w.present || x.present;
      w.threads = std::max(w.threads, x.threads);
      w.run_ns += x.run_ns;
      w.wait_ns += x.wait_ns;
    }
  }
  stop = true;
  for (auto& t : spinners) t.join();
  ASSERT_TRUE(w.present);
  EXPECT_GE(w.threads, n);  // the spinners; this thread is left out
  EXPECT_GT(w.run_ns, 0);
  EXPECT_GT(w.wait_ns, 0);  // more spinners than CPUs: someone waited
}

laggard::WindowSnapshot window_with_wait(uint64_t index) {
  laggard::WindowSnapshot w = laggard::testing::window_at(index);
  w.sections.push_back(laggard::testing::section_of("step", {10, 20, 30}, w.start_ns + 1000));
  w.cpu_wait = {true, 6, 181'000'000, 24'000'000 + int64_t(index), 19'000'000, 5123, 1,
                {{w.start_ns + 50'000'000, 3'000'000}, {w.start_ns + 100'000'000, 4'000'000}}};
  return w;
}

// Both file forms carry it, both readers read it; a window without it reads as not measured.
TEST(CpuWait, JsonAndBinaryFilesCarryItAndTheReaderReadsIt) {
  for (laggard::FileFormat format : {laggard::FileFormat::json, laggard::FileFormat::binary}) {
    TempDir tmp;
    const std::string run_dir = (tmp.path / "run1").string();
    laggard::SegmentWriter w(run_dir, laggard::testing::file_info("run1", 0, 1, 100), 30);
    w.set_format(format);
    laggard::WindowSnapshot plain = laggard::testing::window_at(1);
    plain.sections.push_back(laggard::testing::section_of("step", {10}, plain.start_ns + 1000));
    ASSERT_EQ(w.write(window_with_wait(0), {}, false, 0), "");
    ASSERT_EQ(w.write(plain, {}, true, 0), "");
    laggard::report::RunModel m = laggard::report::read_run(tmp.path.string());
    ASSERT_EQ(m.ranks.size(), 1u);
    ASSERT_EQ(m.ranks[0].windows.size(), 2u);
    ASSERT_TRUE(m.ranks[0].windows[0].cpu_wait);
    const laggard::report::CpuWait& c = *m.ranks[0].windows[0].cpu_wait;
    EXPECT_EQ(c.threads, 6u);
    EXPECT_EQ(c.run_ns, 181'000'000);
    EXPECT_EQ(c.wait_ns, 24'000'000);
    EXPECT_EQ(c.max_thread_wait_ns, 19'000'000);
    EXPECT_EQ(c.timeslices, 5123u);
    ASSERT_EQ(c.nvtx_ticks.size(), 2u);  // the NVTX threads' wait per tick, absolute times again
    EXPECT_EQ(c.nvtx_ticks[0], (std::pair<int64_t, int64_t>{m.ranks[0].windows[0].start_ns + 50'000'000, 3'000'000}));
    EXPECT_EQ(c.nvtx_ticks[1].second, 4'000'000);
    EXPECT_EQ(c.nvtx_threads, 1u);
    EXPECT_FALSE(m.ranks[0].windows[1].cpu_wait);
  }
}

std::string file_with(const std::string& cpu_wait) {
  const std::string window = R"({"index":0,"start_ns":1000000000,"end_ns":2000000000,"dropped":{},"sections":[])" +
                             (cpu_wait.empty() ? std::string() : ",\"cpu_wait\":" + cpu_wait) + "}";
  return R"({"schema":"laggard-rank","schema_version":5,"run_id":"r","rank":0,"world_size":1,"host":"h","pid":1,)"
         R"("segment":0,"process_start_ns":1000000000,"data_end_ns":2000000000,"final":true,"config":{"flush_s":1},)"
         R"("dropped":{},"windows":[)" + window + "]}";
}

// The fast reader and the DOM code read it alike, and refuse the same impossible values (the
// window is then left out with a note, as for any impossible value).
TEST(CpuWait, BothReadersAgreeOnGoodAndBadValues) {
  auto read = [](const std::string& text, bool fast) {
    laggard::report::use_fast_reader(fast);
    laggard::report::StringTable strings;
    std::string out;
    try {
      laggard::report::Segment s = laggard::report::parse_segment_text(text, "rank0.json", strings);
      out = std::to_string(s.windows.size()) + " windows";
      for (const auto& w : s.windows) {
        out += " " + std::to_string(bool(w.cpu_wait));
        if (w.cpu_wait) {
          out += ":" + std::to_string(w.cpu_wait->wait_ns) + "/" + std::to_string(w.cpu_wait->threads);
          for (const auto& [end, wait] : w.cpu_wait->nvtx_ticks)
            out += " t" + std::to_string(end - 1000000000) + "=" + std::to_string(wait);
        }
      }
      for (const auto& n : s.notes) out += " | " + n;
    } catch (const std::exception& e) {
      out = std::string("error: ") + e.what();
    }
    laggard::report::use_fast_reader(true);
    return out;
  };
  const std::string good = R"({"threads":3,"run_ns":5,"wait_ns":7,"max_thread_wait_ns":4,"timeslices":2,)"
                           R"("nvtx":{"threads":1,"end_offset_ns":[10,20],"wait_ns":[3,4]}})";
  EXPECT_EQ(read(file_with(good), true), "1 windows 1:7/3 t10=3 t20=4");
  EXPECT_EQ(read(file_with(""), true), "1 windows 0");
  for (const std::string& bad :
       {std::string("[]"), std::string(R"({"threads":3,"run_ns":5})"), std::string(R"({"threads":3,"run_ns":5,"wait_ns":-7})"),
        std::string(R"({"threads":3,"run_ns":5,"wait_ns":7,"max_thread_wait_ns":8})"),
        std::string(R"({"threads":3,"run_ns":5.5,"wait_ns":7})"),
        std::string(R"({"threads":3,"run_ns":5,"wait_ns":7,"nvtx":{"threads":1,"end_offset_ns":[20,10],"wait_ns":[3,4]}})"),
        std::string(R"({"threads":3,"run_ns":5,"wait_ns":7,"nvtx":{"threads":1,"end_offset_ns":[10],"wait_ns":[3,4]}})"),
        std::string(R"({"threads":3,"run_ns":5,"wait_ns":7,"nvtx":[]})")}) {
    const std::string text = file_with(bad);
    EXPECT_EQ(read(text, true), read(text, false)) << bad;
    EXPECT_EQ(read(text, true).rfind("0 windows", 0), 0u) << bad << ": " << read(text, true);
  }
  // Longer than the window is possible: the flush thread reads the counters when it gets to it
  // after the window closed (seconds later under ThreadSanitizer on a busy machine: a real case).
  for (const std::string& good_too :
       {good, std::string(R"({"threads":0,"run_ns":0,"wait_ns":0})"),
        std::string(R"({"threads":1,"run_ns":5,"wait_ns":9000000000,"max_thread_wait_ns":3000000000})"),
        std::string(R"({"threads":1,"run_ns":5,"wait_ns":7,"nvtx":{"threads":1,"end_offset_ns":[9000000000],"wait_ns":[9000000000]}})")}) {
    EXPECT_EQ(read(file_with(good_too), true).rfind("1 windows 1", 0), 0u) << good_too;
    EXPECT_EQ(read(file_with(good_too), true), read(file_with(good_too), false)) << good_too;
  }
}

}  // namespace cpu_wait_test
