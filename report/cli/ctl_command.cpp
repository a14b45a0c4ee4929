#include "ctl_command.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace laggard::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kControlFile = "laggard-control";  // docs/schema.md, "Control file"
constexpr size_t kMaxControlBytes = 256;

bool has_rank_files(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.rfind("rank", 0) == 0 && (it->path().extension() == ".json" || it->path().extension() == ".lgr")) return true;
  }
  return false;
}

// The run directory the ranks read the file from: DIR itself when it holds rank files (or
// nothing yet), else DIR's one run directory (or --run's).
std::string resolve_run_dir(const CtlOptions& o, std::string* error) {
  std::error_code ec;
  fs::path dir(o.dir);
  if (!fs::is_directory(dir, ec)) {
    *error = fmt::format("'{}' is not a directory (give the run directory, LAGGARD_OUT/RUN_ID)", o.dir);
    return "";
  }
  if (!o.run_id.empty()) {
    fs::path run = dir / o.run_id;
    if (o.run_id.find('/') != std::string::npos || o.run_id == ".." || !fs::is_directory(run, ec)) {
      *error = fmt::format("no run '{}' in '{}'", o.run_id, o.dir);
      return "";
    }
    return run.string();
  }
  if (has_rank_files(dir)) return dir.string();
  std::vector<fs::path> runs;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (it->is_directory(ec) && has_rank_files(it->path())) runs.push_back(it->path());
  if (runs.size() == 1) return runs[0].string();
  if (runs.size() > 1) {
    std::string names;
    for (const auto& r : runs) names += " " + r.filename().string();
    *error = fmt::format("'{}' holds {} runs; choose one with --run:{}", o.dir, runs.size(), names);
    return "";
  }
  return dir.string();  // no rank file yet: the ranks of a run just started write here later
}

// The current file's text (a missing or unreadable one gives ""); never follows a symlink.
std::string read_current(const std::string& run_dir) {
  int fd = ::open((run_dir + "/" + kControlFile).c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return "";
  std::string text;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    char buf[kMaxControlBytes];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) text.assign(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return text;
}

// Temp file beside it, then rename: a rank never reads half a command.
std::string write_atomically(const std::string& run_dir, const std::string& text) {
  std::string tmp = fmt::format("{}/.{}.{}.tmp", run_dir, kControlFile, ::getpid());
  std::string path = run_dir + "/" + kControlFile;
  ::unlink(tmp.c_str());  // our own leftover; unlink never follows a symlink
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) return fmt::format("cannot create '{}': {}", tmp, std::strerror(errno));
  std::string err;
  if (::write(fd, text.data(), text.size()) != static_cast<ssize_t>(text.size())) err = std::strerror(errno);
  if (err.empty() && ::fsync(fd) != 0) err = std::strerror(errno);
  if (::close(fd) != 0 && err.empty()) err = std::strerror(errno);
  if (err.empty() && ::rename(tmp.c_str(), path.c_str()) != 0) err = std::strerror(errno);
  if (!err.empty()) {
    ::unlink(tmp.c_str());
    return fmt::format("cannot write '{}': {}", path, err);
  }
  return "";
}

}  // namespace

std::string control_text(uint64_t seq, const std::string& command, int64_t seconds, int64_t issued_ns) {
  std::string secs = command == "window" ? fmt::format(" seconds={}", seconds) : "";
  return fmt::format("laggard-control 1 seq={} command={}{} issued_ns={}\n", seq, command, secs, issued_ns);
}

uint64_t control_seq(const std::string& text) {
  size_t at = text.find(" seq=");
  if (at == std::string::npos) return 0;
  const char* begin = text.data() + at + 5;
  uint64_t seq = 0;
  auto [end, ec] = std::from_chars(begin, text.data() + text.size(), seq);
  return ec == std::errc() && end != begin ? seq : 0;
}

int ctl_command(const CtlOptions& o, std::ostream& out, std::ostream& err) {
  if (o.command == "window" && o.seconds <= 0) {
    err << "laggard ctl: window needs its length in seconds, e.g. `laggard ctl DIR window 30`\n";
    return 2;
  }
  if (o.command != "window" && o.seconds != 0) {
    err << "laggard ctl: only window takes a number of seconds\n";
    return 2;
  }
  std::string error;
  std::string run_dir = resolve_run_dir(o, &error);
  if (run_dir.empty()) {
    err << "laggard ctl: " << error << '\n';
    return 2;
  }
  uint64_t seq = control_seq(read_current(run_dir)) + 1;
  int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::system_clock::now().time_since_epoch()).count();
  if (std::string e = write_atomically(run_dir, control_text(seq, o.command, o.seconds, now)); !e.empty()) {
    err << "laggard ctl: " << e << '\n';
    return 2;
  }
  std::string what = o.command == "pause"  ? "pause capture"
                     : o.command == "resume" ? "resume capture"
                                             : fmt::format("capture for {} s, then pause", o.seconds);
  out << fmt::format("laggard ctl: asked every rank of {} to {} (command #{}); running ranks apply it within "
                     "a quarter of a second\n", run_dir, what, seq);
  return 0;
}

}  // namespace laggard::cli
