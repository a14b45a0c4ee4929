// Files of one rank written by several process images, and values from the system that are not
// UTF-8 (issue 24, items 3 and 11): written by the capture side, read back by the report's reader.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "file_builders.h"
#include "json_out.h"
#include "process_image.h"
#include "reader.h"
#include "temp_dir.h"
#include "writer.h"

namespace fs = std::filesystem;

namespace process_image_test {

using laggard::testing::TempDir;

laggard::FileInfo info(long pid, const std::string& image, uint64_t ticks = 777) {
  laggard::FileInfo fi = laggard::testing::file_info("run1", 0, 1, pid);
  fi.ppid = 1;
  fi.image = image;
  fi.started_ticks = ticks;
  return fi;
}

laggard::WindowSnapshot window(uint64_t index, uint64_t count, const std::string& name) {
  laggard::WindowSnapshot w = laggard::testing::window_at(index);
  w.sections.push_back(laggard::testing::section_totals(name, count, 1000));
  return w;
}

TEST(ProcessImage, EveryImageGetsItsOwnIdUnlessATestForcesOne) {
  std::set<std::string> ids;
  for (int i = 0; i < 50; ++i) {
    laggard::ProcessImage im = laggard::this_process_image(laggard::map_env({}));
    EXPECT_EQ(im.id.size(), 8u);
    EXPECT_EQ(im.id.find_first_not_of("0123456789abcdef"), std::string::npos) << im.id;
    EXPECT_GT(im.started_ticks, 0u);  // /proc/self/stat field 22
    ids.insert(im.id);
  }
  EXPECT_GT(ids.size(), 45u);
  EXPECT_EQ(laggard::this_process_image(laggard::map_env({{"LAGGARD_TEST_IMAGE_ID", "0123abcd"}})).id, "0123abcd");
  EXPECT_NE(laggard::this_process_image(laggard::map_env({{"LAGGARD_TEST_IMAGE_ID", "../x"}})).id, "../x");
  EXPECT_EQ(laggard::rank_file_stem(3, 42, "0123abcd"), "rank00003-42-0123abcd");
  EXPECT_EQ(laggard::rank_file_stem(3, 42, ""), "rank00003-42");
}

// One pid, two images (a rank that exec()s itself, or a second attempt in a PID namespace):
// both keep their files, both segment 0, and the reader never mixes their windows.
TEST(ProcessImage, TwoImagesWithOnePidNeverShareAFileOrAWindow) {
  for (laggard::FileFormat format : {laggard::FileFormat::binary, laggard::FileFormat::json}) {
    TempDir tmp;
    std::string run_dir = (tmp.path / "run1").string();
    laggard::DropCounters totals;
    laggard::SegmentWriter first(run_dir, info(100, "aaaaaaaa"), 30), second(run_dir, info(100, "bbbbbbbb"), 30);
    first.set_format(format);
    second.set_format(format);
    ASSERT_EQ(first.write(window(0, 9, "first_image"), totals, false, 0), "");
    ASSERT_EQ(first.write(window(1, 9, "first_image"), totals, false, 0), "");
    ASSERT_EQ(second.write(window(0, 4, "second_image"), totals, true, 0), "");  // same index 0
    int files = 0;
    for (const auto& e : fs::directory_iterator(run_dir)) files += e.path().filename().string().rfind("rank", 0) == 0;
    EXPECT_EQ(files, 2);  // was 1: the second image unlinked the first one's file of the same name

    laggard::report::RunModel m = laggard::report::read_run(run_dir);
    ASSERT_EQ(m.ranks.size(), 1u);
    const laggard::report::RankData& r = m.ranks[0];
    EXPECT_EQ(r.image, "aaaaaaaa");  // recorded more
    ASSERT_EQ(r.windows.size(), 2u);  // was: window 0 of one image and window 1 of the other
    for (const auto& w : r.windows)
      for (const auto& s : w.sections) EXPECT_EQ(s.name, "first_image");
    std::string msg;
    for (const auto& p : m.problems)
      if (p.kind == "duplicate_rank") msg = p.message;
    EXPECT_NE(msg.find("100 (image aaaaaaaa)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("100 (image bbbbbbbb)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("exec()ed itself"), std::string::npos) << msg;  // same start time: one process
  }
}

TEST(ProcessImage, AnotherProcessWithTheSamePidIsNotCalledAnExec) {
  TempDir tmp;
  std::string run_dir = (tmp.path / "run1").string();
  laggard::DropCounters totals;
  laggard::SegmentWriter a(run_dir, info(7, "aaaaaaaa", 100), 30), b(run_dir, info(7, "bbbbbbbb", 5000), 30);
  a.write(window(0, 2, "attempt1"), totals, true, 0);
  b.write(window(0, 5, "attempt2"), totals, true, 0);
  laggard::report::RunModel m = laggard::report::read_run(run_dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].image, "bbbbbbbb");
  for (const auto& w : m.ranks[0].windows)
    for (const auto& s : w.sections) EXPECT_EQ(s.name, "attempt2");
  for (const auto& p : m.problems)
    if (p.kind == "duplicate_rank") {
      EXPECT_EQ(p.message.find("exec"), std::string::npos) << p.message;
    }
}

// Item 11: a host name (or run id, or path) that is not UTF-8 made every rank file of its host
// unreadable. Every string the capture side writes comes out valid UTF-8, distinct inputs
// distinct.
TEST(NonUtf8Values, AHostNameThatIsNotUtf8KeepsTheRankFileReadable) {
  for (laggard::FileFormat format : {laggard::FileFormat::binary, laggard::FileFormat::json}) {
    TempDir tmp;
    std::string run_dir = (tmp.path / "run1").string();
    laggard::FileInfo fi = info(100, "aaaaaaaa");
    fi.host = std::string("node\xff\xfe-7\xc3\xa9");  // two bad bytes, then a valid "é"
    laggard::SegmentWriter w(run_dir, fi, 30);
    w.set_format(format);
    laggard::DropCounters totals;
    ASSERT_EQ(w.write(window(0, 3, "step"), totals, true, 0), "");
    laggard::report::RunModel m = laggard::report::read_run(run_dir);
    ASSERT_EQ(m.ranks.size(), 1u);
    EXPECT_EQ(m.ranks[0].host, "node\\xff\\xfe-7\xc3\xa9");
    EXPECT_EQ(m.ranks[0].windows.size(), 1u);
  }
}

TEST(NonUtf8Values, JsonOutWritesOnlyValidUtf8) {
  std::string s;
  laggard::JsonOut j(s);
  // Overlong '/', a surrogate, past U+10FFFF, a truncated sequence, then valid 2-, 3-, 4-byte ones.
  j.value(std::string("\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x82|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
  EXPECT_EQ(s,
            "\"\\\\xc0\\\\xaf|\\\\xed\\\\xa0\\\\x80|\\\\xf4\\\\x90\\\\x80\\\\x80|\\\\xe2\\\\x82|\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"");
}

}  // namespace process_image_test
