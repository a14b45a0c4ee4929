// The one safe-write path (preload/files/safe_write.h): every file the capture side writes goes
// through it, and it cannot be turned against the user by what another user plants in the run
// directory (a symlink, a FIFO, a symlinked run directory), whichever writer asks.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "hang_report.h"
#include "safe_write.h"
#include "watchdog.h"

namespace laggard {
namespace safe_write_test {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A call that creates, replaces, truncates or removes a path. Reading (ifstream, an open without
// O_WRONLY/O_RDWR/O_CREAT) is allowed anywhere; log.cpp's write(2) to stderr is not a path.
bool writes_a_path(const std::string& statement) {
  static const std::regex kPathCall(
      R"((^|[^\w.>])(::)?(open|openat|open64|creat|fopen|freopen|rename|renameat|renameat2|unlink|unlinkat|mkdir|mkdirat|truncate|ftruncate|symlink|symlinkat|link|linkat|mkstemp|mkfifo|mknod)\s*\()");
  static const std::regex kWriteStream(R"(std::(ofstream|fstream)\b)");
  if (std::regex_search(statement, kWriteStream)) return true;
  std::smatch m;
  if (!std::regex_search(statement, m, kPathCall)) return false;
  std::string call = m[3];
  if (call == "open" || call == "openat" || call == "open64")
    return statement.find("O_WRONLY") != std::string::npos || statement.find("O_RDWR") != std::string::npos ||
           statement.find("O_CREAT") != std::string::npos;
  if (call == "fopen") return statement.find("\"r\"") == std::string::npos;
  return true;
}

// Statements (joined across lines up to ';'), comments removed.
std::vector<std::string> statements_of(const std::string& text) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (size_t c = line.find("//"); c != std::string::npos) line.resize(c);
    cur += line + ' ';
    if (line.find(';') != std::string::npos || line.find('{') != std::string::npos) {
      out.push_back(cur);
      cur.clear();
    }
  }
  out.push_back(cur);
  return out;
}

TEST(SafeWrite, NoCaptureSourceWritesAFileOutsideTheSafeWritePath) {
  const fs::path root = LAGGARD_SOURCE_DIR;
  const fs::path allowed = root / "preload/files/safe_write.cpp";
  int scanned = 0;
  std::vector<std::string> offenders;
  for (const char* dir : {"preload", "cupti", "nccl_hooks", "nvml"}) {
    for (const auto& e : fs::recursive_directory_iterator(root / dir)) {
      std::string ext = e.path().extension();
      if (ext != ".cpp" && ext != ".h") continue;
      ++scanned;
      if (e.path() == allowed) continue;
      for (const std::string& s : statements_of(slurp(e.path())))
        if (writes_a_path(s)) offenders.push_back(e.path().lexically_relative(root).string() + ": " + s);
    }
  }
  EXPECT_GT(scanned, 60);  // the walk found the sources
  EXPECT_TRUE(offenders.empty()) << "write these through RunDirFd (preload/files/safe_write.h):\n"
                                 << [&] {
                                      std::string all;
                                      for (auto& o : offenders) all += o + "\n";
                                      return all;
                                    }();
}

TEST(SafeWrite, TheScanRecognisesEveryWayToWriteAPath) {
  // The scan above would pass on an empty tree; these are the calls it must catch.
  for (const char* bad : {"int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);",
                          "fd = openat(dfd, name, O_RDWR);", "FILE* f = fopen(path, \"w\");",
                          "::rename(tmp.c_str(), path.c_str());", "unlink(p);", "std::ofstream out(p);",
                          "mkdir(p, 0755);", "x = creat(p, 0600);"})
    EXPECT_TRUE(writes_a_path(bad)) << bad;
  for (const char* fine : {"int fd = ::open(p, O_RDONLY | O_CLOEXEC);", "std::ifstream in(path);",
                           "ssize_t n = ::write(STDERR_FILENO, line, used);", "void* h = dlopen(lib, RTLD_NOW);",
                           "FILE* f = fopen(path, \"r\");", "dir.write_atomically(name, text);"})
    EXPECT_FALSE(writes_a_path(fine)) << fine;
}

class HangReportFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    base = fs::temp_directory_path() / ("laggard-safe-write-" + std::to_string(::getpid()));
    fs::remove_all(base);
    fs::create_directories(base);
    victim = base / "victim";
    std::ofstream(victim) << "precious";
    ::chmod(victim.c_str(), 0600);
  }
  void TearDown() override { fs::remove_all(base); }

  // The watchdog's own write path, with a report that needs no other threads.
  std::string write_report(const fs::path& run_dir, int index = 0) {
    watch::RankInfo ri;
    ri.run_dir = run_dir;
    ri.run_id = "r";
    ri.rank = 1;
    ri.pid = 4242;
    watch::HangConfig cfg;
    cfg.hang_s = 1;
    watch::Watchdog w(cfg, ri, 0);
    HangReport r;
    r.run_id = "r";
    r.rank = 1;
    r.pid = 4242;
    r.index = index;
    return w.write(r);
  }
  fs::path name(int index = 0) const { return hang_report_name(1, 4242, "", index); }

  fs::path base, victim;
};

TEST_F(HangReportFiles, ASymlinkPlantedAtTheTempNameIsNeverWrittenThrough) {
  fs::path run = base / "run";
  fs::create_directories(run);
  fs::create_symlink(victim, run / ("." + name().string() + ".tmp"));
  fs::create_symlink(victim, run / (name().string() + ".tmp"));  // the old, predictable name too
  ASSERT_EQ(write_report(run), "");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(run / name())));
  EXPECT_NE(slurp(run / name()).find("laggard-hang"), std::string::npos);
}

TEST_F(HangReportFiles, ASymlinkAtTheReportsOwnNameIsReplacedNotFollowed) {
  fs::path run = base / "run";
  fs::create_directories(run);
  fs::create_symlink(victim, run / name());
  ASSERT_EQ(write_report(run), "");
  EXPECT_EQ(slurp(victim), "precious");
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(run / name())));
}

TEST_F(HangReportFiles, AFifoAtTheTempNameNeitherBlocksNorIsOpened) {
  fs::path run = base / "run";
  fs::create_directories(run);
  ASSERT_EQ(::mkfifo((run / ("." + name().string() + ".tmp")).c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((run / (name().string() + ".tmp")).c_str(), 0600), 0);  // the old temp name
  ASSERT_EQ(write_report(run), "");  // would block forever in open() if the FIFO were opened
  EXPECT_TRUE(fs::is_regular_file(fs::symlink_status(run / name())));
}

TEST_F(HangReportFiles, ASymlinkedRunDirectoryIsRefused) {
  fs::path elsewhere = base / "elsewhere";
  fs::create_directories(elsewhere);
  fs::create_directory_symlink(elsewhere, base / "run");
  std::string err = write_report(base / "run");
  EXPECT_NE(err.find("symbolic link"), std::string::npos) << err;
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST_F(HangReportFiles, ReportsAreWrittenWholeAndLeaveNoTempFile) {
  fs::path run = base / "run";
  ASSERT_EQ(write_report(run, 0), "");  // creates the run directory
  ASSERT_EQ(write_report(run, 1), "");
  int files = 0;
  for (const auto& e : fs::directory_iterator(run)) {
    ++files;
    EXPECT_EQ(e.path().filename().string().find('.'), e.path().filename().string().rfind(".json")) << e.path();
  }
  EXPECT_EQ(files, 2);
}

TEST(SafeWriteDurability, SyncedWritesAndAppendsLandWholeLikeCachedOnes) {
  fs::path run = fs::temp_directory_path() / ("laggard-safe-sync-" + std::to_string(::getpid()));
  fs::remove_all(run);
  RunDirFd dir(run.string());
  ASSERT_TRUE(dir.ok()) << dir.error();
  ASSERT_EQ(dir.write_atomically("a.json", "{}\n", Durability::synced), "");
  ASSERT_EQ(dir.append_whole("b.lgr", "one", true, Durability::synced), "");
  ASSERT_EQ(dir.append_whole("b.lgr", "two", false, Durability::cached), "");
  EXPECT_EQ(slurp(run / "a.json"), "{}\n");
  EXPECT_EQ(slurp(run / "b.lgr"), "onetwo");
  fs::remove_all(run);
}

// The room check before an open cannot see an application filling its descriptors meanwhile
// (tests/integration: AnApplicationAtItsDescriptorLimitNeverFailsAnOpen failed now and then:
// cpu_wait checked, the application took all but one, cpu_wait opened the last); keep_if_room,
// after the open, hands the descriptor back when fewer than kFdReserve stay free. In a child: it
// lowers its descriptor limit.
TEST(SafeWriteDescriptors, AnOpenThatLeavesTooFewFreeIsHandedBackAtOnce) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit lim{16, 16};
    if (::setrlimit(RLIMIT_NOFILE, &lim) != 0) ::_exit(10);
    int held[16], n = 0;  // no allocation after fork
    for (int fd; n < 16 && (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held[n++] = fd;
    if (n < 4) ::_exit(11);
    for (int i = 0; i < 3; ++i) ::close(held[--n]);  // three free
    const int kept = keep_if_room(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (kept < 0) ::_exit(12);  // two stay free: room
    ::close(kept);
    if (::open("/dev/null", O_RDONLY | O_CLOEXEC) < 0) ::_exit(11);  // the application takes one: two free
    errno = 0;
    const int refused = keep_if_room(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (refused >= 0 || errno != EMFILE) ::_exit(13);  // it would have left one
    const int a = ::open("/dev/null", O_RDONLY | O_CLOEXEC), b = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (a < 0 || b < 0) ::_exit(14);  // both free again: the refused one was closed
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10 setrlimit, 11 too few descriptors, 12 refused with room, 13 kept "
                                       "without room, 14 the refused descriptor stayed open";
}

}  // namespace safe_write_test
}  // namespace laggard
