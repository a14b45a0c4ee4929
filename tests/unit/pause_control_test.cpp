// `laggard ctl` (issue 15, remote pause/resume): the control file's parser and safe reader,
// the CLI's writer against the library's parser, the pause state machine, and what pausing
// does to NVTX ranges (push/pop and start/end stay balanced; a range capture was paused
// during is never recorded).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "clock.h"
#include "control_file.h"
#include "ctl_command.h"
#include "pause_control.h"
#include "pause_state.h"
#include "range_stack.h"
#include "start_end_table.h"

namespace laggard {
namespace pause_control_test {

namespace fs = std::filesystem;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/laggard-ctl-XXXXXX";
    dir = mkdtemp(tmpl);
    start_epoch = g_pause_epoch.load();
  }
  void TearDown() override {
    fs::remove_all(dir);
    // Leave capture on for the next test, whatever this one did.
    if (paused_epoch(g_pause_epoch.load())) g_pause_epoch.fetch_add(1);
  }
  void write(const std::string& text) { std::ofstream(dir + "/" + kControlFileName, std::ios::binary) << text; }
  std::string dir;
  uint32_t start_epoch = 0;
};

std::string line(uint64_t seq, const char* command, int64_t secs = 0, int64_t issued = 1000) {
  return cli::control_text(seq, command, secs, issued);
}

// ---- parsing ----

TEST(ControlParse, ReadsWhatTheCliWrites) {
  for (const char* cmd : {"pause", "resume"}) {
    ControlParse p = parse_control(line(7, cmd, 0, 1790000000000000000));
    ASSERT_TRUE(p.request) << p.error;
    EXPECT_EQ(p.request->seq, 7u);
    EXPECT_STREQ(control_command_name(p.request->command), cmd);
    EXPECT_EQ(p.request->issued_ns, 1790000000000000000);
    EXPECT_EQ(p.request->window_ns, 0);
  }
  ControlParse w = parse_control(line(8, "window", 30));
  ASSERT_TRUE(w.request) << w.error;
  EXPECT_EQ(w.request->command, ControlCommand::window);
  EXPECT_EQ(w.request->window_ns, 30'000'000'000);
  EXPECT_EQ(cli::control_seq(line(41, "pause")), 41u);
  EXPECT_EQ(cli::control_seq("garbage"), 0u);
}

TEST(ControlParse, RefusesHostileTextWhole) {
  const char* bad[] = {
      "",
      "\n",
      "laggard-control 2 seq=1 command=pause issued_ns=1",    // unknown version
      "laggard-control 1 seq=0 command=pause issued_ns=1",    // seq starts at 1
      "laggard-control 1 seq=-1 command=pause issued_ns=1",
      "laggard-control 1 seq=+1 command=pause issued_ns=1",
      "laggard-control 1 seq=99999999999999999999999 command=pause issued_ns=1",  // overflows
      "laggard-control 1 seq=1 command=stop issued_ns=1",
      "laggard-control 1 seq=1 command=PAUSE issued_ns=1",
      "laggard-control 1 seq=1 command=pause",                // no issued_ns
      "laggard-control 1 seq=1 command=pause issued_ns=1 x=2",
      "laggard-control 1 seq=1 command=pause seconds=5 issued_ns=1",
      "laggard-control 1 seq=1 command=window issued_ns=1",   // window without seconds
      "laggard-control 1 seq=1 command=window seconds=0 issued_ns=1",
      "laggard-control 1 seq=1 command=window seconds=604801 issued_ns=1",
      "laggard-control 1  seq=1 command=pause issued_ns=1",   // two spaces
      "laggard-control 1 command=pause seq=1 issued_ns=1",    // order
      "laggard-control 1 seq=1 command=pause issued_ns=1\n\n",
      "laggard-control 1 seq=1 command=pause\tissued_ns=1",
      "laggard-control 1 seq=1 command=pau\xc3\xa9 issued_ns=1",
      "seq=1 command=pause issued_ns=1",
  };
  for (const char* text : bad) {
    ControlParse p = parse_control(text);
    EXPECT_FALSE(p.request) << "accepted: " << text;
    EXPECT_FALSE(p.error.empty()) << text;
  }
  std::string with_nul = "laggard-control 1 seq=1 command=pause issued_ns=1";
  with_nul[20] = '\0';
  EXPECT_FALSE(parse_control(with_nul).request);
  EXPECT_FALSE(parse_control(std::string(kMaxControlBytes + 1, 'a')).request);
}

// ---- reading the file safely ----

TEST_F(TempDir, AbsentDirectoryOrFileIsNoCommand) {
  EXPECT_EQ(read_control_file(dir + "/nope").status, ControlRead::Status::absent);
  EXPECT_EQ(read_control_file(dir).status, ControlRead::Status::absent);
  write(line(1, "pause"));
  ControlRead r = read_control_file(dir);
  ASSERT_EQ(r.status, ControlRead::Status::ok) << r.error;
  EXPECT_EQ(r.text, line(1, "pause"));
}

TEST_F(TempDir, SymlinkFifoDirectoryAndHugeFileAreRefusedUnread) {
  std::string target = dir + "/elsewhere";
  std::ofstream(target) << line(1, "pause");
  std::string name = dir + "/" + kControlFileName;
  fs::create_symlink(target, name);
  ControlRead r = read_control_file(dir);
  EXPECT_EQ(r.status, ControlRead::Status::refused);
  EXPECT_NE(r.error.find("symbolic link"), std::string::npos) << r.error;
  fs::remove(name);

  ASSERT_EQ(mkfifo(name.c_str(), 0600), 0);  // must not block the flush thread
  r = read_control_file(dir);
  EXPECT_EQ(r.status, ControlRead::Status::refused);
  fs::remove(name);

  fs::create_directory(name);
  EXPECT_EQ(read_control_file(dir).status, ControlRead::Status::refused);
  fs::remove(name);

  int fd = open(name.c_str(), O_WRONLY | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, off_t{1} << 30), 0);  // sparse 1 GiB: refused by its size, never read
  close(fd);
  r = read_control_file(dir);
  EXPECT_EQ(r.status, ControlRead::Status::refused);
  EXPECT_NE(r.error.find("larger"), std::string::npos) << r.error;
}

TEST_F(TempDir, RunDirectoryThatIsASymlinkIsRefused) {
  fs::create_directory(dir + "/real");
  std::ofstream(dir + "/real/" + kControlFileName) << line(1, "pause");
  fs::create_directory_symlink(dir + "/real", dir + "/link");
  EXPECT_EQ(read_control_file(dir + "/link").status, ControlRead::Status::refused);
}

// The CLI replaces the file by rename: a poll racing with many writes reads one whole command
// every time, never half of one.
TEST_F(TempDir, PollsRacingWithTheCliNeverSeeHalfACommand) {
  std::atomic<bool> done{false};
  std::thread writer([&] {
    cli::CtlOptions o{dir, "", "window", 5};
    std::ostringstream out, err;
    for (int i = 0; i < 300; ++i) {
      o.command = i % 3 == 0 ? "pause" : i % 3 == 1 ? "resume" : "window";
      o.seconds = o.command == "window" ? 5 : 0;
      ASSERT_EQ(cli::ctl_command(o, out, err), 0) << err.str();
    }
    done = true;
  });
  int reads = 0;
  while (!done.load()) {
    ControlRead r = read_control_file(dir);
    if (r.status == ControlRead::Status::absent) continue;
    ASSERT_EQ(r.status, ControlRead::Status::ok) << r.error;
    ControlParse p = parse_control(r.text);
    ASSERT_TRUE(p.request) << p.error << ": " << r.text;
    ++reads;
  }
  writer.join();
  EXPECT_GT(reads, 0);
  ControlParse last = parse_control(read_control_file(dir).text);
  ASSERT_TRUE(last.request);
  EXPECT_EQ(last.request->seq, 300u);  // each command took the next number
}

TEST_F(TempDir, CliRefusesBadUse) {
  std::ostringstream out, err;
  EXPECT_EQ(cli::ctl_command({dir + "/missing", "", "pause", 0}, out, err), 2);
  EXPECT_EQ(cli::ctl_command({dir, "", "window", 0}, out, err), 2);
  EXPECT_EQ(cli::ctl_command({dir, "", "pause", 5}, out, err), 2);
  EXPECT_FALSE(fs::exists(dir + "/" + kControlFileName));
  // An output directory holding one run: the command goes into that run.
  fs::create_directory(dir + "/run1");
  std::ofstream(dir + "/run1/rank00000-1-seg0000.json") << "{}";
  EXPECT_EQ(cli::ctl_command({dir, "", "pause", 0}, out, err), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir + "/run1/" + kControlFileName));
  fs::create_directory(dir + "/run2");
  std::ofstream(dir + "/run2/rank00000-1-seg0000.json") << "{}";
  EXPECT_EQ(cli::ctl_command({dir, "", "pause", 0}, out, err), 2);  // which one?
  EXPECT_EQ(cli::ctl_command({dir, "run2", "resume", 0}, out, err), 0) << err.str();
  EXPECT_TRUE(fs::exists(dir + "/run2/" + kControlFileName));
}

// ---- the state machine ----

// A pause is stamped when the flag flips, after the control file was read (the clock poll() is
// given), not when the flush thread's tick began: reading the file took hundreds of µs under load,
// and a range that ended in between was recorded inside the paused period
// (Ctl.PauseAndResumeWhileTheDemoRunsAreRecordedAndReportedAsPaused under ASan, 2026-11-28).
int64_t g_after_read_ns = 0;
int64_t clock_after_read() { return g_after_read_ns; }

TEST_F(TempDir, APauseIsStampedAfterTheControlFileWasRead) {
  PauseControl pc(dir, 0);
  int64_t t = 1'000'000'000;
  pc.poll(t, clock_after_read);
  write(line(1, "pause"));
  t += PauseControl::kPollNs;
  g_after_read_ns = t + 300'000;
  ASSERT_TRUE(pc.poll(t, clock_after_read));
  const std::vector<PausedSpan> spans = pc.take_spans(0, t + 1'000'000'000);
  ASSERT_EQ(spans.size(), 1u);
  EXPECT_EQ(spans[0].start_ns, t + 300'000);
  write(line(2, "resume"));
  t += PauseControl::kPollNs;
  g_after_read_ns = t - 1;  // a clock behind the tick's: never before it
  ASSERT_TRUE(pc.poll(t, clock_after_read));
  EXPECT_FALSE(capture_paused());
}

TEST_F(TempDir, PauseResumeAndWindowSwitchTheFlag) {
  PauseControl pc(dir, 0);
  int64_t t = 1'000'000'000;
  EXPECT_FALSE(pc.poll(t));
  EXPECT_FALSE(capture_paused());

  write(line(1, "pause"));
  t += PauseControl::kPollNs;
  EXPECT_TRUE(pc.poll(t));
  EXPECT_TRUE(capture_paused());
  EXPECT_TRUE(pc.paused());
  // The same file again: nothing new.
  t += PauseControl::kPollNs;
  EXPECT_FALSE(pc.poll(t));

  write(line(2, "resume"));
  t += PauseControl::kPollNs;
  EXPECT_TRUE(pc.poll(t));
  EXPECT_FALSE(capture_paused());

  write(line(3, "pause"));
  t += PauseControl::kPollNs;
  pc.poll(t);
  write(line(4, "window", 2));
  t += PauseControl::kPollNs;
  EXPECT_TRUE(pc.poll(t));
  EXPECT_FALSE(capture_paused());
  EXPECT_FALSE(pc.poll(t + 1'000'000'000));  // before the window is over: not read again yet, still on
  EXPECT_FALSE(capture_paused());
  EXPECT_TRUE(pc.poll(t + 2'000'000'000));
  EXPECT_TRUE(capture_paused());
  // Repeated: the same command with a new number opens another window.
  t += 3'000'000'000;
  write(line(5, "window", 2));
  EXPECT_TRUE(pc.poll(t));
  EXPECT_FALSE(capture_paused());
}

TEST_F(TempDir, GarbageLeavesCaptureAsItWas) {
  PauseControl pc(dir, 0);
  int64_t t = 1'000'000'000;
  write(line(1, "pause"));
  pc.poll(t);
  ASSERT_TRUE(capture_paused());
  for (const char* junk : {"rm -rf /", "laggard-control 1 seq=2 command=resume", "\x01\x02"}) {
    write(junk);
    t += PauseControl::kPollNs;
    EXPECT_FALSE(pc.poll(t)) << junk;
    EXPECT_TRUE(capture_paused()) << junk;
  }
  write(line(2, "resume"));
  t += PauseControl::kPollNs;
  EXPECT_TRUE(pc.poll(t));
  EXPECT_FALSE(capture_paused());
}

TEST_F(TempDir, PollIntervalIsBounded) {
  PauseControl pc(dir, 0);
  int64_t t = 1'000'000'000;
  pc.poll(t);
  write(line(1, "pause"));
  EXPECT_FALSE(pc.poll(t + 1));  // too soon: not read
  EXPECT_TRUE(pc.poll(t + PauseControl::kPollNs));
  EXPECT_LE(PauseControl::kPollNs, 1'000'000'000);
}

TEST_F(TempDir, StartingIntoAPausedRunStartsPaused) {
  write(line(9, "pause"));
  PauseControl pc(dir, 0);
  EXPECT_TRUE(pc.poll(mono_ns()));
  EXPECT_TRUE(capture_paused());
}

TEST_F(TempDir, AWindowOverBeforeTheRankStartedLeavesItPaused) {
  write(line(3, "window", 1, realtime_ns() - 5'000'000'000));
  PauseControl pc(dir, 0);
  pc.poll(mono_ns());
  EXPECT_TRUE(capture_paused());
}

TEST_F(TempDir, AWindowStillOpenAtStartRunsForWhatIsLeft) {
  write(line(3, "window", 10, realtime_ns() - 4'000'000'000));
  PauseControl pc(dir, 0);
  int64_t t = mono_ns();
  pc.poll(t);
  EXPECT_FALSE(capture_paused());
  pc.poll(t + 5'000'000'000);
  EXPECT_FALSE(capture_paused());
  pc.poll(t + 6'100'000'000);
  EXPECT_TRUE(capture_paused());
}

TEST_F(TempDir, SpansAreClippedToEachWindowAndSayWhatPaused) {
  PauseControl pc(dir, 1000);  // epoch = mono + 1000
  write(line(1, "pause"));
  pc.poll(10'000);  // paused at epoch 11'000
  std::vector<PausedSpan> w0 = pc.take_spans(0, 20'000);
  ASSERT_EQ(w0.size(), 1u);
  EXPECT_EQ(w0[0].start_ns, 11'000);
  EXPECT_EQ(w0[0].end_ns, 20'000);
  EXPECT_TRUE(w0[0].ongoing);
  EXPECT_EQ(w0[0].command, "pause");
  EXPECT_EQ(w0[0].seq, 1u);
  write(line(2, "resume"));
  pc.poll(10'000 + PauseControl::kPollNs);  // resumed at epoch 250'011'000
  std::vector<PausedSpan> w1 = pc.take_spans(20'000, 300'000'000);
  ASSERT_EQ(w1.size(), 1u);
  EXPECT_EQ(w1[0].start_ns, 20'000);
  EXPECT_EQ(w1[0].end_ns, 250'011'000);
  EXPECT_FALSE(w1[0].ongoing);
  EXPECT_TRUE(pc.take_spans(300'000'000, 400'000'000).empty());  // over: forgotten
}

// ---- NVTX ranges across pause and resume ----

const NameEntry kStep{1, true, false, nullptr, "step", "", "step"};
const NameEntry kFwd{2, true, false, nullptr, "fwd", "", "fwd"};

TEST(PausedRanges, PushPopStayBalancedAndNothingPausedIsRecorded) {
  RangeStack s;
  RangeRecord r;
  bool emit = false;
  const uint32_t on = 0, paused = 1, on_again = 2;
  // Begun before the pause, ended during it: closed, not recorded.
  EXPECT_EQ(s.push(&kStep, nullptr, 10, on), 0);
  EXPECT_EQ(s.pop(nullptr, 20, 1, &r, &emit, paused), 0);
  EXPECT_FALSE(emit);
  // Begun paused (no name looked up), ended after resume: no bogus section, and the range
  // under it is still the one the next pop closes.
  EXPECT_EQ(s.push(&kStep, nullptr, 30, on_again), 0);
  EXPECT_EQ(s.push(&kFwd, nullptr, 0, paused), 1);
  EXPECT_EQ(s.pop(nullptr, 40, 1, &r, &emit, on_again), 1);
  EXPECT_FALSE(emit);
  EXPECT_EQ(s.pop(nullptr, 50, 1, &r, &emit, on_again), 0);
  ASSERT_TRUE(emit);
  EXPECT_EQ(r.name_id, kStep.id);
  EXPECT_EQ(r.start_ns, 30);
  // Spanning a whole pause: not recorded (its time includes time nothing was captured).
  EXPECT_EQ(s.push(&kStep, nullptr, 60, on), 0);
  EXPECT_EQ(s.pop(nullptr, 70, 1, &r, &emit, on_again), 0);
  EXPECT_FALSE(emit);
  EXPECT_EQ(s.depth(), 0);
  EXPECT_EQ(s.unbalanced(), 0u);
  EXPECT_EQ(s.filtered(), 0u);  // paused ranges are not "filtered"
}

TEST(PausedRanges, StartEndRangesFollowTheSameRule) {
  StartEndTable t(64);
  RangeRecord r;
  bool emit = false, paused = false;
  uint64_t before = t.start(&kStep, 10, 1, nullptr, 0);
  uint64_t during = t.start(&kFwd, 0, 1, nullptr, 1);
  EXPECT_TRUE(t.end(before, 20, &r, &emit, 1, &paused));
  EXPECT_FALSE(emit);
  EXPECT_TRUE(paused);
  EXPECT_TRUE(t.end(during, 30, &r, &emit, 2, &paused));
  EXPECT_FALSE(emit);
  EXPECT_TRUE(paused);
  uint64_t after = t.start(&kStep, 40, 1, nullptr, 2);
  EXPECT_TRUE(t.end(after, 50, &r, &emit, 2, &paused));
  EXPECT_TRUE(emit);
  EXPECT_FALSE(paused);
  EXPECT_EQ(t.open_count(), 0u);
}

}  // namespace
}  // namespace laggard

// ---- files and report (schema version 5) ----

#include "file_builders.h"
#include "reader.h"
#include "render_paused.h"
#include "writer.h"

namespace laggard {
namespace pause_control_test {

FileInfo rank_info(int rank) {
  FileInfo fi = testing::file_info("run1", rank, 2, 100 + rank);
  fi.process_start_ns = 1'000'000'000;
  return fi;
}

WindowSnapshot window(uint64_t index, bool with_section, std::vector<PausedSpan> paused = {}) {
  WindowSnapshot w = testing::window_at(index);
  if (with_section) w.sections.push_back(testing::section_of("step", {100'000}, w.start_ns + 10'000));
  w.paused = std::move(paused);
  return w;
}

// Window 1 pauses half way, window 2 is paused throughout, window 3 resumes half way: one
// period from 2.5 s to 4.5 s, windows contiguous, no missing data reported.
void write_paused_rank(const std::string& dir, int rank) {
  SegmentWriter w(dir, rank_info(rank), 30);
  PausedSpan a{2'500'000'000, 3'000'000'000, "pause", 4, true};
  PausedSpan b{3'000'000'000, 4'000'000'000, "pause", 4, true};
  PausedSpan c{4'000'000'000, 4'500'000'000, "pause", 4, false};
  ASSERT_EQ(w.write(window(0, true), {}, false, 0), "");
  ASSERT_EQ(w.write(window(1, true, {a}), {}, false, 0), "");
  ASSERT_EQ(w.write(window(2, false, {b}), {}, false, 0), "");
  ASSERT_EQ(w.write(window(3, true, {c}), {}, true, 0), "");
}

TEST_F(TempDir, PausedPeriodsGoThroughTheFilesIntoTheReport) {
  write_paused_rank(dir, 0);
  write_paused_rank(dir, 1);
  std::ifstream in(dir + "/rank00000-100-seg0000.json");
  nlohmann::json f = nlohmann::json::parse(in);
  EXPECT_EQ(f["schema_version"], 5);
  EXPECT_FALSE(f["windows"][0].contains("paused"));  // optional: only windows that were paused
  EXPECT_EQ(f["windows"][1]["paused"][0]["command"], "pause");
  EXPECT_EQ(f["windows"][1]["paused"][0]["seq"], 4);
  EXPECT_EQ(f["windows"][1]["paused"][0]["ongoing"], true);

  report::RunModel m = report::read_run(dir);
  ASSERT_EQ(m.ranks.size(), 2u);
  ASSERT_EQ(m.ranks[0].paused.size(), 1u);
  EXPECT_EQ(m.ranks[0].paused[0].start_ns, 2'500'000'000);
  EXPECT_EQ(m.ranks[0].paused[0].end_ns, 4'500'000'000);
  EXPECT_FALSE(m.ranks[0].paused[0].ongoing);
  for (const report::Problem& p : m.problems) EXPECT_NE(p.kind, "missing_windows") << p.message;

  nlohmann::json j = report::paused_json(m);
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["command"], "pause");
  EXPECT_EQ(j[0]["rank_count"], 2);
  EXPECT_DOUBLE_EQ(j[0]["dur_s"].get<double>(), 2.0);
  std::ostringstream text;
  report::render_paused_text(m, text);
  EXPECT_NE(text.str().find("capture was paused (laggard ctl) 1 time(s)"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("1.5 s to 3.5 s"), std::string::npos) << text.str();
}

TEST_F(TempDir, AnImpossiblePausedSpanLeavesItsWindowOutNotTheFile) {
  write_paused_rank(dir, 0);
  std::string path = dir + "/rank00000-100-seg0000.json";
  nlohmann::json f;
  std::ifstream(path) >> f;
  f["windows"][1]["paused"][0]["end_ns"] = 1;  // before its start
  f["windows"][2]["paused"][0]["command"] = "<script>";
  std::ofstream(path) << f.dump();
  report::RunModel m = report::read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_EQ(m.ranks[0].windows.size(), 2u);
  bool noted = false;
  for (const report::Problem& p : m.problems) noted |= p.kind == "invalid_value";
  EXPECT_TRUE(noted);
}

TEST_F(TempDir, AFileWithoutPausesHasNoPausedPeriods) {
  SegmentWriter w(dir, rank_info(0), 30);
  ASSERT_EQ(w.write(window(0, true), {}, true, 0), "");
  report::RunModel m = report::read_run(dir);
  ASSERT_EQ(m.ranks.size(), 1u);
  EXPECT_TRUE(m.ranks[0].paused.empty());
  EXPECT_TRUE(report::paused_json(m).empty());
  std::ostringstream text;
  report::render_paused_text(m, text);
  EXPECT_EQ(text.str(), "");
}

}  // namespace
}  // namespace laggard
