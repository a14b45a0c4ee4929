#include "control_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>

#include "safe_write.h"

namespace laggard {
namespace {

constexpr int64_t kMaxWindowSeconds = 7 * 24 * 3600;

// Closes a descriptor when it goes.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Splits off the next space-separated token; an empty token (two spaces) is returned as such.
std::string_view next_token(std::string_view& rest) {
  size_t sp = rest.find(' ');
  std::string_view tok = rest.substr(0, sp);
  rest = sp == std::string_view::npos ? std::string_view() : rest.substr(sp + 1);
  return tok;
}

template <class T>
bool parse_number(std::string_view s, T* out) {
  if (s.empty() || s.size() > 20 || s[0] < '0' || s[0] > '9') return false;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size();
}

// "key=value" with the expected key; returns the value or nullopt.
std::optional<std::string_view> field(std::string_view tok, std::string_view key) {
  if (tok.size() <= key.size() || tok.substr(0, key.size()) != key || tok[key.size()] != '=') return std::nullopt;
  return tok.substr(key.size() + 1);
}

std::optional<ControlCommand> command_of(std::string_view s) {
  if (s == "pause") return ControlCommand::pause;
  if (s == "resume") return ControlCommand::resume;
  if (s == "window") return ControlCommand::window;
  return std::nullopt;
}

ControlParse fail(std::string why) { return ControlParse{std::nullopt, std::move(why)}; }

}  // namespace

const char* control_command_name(ControlCommand c) {
  switch (c) {
    case ControlCommand::pause: return "pause";
    case ControlCommand::resume: return "resume";
    case ControlCommand::window: return "window";
  }
  return "?";
}

ControlParse parse_control(std::string_view text) {
  if (text.size() > kMaxControlBytes) return fail("longer than " + std::to_string(kMaxControlBytes) + " bytes");
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  for (char c : text)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
      return fail("holds a control or non-ASCII byte");
  std::string_view rest = text;
  if (next_token(rest) != "laggard-control" || next_token(rest) != "1")
    return fail("does not start with 'laggard-control 1'");
  ControlRequest r;
  auto seq = field(next_token(rest), "seq");
  if (!seq || !parse_number(*seq, &r.seq) || r.seq == 0) return fail("no valid seq=N (N >= 1)");
  auto cmd = field(next_token(rest), "command");
  auto kind = cmd ? command_of(*cmd) : std::nullopt;
  if (!kind) return fail("no valid command=pause|resume|window");
  r.command = *kind;
  std::string_view tok = next_token(rest);
  if (r.command == ControlCommand::window) {
    auto secs = field(tok, "seconds");
    int64_t s = 0;
    if (!secs || !parse_number(*secs, &s) || s < 1 || s > kMaxWindowSeconds)
      return fail("window without a valid seconds=N (1 to " + std::to_string(kMaxWindowSeconds) + ")");
    r.window_ns = s * 1'000'000'000;
    tok = next_token(rest);
  }
  auto issued = field(tok, "issued_ns");
  if (!issued || !parse_number(*issued, &r.issued_ns)) return fail("no valid issued_ns=N");
  if (!rest.empty()) return fail("unexpected text after issued_ns");
  return ControlParse{r, ""};
}

ControlRead read_control_file(const std::string& run_dir) {
  ControlRead out;
  // The writer's long-lived run directory descriptor when it has one (issue 24: laggard's
  // descriptors are few and long-lived); never one of the application's last descriptors.
  BorrowedRunDir kept_dir(run_dir);
  if (!fd_room(kept_dir.fd() >= 0 ? 1 : 2)) return out;  // read again at the next poll
  Fd dir{kept_dir.fd() >= 0 ? -1 : keep_if_room(::open(run_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC))};
  const int dir_fd = kept_dir.fd() >= 0 ? kept_dir.fd() : dir.fd;
  if (dir_fd < 0) {
    // A missing or unusable directory is the writer's to report (once); only a run directory
    // planted as a symlink is refused here.
    struct stat link;
    if (::lstat(run_dir.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return out;
    out.status = ControlRead::Status::refused;
    out.error = "the run directory '" + run_dir + "' is a symbolic link";
    return out;
  }
  // Checked again: the application may have taken descriptors since the check above.
  if (dir.fd >= 0 && !fd_room(1)) return out;
  // O_NONBLOCK: a FIFO planted under the name must not block the flush thread in open().
  Fd file{keep_if_room(::openat(dir_fd, kControlFileName, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY))};
  if (file.fd < 0) {
    if (errno == ENOENT || errno == EMFILE || errno == ENFILE) return out;  // none, or read again at the next poll
    out.status = ControlRead::Status::refused;
    out.error = errno == ELOOP ? "is a symbolic link" : std::string("cannot be opened (") + std::strerror(errno) + ")";
    return out;
  }
  struct stat st;
  out.status = ControlRead::Status::refused;
  if (::fstat(file.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    out.error = "is not a regular file";
    return out;
  }
  if (st.st_uid != ::geteuid() && st.st_uid != 0) {
    out.error = "belongs to another user (uid " + std::to_string(st.st_uid) + ")";
    return out;
  }
  if (st.st_size > static_cast<off_t>(kMaxControlBytes)) {
    out.error = "is larger than " + std::to_string(kMaxControlBytes) + " bytes";
    return out;
  }
  // One byte more than allowed: a file that grew after fstat is still caught.
  char buf[kMaxControlBytes + 1];
  size_t got = 0;
  while (got < sizeof buf) {
    ssize_t n = ::read(file.fd, buf + got, sizeof buf - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.error = std::string("cannot be read (") + std::strerror(errno) + ")";
      return out;
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  if (got > kMaxControlBytes) {
    out.error = "is larger than " + std::to_string(kMaxControlBytes) + " bytes";
    return out;
  }
  out.status = ControlRead::Status::ok;
  out.text.assign(buf, got);
  return out;
}

}  // namespace laggard
