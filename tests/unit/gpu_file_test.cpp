// Schema version 2: a window's GPU data written by capture and read back by the report, and
// version 1 files (no GPU data) still read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <climits>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "file_builders.h"
#include "temp_dir.h"
#include "cut.h"
#include "gpu_timeline.h"
#include "reader_checks.h"
#include "reader.h"
#include "span_chunks.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace gpu_file_test {

using laggard::testing::TempDir;

laggard::FileInfo info() {
  laggard::FileInfo fi = laggard::testing::file_info("gpu1", 0, 1, 42);
  fi.local_rank = 0;
  fi.cupti_enabled = true;
  fi.profiling_interval = 2;
  return fi;
}

constexpr int64_t kStart = 5'000'000'000;

laggard::WindowSnapshot gpu_window() {
  using namespace laggard;
  WindowSnapshot w = laggard::testing::window_at(0, kStart);
  GpuWindow& g = w.gpu;
  g.present = true;
  g.sampled = true;
  g.clock_offset_ns = -123;
  g.strings = {"_Z4gemmPf", "backward", "ncclDevKernel_AllReduce", "[memcpy HtoD]"};
  GpuKernelStats k;
  k.section = 1;
  k.name = 0;
  k.grid = {64, 2, 1};
  k.block = {256, 1, 1};
  k.graph = true;
  k.count = 3;
  k.total_ns = 300;
  k.min_ns = 90;
  k.max_ns = 110;
  k.median_ns = 100;
  g.kernels.push_back(k);
  GpuKernelStats n;
  n.section = kNoString;
  n.name = 2;
  n.nccl = true;
  n.count = 1;
  n.total_ns = n.min_ns = n.max_ns = n.median_ns = 50;
  g.kernels.push_back(n);
  GpuKernelStats c;
  c.name = 3;
  c.section = 1;
  c.kind = GpuRecordKind::memcpy;
  c.count = 1;
  c.total_ns = c.min_ns = c.max_ns = c.median_ns = 20;
  g.kernels.push_back(c);

  GpuRecords& r = g.records;
  auto add = [&](GpuRecordKind kind, uint32_t name, uint32_t section, int64_t start, int64_t dur, int64_t api_start,
                 int64_t api_dur, int32_t shape, uint64_t bytes, uint8_t copy, uint8_t flags) {
    laggard::testing::add_gpu_record(r, {.kind = uint8_t(kind), .name = name, .section = section, .start_ns = start,
                                .dur_ns = dur, .api_start_ns = api_start, .api_dur_ns = api_dur, .shape = shape,
                                .bytes = bytes, .copy_kind = copy, .flags = flags, .tid = 77,
                                .correlation = uint32_t(r.correlation.size() + 1), .device = 1});
  };
  r.shapes.push_back({64, 2, 1, 256, 1, 1});
  add(GpuRecordKind::kernel, 0, 1, kStart + 1000, 100, kStart + 500, 40, 0, 0, 0, kGpuFlagGraph);
  add(GpuRecordKind::kernel, 2, kNoString, kStart + 2000, 50, 0, -1, 0, 0, 0, kGpuFlagNccl | kGpuFlagUnmatched);
  add(GpuRecordKind::memcpy, 3, 1, kStart - 10, 20, kStart - 100, 5, -1, 4096, 1, 0);  // ran before the window
  w.gpu_status.cupti = "on";
  w.gpu_status.library = "/usr/local/cuda/lib64/libcupti.so.13";
  w.gpu_status.has_clock = true;
  w.gpu_status.clock_offset_ns = -123;
  w.gpu_status.clock_uncertainty_ns = 40;
  w.dropped.cupti_records_dropped = 2;
  w.dropped.unmatched_correlation = 1;
  return w;
}

TEST(GpuFile, WindowGpuDataSurvivesTheRoundTrip) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot win = gpu_window();
  ASSERT_EQ(w.write(win, win.dropped, true, 0), "");

  // The file itself: version 2, header fields.
  std::ifstream in(dir + "/rank00000-42-seg0000.json");
  nlohmann::json f = nlohmann::json::parse(in);
  EXPECT_EQ(f["schema_version"], 5);  // versions 3 (NCCL), 4 and 5 keep every version 2 field
  EXPECT_EQ(f["capture"]["cupti"], "on");
  EXPECT_EQ(f["capture"]["cupti_library"], "/usr/local/cuda/lib64/libcupti.so.13");
  EXPECT_EQ(f["clock"]["gpu_offset_ns"], -123);
  EXPECT_EQ(f["clock"]["gpu_offset_uncertainty_ns"], 40);
  EXPECT_EQ(f["config"]["profiling_interval"], 2);
  EXPECT_EQ(f["dropped"]["cupti_records_dropped"], 2);
  EXPECT_EQ(f["windows"][0]["gpu"]["records"]["start_offset_ns"][2], -10);

  using namespace laggard::report;
  RunModel m = read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  const RankData& r = m.ranks[0];
  EXPECT_EQ(r.gpu_clock_offset_ns, -123);
  EXPECT_EQ(r.cupti_status, "on");
  EXPECT_EQ(r.dropped.at("unmatched_correlation"), 1u);
  ASSERT_EQ(r.windows.size(), 1u);
  const CaptureWindow& cw = r.windows[0];
  EXPECT_TRUE(cw.gpu_sampled);
  ASSERT_EQ(cw.kernel_stats.size(), 3u);
  const KernelWindowStats& k = cw.kernel_stats[0];
  EXPECT_EQ(m.strings.at(k.name), "_Z4gemmPf");
  EXPECT_EQ(m.strings.at(k.section), "backward");
  EXPECT_EQ(k.kind, GpuKind::kernel);
  EXPECT_TRUE(k.graph);
  EXPECT_EQ(k.grid[0], 64u);
  EXPECT_EQ(k.grid[1], 2u);
  EXPECT_EQ(k.block[0], 256u);
  EXPECT_EQ(k.count, 3u);
  EXPECT_EQ(k.total_ns, 300);
  EXPECT_EQ(k.median_ns, 100);
  EXPECT_EQ(cw.kernel_stats[1].section, StringTable::kNone);
  EXPECT_TRUE(cw.kernel_stats[1].nccl);
  EXPECT_EQ(cw.kernel_stats[2].kind, GpuKind::memcpy);

  ASSERT_EQ(cw.gpu.size(), 3u);
  const GpuActivity& a = cw.gpu[0];
  EXPECT_EQ(a.kind, GpuKind::kernel);
  EXPECT_EQ(m.strings.at(a.name), "_Z4gemmPf");
  EXPECT_EQ(m.strings.at(a.section), "backward");
  EXPECT_EQ(a.start_ns, kStart + 1000);
  EXPECT_EQ(a.end_ns, kStart + 1100);
  EXPECT_EQ(a.api_start_ns, kStart + 500);
  EXPECT_EQ(a.api_end_ns, kStart + 540);
  EXPECT_EQ(a.api_tid, 77u);
  EXPECT_EQ(a.correlation, 1u);
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.stream, 13u);
  EXPECT_EQ(a.grid[1], 2u);
  EXPECT_EQ(a.block[0], 256u);
  EXPECT_TRUE(a.graph);
  EXPECT_FALSE(a.nccl);
  const GpuActivity& b = cw.gpu[1];
  EXPECT_EQ(b.section, StringTable::kNone);
  EXPECT_TRUE(b.nccl);
  EXPECT_EQ(b.api_start_ns, 0);  // launch not seen
  EXPECT_EQ(b.api_end_ns, 0);
  const GpuActivity& c = cw.gpu[2];
  EXPECT_EQ(c.kind, GpuKind::memcpy);
  EXPECT_EQ(c.start_ns, kStart - 10);
  EXPECT_EQ(c.bytes, 4096u);
  EXPECT_EQ(c.copy_kind, 1);
  EXPECT_EQ(c.grid[0], 0u);
  // Strings are interned once for the whole run.
  EXPECT_EQ(cw.gpu[0].name, k.name);
}

TEST(GpuFile, WindowsWithoutGpuDataHaveNone) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot win;
  win.start_ns = kStart;
  win.end_ns = kStart + 10;
  win.gpu_status.cupti = "idle: this process has not used CUDA";
  ASSERT_EQ(w.write(win, {}, true, 0), "");
  auto m = laggard::report::read_run(dir);
  const auto& r = m.ranks.at(0);
  EXPECT_EQ(r.cupti_status, "idle: this process has not used CUDA");
  EXPECT_EQ(r.gpu_clock_offset_ns, 0);
  EXPECT_FALSE(r.windows.at(0).gpu_sampled);
  EXPECT_TRUE(r.windows.at(0).kernel_stats.empty());
  EXPECT_TRUE(m.problems.empty());
}

TEST(GpuFile, Version1FilesStillRead) {
  TempDir tmp;
  fs::create_directories(tmp.path / "old");
  std::ofstream(tmp.path / "old" / "rank00000-7-seg0000.json") << R"({
    "schema": "laggard-rank", "schema_version": 1, "run_id": "old", "run_id_source": "LAGGARD_RUN_ID",
    "rank": 0, "local_rank": 0, "world_size": 1, "rank_source": "RANK", "host": "h", "pid": 7, "segment": 0,
    "process_start_ns": 1000, "data_end_ns": 3000, "written_ns": 3001, "final": true, "signal": null,
    "clock": {"source": "CLOCK_MONOTONIC + epoch_offset_ns", "epoch_offset_ns": 5},
    "config": {"flush_s": 10, "sections": "", "max_occurrences": 2048}, "capture": {"nvtx": "on"},
    "dropped": {"ring_full": 0},
    "windows": [{"index": 0, "start_ns": 1000, "end_ns": 3000, "dropped": {},
                 "sections": [{"name": "step", "parent": null, "count": 1, "total_ns": 5, "min_ns": 5,
                               "max_ns": 5, "median_ns": 5,
                               "occurrences": {"start_offset_ns": [10], "dur_ns": [5], "tid": [7]}}]}]})";
  auto m = laggard::report::read_run((tmp.path / "old").string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_TRUE(m.problems.empty());
  EXPECT_EQ(m.ranks[0].windows.at(0).sections.at(0).name, "step");
  EXPECT_TRUE(m.ranks[0].windows[0].kernel_stats.empty());
  EXPECT_EQ(m.ranks[0].cupti_status, "");
}

TEST(GpuFile, MalformedGpuColumnsLeaveOutTheWindow) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot win = gpu_window();
  ASSERT_EQ(w.write(win, {}, true, 0), "");
  std::string path = dir + "/rank00000-42-seg0000.json";
  std::ifstream in(path);
  nlohmann::json f = nlohmann::json::parse(in);
  in.close();
  f["windows"][0]["gpu"]["records"]["dur_ns"].erase(0);
  std::ofstream(path) << f.dump();
  // The window is left out, the rank and the rest of its file are kept.
  auto m = laggard::report::read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_TRUE(m.ranks[0].windows.empty());
  ASSERT_FALSE(m.problems.empty());
  EXPECT_EQ(m.problems[0].kind, "invalid_value");
  EXPECT_NE(m.problems[0].message.find("dur_ns"), std::string::npos) << m.problems[0].message;
}

// Issue 9 items 7, 9, 10: schema v4 CUPTI fields, and what the report makes of them.
TEST(GpuFile, StarvedWindowsAndClockProblemsAreProblemsAndTheStatusIsNotOn) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot a = gpu_window();
  a.gpu.launches = 9;
  a.gpu.starved = "libtorch_cuda.so held the CUPTI activity API (its own buffer callbacks): 0 records for 9 launches";
  a.gpu.clock_ticks_per_ns = 2.5;
  a.gpu.clock_problem = "CUPTI's clock changed during this window";
  a.gpu_status.cupti = "starved: " + a.gpu.starved;
  a.gpu_status.version = 130001;
  ASSERT_EQ(w.write(a, a.dropped, false, 0), "");
  laggard::WindowSnapshot b = gpu_window();  // taken back: "on" again in the header
  b.index = 1;
  b.start_ns += 1'000'000'000;
  b.end_ns += 1'000'000'000;
  b.gpu.launches = 3;
  b.gpu_status.version = 130001;
  ASSERT_EQ(w.write(b, b.dropped, true, 0), "");

  std::ifstream in(dir + "/rank00000-42-seg0000.json");
  nlohmann::json f = nlohmann::json::parse(in);
  EXPECT_EQ(f["capture"]["cupti_version"], 130001);
  const nlohmann::json& g0 = f["windows"][0]["gpu"];
  EXPECT_EQ(g0["launches"], 9);
  EXPECT_EQ(g0["clock_ticks_per_ns"], 2.5);
  EXPECT_TRUE(g0.contains("starved"));
  EXPECT_TRUE(g0.contains("clock_problem"));
  const nlohmann::json& g1 = f["windows"][1]["gpu"];
  EXPECT_FALSE(g1.contains("starved"));  // optional: absent when there is nothing to say
  EXPECT_FALSE(g1.contains("clock_ticks_per_ns"));

  using namespace laggard::report;
  RunModel m = read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  const RankData& r = m.ranks[0];
  EXPECT_EQ(r.windows[0].gpu_launches, 9u);
  EXPECT_NE(r.windows[0].gpu_starved, "");
  EXPECT_EQ(r.windows[1].gpu_starved, "");
  EXPECT_EQ(r.cupti_status.rfind("starved in 1 of 2 windows: libtorch_cuda.so", 0), 0u) << r.cupti_status;
  std::set<std::string> kinds;
  for (const Problem& p : m.problems) kinds.insert(p.kind);
  EXPECT_TRUE(kinds.count("gpu_starved"));
  EXPECT_TRUE(kinds.count("gpu_clock"));
}

// Issue 26: windows during which another CUPTI client (torch.profiler) held what laggard uses
// carry a note and the launches laggard could not record; the report makes them a gpu_shared
// problem and the rank's CUPTI status says so, with the count.
TEST(GpuFile, SharedWindowsAreProblemsWithTheLaunchesNotRecorded) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu26").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot a = gpu_window();
  a.gpu.launches = 12;
  a.gpu.missed_launches = 7;
  a.gpu.shared = "libtorch_cuda.so held CUPTI's activity API without laggard's record kinds: 7 launches not recorded";
  ASSERT_EQ(w.write(a, a.dropped, false, 0), "");
  laggard::WindowSnapshot b = gpu_window();
  b.index = 1;
  b.start_ns += 1'000'000'000;
  b.end_ns += 1'000'000'000;
  b.gpu.shared = "libtorch_cuda.so held CUPTI's activity API; laggard read the records from its buffers";
  ASSERT_EQ(w.write(b, b.dropped, false, 0), "");
  laggard::WindowSnapshot c = gpu_window();
  c.index = 2;
  c.start_ns += 2'000'000'000;
  c.end_ns += 2'000'000'000;
  ASSERT_EQ(w.write(c, c.dropped, true, 0), "");

  std::ifstream in(dir + "/rank00000-42-seg0000.json");
  nlohmann::json f = nlohmann::json::parse(in);
  EXPECT_EQ(f["windows"][0]["gpu"]["missed_launches"], 7);
  EXPECT_TRUE(f["windows"][1]["gpu"].contains("shared"));
  EXPECT_FALSE(f["windows"][1]["gpu"].contains("missed_launches"));  // optional: absent when 0
  EXPECT_FALSE(f["windows"][2]["gpu"].contains("shared"));

  using namespace laggard::report;
  RunModel m = read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  const RankData& r = m.ranks[0];
  EXPECT_EQ(r.windows[0].gpu_missed_launches, 7u);
  EXPECT_EQ(r.windows[1].gpu_shared.rfind("libtorch_cuda.so held", 0), 0u);
  EXPECT_EQ(r.cupti_status.rfind("shared in 2 of 3 windows, 7 launches not recorded: libtorch_cuda.so", 0), 0u)
      << r.cupti_status;
  bool problem = false;
  for (const Problem& p : m.problems)
    if (p.kind == "gpu_shared") {
      problem = true;
      EXPECT_NE(p.message.find("7 launches not recorded"), std::string::npos) << p.message;
    }
  EXPECT_TRUE(problem);
}

// Schema v5, "Version 5: late GPU records": window 1's file carries statistics for window 0
// (CUPTI delivered them after window 0 was written); the reader adds them to window 0, merging
// with the same key exactly (count, total, min, max) and adding new keys. Statistics for a
// window that is not in the data stay where they arrived.
TEST(GpuFile, LateStatisticsGoToTheWindowTheyBelongTo) {
  using namespace laggard;
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  SegmentWriter w(dir, info(), 30);
  WindowSnapshot a = gpu_window();
  ASSERT_EQ(w.write(a, a.dropped, false, 0), "");
  WindowSnapshot b = gpu_window();
  b.index = 1;
  b.start_ns += 1'000'000'000;
  b.end_ns += 1'000'000'000;
  GpuKernelStats same = b.gpu.kernels[0];  // _Z4gemmPf in backward: 3 in window 0 already
  same.count = 5;
  same.total_ns = 5 * 80;
  same.min_ns = 70;
  same.max_ns = 130;
  same.median_ns = 80;
  GpuKernelStats added = same;  // another shape: a key window 0 does not have
  added.grid = {1, 1, 1};
  added.count = 1;
  added.total_ns = added.min_ns = added.max_ns = added.median_ns = 7;
  GpuKernelStats orphan = added;  // for window 77, not in the data
  b.gpu.late = {{0, {same, added}}, {77, {orphan}}};
  b.gpu.late_unplaced = 4;
  ASSERT_EQ(w.write(b, b.dropped, true, 0), "");

  std::ifstream in(dir + "/rank00000-42-seg0000.json");
  nlohmann::json f = nlohmann::json::parse(in);
  EXPECT_FALSE(f["windows"][0]["gpu"].contains("late"));  // optional: absent when nothing was late
  const nlohmann::json& late = f["windows"][1]["gpu"]["late"];
  ASSERT_EQ(late.size(), 2u);
  EXPECT_EQ(late[0]["window"], 0);
  EXPECT_EQ(late[0]["kernels"][0]["count"], 5);
  EXPECT_EQ(f["windows"][1]["gpu"]["late_unplaced"], 4);

  using namespace laggard::report;
  RunModel m = read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  const RankData& r = m.ranks[0];
  ASSERT_EQ(r.windows.size(), 2u);
  const auto& w0 = r.windows[0].kernel_stats;
  ASSERT_EQ(w0.size(), 4u);  // 3 of its own + the new shape
  EXPECT_EQ(w0[0].count, 8u);
  EXPECT_EQ(w0[0].total_ns, 300 + 400);
  EXPECT_EQ(w0[0].min_ns, 70);
  EXPECT_EQ(w0[0].max_ns, 130);
  EXPECT_EQ(w0[0].median_ns, 80);  // the larger part's
  EXPECT_EQ(w0[3].grid[0], 1u);
  EXPECT_EQ(w0[3].count, 1u);
  const auto& w1 = r.windows[1].kernel_stats;
  ASSERT_EQ(w1.size(), 4u);  // 3 of its own + the one for the missing window 77
  EXPECT_EQ(w1[0].count, 3u);
  EXPECT_EQ(w1[3].total_ns, 7);
  EXPECT_TRUE(r.windows[1].gpu_late.empty());
  uint64_t all = 0;
  for (const CaptureWindow& cw : r.windows)
    for (const KernelWindowStats& k : cw.kernel_stats) all += k.count;
  EXPECT_EQ(all, 2u * (3 + 1 + 1) + 5 + 1 + 1);  // nothing lost, nothing counted twice
}

// Issue 14: `laggard report` reads records as GpuSpans (ReadOptions::compact_gpu). Every field
// the analyses read must arrive as in the full record, ids interned the same way.
TEST(GpuFile, CompactReadKeepsWhatTheAnalysesReadOfEveryRecord) {
  TempDir tmp;
  std::string dir = (tmp.path / "gpu1").string();
  laggard::SegmentWriter w(dir, info(), 30);
  laggard::WindowSnapshot win = gpu_window();
  ASSERT_EQ(w.write(win, win.dropped, true, 0), "");

  using namespace laggard::report;
  const RunModel full = read_run(dir);
  ReadOptions compact_opts;
  compact_opts.compact_gpu = true;
  const RunModel compact = read_run(dir, compact_opts);
  ASSERT_EQ(compact.ranks.size(), 1u);
  const CaptureWindow& f = full.ranks[0].windows[0];
  const CaptureWindow& cw = compact.ranks[0].windows[0];
  EXPECT_TRUE(cw.gpu.empty());
  EXPECT_TRUE(cw.gpu_spans.empty());  // moved into the rank's array, read through spans_of
  const SpanRange c = compact.ranks[0].spans_of(cw);
  ASSERT_EQ(c.size(), f.gpu.size());
  EXPECT_EQ(cw.kernel_stats.size(), f.kernel_stats.size());
  for (size_t i = 0; i < f.gpu.size(); ++i) {
    const GpuActivity& a = f.gpu[i];
    const GpuSpan s = c[i];
    EXPECT_EQ(s.start_ns, a.start_ns) << i;
    EXPECT_EQ(s.end_ns, a.end_ns) << i;
    EXPECT_EQ(s.api_start_ns, a.api_start_ns) << i;
    EXPECT_EQ(s.api_end_ns, a.api_end_ns) << i;
    EXPECT_EQ(compact.strings.at(s.name), full.strings.at(a.name)) << i;
    EXPECT_EQ(s.section == StringTable::kNone, a.section == StringTable::kNone) << i;
    if (s.section != StringTable::kNone) {
      EXPECT_EQ(compact.strings.at(s.section), full.strings.at(a.section)) << i;
    }
    EXPECT_EQ(s.stream, a.stream) << i;
    EXPECT_EQ(s.device, a.device) << i;
    EXPECT_EQ(s.kind, a.kind) << i;
    EXPECT_EQ(s.nccl, a.nccl) << i;
  }
  EXPECT_EQ(c[2].kind, GpuKind::memcpy);
  EXPECT_TRUE(c[1].nccl);
}

TEST(GpuFile, SpanCarriesEveryAnalysedFieldAtItsLimits) {
  using namespace laggard::report;
  static_assert(sizeof(GpuSpan) <= 48, "the compact record is what keeps 43 M kernels in memory");
  GpuActivity a;
  a.start_ns = INT64_MAX - 1;
  a.end_ns = INT64_MAX;
  a.api_start_ns = INT64_MIN;
  a.api_end_ns = -1;
  a.name = StringTable::kNone - 1;
  a.section = StringTable::kNone;
  a.stream = UINT32_MAX;
  a.device = kMaxGpuDevice;
  a.kind = GpuKind::memset;
  a.nccl = true;
  GpuSpan s = span_of(a);
  EXPECT_EQ(s.start_ns, INT64_MAX - 1);
  EXPECT_EQ(s.end_ns, INT64_MAX);
  EXPECT_EQ(s.api_start_ns, INT64_MIN);
  EXPECT_EQ(s.api_end_ns, -1);
  EXPECT_EQ(s.name, StringTable::kNone - 1);
  EXPECT_EQ(s.section, StringTable::kNone);
  EXPECT_EQ(s.stream, UINT32_MAX);
  EXPECT_EQ(s.device, kMaxGpuDevice);
  EXPECT_EQ(s.kind, GpuKind::memset);
  EXPECT_TRUE(s.nccl);
  GpuActivity low;  // the other ends: zero times (unknown launch), device -1, a plain kernel
  low.device = -1;
  s = span_of(low);
  EXPECT_EQ(s.api_start_ns, 0);
  EXPECT_EQ(s.device, -1);
  EXPECT_EQ(s.stream, 0u);
  EXPECT_EQ(s.kind, GpuKind::kernel);
  EXPECT_FALSE(s.nccl);
  GpuActivity made;  // a record made in memory with a device no file may hold: unknown, not wrapped around
  made.device = kMaxGpuDevice + 1;
  EXPECT_EQ(span_of(made).device, -1);
}

// Issue 29: a file's records are kept packed in 16 bytes: the start as a 32-bit offset from its
// block's base (2^31 ns before the start of the block's first record), the host and GPU lengths as
// offsets from the start (the launch call's in 16 bits), and what they share with other records
// (name, section, device, stream, kind, NCCL) as a label. Whatever does not pack exactly is kept
// whole: every record reads back as it was, at the limits of each offset and of int64.
struct Awkward {
  laggard::report::GpuSpan span;
  bool packs_alone;      // as a chunk's first record: the block's base is its own start's
  bool packs_after_first;  // after the first record (t) in the same block
};

std::vector<Awkward> awkward_spans() {
  using laggard::report::GpuSpan;
  std::vector<Awkward> out;
  auto add = [&](int64_t start, int64_t end, int64_t api_start, int64_t api_end, bool alone, bool after_first) {
    GpuSpan s;
    s.start_ns = start;
    s.end_ns = end;
    s.api_start_ns = api_start;
    s.api_end_ns = api_end;
    s.name = uint32_t(out.size());
    s.section = uint32_t(out.size() % 3);
    s.device = int16_t(out.size() % 4 - 1);
    s.stream = uint32_t(out.size() % 5 == 0 ? UINT32_MAX : 7);
    s.kind = laggard::report::GpuKind(out.size() % 3);
    s.nccl = out.size() % 2;
    out.push_back({s, alone, after_first});
  };
  const int64_t t = 1'700'000'000'000'000'000, max32 = UINT32_MAX, max16 = UINT16_MAX, half = int64_t{1} << 31;
  add(t, t + 1000, t - 500, t - 400, true, true);                         // packs
  add(t, t + 1000, 0, 0, true, true);                                     // packs: launch unknown
  add(t, t + max32, t - (max32 - 1), t - (max32 - 1) + max16, true, true);  // packs: every offset at its largest
  add(t, t + 1000, t - 500, t - 500 + max16 + 1, false, false);          // a launch call of over 65 us
  add(t, t + max32 + 1, t - 500, t - 400, false, false);                 // a kernel of over 4.3 s
  add(t, t + 1000, t - max32, t - 400, false, false);                    // a launch 4.3 s ahead (UINT32_MAX means unknown)
  add(t, t + 1000, t - 500, t - 500 + max32 + 1, false, false);          // a launch call of over 4.3 s
  add(t, t + 1000, t + 10, t + 20, false, false);                        // launched after its start (clock trouble)
  add(t, t - 1, t - 500, t - 400, false, false);                         // ends before it starts
  add(t, t + 1000, 0, t - 400, false, false);                            // launch start unknown, end known
  add(t, t + 1000, t - 500, 0, false, false);                            // the other way round
  add(t, t + 1000, t - 500, t - 600, false, false);                      // a call that ends before it starts
  add(t + half - 1, t + half, 0, 0, true, true);                         // packs: the block's latest start
  add(t + half, t + half + 1, 0, 0, true, false);                        // 2^31 ns after the block's first
  add(t - half, t - half + 1, 0, 0, true, true);                         // packs: the block's earliest start
  add(t - half - 1, t - half, 0, 0, true, false);                        // before it
  add(INT64_MAX - 1, INT64_MAX, INT64_MAX - 3, INT64_MAX - 2, true, false);  // near the top of int64
  add(INT64_MIN, INT64_MIN + 5, 0, 0, true, false);                      // the bottom
  add(INT64_MIN, INT64_MAX, INT64_MIN, -1, false, false);                // neither fits
  add(500, 1000, 500, 600, true, false);                                 // launch at its start
  add(0, 0, 0, 0, true, false);
  return out;
}

TEST(SpanChunk, EveryRecordReadsBackAsItWasPackedOrKeptWhole) {
  using namespace laggard::report;
  static_assert(sizeof(PackedSpan) == 16, "what keeps 960 x 903 x 50 kernels in 2 GiB");
  const std::vector<Awkward> spans = awkward_spans();
  SpanChunk together;
  for (const Awkward& s : spans) {
    SpanChunk alone;
    alone.push_back(s.span);
    EXPECT_TRUE(alone.at(0) == s.span) << s.span.name;
    EXPECT_EQ(!SpanChunk::is_escaped(alone.packed[0]), s.packs_alone) << s.span.name;
    together.push_back(s.span);
  }
  ASSERT_EQ(together.size(), spans.size());
  size_t kept_whole = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_TRUE(together.at(i) == spans[i].span) << i;
    EXPECT_EQ(!SpanChunk::is_escaped(together.packed[i]), spans[i].packs_after_first) << i;
    kept_whole += !spans[i].packs_after_first;
  }
  EXPECT_EQ(together.escaped.size(), kept_whole);
  EXPECT_EQ(together.labels.size(), spans.size() - kept_whole);  // every packed record its own: each has its own name
  SpanRange range(together, 2, 3);
  std::vector<GpuSpan> seen(range.begin(), range.end());
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_TRUE(seen[2] == spans[4].span);
}

// Each block of 64 positions has its own base: records an hour apart pack when the later one begins
// a block, and are kept whole inside one. A chunk cut back (a refused window) drops the bases of the
// blocks it no longer reaches, and the next record begins its block anew.
TEST(SpanChunk, EachBlockOfPositionsHasItsOwnBase) {
  using namespace laggard::report;
  constexpr size_t kBlock = size_t{1} << SpanChunk::kBlockBits;
  static_assert(kBlock == 64);
  const int64_t hour = 3'600'000'000'000;
  auto span_at = [](int64_t start) {
    GpuSpan s;
    s.start_ns = start;
    s.end_ns = start + 100;
    s.api_start_ns = start - 50;
    s.api_end_ns = start - 40;
    s.name = 1;
    return s;
  };
  SpanChunk chunk;
  std::vector<GpuSpan> spans;
  const size_t jump = kBlock + kBlock / 2;
  for (size_t i = 0; i < 3 * kBlock + 5; ++i) {
    // Block 1 begins an hour later; in it, one record jumps an hour more.
    const int64_t start = 1'000'000 + int64_t(i) * 1000 + (i >= kBlock ? hour : 0) + (i == jump ? hour : 0);
    spans.push_back(span_at(start));
    chunk.push_back(spans.back());
  }
  ASSERT_EQ(chunk.block_base.size(), 4u);
  for (size_t i = 0; i < spans.size(); ++i) ASSERT_TRUE(chunk.at(i) == spans[i]) << i;
  EXPECT_EQ(chunk.escaped.size(), 1u);
  EXPECT_TRUE(SpanChunk::is_escaped(chunk.packed[jump]));
  EXPECT_FALSE(SpanChunk::is_escaped(chunk.packed[kBlock]));
  chunk.truncate({kBlock, 0});
  EXPECT_EQ(chunk.block_base.size(), 1u);
  const GpuSpan later = span_at(5 * hour);  // begins block 1 again, with its own base
  chunk.push_back(later);
  EXPECT_TRUE(chunk.at(kBlock) == later);
  EXPECT_FALSE(SpanChunk::is_escaped(chunk.packed[kBlock]));
  // A block's records 2.1 s after its first are kept whole: 40 ms apart, the last ten of 64.
  SpanChunk sparse;
  for (size_t i = 0; i < kBlock; ++i) sparse.push_back(span_at(int64_t(i) * 40'000'000));
  EXPECT_EQ(sparse.escaped.size(), 10u);
  for (size_t i = 0; i < kBlock; ++i) EXPECT_TRUE(sparse.at(i) == span_at(int64_t(i) * 40'000'000)) << i;
}

// Records that move keep their times: a chunk appended to another (a rank's files joined) lands at
// other positions, under other bases; records compacted by a cut move to earlier blocks; a clock
// shift moves every base, and records whose times then saturate are packed again or kept whole.
TEST(SpanChunk, RecordsKeepTheirTimesWhenTheyMoveOrShift) {
  using namespace laggard::report;
  auto make = [](size_t n, int64_t first, int64_t step, uint32_t name) {
    std::vector<GpuSpan> v;
    for (size_t i = 0; i < n; ++i) {
      GpuSpan s;
      s.start_ns = first + int64_t(i) * step;
      s.end_ns = s.start_ns + 100 + int64_t(i % 7);
      if (i % 3) s.api_start_ns = s.start_ns - 500, s.api_end_ns = s.start_ns - 400 + int64_t(i % 5);
      s.name = name + uint32_t(i % 4);
      s.section = uint32_t(i % 2);
      v.push_back(s);
    }
    return v;
  };
  const std::vector<GpuSpan> a = make(1500, 1'000'000, 1000, 0);
  std::vector<GpuSpan> b = make(1300, 10'000'000'000, 35'000'000, 2);  // 10 s later, 35 ms apart
  b[700].api_end_ns = b[700].api_start_ns + 70'000;  // kept whole in b
  SpanChunk ca, cb;
  for (const GpuSpan& s : a) ca.push_back(s);
  for (const GpuSpan& s : b) cb.push_back(s);
  const size_t b_kept_whole = cb.escaped.size();  // b[700], and b's records 2.1 s after their block's first
  ASSERT_GT(b_kept_whole, 1u);
  ca.drop_label_lookups();
  const uint32_t first = ca.append(std::move(cb));
  ASSERT_EQ(first, a.size());
  std::vector<GpuSpan> all = a;
  all.insert(all.end(), b.begin(), b.end());
  ASSERT_EQ(ca.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) ASSERT_TRUE(ca.at(i) == all[i]) << i;
  // In their new blocks (b begins in the middle of one), other records of b lie too far from their
  // block's first, and others no longer do.
  EXPECT_NE(ca.escaped.size(), b_kept_whole);
  EXPECT_LT(ca.escaped.size(), b.size() / 2);

  // Compacting: every third record dropped, the rest moved down across block boundaries.
  std::vector<GpuSpan> kept;
  size_t to = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % 3 == 1) continue;
    ca.move_record(i, to++);
    kept.push_back(all[i]);
  }
  for (size_t i = 0; i < kept.size(); ++i) ASSERT_TRUE(ca.at(i) == kept[i]) << i;

  // Shifting: by a minute, then to the top of int64 (times saturate: packed again or kept whole).
  for (const int64_t d : {int64_t{60'000'000'000}, INT64_MAX - 5'000'000'000}) {
    SpanChunk c;
    for (const GpuSpan& s : all) c.push_back(s);
    auto shift = [d](GpuSpan& s) {
      auto move = [d](int64_t& t, bool keep_zero) {
        if (keep_zero && !t) return;
        if (__builtin_add_overflow(t, d, &t)) t = d > 0 ? INT64_MAX : INT64_MIN;
      };
      move(s.start_ns, false);
      move(s.end_ns, false);
      move(s.api_start_ns, true);
      move(s.api_end_ns, true);
    };
    c.shift(d, shift);
    for (size_t i = 0; i < all.size(); ++i) {
      GpuSpan want = all[i];
      shift(want);
      ASSERT_TRUE(c.at(i) == want) << "shift " << d << " record " << i;
    }
  }
}

// Records share labels: one per (name, section, device, stream, kind, NCCL) however the records
// interleave, a name seen again in another section or on another stream gets its own, and past a
// chunk's 65,535th label (16 bits) a record that needs a new one is kept whole: still read back.
TEST(SpanChunk, RecordsShareOneLabelPerNameSectionAndStream) {
  using namespace laggard::report;
  SpanChunk chunk;
  std::vector<GpuSpan> spans;
  for (uint32_t i = 0; i < 70'000; ++i) {
    GpuSpan s;
    s.start_ns = 1000 + i;
    s.end_ns = 2000 + i;
    s.name = i % 7;                 // interleaved names
    s.section = i % 3 == 0 ? 5 : 6;  // each name in two sections
    s.stream = i < 1000 ? 9 : i;     // then a stream per record
    s.device = int16_t(i % 2);
    s.nccl = s.name == 3;
    spans.push_back(s);
    chunk.push_back(s);
  }
  spans.push_back(spans[5]);  // a label met long before
  chunk.push_back(spans[5]);
  spans.push_back(spans[5]);
  spans.back().name = StringTable::kNone;  // no name, and an id no string table holds
  chunk.push_back(spans.back());
  spans.push_back(spans[5]);
  spans.back().name = 0xfffffff0u;
  chunk.push_back(spans.back());
  std::set<std::tuple<uint32_t, uint32_t, uint32_t, int16_t, bool>> distinct;
  for (const GpuSpan& s : spans) distinct.insert({s.name, s.section, s.stream, s.device, s.nccl});
  ASSERT_GT(distinct.size(), size_t{PackedSpan::kEscaped});
  EXPECT_EQ(chunk.labels.size(), size_t{PackedSpan::kEscaped});
  EXPECT_EQ(chunk.escaped.size(), distinct.size() - PackedSpan::kEscaped);  // one record per label past the table
  EXPECT_FALSE(SpanChunk::is_escaped(chunk.packed[70'000]));  // the label met long before
  for (size_t i = 0; i < spans.size(); ++i) ASSERT_TRUE(chunk.at(i) == spans[i]) << i;
}

// The reader compares a record's label with its name's last one as two 8-byte words made from the
// fields (SpanChunk::Label::words_of): a record differing from it in any one field, each at the
// edges of its range (a device of -1 sign-extends), gets a label of its own and reads back as it was.
TEST(SpanChunk, ARecordDifferingFromItsNamesLastLabelInOneFieldGetsItsOwn) {
  using namespace laggard::report;
  GpuSpan base;
  base.start_ns = 1000;
  base.end_ns = 2000;
  base.name = 4;
  base.section = 5;
  base.stream = 6;
  base.device = 0;
  std::vector<GpuSpan> variants;
  auto vary = [&](auto change) {
    GpuSpan v = base;
    change(v);
    variants.push_back(v);
  };
  vary([](GpuSpan& v) { v.section = 0xffffffffu; });
  vary([](GpuSpan& v) { v.stream = 0xffffffffu; });
  vary([](GpuSpan& v) { v.device = -1; });
  vary([](GpuSpan& v) { v.device = INT16_MAX; });
  vary([](GpuSpan& v) { v.kind = GpuKind::memcpy; });
  vary([](GpuSpan& v) { v.kind = GpuKind::memset; });
  vary([](GpuSpan& v) { v.nccl = true; });
  SpanChunk chunk;
  std::vector<GpuSpan> spans;
  for (const GpuSpan& v : variants)
    for (const GpuSpan& s : {base, v, v, base}) {  // each after the name's last label differing in one field
      spans.push_back(s);
      chunk.push_back(s);
    }
  EXPECT_EQ(chunk.labels.size(), 1 + variants.size());
  for (size_t i = 0; i < spans.size(); ++i) ASSERT_TRUE(chunk.at(i) == spans[i]) << i;
}

// The reader renumbers a file's string ids into the run's (reader_parallel.cpp) by its labels: the
// records read back renamed, and records packed after that (a rank shifted in time is packed
// again) find or make labels by the new ids.
TEST(SpanChunk, RenamedLabelsReadBackAndLabelRecordsPackedLater) {
  using namespace laggard::report;
  SpanChunk chunk;
  GpuSpan a;
  a.start_ns = 1000;
  a.end_ns = 2000;
  a.name = 0;
  a.section = 1;
  chunk.push_back(a);
  GpuSpan b = a;
  b.name = 1;
  chunk.push_back(b);
  for (SpanChunk::Label& l : chunk.labels) {  // as remap does: 0 -> 1, 1 -> 0
    l.name = 1 - l.name;
    l.section = 7;
  }
  chunk.drop_label_lookups();
  EXPECT_EQ(chunk.at(0).name, 1u);
  EXPECT_EQ(chunk.at(1).name, 0u);
  EXPECT_EQ(chunk.at(0).section, 7u);
  GpuSpan c = a;
  c.name = 1;
  c.section = 7;
  chunk.push_back(c);
  GpuSpan d = a;
  d.section = 1;  // name 0, section 1: no record has it now
  chunk.push_back(d);
  EXPECT_TRUE(chunk.at(2) == c);
  EXPECT_TRUE(chunk.at(3) == d);
  EXPECT_EQ(chunk.at(0).name, 1u);
}

// A rank whose clock disagrees is shifted (reader_checks.cpp): packed records move with their
// start; one whose host time would become 0 (unknown) or saturate is packed again, so the
// records read back as the same records shifted one by one would.
TEST(SpanChunk, AShiftedRankReadsAsItsRecordsShiftedOneByOne) {
  using namespace laggard::report;
  const int64_t to_zero = -(1'700'000'000'000'000'000 - 500);  // the first record's launch to 0
  for (int64_t d : {int64_t(-5'000'000'000'000), int64_t(5'000'000'000'000), to_zero, INT64_MAX / 2, INT64_MIN / 2}) {
    std::vector<GpuSpan> spans;
    for (const Awkward& a : awkward_spans()) spans.push_back(a.span);
    RunModel wide, packed;
    for (int r = 0; r < 3; ++r) {
      RankData a;
      a.rank = r;
      CaptureWindow w;
      w.start_ns = r == 2 ? 1'000 - d : 1'000;  // rank 2's clock is off: shifted by d
      w.end_ns = w.start_ns + 1'000'000;
      w.gpu_sampled = true;
      RankData b = a;
      CaptureWindow pw = w;
      if (r == 2) {
        w.gpu_spans = spans;
        b.span_chunks.emplace_back();
        for (const GpuSpan& s : spans) b.span_chunks[0].push_back(s);
        pw.gpu_spans_count = uint32_t(spans.size());
      }
      a.windows.push_back(w);
      b.windows.push_back(pw);
      wide.ranks.push_back(a);
      packed.ranks.push_back(b);
    }
    align_rank_clocks(wide);
    align_rank_clocks(packed);
    const SpanRange x = wide.ranks[2].spans_of(wide.ranks[2].windows[0]);
    const SpanRange y = packed.ranks[2].spans_of(packed.ranks[2].windows[0]);
    ASSERT_EQ(x.size(), spans.size());
    ASSERT_EQ(y.size(), spans.size());
    EXPECT_NE(x[0].start_ns, spans[0].start_ns) << d;  // it was shifted
    for (size_t i = 0; i < spans.size(); ++i) EXPECT_TRUE(x[i] == y[i]) << d << " " << i;
  }
}

// The compact record holds a device in 16 bits (issue 29): a file's device above kMaxGpuDevice
// is refused like any value out of range, in both formats and both reading modes: the window is
// left out with a problem naming the field, the rest of the file is kept.
TEST(GpuFile, ADeviceAboveTheLargestOrdinalLeavesOutTheWindow) {
  for (laggard::FileFormat format : {laggard::FileFormat::json, laggard::FileFormat::binary})
    for (bool compact : {false, true}) {
      TempDir tmp;
      std::string dir = (tmp.path / "gpu1").string();
      laggard::SegmentWriter w(dir, info(), 30);
      w.set_format(format);
      laggard::WindowSnapshot win = gpu_window();
      win.gpu.records.device[1] = laggard::report::kMaxGpuDevice + 1;
      ASSERT_EQ(w.write(win, {}, false, 0), "");
      laggard::WindowSnapshot fine = gpu_window();
      fine.index = win.index + 1;
      ASSERT_EQ(w.write(fine, {}, true, 0), "");
      laggard::report::ReadOptions opts;
      opts.compact_gpu = compact;
      auto m = laggard::report::read_run(dir, opts);
      const std::string what = std::string(format == laggard::FileFormat::json ? "json" : "binary") +
                               (compact ? ", compact" : ", full");
      ASSERT_EQ(m.ranks.size(), 1u) << what;
      ASSERT_EQ(m.ranks[0].windows.size(), 1u) << what;
      EXPECT_EQ(m.ranks[0].windows[0].index, fine.index) << what;
      ASSERT_FALSE(m.problems.empty()) << what;
      EXPECT_NE(m.problems[0].message.find("device"), std::string::npos) << what << ": " << m.problems[0].message;
    }
}

}  // namespace gpu_file_test

namespace gpu_file_test {

// A sampled window of `n` kernels on two streams, written in launch order (as CUPTI's records of
// one launching thread come), the last one launched just before the next window's first.
laggard::WindowSnapshot launch_ordered_window(uint64_t index, int n = 6) {
  using namespace laggard;
  WindowSnapshot w = laggard::testing::window_at(index, kStart);
  w.gpu.present = true;
  w.gpu.sampled = true;
  w.gpu.strings = {"_Z4gemmPf", "forward", "ncclDevKernel_AllReduce"};
  for (int i = 0; i < n; ++i) {
    const int64_t launch = w.start_ns + 1000 + i * 400;
    laggard::testing::add_gpu_record(
        w.gpu.records, {.kind = uint8_t(GpuRecordKind::kernel), .name = uint32_t(i % 3 == 2 ? 2 : 0), .section = 1,
                        .start_ns = launch + 5000 - (i % 2) * 4000, .dur_ns = 300 + i, .api_start_ns = launch,
                        .api_dur_ns = 20, .flags = uint8_t(i % 3 == 2 ? kGpuFlagNccl : 0),
                        .correlation = uint32_t(index * 100 + i + 1), .device = 0, .stream = uint32_t(7 + i % 2)});
  }
  return w;
}

std::string write_ordered_run(const laggard::testing::TempDir& tmp, int windows, int windows_per_file,
                              laggard::FileFormat format) {
  std::string dir = (tmp.path / "ordered").string();
  laggard::SegmentWriter w(dir, info(), windows_per_file);
  w.set_format(format);
  for (int i = 0; i < windows; ++i) {
    laggard::WindowSnapshot win = launch_ordered_window(uint64_t(i));
    EXPECT_EQ(w.write(win, {}, i + 1 == windows, 0), "");
  }
  return dir;
}

bool same_spans(const laggard::report::GpuTimeline& a, const laggard::report::GpuTimeline& b) {
  if (a.size() != b.size() || a.previous != b.previous || a.by_stream != b.by_stream) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto &x = a.at(i), &y = b.at(i);
    if (x.start_ns != y.start_ns || x.end_ns != y.end_ns || x.api_start_ns != y.api_start_ns ||
        x.api_end_ns != y.api_end_ns || x.name != y.name || x.stream != y.stream || x.nccl != y.nccl)
      return false;
  }
  return true;
}

// Issue 29: the reader keeps a rank's compact records in one array, each window a range of it, and
// the analyses' timeline reads a rank's records there when they are in launch order: no pointer a
// record. A rank's several files (a long job's) are joined into that one array too
// (span_chunks.h); records kept in several arrays (models made otherwise, or more than 32-bit
// positions hold) are read through pointers. Every way, the timeline is the one of the full
// records, in both file formats.
TEST(GpuFile, TheTimelineReadsARanksRecordsWhereTheReaderKeepsThem) {
  using namespace laggard::report;
  for (laggard::FileFormat format : {laggard::FileFormat::json, laggard::FileFormat::binary})
    for (int per_file : {10, 1}) {
      TempDir tmp;
      const std::string dir = write_ordered_run(tmp, 4, per_file, format);
      const std::string what = std::string(format == laggard::FileFormat::json ? "json" : "binary") +
                               (per_file == 1 ? ", a file a window" : ", one file");
      ReadOptions compact_opts;
      compact_opts.compact_gpu = true;
      const RunModel full = read_run(dir), compact = read_run(dir, compact_opts);
      ASSERT_EQ(compact.ranks.size(), 1u) << what;
      const RankData& r = compact.ranks[0];
      ASSERT_EQ(r.windows.size(), 4u) << what;
      EXPECT_EQ(r.files.size(), per_file == 1 ? 4u : 1u) << what;
      EXPECT_EQ(r.span_chunks.size(), 1u) << what;
      for (const CaptureWindow& w : r.windows) {
        EXPECT_TRUE(w.gpu_spans.empty()) << what;
        EXPECT_EQ(r.spans_of(w).size(), 6u) << what;
      }
      const GpuTimeline a = index_gpu(full.ranks[0]), b = index_gpu(r);
      EXPECT_EQ(a.size(), 24u) << what;
      EXPECT_TRUE(same_spans(a, b)) << what;
      EXPECT_TRUE(b.by_launch.empty()) << what;
      EXPECT_EQ(b.in_chunk, &r.span_chunks[0]) << what;

      // The same records kept one array per window: through pointers, the same timeline.
      RankData split = r;
      split.span_chunks.clear();
      for (CaptureWindow& w : split.windows) {
        SpanChunk own;
        for (const GpuSpan& x : r.spans_of(w)) own.push_back(x);
        w.gpu_spans_chunk = static_cast<uint32_t>(split.span_chunks.size());
        w.gpu_spans_first = 0;
        split.span_chunks.push_back(std::move(own));
      }
      const GpuTimeline c = index_gpu(split);
      EXPECT_TRUE(same_spans(a, c)) << what;
      EXPECT_EQ(c.by_launch.size(), 24u) << what;
    }
}

// Joining a file's records onto another's: labels both have are shared, the others added, records
// kept whole (escaped) keep their place in the joined table, and every record reads back as it was.
TEST(GpuFile, AppendingAFilesRecordsKeepsEveryRecord) {
  using namespace laggard::report;
  auto span = [](int64_t start, uint32_t name, uint32_t stream, int64_t dur) {
    GpuSpan a;
    a.start_ns = start;
    a.end_ns = start + dur;
    a.api_start_ns = start - 100;
    a.api_end_ns = start - 90;
    a.name = name;
    a.section = 9;
    a.stream = stream;
    a.device = 0;
    return a;
  };
  const int64_t kLong = int64_t{5} << 32;  // longer than 32 bits of ns: kept whole
  const std::vector<GpuSpan> first = {span(1000, 1, 7, 10), span(2000, 2, 7, kLong), span(3000, 1, 7, 30)};
  const std::vector<GpuSpan> second = {span(4000, 2, 7, 40), span(5000, 3, 8, 50), span(6000, 1, 7, kLong),
                                       span(7000, 3, 8, 70)};
  SpanChunk into, from;
  for (const GpuSpan& a : first) into.push_back(a);
  for (const GpuSpan& a : second) from.push_back(a);
  ASSERT_EQ(into.escaped.size(), 1u);
  ASSERT_EQ(from.escaped.size(), 1u);
  ASSERT_EQ(into.labels.size(), 1u);  // the kept-whole record takes no label
  ASSERT_EQ(from.labels.size(), 2u);
  EXPECT_EQ(into.append(std::move(from)), 3u);
  ASSERT_EQ(into.size(), 7u);
  EXPECT_EQ(into.labels.size(), 3u);  // (1, 7) shared; (2, 7) and (3, 8) added
  EXPECT_EQ(into.escaped.size(), 2u);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(into.at(i), first[i]) << i;
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(into.at(first.size() + i), second[i]) << i;
  EXPECT_TRUE(from.empty());  // its memory goes with the call
  // Packing more after the join reads back right too (labels are looked up anew).
  into.push_back(span(8000, 3, 8, 80));
  EXPECT_EQ(into.at(7), span(8000, 3, 8, 80));
  EXPECT_TRUE(spans_fit_one_array(UINT32_MAX, 10));
  EXPECT_FALSE(spans_fit_one_array(uint64_t{UINT32_MAX} + 1, 10));
  EXPECT_FALSE(spans_fit_one_array(10, PackedSpan::kEscaped));
}

// A cut (laggard report --steps, --sections) drops records inside a window's range of its rank's
// array: what is left is what the cut leaves of the full records, window by window.
TEST(GpuFile, ACutKeepsTheSameRecordsFromTheRanksArray) {
  using namespace laggard::report;
  TempDir tmp;
  const std::string dir = write_ordered_run(tmp, 4, 10, laggard::FileFormat::binary);
  ReadOptions compact_opts;
  compact_opts.compact_gpu = true;
  const RunModel full = read_run(dir), compact = read_run(dir, compact_opts);
  StepSet steps;  // step 1 ends among window 2's records: it keeps the 2nd and 4th of them, not a prefix
  steps.per_rank.push_back({{0, kStart, kStart + 1'000'000'000},
                            {1, kStart + 1'000'000'000, kStart + 2'000'000'000 + 3500},
                            {2, kStart + 2'000'000'000 + 3500, kStart + 4'000'000'000}});
  auto expect_same = [](const RunModel& a, const RunModel& b, const char* what, size_t fewer_than) {
    ASSERT_EQ(a.ranks.size(), 1u) << what;
    ASSERT_EQ(b.ranks.size(), 1u) << what;
    ASSERT_EQ(a.ranks[0].windows.size(), b.ranks[0].windows.size()) << what;
    size_t kept = 0;
    for (size_t i = 0; i < a.ranks[0].windows.size(); ++i) {
      const std::vector<GpuActivity>& x = a.ranks[0].windows[i].gpu;
      const SpanRange y = b.ranks[0].spans_of(b.ranks[0].windows[i]);
      ASSERT_EQ(x.size(), y.size()) << what << " " << i;
      for (size_t k = 0; k < x.size(); ++k) EXPECT_EQ(x[k].start_ns, y[k].start_ns) << what << " " << i << " " << k;
      kept += x.size();
    }
    EXPECT_GT(kept, 0u) << what;
    EXPECT_LT(kept, fewer_than) << what;
    EXPECT_TRUE(same_spans(index_gpu(a.ranks[0]), index_gpu(b.ranks[0]))) << what;
  };
  expect_same(cut_to_steps(full, steps, {1, 1}), cut_to_steps(compact, steps, {1, 1}), "steps 1", 24);
  Cut sections;
  sections.sections = "forw";
  const RunModel kept_all = apply_cut(compact, sections);
  EXPECT_EQ(index_gpu(kept_all.ranks[0]).size(), 24u);
  // The section filter after a step cut: ranges already shortened are shortened again.
  expect_same(apply_cut(cut_to_steps(full, steps, {1, 2}), sections),
              apply_cut(cut_to_steps(compact, steps, {1, 2}), sections), "steps 1-2, sections", 24);
  sections.sections = "^backward$";
  const RunModel none = apply_cut(compact, sections);
  for (const CaptureWindow& w : none.ranks[0].windows) EXPECT_TRUE(none.ranks[0].spans_of(w).empty());
}

}  // namespace gpu_file_test
