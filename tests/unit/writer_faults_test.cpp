// The writer when the file system fails it, and the reader's checks across a rank's files
// (issue 10 items 3 and 4).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "reader.h"
#include "file_builders.h"
#include "temp_dir.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace writer_faults_test {

using laggard::testing::TempDir;

laggard::FileInfo info(long pid, long ppid = 1) {
  laggard::FileInfo fi = laggard::testing::file_info("run1", 0, 1, pid);
  fi.ppid = ppid;
  return fi;
}

laggard::WindowSnapshot window(uint64_t index, uint64_t count = 1, const std::string& name = "step") {
  laggard::WindowSnapshot w = laggard::testing::window_at(index);
  w.sections.push_back(laggard::testing::section_totals(name, count, 1000));
  return w;
}

const laggard::report::Problem* find_problem(const laggard::report::RunModel& m, const std::string& kind) {
  for (const auto& p : m.problems)
    if (p.kind == kind) return &p;
  return nullptr;
}

// The run directory's name is taken by a file: every write fails until it goes.
struct BlockedRunDir {
  explicit BlockedRunDir(const fs::path& p) : path(p) { std::ofstream(p) << "x"; }
  void unblock() { fs::remove(path); }
  fs::path path;
};

TEST(WriterFaults, SegmentsThatCouldNotBeWrittenAreRetriedAfterRollover) {
  TempDir tmp;
  fs::path run_dir = tmp.path / "run1";
  BlockedRunDir blocked(run_dir);
  laggard::SegmentWriter w(run_dir.string(), info(100), /*windows_per_file=*/2);
  laggard::DropCounters totals;
  for (uint64_t i = 0; i < 6; ++i) EXPECT_NE(w.write(window(i), totals, false, 0), "");
  EXPECT_EQ(w.unwritten_segments(), 2u);  // segments 0 and 1 closed unwritten; 2 is current
  blocked.unblock();
  EXPECT_EQ(w.write(window(6), totals, true, 0), "");
  EXPECT_EQ(w.unwritten_segments(), 0u);
  EXPECT_EQ(w.windows_lost(), 0u);

  laggard::report::RunModel m = laggard::report::read_run(run_dir.string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 7u);  // was 3: the windows of segments 0-1 were dropped
  EXPECT_EQ(find_problem(m, "missing_windows"), nullptr);
}

TEST(WriterFaults, MemoryIsBoundedAndWhatIsDroppedIsCountedAndReported) {
  TempDir tmp;
  fs::path run_dir = tmp.path / "run1";
  BlockedRunDir blocked(run_dir);
  laggard::SegmentWriter w(run_dir.string(), info(100), 2, 4u << 20, /*max_unwritten_bytes=*/1);
  laggard::DropCounters totals;
  for (uint64_t i = 0; i < 5; ++i) w.write(window(i), totals, false, 0);
  EXPECT_EQ(w.unwritten_segments(), 0u);  // segments 0 and 1 went as soon as they closed
  EXPECT_EQ(w.windows_lost(), 4u);
  blocked.unblock();
  EXPECT_EQ(w.write(window(5), totals, true, 0), "");

  std::ifstream in(run_dir / "rank00000-100-seg0002.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["windows_lost"], 4);
  laggard::report::RunModel m = laggard::report::read_run(run_dir.string());
  const auto* p = find_problem(m, "missing_windows");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->message.find("4 window(s): 0-3 of 6 flushes"), std::string::npos) << p->message;
  EXPECT_NE(p->message.find("4 window(s) its writer could not write and dropped"), std::string::npos) << p->message;
}

TEST(ReaderChoice, AnExecdChildNeverStandsForItsRank) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::DropCounters totals;
  laggard::SegmentWriter parent(run_dir, info(100, 50), 30), child(run_dir, info(200, 100), 30);
  parent.write(window(0, 3, "parent_step"), totals, true, 0);
  child.write(window(0, 50, "child_step"), totals, true, 0);  // records more
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].pid, 100);
  EXPECT_EQ(m.ranks[0].ppid, 50);
  const auto* p = find_problem(m, "duplicate_rank");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->message.find("using pid 100, the rank's own process; pid(s) 200 were started"), std::string::npos)
      << p->message;
}

TEST(ReaderChoice, UnrelatedWritersOfOneRankKeepTheOneThatRecordedMost) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::DropCounters totals;
  laggard::SegmentWriter a(run_dir, info(100, 50), 30), b(run_dir, info(200, 60), 30);
  a.write(window(0, 3), totals, true, 0);
  b.write(window(0, 50), totals, true, 0);
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].pid, 200);
  const auto* p = find_problem(m, "duplicate_rank");
  ASSERT_NE(p, nullptr);
  EXPECT_NE(p->message.find("using pid 200, which recorded the most"), std::string::npos) << p->message;
}

}  // namespace
