// Hostile or broken rank files (issue 10, items 7 and 8): every case named there is read into a
// bounded model with a problem entry, never an abort, an out-of-memory or a wrapped value. The
// bounds asserted here (report windows, problem entries) are what keep memory and time small.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "reader.h"
#include "reader_segment.h"
#include "report_command.h"
#include "scores.h"
#include "temp_dir.h"

namespace reader_safety_test {

using nlohmann::json;
using laggard::testing::TempDir;
namespace rep = laggard::report;

constexpr int64_t kStart = 1'795'419'561'000'000'000;  // 2026
constexpr int64_t kFlushNs = 250'000'000;              // 0.25 s, the flush that made a year 126 M windows
constexpr int64_t kYearNs = 365LL * 86400 * 1'000'000'000;

// A schema-3 rank file: `windows` windows of 0.25 s, each with 5 occurrences of "step".
json rank_file(int rank, int world, int windows, int64_t start = kStart, int64_t dur = 10'000'000) {
  json f = {{"schema", "laggard-rank"}, {"schema_version", 3}, {"run_id", "r"},  {"rank", rank},
            {"world_size", world},      {"host", "h" + std::to_string(rank)},     {"pid", 100 + rank},
            {"segment", 0},             {"process_start_ns", start},             {"data_end_ns", start + windows * kFlushNs},
            {"final", true},            {"config", {{"flush_s", 0.25}}},          {"dropped", json::object()}};
  json ws = json::array();
  for (int i = 0; i < windows; ++i) {
    json occ = {{"start_offset_ns", json::array()}, {"dur_ns", json::array()}, {"tid", json::array()}};
    for (int k = 0; k < 5; ++k) {
      occ["start_offset_ns"].push_back(k * 40'000'000);
      occ["dur_ns"].push_back(dur);
      occ["tid"].push_back(7);
    }
    ws.push_back({{"index", i},
                  {"start_ns", start + i * kFlushNs},
                  {"end_ns", start + (i + 1) * kFlushNs},
                  {"sections", json::array({{{"name", "step"}, {"parent", nullptr}, {"count", 5},
                                             {"total_ns", 5 * dur}, {"min_ns", dur}, {"max_ns", dur},
                                             {"median_ns", dur}, {"occurrences", occ}}})}});
  }
  f["windows"] = ws;
  return f;
}

void write(const std::filesystem::path& dir, const json& f) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir / ("rank" + std::to_string(f["rank"].get<int>()) + "-" + std::to_string(f["pid"].get<int>()) +
                       "-seg0000.json"))
      << f.dump();
}

bool has_problem(const rep::RunModel& m, const std::string& kind, int rank = -2) {
  for (const auto& p : m.problems)
    if (p.kind == kind && (rank == -2 || p.rank == rank)) return true;
  return false;
}

std::string problems_of(const rep::RunModel& m) {
  std::string s;
  for (const auto& p : m.problems) s += "[" + p.kind + "] " + p.message + "\n";
  return s;
}

// The whole report (every analysis, both renderers) on the directory: must finish with rc 0.
void full_report_runs(const std::filesystem::path& dir) {
  for (const char* format : {"json", "text"}) {
    laggard::cli::ReportOptions o;
    o.dir = dir.string();
    o.format = format;
    std::ostringstream out, err;
    EXPECT_EQ(laggard::cli::report_command(o, out, err), 0) << err.str();
  }
}

TEST(ReaderSafety, HostClockAYearOffIsAlignedNotSpreadOverAYearOfWindows) {
  TempDir tmp;
  for (int r = 0; r < 4; ++r) write(tmp.path, rank_file(r, 4, 8, r == 2 ? kStart + kYearNs : kStart));
  rep::RunModel m = rep::read_run(tmp.path.string());
  ASSERT_EQ(m.ranks.size(), 4u);
  EXPECT_TRUE(has_problem(m, "clock_disagrees", 2)) << problems_of(m);
  EXPECT_EQ(m.ranks[2].windows.front().start_ns, kStart);  // shifted to start with the others
  rep::ScoreReport s = rep::compute_scores(m, {});
  EXPECT_LE(s.windows.size(), 10u);
  full_report_runs(tmp.path);
}

TEST(ReaderSafety, ClockNear1970IsAligned) {
  TempDir tmp;
  for (int r = 0; r < 4; ++r) write(tmp.path, rank_file(r, 4, 8, r == 1 ? 5'000'000'000 : kStart));
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_TRUE(has_problem(m, "clock_disagrees", 1)) << problems_of(m);
  EXPECT_LE(rep::compute_scores(m, {}).windows.size(), 10u);
  full_report_runs(tmp.path);
}

TEST(ReaderSafety, ClocksThatAgreeWithinTheRunAreLeftAlone) {
  TempDir tmp;
  for (int r = 0; r < 4; ++r) write(tmp.path, rank_file(r, 4, 8, kStart + r * 20'000'000));
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_FALSE(has_problem(m, "clock_disagrees")) << problems_of(m);
  EXPECT_EQ(m.ranks[3].windows.front().start_ns, kStart + 60'000'000);
}

TEST(ReaderSafety, OneWindow1e17NsOffIsLeftOut) {
  TempDir tmp;
  for (int r = 0; r < 2; ++r) {
    json f = rank_file(r, 2, 6);
    if (r == 1) {
      f["windows"][3]["start_ns"] = kStart + 100'000'000'000'000'000;
      f["windows"][3]["end_ns"] = kStart + 100'000'000'250'000'000;
    }
    write(tmp.path, f);
  }
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_TRUE(has_problem(m, "window_time_outlier", 1)) << problems_of(m);
  EXPECT_EQ(m.ranks[1].windows.size(), 5u);
  EXPECT_LE(rep::compute_scores(m, {}).windows.size(), 10u);
  full_report_runs(tmp.path);
}

// Found by fuzz_reader: an imported window from 1970 to 2024 (one window, so no other window
// to compare it with) made a report of 54 years. A window longer than any duration a file may
// hold (104 days) is left out and named, however many windows the rank has.
TEST(ReaderSafety, AWindowDecadesLongIsLeftOut) {
  TempDir tmp;
  for (int r = 0; r < 2; ++r) {
    json f = rank_file(r, 2, 2);
    if (r == 1) f["windows"][0]["start_ns"] = 30'000'000'000'000'000;  // 1970 + 347 days
    write(tmp.path, f);
  }
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_TRUE(has_problem(m, "window_time_outlier", 1)) << problems_of(m);
  ASSERT_EQ(m.ranks[1].windows.size(), 1u);
  EXPECT_EQ(m.ranks[1].windows[0].index, 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u);
  EXPECT_FALSE(has_problem(m, "window_time_outlier", 0)) << problems_of(m);
  full_report_runs(tmp.path);
}

// Found by fuzz_reader under UBSan: "launches": 9.2e19 was read with json::value(key,
// uint64_t), a float-to-integer conversion out of range (undefined behaviour); likewise the
// NCCL plugin table and p2p counts. Anything but an unsigned integer leaves its window out.
TEST(ReaderSafety, CountsThatAreFloatsOrNegativeLeaveTheirWindowOut) {
  TempDir tmp;
  json gpu = rank_file(0, 2, 4);
  gpu["windows"][1]["gpu"] = {{"sampled", false}, {"launches", 9.2e19}};
  gpu["windows"][2]["gpu"] = {{"sampled", false}, {"launches", -5}};
  write(tmp.path, gpu);
  json nccl = rank_file(1, 2, 4);
  nccl["windows"][3]["nccl"] = {{"comms", {{{"id", "c0"}, {"nranks", 1}, {"rank", 0}}}},
                                {"p2p", {{{"comm", 0}, {"sends", 1e300}}}}};
  write(tmp.path, nccl);
  rep::RunModel m = rep::read_run(tmp.path.string());
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u) << problems_of(m);
  EXPECT_EQ(m.ranks[1].windows.size(), 3u) << problems_of(m);
  EXPECT_NE(problems_of(m).find("gpu.launches"), std::string::npos) << problems_of(m);
  EXPECT_NE(problems_of(m).find("nccl.p2p.sends"), std::string::npos) << problems_of(m);
  full_report_runs(tmp.path);
}

// Found by fuzz_reader (tests/fuzz): a GPU stream event's device of -2e91 was converted to
// int32_t unchecked (undefined behaviour, garbage in the model). Its window is left out, named.
TEST(ReaderSafety, StreamEventValuesOutOfRangeLeaveTheirWindowOut) {
  TempDir tmp;
  json f = rank_file(0, 1, 3);
  f["windows"][1]["gpu"] = {{"sampled", true},
                            {"strings", {"Stream Sync"}},
                            {"stream_events",
                             {{"name", {0}}, {"start_offset_ns", {0}}, {"dur_ns", {5}}, {"device", {-2e91}},
                              {"stream", {1}}, {"correlation", {1}}, {"api_start_offset_ns", {0}}, {"api_dur_ns", {-1}}}}};
  write(tmp.path, f);
  rep::RunModel m = rep::read_run(tmp.path.string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u) << problems_of(m);
  EXPECT_NE(problems_of(m).find("gpu.stream_events.device"), std::string::npos) << problems_of(m);
  full_report_runs(tmp.path);
}

TEST(ReaderSafety, WorldSizeOf1e8IsIgnoredAndMissingRanksStayFewEntries) {
  TempDir tmp;
  json f0 = rank_file(0, 2, 4);
  f0["world_size"] = 1e8;
  write(tmp.path, f0);
  json f1 = rank_file(1, 2, 4);
  f1["world_size"] = 1 << 20;  // within bounds, but a million ranks missing
  write(tmp.path, f1);
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_TRUE(has_problem(m, "invalid_value", 0)) << problems_of(m);
  EXPECT_EQ(m.world_size, 1 << 20);
  EXPECT_LT(m.problems.size(), 50u);
  EXPECT_TRUE(has_problem(m, "missing_rank", 2));  // one entry for the run of absent ranks 2-1048575
}

TEST(ReaderSafety, NcclCommunicatorOf2e9RanksLeavesOutItsWindowNotTheReport) {
  TempDir tmp;
  for (int r = 0; r < 2; ++r) {
    json f = rank_file(r, 2, 4);
    f["windows"][1]["nccl"] = {
        {"comms", json::array({{{"id", "00ab"}, {"nranks", 2e9}, {"rank", r}, {"nnodes", 1}}})},
        {"strings", json::array({"AllReduce"})},
        {"ops", {{"comm", {0}}, {"p2p", {0}}, {"func", {0}}, {"seq", {1}}, {"count", {1}}, {"bytes", {4}},
                 {"datatype", {-1}}, {"root", {-1}}, {"peer", {-1}}, {"algo", {-1}}, {"proto", {-1}},
                 {"nchannels", {1}}, {"host_start_offset_ns", {10}}, {"host_dur_ns", {10}},
                 {"gpu_start_offset_ns", {20}}, {"gpu_dur_ns", {5}}}}};
    write(tmp.path, f);
  }
  rep::RunModel m = rep::read_run(tmp.path.string());
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].windows.size(), 3u);
  EXPECT_TRUE(has_problem(m, "invalid_value", 0)) << problems_of(m);
  full_report_runs(tmp.path);
}

TEST(ReaderSafety, HugeSparseFileIsRefusedUnread) {
  TempDir tmp;
  write(tmp.path, rank_file(0, 2, 4));
  const auto huge = tmp.path / "rank1-101-seg0000.json";
  std::ofstream(huge) << rank_file(1, 2, 4).dump();
  std::filesystem::resize_file(huge, 6ULL << 30);  // sparse: no disk used
  rep::RunModel m = rep::read_run(tmp.path.string());
  EXPECT_EQ(m.ranks.size(), 1u);
  ASSERT_TRUE(has_problem(m, "unreadable_file")) << problems_of(m);
  EXPECT_NE(problems_of(m).find("more than the 268435456 bytes"), std::string::npos) << problems_of(m);
}

TEST(ReaderSafety, NegativeDurationsCountsAndDropsAreRejectedNotWrapped) {
  TempDir tmp;
  json f0 = rank_file(0, 2, 4);
  f0["windows"][1]["sections"][0]["occurrences"]["dur_ns"][2] = -390949;
  f0["windows"][2]["sections"][0]["count"] = -5;
  f0["dropped"]["unbalanced_pop"] = -1;
  write(tmp.path, f0);
  write(tmp.path, rank_file(1, 2, 4));
  rep::RunModel m = rep::read_run(tmp.path.string());
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u);  // windows 1 and 2 left out
  EXPECT_TRUE(m.ranks[0].dropped.empty());   // -1 is not 18446744073709551615
  std::string p = problems_of(m);
  EXPECT_NE(p.find("dur_ns: -390949 is negative"), std::string::npos) << p;
  EXPECT_NE(p.find("unbalanced_pop: -1 is negative"), std::string::npos) << p;
  for (const auto& w : m.ranks[0].windows)
    for (const auto& s : w.sections)
      for (const auto& o : s.occurrences) EXPECT_GE(o.dur_ns, 0);
}

TEST(ReaderSafety, MoreStoredOccurrencesThanCountedIsImpossible) {
  json f = rank_file(0, 1, 2);
  f["windows"][0]["sections"][0]["count"] = 2;
  rep::StringTable strings;
  rep::Segment s = rep::parse_segment_text(f.dump(), "x", strings);
  EXPECT_EQ(s.windows.size(), 1u);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("stores 5 occurrences but counts 2"), std::string::npos) << s.notes[0];
}

TEST(ReaderSafety, RankOutOfRangeMakesTheFileUnreadable) {
  rep::StringTable strings;
  for (json bad : {json(-1), json(2e9), json(1.5), json("3")}) {
    json f = rank_file(0, 1, 1);
    f["rank"] = bad;
    EXPECT_THROW(rep::parse_segment_text(f.dump(), "x", strings), std::exception) << bad;
  }
}

}  // namespace
