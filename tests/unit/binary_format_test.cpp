// Schema version 5 (docs/schema.md, "Version 5: binary kernel records"): windows appended once as
// checked frames with GPU records in fixed-width columns; the reader reads them like JSON files,
// copes with a torn tail, and parses rank files in parallel with the same result.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "frame_out.h"
#include "progress.h"
#include "reader.h"
#include "reader_frames.h"
#include "file_builders.h"
#include "reader_segment.h"
#include "temp_dir.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace binary_format_test {

using laggard::testing::TempDir;
using laggard::report::GpuActivity;
using laggard::report::RunModel;

constexpr int64_t kStart = 1'700'000'000'000'000'000;
constexpr int64_t kWindowNs = 1'000'000'000;

laggard::FileInfo info(int rank, long pid = 100) {
  laggard::FileInfo fi = laggard::testing::file_info("bin1", rank, 2, pid);
  fi.local_rank = rank;
  fi.cupti_enabled = true;
  return fi;
}

// One record of every sort: kernels in and out of sections, a graph kernel, NCCL, a memcpy that
// started before the window, a launch call that was not seen.
void add_record(laggard::GpuRecords& r, uint8_t kind, uint32_t name, uint32_t section, int64_t start, int64_t dur,
                int64_t api_start, int64_t api_dur, int32_t shape, uint64_t bytes, uint8_t copy, uint8_t flags) {
  laggard::testing::add_gpu_record(
      r, {.kind = kind, .name = name, .section = section, .start_ns = start, .dur_ns = dur,
          .api_start_ns = api_start, .api_dur_ns = api_dur, .shape = shape, .bytes = bytes, .copy_kind = copy,
          .flags = flags, .correlation = r.correlation.empty() ? 7u : r.correlation.back() + 3,
          .device = kind == 0 ? 0 : -1});
}

// A step's worth of kernels: `kernels` launches of distinct names in section "step", like the
// GTC 2020 workload (903 kernels per step).
laggard::WindowSnapshot window(uint64_t index, int kernels, int rank_skew_ns = 0) {
  laggard::WindowSnapshot w = laggard::testing::window_at(index, kStart, kWindowNs);
  w.sections.push_back(laggard::testing::section_of("step", {900'000'000}, w.start_ns + 1000, 4242));
  laggard::GpuWindow& g = w.gpu;
  g.present = g.sampled = true;
  g.strings.push_back("step");
  g.strings.push_back("[memcpy HtoD]");
  g.records.shapes.push_back({64, 2, 1, 256, 1, 1});
  g.records.shapes.push_back({1024, 1, 1, 128, 1, 1});
  add_record(g.records, 1, 1, 0, w.start_ns - 500, 400, w.start_ns - 900, 30, -1, 1u << 20, 1, 0);
  int64_t t = w.start_ns + 2000;
  for (int k = 0; k < kernels; ++k) {
    g.strings.push_back("_Z6kernel" + std::to_string(k) + "PfS_i");
    uint32_t name = static_cast<uint32_t>(g.strings.size() - 1);
    int64_t dur = 20'000 + (k * 7919) % 900'000 + rank_skew_ns;
    bool unmatched = k % 97 == 5;
    add_record(g.records, 0, name, unmatched ? laggard::kNoString : 0, t, dur, unmatched ? 0 : t - 3000 - k % 50,
               unmatched ? -1 : 2500 + k % 300, k % 2, 0, 0,
               uint8_t((k % 50 == 0 ? laggard::kGpuFlagNccl : 0) | (k % 3 == 0 ? laggard::kGpuFlagGraph : 0) |
                       (unmatched ? laggard::kGpuFlagUnmatched : 0)));
    t += dur + 1500 + k % 700;
  }
  laggard::GpuKernelStats st;
  st.section = 0;
  st.name = 2;
  st.count = 1;
  st.total_ns = st.min_ns = st.max_ns = st.median_ns = 20'000;
  g.kernels.push_back(st);
  laggard::GpuKernelStats copy;
  copy.section = laggard::kNoString;
  copy.name = 1;
  copy.kind = laggard::GpuRecordKind::memcpy;
  copy.nccl = copy.graph = true;
  copy.grid = {1024, 3, 1};
  copy.block = {128, 2, 1};
  copy.count = 70000;
  copy.total_ns = 5'000'000'000'000;
  copy.min_ns = 400;
  copy.max_ns = 9'000'000;
  copy.median_ns = 1234;
  g.kernels.push_back(copy);
  w.gpu_status.cupti = "on";
  return w;
}

std::string write_run(const fs::path& dir, laggard::FileFormat format, int ranks, int windows, int kernels,
                      int windows_per_file = 30) {
  for (int r = 0; r < ranks; ++r) {
    laggard::SegmentWriter w(dir.string(), info(r, 100 + r), windows_per_file);
    w.set_format(format);
    for (int i = 0; i < windows; ++i) {
      laggard::WindowSnapshot win = window(uint64_t(i), kernels, r * 1000);
      std::string err = w.write(win, win.dropped, i + 1 == windows, 0);
      if (!err.empty()) return err;
    }
  }
  return "";
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void expect_same_activity(const GpuActivity& a, const GpuActivity& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.section, b.section);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.api_start_ns, b.api_start_ns);
  EXPECT_EQ(a.api_end_ns, b.api_end_ns);
  EXPECT_EQ(a.api_tid, b.api_tid);
  EXPECT_EQ(a.correlation, b.correlation);
  EXPECT_EQ(a.device, b.device);
  EXPECT_EQ(a.stream, b.stream);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(a.grid[d], b.grid[d]);
    EXPECT_EQ(a.block[d], b.block[d]);
  }
  EXPECT_EQ(a.bytes, b.bytes);
  EXPECT_EQ(a.copy_kind, b.copy_kind);
  EXPECT_EQ(a.nccl, b.nccl);
  EXPECT_EQ(a.graph, b.graph);
}

void expect_same_stats(const laggard::report::KernelWindowStats& a, const laggard::report::KernelWindowStats& b) {
  EXPECT_EQ(a.section, b.section);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.nccl, b.nccl);
  EXPECT_EQ(a.graph, b.graph);
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(a.grid[d], b.grid[d]);
    EXPECT_EQ(a.block[d], b.block[d]);
  }
  EXPECT_EQ(a.count, b.count);
  EXPECT_EQ(a.total_ns, b.total_ns);
  EXPECT_EQ(a.min_ns, b.min_ns);
  EXPECT_EQ(a.max_ns, b.max_ns);
  EXPECT_EQ(a.median_ns, b.median_ns);
}

void expect_same_runs(const RunModel& a, const RunModel& b) {
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  ASSERT_EQ(a.strings.size(), b.strings.size());
  for (uint32_t i = 0; i < a.strings.size(); ++i) EXPECT_EQ(a.strings.at(i), b.strings.at(i));
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    ASSERT_EQ(a.ranks[r].windows.size(), b.ranks[r].windows.size());
    EXPECT_EQ(a.ranks[r].final, b.ranks[r].final);
    EXPECT_EQ(a.ranks[r].data_end_ns, b.ranks[r].data_end_ns);
    for (size_t w = 0; w < a.ranks[r].windows.size(); ++w) {
      const auto &wa = a.ranks[r].windows[w], &wb = b.ranks[r].windows[w];
      EXPECT_EQ(wa.index, wb.index);
      ASSERT_EQ(wa.sections.size(), wb.sections.size());
      ASSERT_EQ(wa.kernel_stats.size(), wb.kernel_stats.size());
      ASSERT_EQ(wa.gpu.size(), wb.gpu.size());
      for (size_t i = 0; i < wa.gpu.size(); ++i) expect_same_activity(wa.gpu[i], wb.gpu[i]);
      for (size_t i = 0; i < wa.kernel_stats.size(); ++i) expect_same_stats(wa.kernel_stats[i], wb.kernel_stats[i]);
    }
  }
}

const laggard::report::Problem* find_problem(const RunModel& m, const std::string& kind) {
  for (const auto& p : m.problems)
    if (p.kind == kind) return &p;
  return nullptr;
}

TEST(BinaryFormat, ReadsBackExactlyWhatTheJsonFormatReadsBack) {
  TempDir tmp;
  ASSERT_EQ(write_run(tmp.path / "json", laggard::FileFormat::json, 2, 3, 40), "");
  ASSERT_EQ(write_run(tmp.path / "bin", laggard::FileFormat::binary, 2, 3, 40), "");
  EXPECT_TRUE(fs::exists(tmp.path / "bin" / "rank00000-100-seg0000.lgr"));
  RunModel json = laggard::report::read_run((tmp.path / "json").string());
  RunModel bin = laggard::report::read_run((tmp.path / "bin").string());
  EXPECT_EQ(json.ranks.at(0).windows.at(0).gpu.size(), 41u);
  EXPECT_EQ(json.ranks.at(0).windows.at(0).kernel_stats.size(), 2u);
  expect_same_runs(json, bin);
  EXPECT_EQ(find_problem(bin, "torn_tail"), nullptr);
  EXPECT_EQ(find_problem(bin, "invalid_value"), nullptr);
}

TEST(BinaryFormat, AKernelRecordTakesAtMost40BytesBeforeCompression) {
  laggard::WindowSnapshot w = window(0, 903);
  std::string block = laggard::encode_gpu_records(w.gpu.records, w.start_ns);
  double per_record = double(block.size()) / double(w.gpu.records.size());
  EXPECT_LE(per_record, 40.0) << block.size() << " bytes for " << w.gpu.records.size() << " records";
}

TEST(BinaryFormat, EachWindowIsWrittenOnceByAppending) {
  TempDir tmp;
  laggard::SegmentWriter w((tmp.path / "run").string(), info(0), 30);
  w.set_format(laggard::FileFormat::binary);
  std::vector<std::string> after;
  for (uint64_t i = 0; i < 3; ++i) {
    laggard::WindowSnapshot win = window(i, 50);
    ASSERT_EQ(w.write(win, win.dropped, false, 0), "");
    after.push_back(file_bytes(w.current_path()));
  }
  // Every earlier state of the file is a prefix of the later one: nothing was rewritten.
  EXPECT_LT(after[0].size(), after[1].size());
  EXPECT_EQ(after[1].compare(0, after[0].size(), after[0]), 0);
  EXPECT_EQ(after[2].compare(0, after[1].size(), after[1]), 0);
}

TEST(BinaryFormat, SegmentsRollOverAndAreReadTogether) {
  TempDir tmp;
  ASSERT_EQ(write_run(tmp.path / "run", laggard::FileFormat::binary, 1, 5, 10, 2), "");
  EXPECT_TRUE(fs::exists(tmp.path / "run" / "rank00000-100-seg0002.lgr"));
  EXPECT_FALSE(fs::exists(tmp.path / "run" / "rank00000-100-seg0003.lgr"));
  RunModel m = laggard::report::read_run((tmp.path / "run").string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 5u);
  EXPECT_TRUE(m.ranks[0].final);
  EXPECT_EQ(find_problem(m, "missing_windows"), nullptr);
}

// A crash mid-append: whatever the cut, the whole windows before it are read and the tail is a
// problem entry, never a failure of the file.
TEST(BinaryFormat, ATornTailKeepsTheWholeWindowsBeforeIt) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  ASSERT_EQ(write_run(run, laggard::FileFormat::binary, 1, 3, 30), "");
  fs::path file = run / "rank00000-100-seg0000.lgr";
  std::string whole = file_bytes(file);
  // Where the third frame starts: each frame is a 20-byte head (stored length at byte 8) + payload.
  auto frame_end = [&](size_t at) {
    uint32_t stored = 0;
    for (int i = 3; i >= 0; --i) stored = (stored << 8) | static_cast<unsigned char>(whole[at + 8 + i]);
    return at + 20 + stored;
  };
  std::string two_windows = whole.substr(0, frame_end(frame_end(0)));
  for (size_t cut : {two_windows.size() + 3, two_windows.size() + 19, two_windows.size() + 25, whole.size() - 1}) {
    std::ofstream(file, std::ios::binary | std::ios::trunc) << whole.substr(0, cut);
    RunModel m = laggard::report::read_run(run.string());
    ASSERT_EQ(m.ranks.size(), 1u) << cut;
    EXPECT_EQ(m.ranks[0].windows.size(), 2u) << cut;
    EXPECT_FALSE(m.ranks[0].final) << cut;
    const auto* torn = find_problem(m, "torn_tail");
    ASSERT_NE(torn, nullptr) << cut;
    EXPECT_NE(torn->message.find("2 whole window(s)"), std::string::npos) << torn->message;
  }
}

TEST(BinaryFormat, AFrameThatDoesNotCheckOutEndsTheFileThere) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  ASSERT_EQ(write_run(run, laggard::FileFormat::binary, 1, 3, 30), "");
  fs::path file = run / "rank00000-100-seg0000.lgr";
  std::string bytes = file_bytes(file);
  bytes[bytes.size() - 10] ^= 0x5a;  // inside the last frame: its CRC no longer matches
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes << "garbage";
  RunModel m = laggard::report::read_run(run.string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u);
  const auto* torn = find_problem(m, "torn_tail");
  ASSERT_NE(torn, nullptr);
  EXPECT_NE(torn->message.find("checksum"), std::string::npos) << torn->message;
}

TEST(BinaryFormat, AFileWithNoWholeFrameIsUnreadableNotFatal) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  ASSERT_EQ(write_run(run, laggard::FileFormat::binary, 2, 1, 30), "");
  fs::path file = run / "rank00001-101-seg0000.lgr";
  std::string bytes = file_bytes(file);
  std::ofstream(file, std::ios::binary | std::ios::trunc) << bytes.substr(0, bytes.size() / 2);
  RunModel m = laggard::report::read_run(run.string());
  EXPECT_EQ(m.ranks.size(), 1u);
  const auto* bad = find_problem(m, "unreadable_file");
  ASSERT_NE(bad, nullptr);
  EXPECT_NE(bad->message.find("no whole window"), std::string::npos) << bad->message;
}

TEST(BinaryFormat, FailedAppendsWaitInMemoryAndLandInOrder) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  std::ofstream(run) << "x";  // the run directory's name is taken: every write fails
  laggard::SegmentWriter w(run.string(), info(0), 30);
  w.set_format(laggard::FileFormat::binary);
  for (uint64_t i = 0; i < 2; ++i) {
    laggard::WindowSnapshot win = window(i, 5);
    EXPECT_NE(w.write(win, win.dropped, false, 0), "");
  }
  EXPECT_EQ(w.unwritten_segments(), 2u);
  fs::remove(run);
  laggard::WindowSnapshot last = window(2, 5);
  ASSERT_EQ(w.write(last, last.dropped, true, 0), "");
  EXPECT_EQ(w.unwritten_segments(), 0u);
  RunModel m = laggard::report::read_run(run.string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 3u);
  EXPECT_TRUE(m.ranks[0].final);
}

TEST(BinaryFormat, MemoryForUnwrittenFramesIsBoundedAndCounted) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  std::ofstream(run) << "x";
  laggard::SegmentWriter w(run.string(), info(0), 30, 4u << 20, 1);  // room for one frame
  w.set_format(laggard::FileFormat::binary);
  for (uint64_t i = 0; i < 3; ++i) {
    laggard::WindowSnapshot win = window(i, 5);
    EXPECT_NE(w.write(win, win.dropped, false, 0), "");
  }
  EXPECT_EQ(w.windows_lost(), 2u);
  fs::remove(run);
  laggard::WindowSnapshot last = window(3, 5);
  ASSERT_EQ(w.write(last, last.dropped, true, 0), "");
  RunModel m = laggard::report::read_run(run.string());
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows_lost, 3u);  // the last window waited too when the fourth came
}

TEST(BinaryFormat, ParallelParsingGivesTheModelOneThreadGives) {
  TempDir tmp;
  ASSERT_EQ(write_run(tmp.path / "run", laggard::FileFormat::binary, 4, 2, 25), "");
  laggard::report::ReadOptions one, two;
  one.threads = 1;
  two.threads = 2;
  size_t calls = 0, last_done = 0, total = 0;
  two.on_progress = [&](size_t done, size_t files, uint64_t, uint64_t) {
    ++calls;
    last_done = done;
    total = files;
  };
  RunModel a = laggard::report::read_run((tmp.path / "run").string(), one);
  RunModel b = laggard::report::read_run((tmp.path / "run").string(), two);
  expect_same_runs(a, b);
  EXPECT_EQ(calls, 4u);
  EXPECT_EQ(last_done, 4u);
  EXPECT_EQ(total, 4u);
}

// Files finish in any order on several threads, and each file's strings are interned into the
// run's table as soon as the files before it are done (InOrderStrings, reader.cpp): the ids are
// still the ones one thread gives. Every rank names its kernels and sections apart, so the run's
// ids depend on the files' order, and small files on 4 threads finish out of it.
TEST(BinaryFormat, StringIdsFollowTheFilesOrderHoweverTheyFinish) {
  TempDir tmp;
  for (int r = 0; r < 24; ++r) {
    laggard::SegmentWriter w((tmp.path / "run").string(), info(r, 100 + r), 30);
    w.set_format(r % 2 ? laggard::FileFormat::binary : laggard::FileFormat::json);
    laggard::WindowSnapshot win = window(0, 3 + r % 5, r * 1000);
    for (std::string& name : win.gpu.strings) name += "_rank" + std::to_string(24 - r);
    win.sections.push_back(laggard::testing::section_of("only_rank" + std::to_string(r), {1000}, win.start_ns + 10, 1));
    ASSERT_EQ(w.write(win, win.dropped, true, 0), "");
  }
  laggard::report::ReadOptions one, four;
  one.threads = 1;
  four.threads = 4;
  const RunModel a = laggard::report::read_run((tmp.path / "run").string(), one);
  ASSERT_EQ(a.ranks.size(), 24u);
  EXPECT_GT(a.strings.size(), 24u * 4);
  for (int k = 0; k < 5; ++k) expect_same_runs(a, laggard::report::read_run((tmp.path / "run").string(), four));
}

// Frames whose checksum is right but whose GPU block is not (a writer bug, a crafted file): the
// window is left out with a note or the file refused, never a crash or a read past the block.
TEST(BinaryFormat, AMalformedGpuBlockIsAnErrorNotACrash) {
  laggard::WindowSnapshot w = window(0, 20);
  std::string header = R"({"schema":"laggard-rank","schema_version":5,"run_id":"r","rank":0,"pid":1,"segment":0})";
  std::string window_json = laggard::render_window(w, false);
  std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
  std::mt19937 rng(14);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = block;
    if (trial % 3 == 0) bad.resize(rng() % bad.size());
    for (int flips = 1 + int(rng() % 4); flips > 0; --flips) bad[rng() % bad.size()] = static_cast<char>(rng());
    std::string file = laggard::encode_frame(header, window_json, bad);
    laggard::report::StringTable strings;
    try {
      laggard::report::Segment s = laggard::report::parse_segment_text(file, "f.lgr", strings);
      for (const auto& win : s.windows) EXPECT_LE(win.gpu.size(), w.gpu.records.size() + 1000u);
    } catch (const std::exception&) {
      // refused with a message: fine
    }
  }
}

// Records are decoded in place into an array sized once for the block (issue 29): a block refused at
// its last record must leave the window's arrays as they were, in either decoding mode, and the
// same block with every string known must decode whole. (The per-record push_back it replaced kept
// the records before the bad one.)
// 700 kernels: a block of several decoding batches (reader_frames.cpp, Columns::kBatch), refused in its last.
TEST(BinaryFormat, ABlockRefusedAtItsLastRecordKeepsNoneOfItsRecords) {
  for (int kernels : {20, 700}) {
  SCOPED_TRACE(kernels);
  const laggard::WindowSnapshot w = window(0, kernels);
  const std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
  const size_t records = w.gpu.records.kind.size();
  ASSERT_EQ(records, size_t(kernels) + 1);
  for (bool as_spans : {false, true}) {
    laggard::report::DecodeGpuAsSpans mode(as_spans);
    std::vector<uint32_t> ids(w.gpu.strings.size() - 1);  // the last kernel's name unknown
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(100 + i);
    laggard::report::CaptureWindow cw;
    cw.gpu.resize(2);
    cw.gpu_spans.resize(3);
    EXPECT_THROW(laggard::report::decode_gpu_block(block, w.start_ns, ids, cw), std::runtime_error) << as_spans;
    EXPECT_EQ(cw.gpu.size(), 2u) << as_spans;
    EXPECT_EQ(cw.gpu_spans.size(), 3u) << as_spans;
    EXPECT_TRUE(cw.kernel_stats.empty()) << as_spans;
    ids.push_back(static_cast<uint32_t>(100 + ids.size()));
    laggard::report::decode_gpu_block(block, w.start_ns, ids, cw);
    EXPECT_EQ(cw.gpu.size(), as_spans ? 2u : 2u + records) << as_spans;
    EXPECT_EQ(cw.gpu_spans.size(), as_spans ? 3u + records : 3u) << as_spans;
    const auto last_name = as_spans ? cw.gpu_spans.back().name : cw.gpu.back().name;
    EXPECT_EQ(last_name, ids.back()) << as_spans;
  }
  }
}

// Every record of a block of several decoding batches has its own values, in all three decodings:
// full records, the window's spans and the file's packed array.
TEST(BinaryFormat, EveryRecordOfABlockOfSeveralBatchesDecodesToItsOwnValues) {
  const laggard::WindowSnapshot w = window(0, 700);
  const laggard::GpuRecords& in = w.gpu.records;
  const std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
  std::vector<uint32_t> ids(w.gpu.strings.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(100 + i);
  laggard::report::CaptureWindow full, spans, packed;
  laggard::report::decode_gpu_block(block, w.start_ns, ids, full);
  {
    laggard::report::DecodeGpuAsSpans mode(true);
    laggard::report::decode_gpu_block(block, w.start_ns, ids, spans);
    laggard::report::SpanChunk chunk;
    laggard::report::DecodeSpansInto into(chunk);
    laggard::report::decode_gpu_block(block, w.start_ns, ids, packed);
    ASSERT_EQ(chunk.size(), in.size());
    for (size_t i = 0; i < in.size(); ++i) EXPECT_EQ(chunk.at(i), spans.gpu_spans.at(i)) << i;
  }
  ASSERT_EQ(full.gpu.size(), in.size());
  ASSERT_EQ(spans.gpu_spans.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const laggard::report::GpuActivity& a = full.gpu[i];
    EXPECT_EQ(a.start_ns, in.start_ns[i]) << i;
    EXPECT_EQ(a.end_ns, in.start_ns[i] + in.dur_ns[i]) << i;
    EXPECT_EQ(a.name, ids[in.name[i]]) << i;
    EXPECT_EQ(a.stream, in.stream[i]) << i;
    EXPECT_EQ(spans.gpu_spans[i], laggard::report::span_of(a)) << i;
  }
}

// Records packed straight into the file's array (DecodeSpansInto, issue 29): the same values as the
// window's own GpuSpan array, the window told where they are; a refused block leaves the array as it
// was; a window whose records are already in an array of its own keeps getting them there.
TEST(BinaryFormat, RecordsPackedIntoTheFileArrayAreTheSpansAndARefusedBlockLeavesNone) {
  const laggard::WindowSnapshot w = window(0, 20);
  const std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
  const size_t records = w.gpu.records.kind.size();
  std::vector<uint32_t> ids(w.gpu.strings.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<uint32_t>(100 + i);
  laggard::report::DecodeGpuAsSpans mode(true);
  laggard::report::CaptureWindow own;
  ASSERT_EQ(laggard::report::decode_gpu_block(block, w.start_ns, ids, own), records);  // no sink: its own array
  ASSERT_EQ(own.gpu_spans.size(), records);

  laggard::report::SpanChunk chunk;
  laggard::report::DecodeSpansInto into(chunk);
  laggard::report::CaptureWindow first, second;
  ASSERT_EQ(laggard::report::decode_gpu_block(block, w.start_ns, ids, first), records);
  ASSERT_EQ(laggard::report::decode_gpu_block(block, w.start_ns, ids, second), records);
  EXPECT_TRUE(first.gpu_spans.empty());
  EXPECT_EQ(first.gpu_spans_first, 0u);
  EXPECT_EQ(first.gpu_spans_count, records);
  EXPECT_EQ(second.gpu_spans_first, records);
  EXPECT_EQ(second.gpu_spans_count, records);
  ASSERT_EQ(chunk.size(), 2 * records);
  EXPECT_EQ(first.kernel_stats.size(), own.kernel_stats.size());
  for (size_t i = 0; i < records; ++i) {
    const laggard::report::GpuSpan a = own.gpu_spans[i], b = chunk.at(i), c = chunk.at(records + i);
    for (const laggard::report::GpuSpan& x : {b, c}) {
      EXPECT_EQ(x.start_ns, a.start_ns) << i;
      EXPECT_EQ(x.end_ns, a.end_ns) << i;
      EXPECT_EQ(x.api_start_ns, a.api_start_ns) << i;
      EXPECT_EQ(x.api_end_ns, a.api_end_ns) << i;
      EXPECT_EQ(x.name, a.name) << i;
      EXPECT_EQ(x.section, a.section) << i;
      EXPECT_EQ(x.stream, a.stream) << i;
      EXPECT_EQ(x.device, a.device) << i;
      EXPECT_EQ(x.kind, a.kind) << i;
      EXPECT_EQ(x.nccl, a.nccl) << i;
    }
  }

  std::vector<uint32_t> short_ids(ids.begin(), ids.end() - 1);  // the last kernel's name unknown
  laggard::report::CaptureWindow refused;
  EXPECT_THROW(laggard::report::decode_gpu_block(block, w.start_ns, short_ids, refused), std::runtime_error);
  EXPECT_EQ(chunk.size(), 2 * records);
  EXPECT_EQ(refused.gpu_spans_count, 0u);

  laggard::report::CaptureWindow has_own;
  has_own.gpu_spans.resize(1);
  laggard::report::decode_gpu_block(block, w.start_ns, ids, has_own);
  EXPECT_EQ(has_own.gpu_spans.size(), 1 + records);
  EXPECT_EQ(chunk.size(), 2 * records);
}

// A file's packed array is reserved once, at its first block, for every record its frames can hold
// (each takes at least a byte per column): no copy on the way. A frame header that claims far more
// than the file holds reserves no more than one record per 4 bytes of the file.
TEST(BinaryFormat, TheFileArrayIsReservedOnceFromTheFramesSizes) {
  TempDir tmp;
  fs::path run = tmp.path / "run";
  ASSERT_EQ(write_run(run, laggard::FileFormat::binary, 1, 6, 300), "");
  const std::string bytes = file_bytes(run / "rank00000-100-seg0000.lgr");
  const size_t most = laggard::report::most_gpu_records(bytes);
  laggard::report::ReadOptions opts;
  opts.compact_gpu = true;
  RunModel m = laggard::report::read_run(run.string(), opts);
  ASSERT_EQ(m.ranks.size(), 1u);
  ASSERT_EQ(m.ranks[0].span_chunks.size(), 1u);
  const laggard::report::SpanChunk& chunk = m.ranks[0].span_chunks[0];
  EXPECT_EQ(chunk.size(), 6u * 301);  // 300 kernels and a memcpy a window
  EXPECT_GE(most, chunk.size());
  EXPECT_EQ(chunk.packed.capacity(), most) << "grown by doubling, not reserved once";

  std::string claims_more = bytes;
  for (size_t at = 0; at + 20 <= claims_more.size();) {  // every frame's raw size: 256 MiB
    uint32_t stored = 0;
    for (int i = 3; i >= 0; --i) stored = (stored << 8) | static_cast<unsigned char>(claims_more[at + 8 + i]);
    for (int i = 0; i < 4; ++i) claims_more[at + 12 + i] = char(i == 3 ? 0x10 : 0);
    at += 20 + stored;
  }
  EXPECT_EQ(laggard::report::most_gpu_records(claims_more), claims_more.size() / 4);
  EXPECT_EQ(laggard::report::most_gpu_records("not a frame file"), 0u);
  EXPECT_EQ(laggard::report::most_gpu_records(bytes.substr(0, bytes.size() / 2)),
            laggard::report::most_gpu_records(bytes.substr(0, bytes.size() / 2 + 1)))
      << "a cut-off frame counts as nothing";
}

// A frame file whose second window's GPU block is refused after its records were decoded (bytes
// left over after the kernel statistics): that window is left out with a note, and the file's
// packed array holds the first and third windows' records only, each window pointing at its own.
TEST(BinaryFormat, AWindowRefusedAfterItsRecordsTakesThemOutOfTheFileArray) {
  std::string header = R"({"schema":"laggard-rank","schema_version":5,"run_id":"r","rank":0,"pid":1,"segment":0})";
  std::string file;
  size_t records = 0;
  for (int i = 0; i < 3; ++i) {
    const laggard::WindowSnapshot w = window(i, 20);
    records = w.gpu.records.kind.size();
    std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
    if (i == 1) block += '\0';  // every record and statistic fine, then a byte too many
    file += laggard::encode_frame(header, laggard::render_window(w, false), block);
  }
  for (bool fast : {true, false}) {
    laggard::report::use_fast_reader(fast);
    laggard::report::DecodeGpuAsSpans mode(true);
    laggard::report::StringTable strings;
    const laggard::report::Segment s = laggard::report::parse_segment_text(file, "f.lgr", strings);
    ASSERT_EQ(s.windows.size(), 2u) << fast;
    EXPECT_FALSE(s.notes.empty()) << fast;
    EXPECT_EQ(s.gpu_spans.size(), 2 * records) << fast;
    EXPECT_EQ(s.windows[0].gpu_spans_first, 0u) << fast;
    EXPECT_EQ(s.windows[1].gpu_spans_first, records) << fast;
    for (const auto& win : s.windows) {
      EXPECT_EQ(win.gpu_spans_count, records) << fast;
      EXPECT_TRUE(win.gpu_spans.empty()) << fast;
      EXPECT_LT(std::llabs(s.gpu_spans.at(win.gpu_spans_first).start_ns - win.start_ns), 1'000'000) << fast;  // its own
    }
  }
  laggard::report::use_fast_reader(true);
}

// A window the fast reader declines after packing its records (here gpu.records_api holds whole
// numbers written as floats, which only the DOM code accepts) is read again by the DOM code: its
// records must be packed once, not twice.
TEST(BinaryFormat, AWindowTheFastReaderDeclinesIsPackedOnce) {
  std::string header = R"({"schema":"laggard-rank","schema_version":5,"run_id":"r","rank":0,"pid":1,"segment":0})";
  const laggard::WindowSnapshot w = window(0, 20);
  const size_t records = w.gpu.records.kind.size();
  std::string window_json = laggard::render_window(w, false);
  const size_t gpu = window_json.find("\"gpu\":{");
  ASSERT_NE(gpu, std::string::npos);
  std::string api = "\"records_api\":[";
  for (size_t i = 0; i < records; ++i) api += i ? ",0.0" : "0.0";
  window_json.insert(gpu + 7, api + "],");
  const std::string file = laggard::encode_frame(header, window_json, laggard::encode_gpu_block(w.gpu, w.start_ns));
  laggard::report::DecodeGpuAsSpans mode(true);
  laggard::report::StringTable strings;
  const laggard::report::Segment s = laggard::report::parse_segment_text(file, "f.lgr", strings);
  ASSERT_EQ(s.windows.size(), 1u);
  EXPECT_TRUE(s.notes.empty());
  EXPECT_EQ(s.gpu_spans.size(), records);
  EXPECT_EQ(s.windows[0].gpu_spans_first, 0u);
  EXPECT_EQ(s.windows[0].gpu_spans_count, records);
}

// The frame header's tape reader (reader.cpp read_header_fast) against the DOM code, the reference:
// a header with every field, and each field missing, null, of another type, out of range, a whole
// or fractional float, or twice, must read alike (the same fields and notes) or fail alike.
std::string header_as(const std::string& file, bool fast) {
  laggard::report::use_fast_reader(fast);
  laggard::report::StringTable strings;
  std::ostringstream o;
  try {
    const laggard::report::Segment s = laggard::report::parse_segment_text(file, "f.lgr", strings);
    o << s.run_id << "|" << s.rank << "|" << s.world_size << "|" << s.local_rank << "|" << s.segment << "|" << s.host
      << "|" << s.pid << "|" << s.process_start_ns << "|" << s.data_end_ns << "|" << s.ppid << "|" << s.image << "|"
      << s.started_ticks << "|" << s.windows_lost << "|" << s.final << "|" << s.signal << "|" << s.flush_s << "|"
      << s.sections_filter << "|" << s.nvtx_status << "|" << s.nccl_status << "|" << s.cupti_status << "|"
      << s.import_time_base_ns << "|" << s.gpu_clock_offset_ns << "|" << s.windows.size();
    for (const auto& [k, v] : s.dropped) o << "|dropped " << k << "=" << v;
    for (const auto& n : s.notes) o << "|note " << n;
  } catch (const std::exception& e) {
    o << "error: " << e.what();
  }
  laggard::report::use_fast_reader(true);
  return o.str();
}

TEST(BinaryFormat, FrameHeadersReadAsTheDomCodeReadsThem) {
  const nlohmann::json full = {
      {"schema", "laggard-rank"}, {"schema_version", 5}, {"run_id", "r1"}, {"rank", 3}, {"world_size", 8},
      {"local_rank", 1}, {"segment", 2}, {"host", "node7"}, {"pid", 4242}, {"process_start_ns", 1'700'000'000'000'000'000},
      {"data_end_ns", 1'700'000'001'000'000'000}, {"ppid", 4000}, {"image", "python3"}, {"started_ticks", 123456},
      {"windows_lost", 2}, {"final", true}, {"signal", 15},
      {"config", {{"flush_s", 0.5}, {"sections", "fwd,bwd"}}},
      {"capture", {{"nvtx", "on"}, {"nccl", "off: no NCCL"}, {"cupti", "on"}}},
      {"import", {{"time_base_ns", 1000}}}, {"clock", {{"gpu_offset_ns", -5000}}},
      {"dropped", {{"ring_full", 3}, {"names", 0}}}};
  const laggard::WindowSnapshot w = window(0, 3);
  const std::string window_json = laggard::render_window(w, false);
  const std::string block = laggard::encode_gpu_block(w.gpu, w.start_ns);
  auto check = [&](const std::string& header, const std::string& what) {
    const std::string file = laggard::encode_frame(header, window_json, block);
    EXPECT_EQ(header_as(file, true), header_as(file, false)) << what << ": " << header;
  };
  check(full.dump(), "every field");
  const std::vector<nlohmann::json> odd = {nullptr, "x", -1, 0, 7.0, 7.5, 1e300, true, false,
                                           nlohmann::json::array({1}), nlohmann::json::object(),
                                           nlohmann::json::object({{"a", 1}}), 18'446'744'073'709'551'615ull,
                                           -9'223'372'036'854'775'807LL - 1};
  for (const auto& [key, value] : full.items()) {
    nlohmann::json h = full;
    h.erase(key);
    check(h.dump(), "without " + key);
    for (const nlohmann::json& v : odd) {
      h = full;
      h[key] = v;
      check(h.dump(), key + " = " + v.dump());
    }
    if (value.is_object())
      for (const auto& [inner, inner_value] : value.items())
        for (const nlohmann::json& v : odd) {
          h = full;
          h[key][inner] = v;
          check(h.dump(), key + "." + inner + " = " + v.dump());
        }
    // The key twice (nlohmann's DOM keeps the last one).
    std::string twice = full.dump();
    twice.insert(1, "\"" + key + "\":" + (key == "rank" ? std::string("5") : value.dump()) + ",");
    check(twice, key + " twice");
  }
}

// `laggard report`'s progress bar: only on a terminal, only after the delay, wiped at the end.
TEST(ProgressBar, DrawsNothingWhenStderrIsNotATerminal) {
  std::ostringstream err;
  laggard::cli::ProgressBar bar(err, false, std::chrono::milliseconds(0));
  bar.update("reading", 0.5, "1/2 files");
  bar.clear();
  EXPECT_EQ(err.str(), "");
}

TEST(ProgressBar, DrawsNothingForAShortMerge) {
  std::ostringstream err;
  laggard::cli::ProgressBar bar(err, true, std::chrono::hours(1));
  bar.update("reading", 0.5);
  bar.clear();
  EXPECT_EQ(err.str(), "");
}

TEST(ProgressBar, DrawsOnOneLineAndWipesIt) {
  std::ostringstream err;
  {
    laggard::cli::ProgressBar bar(err, true, std::chrono::milliseconds(0));
    bar.update("reading", 0.5, "1/2 files");
    bar.update("reading", 1.0, "2/2 files");
  }
  std::string s = err.str();
  EXPECT_NE(s.find("\rlaggard report: reading ["), std::string::npos) << s;
  EXPECT_NE(s.find(" 50% 1/2 files"), std::string::npos) << s;
  EXPECT_NE(s.find("100% 2/2 files"), std::string::npos) << s;
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  EXPECT_EQ(s.substr(s.size() - 4), "\r\x1b[K") << s;  // wiped when it goes
}

}  // namespace
