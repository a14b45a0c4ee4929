// Fault injection (issue 10): a hostile or broken environment around the host application.
// Every test checks that the application's exit code and output are what they are without
// laggard, and that no file that looks valid says something wrong. The file-system faults run
// for both file formats (HostSafetyBothFormats): binary frames appended to rank*.lgr, the
// default, and JSON segments rewritten through temp files (LAGGARD_FILE_FORMAT=json).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <algorithm>

#include "harness.h"

namespace laggard::test {
namespace host_safety_test {

namespace fs = std::filesystem;

const std::string kHostileApp = kBin + "/laggard-hostile-app";
const std::string kShim = kBin + "/liblaggard-io-fault-shim.so";

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

class HostSafety : public Scratch {
 protected:
  std::string run_dir() const { return out() + "/hs"; }

  // An application as rank 0 of 1 with liblaggard preloaded (after the fault shim when asked).
  ProcessOptions preloaded(bool with_shim = false) const {
    ProcessOptions o = single_rank(out(), "hs");
    if (with_shim) o.env["LD_PRELOAD"] = kShim + ":" + kLibrary;
    o.env["LAGGARD_TEST_IMAGE_ID"] = kImage;  // names known before the rank starts, to plant files at
    if (!format.empty()) o.env["LAGGARD_FILE_FORMAT"] = format;
    return o;
  }
  bool binary() const { return format != "json"; }
  // rank00000-PID-IMAGE-segNNNN.lgr (binary) or .json
  std::string rank_file_name(int pid, int segment) const {
    char name[96];
    std::snprintf(name, sizeof name, "rank00000-%d-%s-seg%04d.%s", pid, kImage, segment, binary() ? "lgr" : "json");
    return name;
  }
  static constexpr const char* kImage = "0123abcd";
  // Files a flush thread blocked in write(2) leaves: JSON's temp file, or the segment a frame is
  // being appended to.
  std::vector<fs::path> files_being_written() const {
    std::vector<fs::path> found;
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir(), ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == (binary() ? ".lgr" : ".tmp")) found.push_back(it->path());
    return found;
  }
  // Bytes in rank files that hold windows (not temp files): 0 while every write fails or hangs,
  // which shows the fault shim caught laggard's writes in this format.
  uintmax_t window_bytes_on_disk() const {
    uintmax_t bytes = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir(), ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".lgr" || it->path().extension() == ".json") bytes += fs::file_size(it->path(), ec);
    return bytes;
  }
  static ProcessOptions plain() {
    ProcessOptions o = clean_env();
    o.env["RANK"] = "0";
    return o;
  }
  std::vector<fs::path> temp_files() const {
    std::vector<fs::path> tmp;
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir(), ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().extension() == ".tmp") tmp.push_back(it->path());
    return tmp;
  }
  static std::vector<std::string> problem_kinds(const nlohmann::json& rep) {
    std::vector<std::string> kinds;
    for (const auto& p : rep["problems"]) kinds.push_back(p["kind"]);
    return kinds;
  }
  static bool has_problem(const nlohmann::json& rep, const std::string& kind) {
    auto k = problem_kinds(rep);
    return std::find(k.begin(), k.end(), kind) != k.end();
  }
  std::string format;  // LAGGARD_FILE_FORMAT for the preloaded application; empty: the default
};

class HostSafetyBothFormats : public HostSafety, public ::testing::WithParamInterface<const char*> {
 protected:
  void SetUp() override {
    HostSafety::SetUp();
    format = GetParam();
  }
};

INSTANTIATE_TEST_SUITE_P(Formats, HostSafetyBothFormats, ::testing::Values("binary", "json"),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// ---- planted symlinks, FIFOs and directories (issue 10 item 1) ----

TEST_P(HostSafetyBothFormats, SymlinksPlantedAtTheTempAndFileNamesAreNeverFollowed) {
  fs::create_directories(run_dir());
  std::ofstream(dir + "/victim") << "precious";
  std::string go = dir + "/go";
  Running p = start_process({kHostileApp, "wait-for", go, "5"}, preloaded());
  // The names carry the pid, so they are planted once it is known, before the first NVTX call.
  // JSON: both temp names and the file's; binary: the segment's name, which frames are appended to.
  std::string name = rank_file_name(p.pid, 0);
  std::vector<std::string> planted = {name};
  if (!binary())
    for (int seg = 0; seg < 2; ++seg) planted.push_back("." + rank_file_name(p.pid, seg) + ".tmp");
  for (const std::string& n : planted) fs::create_symlink(dir + "/victim", run_dir() + "/" + n);
  std::ofstream(go) << "";
  ProcessResult r = wait_process(p, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "5 steps done\n");
  EXPECT_EQ(read_file(dir + "/victim"), "precious");  // was truncated and overwritten
  EXPECT_FALSE(fs::is_symlink(run_dir() + "/" + name));
  EXPECT_TRUE(fs::is_regular_file(run_dir() + "/" + name));
  nlohmann::json rep = report();
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 5);
}

TEST_P(HostSafetyBothFormats, AFifoAtTheTempNameNeitherBlocksNorLosesTheFile) {
  fs::create_directories(run_dir());
  std::string go = dir + "/go";
  Running p = start_process({kHostileApp, "wait-for", go, "5"}, preloaded());
  // JSON: the temp name; binary: the segment's own name, which frames are appended to.
  std::string name = binary() ? run_dir() + "/" + rank_file_name(p.pid, 0)
                              : run_dir() + "/." + rank_file_name(p.pid, 0) + ".tmp";
  ASSERT_EQ(mkfifo(name.c_str(), 0600), 0);
  std::ofstream(go) << "";
  auto start = std::chrono::steady_clock::now();
  ProcessResult r = wait_process(p, 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "5 steps done\n");
  EXPECT_LT(seconds_since(start), 5.0);  // was: the flush thread blocked in open(), exit waited 10 s
  nlohmann::json rep = report();
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 5);
}

TEST_F(HostSafety, ARunDirectoryPlantedAsASymlinkIsNotWrittenThrough) {
  fs::create_directories(out());
  fs::create_directories(dir + "/elsewhere");
  fs::create_directory_symlink(dir + "/elsewhere", run_dir());
  ProcessResult with = run_process({kDemo, "--steps", "5"}, preloaded());
  ProcessResult without = run_process({kDemo, "--steps", "5"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_TRUE(fs::is_empty(dir + "/elsewhere"));  // was: the rank file landed there
  EXPECT_NE(with.err.find("symbolic link"), std::string::npos) << with.err;
}

TEST_F(HostSafety, ARunDirectoryOfAnotherUserIsNotWrittenInto) {
  fs::create_directories(run_dir());
  if (chown(run_dir().c_str(), 65534, 65534) != 0) GTEST_SKIP() << "needs root to give the directory away";
  ProcessResult with = run_process({kDemo, "--steps", "5"}, preloaded());
  ProcessResult without = run_process({kDemo, "--steps", "5"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_TRUE(fs::is_empty(run_dir()));  // was: written into
  EXPECT_NE(with.err.find("belongs to another user"), std::string::npos) << with.err;
}

TEST_F(HostSafety, DirectoriesAre0755AndFiles0644UnderTheUmask) {
  mode_t old = umask(0);  // children inherit it; the widest case
  ProcessResult r = run_process({kDemo, "--steps", "3"}, preloaded());
  umask(old);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto perms = [](const std::string& p) { return static_cast<int>(fs::status(p).permissions()) & 0777; };
  EXPECT_EQ(perms(out()), 0755);  // was 0777: anyone could plant files
  EXPECT_EQ(perms(run_dir()), 0755);
  ASSERT_EQ(rank_files().size(), 1u);
  EXPECT_EQ(perms(rank_files()[0].string()), 0644);

  old = umask(077);
  fs::remove_all(out());
  r = run_process({kDemo, "--steps", "3"}, preloaded());
  umask(old);
  EXPECT_EQ(perms(run_dir()), 0700);
  ASSERT_EQ(rank_files().size(), 1u);
  EXPECT_EQ(perms(rank_files()[0].string()), 0600);
}

// ---- an application that closes every fd >= 3 (issue 10 item 2) ----

TEST_F(HostSafety, AnApplicationThatClosesItsFdsKeepsItsDataAndCpu) {
  ProcessResult without = run_process({kHostileApp, "close-fds"}, plain());
  ProcessResult with = run_process({kHostileApp, "close-fds"}, preloaded());
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_NE(without.out.find("read back 12 of 12 bytes"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("bytes found in my pipe at exit: 0"), std::string::npos) << without.out;
  // Was: laggard read the app's pipe (0 of 12 bytes), spun on POLLNVAL, wrote a byte at exit.
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(with.err, "");
  nlohmann::json rep = report();
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 7);
  EXPECT_TRUE(rep["ranks"][0]["final"].get<bool>());
}

// Was: once in a CI run the application's pipe got fds 4 and 5 above: the flush thread held 3
// and 4 for a moment, on /proc/self/task and a thread's schedstat. Now laggard's descriptors live
// in a table of their own (files/private_fds.h). With the old library this run found laggard's
// run directory and segment in the application's table, and 563-754 opens in 1.5 s not at fd 3.
TEST_F(HostSafety, LaggardTakesNoDescriptorNumberOfTheApplications) {
  ProcessResult without = run_process({kHostileApp, "lowest-fd", "1500"}, plain());
  ProcessResult with = run_process({kHostileApp, "lowest-fd", "1500"}, preloaded());
  ASSERT_EQ(without.exit_code, 0) << without.err;
  EXPECT_NE(without.out.find("descriptors in my table besides 0-2: 0\n"), std::string::npos) << without.out;
  EXPECT_NE(without.out.find("did not get the lowest free descriptor: 0\n"), std::string::npos) << without.out;
  EXPECT_EQ(with.exit_code, 0);
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(with.err, "");
  nlohmann::json rep = report();
  EXPECT_GE(rep["ranks"][0]["sections"]["step"]["count"].get<int>(), 50);
  EXPECT_TRUE(rep["ranks"][0]["final"].get<bool>());
}

// ---- laggard's threads by name (top -H, py-spy, gdb and hang reports show them so) ----

TEST_F(HostSafety, LaggardsThreadsAreNamedSoUsersCanTellThemApart) {
  ProcessResult without = run_process({kHostileApp, "thread-names", "0"}, plain());
  EXPECT_EQ(without.out, "threads named laggard-*:\n");
  ProcessOptions o = preloaded();
  o.env["LAGGARD_HANG_S"] = "30";  // the watchdog thread too
  ProcessResult with = run_process({kHostileApp, "thread-names", "3"}, o);
  EXPECT_EQ(with.exit_code, 0) << with.err;
  // Was " laggard-files" alone: the flush and watchdog threads kept the application's name.
  EXPECT_EQ(with.out, "threads named laggard-*: laggard-files laggard-flush laggard-watch\n") << with.err;
}

// ---- a full file system (issue 10 item 3) ----

TEST_P(HostSafetyBothFormats, WindowsRefusedByAFullFileSystemAreKeptAndWrittenLater) {
  std::string full = dir + "/disk-full";
  std::ofstream(full) << "";
  ProcessOptions o = preloaded(true);
  o.env["LAGGARD_TEST_IO_FAULT"] = "enospc";
  o.env["LAGGARD_TEST_IO_WHILE"] = full;
  o.env["LAGGARD_WINDOWS_PER_FILE"] = "2";  // segments roll over while the disk is full
  Running p = start_process({kDemo, "--steps", "60", "--step-ms", "25"}, o);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  EXPECT_EQ(window_bytes_on_disk(), 0u);  // every write so far was refused
  fs::remove(full);  // space again
  ProcessResult r = wait_process(p, 60);
  ProcessResult without = run_process({kDemo, "--steps", "60", "--step-ms", "25"}, plain());
  EXPECT_EQ(r.exit_code, without.exit_code);
  EXPECT_EQ(r.out, without.out);
  nlohmann::json rep = report();
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 60);  // was: the windows of full segments were lost
  EXPECT_FALSE(has_problem(rep, "missing_windows")) << rep["problems"].dump();
  EXPECT_FALSE(has_problem(rep, "torn_tail")) << rep["problems"].dump();  // a refused append is cut off again
  for (const fs::path& f : rank_files()) EXPECT_EQ(f.extension(), binary() ? ".lgr" : ".json") << f;
}

TEST_F(HostSafety, AReportListsTheWindowsMissingFromARank) {
  ProcessOptions o = preloaded();
  o.env["LAGGARD_WINDOWS_PER_FILE"] = "1";  // one file per window
  ASSERT_EQ(run_process({kDemo, "--steps", "40", "--step-ms", "10"}, o).exit_code, 0);
  std::vector<fs::path> files = rank_files();
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 3u);
  fs::remove(files[1]);  // segment 1 = window 1
  nlohmann::json rep = report();
  std::string msg;
  for (const auto& p : rep["problems"])
    if (p["kind"] == "missing_windows") msg = p["message"];
  EXPECT_NE(msg.find("1 window(s): 1 of"), std::string::npos) << rep["problems"].dump();  // was: "none"
}

// ---- an exec'd child inherits LD_PRELOAD and RANK (issue 10 item 4) ----

TEST_F(HostSafety, AnExecdChildDoesNotReplaceTheRanksOwnData) {
  ProcessResult with = run_process({kHostileApp, "exec-child", "3", "50"}, preloaded());
  ProcessResult without = run_process({kHostileApp, "exec-child", "3", "50"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_EQ(with.err, "");
  nlohmann::json rep = report();
  ASSERT_EQ(rep["ranks"].size(), 1u);
  // Was: the child, which recorded more, stood for rank 0.
  EXPECT_EQ(rep["ranks"][0]["sections"]["parent_step"]["count"], 4);
  EXPECT_FALSE(rep["ranks"][0]["sections"].contains("child_step"));
  std::string msg;
  for (const auto& p : rep["problems"])
    if (p["kind"] == "duplicate_rank") msg = p["message"];
  EXPECT_NE(msg.find("the rank's own process"), std::string::npos) << rep["problems"].dump();
  EXPECT_NE(msg.find("exec'd child"), std::string::npos) << msg;
}

// ---- a hung output file system and SIGKILL mid-write (issue 10 item 5) ----

TEST_P(HostSafetyBothFormats, AHungFileSystemDelaysExitByTheBoundOnly) {
  ProcessOptions o = preloaded(true);
  o.env["LAGGARD_TEST_IO_FAULT"] = "hang";
  o.env["LAGGARD_FLUSH_S"] = "100";  // the only write is the one at exit
  auto start = std::chrono::steady_clock::now();
  ProcessResult with = run_process({kDemo, "--steps", "5"}, o);
  double took = seconds_since(start);
  ProcessResult without = run_process({kDemo, "--steps", "5"}, plain());
  EXPECT_EQ(with.exit_code, without.exit_code);
  EXPECT_EQ(with.out, without.out);
  EXPECT_LT(took, 5.0);  // 1 s bound + the demo's own time; was 10 s
  EXPECT_EQ(window_bytes_on_disk(), 0u);  // the write really hung
}

TEST_P(HostSafetyBothFormats, AHungFileSystemDelaysSigtermDeathByTheBoundOnly) {
  ProcessOptions o = preloaded(true);
  o.env["LAGGARD_TEST_IO_FAULT"] = "hang";
  o.env["LAGGARD_EXIT_WAIT_S"] = "0.2";
  Running p = start_process({kDemo, "--steps", "100000", "--step-ms", "10"}, o);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (files_being_written().empty() && std::chrono::steady_clock::now() < deadline)  // the flush thread is stuck
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_FALSE(files_being_written().empty());
  auto start = std::chrono::steady_clock::now();
  kill(p.pid, SIGTERM);
  ProcessResult r = wait_process(p, 30);
  EXPECT_EQ(r.term_signal, SIGTERM);
  EXPECT_LT(seconds_since(start), 1.5);  // 0.2 s asked; was 2 s whatever was asked
}

TEST_F(HostSafety, TempFilesLeftBySigkillMidWriteAreRemovedAtTheNextStart) {
  format = "json";  // temp files are how JSON segments are rewritten; frames are appended in place
  ProcessOptions o = preloaded(true);
  o.env["LAGGARD_TEST_IO_FAULT"] = "hang";
  Running p = start_process({kDemo, "--steps", "100000", "--step-ms", "10"}, o);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (temp_files().empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(temp_files().size(), 1u);
  kill(p.pid, SIGKILL);
  wait_process(p, 30);
  ASSERT_EQ(temp_files().size(), 1u);  // left behind, mid-write
  ProcessResult r = run_process({kDemo, "--steps", "3"}, preloaded());  // the same rank starts again
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(temp_files().empty()) << temp_files()[0];
  nlohmann::json rep = report();
  EXPECT_EQ(rep["ranks"][0]["sections"]["step"]["count"], 3);
}

// Binary frames: a SIGKILL in the middle of an append leaves a torn tail. The whole frames before
// it stay readable, `laggard cat` and `laggard report` say what was cut, and the rank's next
// process writes its own file beside it.
TEST_F(HostSafety, ATornTailLeftBySigkillMidAppendIsReportedAndTheWholeWindowsKept) {
  std::string torn = dir + "/torn";
  ProcessOptions o = preloaded(true);
  o.env["LAGGARD_TEST_IO_FAULT"] = "half-hang";
  o.env["LAGGARD_TEST_IO_WHILE"] = torn;
  Running p = start_process({kDemo, "--steps", "100000", "--step-ms", "10"}, o);
  fs::path file = run_dir() + "/" + rank_file_name(p.pid, 0);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (rank_file_text(file).find("\"name\":\"step\"") == std::string::npos && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  std::ofstream(torn) << "";  // the next append writes half a frame and hangs
  ProcessResult cat;
  while (std::chrono::steady_clock::now() < deadline) {
    cat = run_process({kLaggard, "cat", file.string()}, clean_env());
    if (cat.exit_code != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(p.pid, SIGKILL);
  wait_process(p, 30);
  ASSERT_NE(cat.exit_code, 0) << "no torn tail appeared";
  cat = run_process({kLaggard, "cat", file.string()}, clean_env());
  EXPECT_EQ(cat.exit_code, 1);
  EXPECT_NE(cat.err.find("a frame cut off"), std::string::npos) << cat.err;  // was: a hung write looked whole
  nlohmann::json whole = nlohmann::json::parse(cat.out);
  ASSERT_GE(whole["windows"].size(), 1u);
  EXPECT_FALSE(whole["final"].get<bool>());

  ProcessResult again = run_process({kDemo, "--steps", "3"}, preloaded());  // the same rank starts again
  EXPECT_EQ(again.exit_code, 0) << again.err;
  nlohmann::json rep = report();
  EXPECT_TRUE(has_problem(rep, "torn_tail")) << rep["problems"].dump();
  EXPECT_EQ(rep["ranks"].size(), 1u);
}

// ---- `laggard run` command line (issue 10 item 11) ----

TEST(LaggardRunCli, UnknownOptionBeforeDashesIsAnError) {
  // Was: `--nprocs 4 --flush 0.25` vanished and the command ran once, without RANK, rc 0.
  ProcessResult r = run_process({kLaggard, "run", "--nprocs", "4", "--flush", "0.25", "--", "true"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option '--nprocs'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Usage: laggard run [OPTIONS] -- CMD [ARGS...]"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, UnknownOptionWithoutDashesIsAnErrorNotTheCommand) {
  ProcessResult r = run_process({kLaggard, "run", "--nprocs", "4", "true"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown option '--nprocs'"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, MissingLibraryIsAnError) {
  ProcessResult r = run_process({kLaggard, "run", "--lib", "/nonexistent.so", "--", "sh", "-c", "echo ran"}, clean_env());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");  // the command did not run
  EXPECT_NE(r.err.find("/nonexistent.so"), std::string::npos) << r.err;
}

TEST(LaggardRunCli, UsageLinesNameTheProgramAndTheCommand) {
  ProcessResult run = run_process({kLaggard, "run", "--help"}, clean_env());
  EXPECT_NE(run.out.find("Usage: laggard run [OPTIONS] -- CMD [ARGS...]"), std::string::npos) << run.out;
  ProcessResult top = run_process({kLaggard, "--help"}, clean_env());
  EXPECT_NE(top.out.find("Usage: laggard [OPTIONS] SUBCOMMAND"), std::string::npos) << top.out;
  ProcessResult rep = run_process({kLaggard, "report", "--help"}, clean_env());
  EXPECT_NE(rep.out.find("Usage: laggard report [OPTIONS] dir"), std::string::npos) << rep.out;
}

}  // namespace
}  // namespace laggard::test
