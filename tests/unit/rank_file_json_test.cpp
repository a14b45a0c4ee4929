// `laggard cat` (issue 14: binary frames became the default file format): any rank file as the
// JSON document of docs/schema.md. A binary frame file must read as exactly the JSON segment the
// same windows make, so tests and jq users can inspect either format the same way.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "cat_command.h"
#include "rank_file_json.h"
#include "file_builders.h"
#include "temp_dir.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace rank_file_json_test {

using laggard::testing::TempDir;

constexpr int64_t kStart = 1'700'000'000'000'000'000;

laggard::FileInfo info() {
  laggard::FileInfo fi = laggard::testing::file_info("cat1", 0, 1, 100);
  fi.cupti_enabled = true;
  fi.written_ns = kStart;  // both formats stamp the same time
  return fi;
}

void add_record(laggard::GpuRecords& r, uint8_t kind, uint32_t name, uint32_t section, int64_t start, int64_t dur,
                int64_t api_start, int64_t api_dur, int32_t shape, uint8_t flags) {
  laggard::testing::add_gpu_record(
      r, {.kind = kind, .name = name, .section = section, .start_ns = start, .dur_ns = dur,
          .api_start_ns = api_start, .api_dur_ns = api_dur, .shape = shape, .bytes = kind == 0 ? 0 : 1u << 20,
          .copy_kind = uint8_t(kind == 0 ? 0 : 1), .flags = flags,
          .correlation = r.correlation.empty() ? 9u : r.correlation.back() - 2,  // may go down
          .device = kind == 0 ? 1 : -1, .stream = 7});
}

// A window with every part a JSON segment may hold: sections, GPU records of every sort (one
// before the window, an unseen launch, late and NCCL/graph flags), statistics, late statistics
// and a pause.
laggard::WindowSnapshot window(uint64_t index) {
  laggard::WindowSnapshot w = laggard::testing::window_at(index, kStart);
  w.sections.push_back(laggard::testing::section_of("step", {900'000'000}, w.start_ns + 1000, 4242));
  laggard::GpuWindow& g = w.gpu;
  g.present = g.sampled = true;
  g.launches = 3;
  g.strings = {"step", "[memcpy HtoD]", "_Z4gemmv", "_Z4ncclv"};
  g.records.shapes.push_back({64, 2, 1, 256, 1, 1});
  add_record(g.records, 1, 1, 0, w.start_ns - 500, 400, w.start_ns - 900, 30, -1, 0);
  add_record(g.records, 0, 2, laggard::kNoString, w.start_ns + 2000, 5000, 0, -1, 0,
             laggard::kGpuFlagUnmatched | laggard::kGpuFlagGraph);
  add_record(g.records, 0, 3, 0, w.start_ns + 9000, 7000, w.start_ns + 100, 2500, 0, laggard::kGpuFlagNccl | 8);
  laggard::GpuKernelStats st;
  st.section = 0;
  st.name = 2;
  st.grid = {64, 2, 1};
  st.block = {256, 1, 1};
  st.count = 2;
  st.total_ns = 12000;
  st.min_ns = 5000;
  st.max_ns = st.median_ns = 7000;
  g.kernels.push_back(st);
  laggard::GpuKernelStats copy;
  copy.section = laggard::kNoString;
  copy.name = 1;
  copy.kind = laggard::GpuRecordKind::memcpy;
  copy.count = 1;
  copy.total_ns = copy.min_ns = copy.max_ns = copy.median_ns = 400;
  g.kernels.push_back(copy);
  if (index > 0) g.late.push_back({index - 1, {st}});
  w.paused.push_back({w.start_ns + 10, w.start_ns + 20, "pause", 1, false});
  w.gpu_status.cupti = "on";
  return w;
}

fs::path write_segment(const fs::path& dir, laggard::FileFormat format, int windows) {
  laggard::SegmentWriter w(dir.string(), info(), 30);
  w.set_format(format);
  for (int i = 0; i < windows; ++i) {
    laggard::WindowSnapshot win = window(uint64_t(i));
    EXPECT_EQ(w.write(win, win.dropped, i + 1 == windows, 0), "");
  }
  return w.current_path();
}

std::string file_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(RankFileJson, ABinaryFrameFileReadsAsTheJsonSegmentOfTheSameWindows) {
  TempDir tmp;
  fs::path json = write_segment(tmp.path / "json", laggard::FileFormat::json, 3);
  fs::path bin = write_segment(tmp.path / "bin", laggard::FileFormat::binary, 3);
  ASSERT_EQ(bin.extension(), ".lgr");
  laggard::report::RankFileJson from_json = laggard::report::rank_file_json(file_bytes(json));
  laggard::report::RankFileJson from_bin = laggard::report::rank_file_json(file_bytes(bin));
  EXPECT_EQ(from_json.problem, "");
  EXPECT_EQ(from_bin.problem, "");
  ASSERT_EQ(from_bin.doc["windows"].size(), 3u);
  EXPECT_EQ(from_bin.doc["windows"][1]["gpu"]["records"]["flags"][2], laggard::kGpuFlagNccl | 8);
  // Byte for byte, key order included: `cat` of either is one text.
  EXPECT_EQ(from_bin.doc.dump(), from_json.doc.dump());
  // And a JSON segment is shown as it is on disk.
  EXPECT_EQ(from_json.doc, nlohmann::ordered_json::parse(file_bytes(json)));
}

TEST(RankFileJson, ATornTailShowsTheWholeFramesAndSaysWhatWasCut) {
  TempDir tmp;
  fs::path bin = write_segment(tmp.path / "bin", laggard::FileFormat::binary, 3);
  std::string whole = file_bytes(bin);
  laggard::report::RankFileJson r = laggard::report::rank_file_json(whole.substr(0, whole.size() - 5));
  ASSERT_TRUE(r.doc.is_object());
  EXPECT_EQ(r.doc["windows"].size(), 2u);
  EXPECT_FALSE(r.doc["final"].get<bool>());  // the header of the last whole frame
  EXPECT_NE(r.problem.find("a frame cut off"), std::string::npos) << r.problem;
  EXPECT_NE(r.problem.find("2 whole window(s)"), std::string::npos) << r.problem;
}

TEST(RankFileJson, NeitherJsonNorFramesIsAProblemNotACrash) {
  for (std::string text : {std::string("LGF5"), std::string("{\"schema\":"), std::string(), std::string("\0\1", 2)}) {
    laggard::report::RankFileJson r = laggard::report::rank_file_json(text);
    EXPECT_TRUE(r.doc.is_null()) << text;
    EXPECT_NE(r.problem, "") << text;
  }
}

TEST(CatCommand, PrintsEveryFileAndFailsWhenOneIsNotWhole) {
  TempDir tmp;
  fs::path json = write_segment(tmp.path / "json", laggard::FileFormat::json, 2);
  fs::path bin = write_segment(tmp.path / "bin", laggard::FileFormat::binary, 2);
  std::ostringstream out, err;
  EXPECT_EQ(laggard::cli::cat_command({json.string(), bin.string()}, false, out, err), 0) << err.str();
  EXPECT_EQ(err.str(), "");
  std::istringstream lines(out.str());
  std::string first, second;
  std::getline(lines, first);
  std::getline(lines, second);
  EXPECT_EQ(first, second);  // the same windows in either format

  std::string whole = file_bytes(bin);
  std::ofstream(bin, std::ios::binary | std::ios::trunc) << whole.substr(0, whole.size() - 5);
  std::ostringstream out2, err2;
  EXPECT_EQ(laggard::cli::cat_command({bin.string(), (tmp.path / "missing").string()}, true, out2, err2), 1);
  EXPECT_EQ(nlohmann::json::parse(out2.str())["windows"].size(), 1u);
  EXPECT_NE(err2.str().find(bin.string() + ": the last"), std::string::npos) << err2.str();
  EXPECT_NE(err2.str().find("cannot open"), std::string::npos) << err2.str();
}

}  // namespace
