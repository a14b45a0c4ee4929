// A scratch directory for one test, removed with everything in it when the test ends.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string>

namespace laggard::testing {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "laggard-test") {
    std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
    path = mkdtemp(tmpl.data());
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

// The output directory of a test process that loads liblaggard.so: <root>/<pid>. ctest runs each test
// of a suite in its own process, in parallel, and a process sharing its directory with another would
// see that one's rank files, or lose its own to that one's clean-up. Kept after the tests (the
// library's exit flush writes once more); directories of dead processes are removed here, and this
// process's own is emptied first (a dead process with the same pid may have left one).
inline std::filesystem::path per_process_out_dir(const std::filesystem::path& root) {
  std::filesystem::create_directories(root);
  for (const auto& e : std::filesystem::directory_iterator(root)) {
    const pid_t pid = static_cast<pid_t>(std::atoll(e.path().filename().c_str()));
    // Another test process may be removing the same directory: its error is not ours.
    std::error_code ignored;
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) std::filesystem::remove_all(e.path(), ignored);
  }
  const std::filesystem::path mine = root / std::to_string(getpid());
  std::filesystem::remove_all(mine);
  return mine;
}

}  // namespace laggard::testing
