#include "safe_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace laggard {
namespace {

constexpr mode_t kDirMode = 0755;   // reduced by the umask
constexpr mode_t kFileMode = 0644;  // reduced by the umask

std::string write_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return std::strerror(errno);
    }
    off += static_cast<size_t>(n);
  }
  return "";
}

std::string parent_of(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// fsync of the file; of the directory too after a rename, so the new name survives a reboot.
std::string sync_if(Durability durability, int fd) {
  if (durability != Durability::synced) return "";
  return ::fsync(fd) == 0 || errno == EINVAL || errno == EROFS ? "" : std::strerror(errno);
}

bool pid_is_dead(long pid) { return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

std::string make_dirs(const std::string& path) {
  if (path.empty()) return "empty output path";
  std::string cur;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = path.find('/', pos + 1);
    cur = path.substr(0, pos);
    if (cur.empty()) continue;
    if (::mkdir(cur.c_str(), kDirMode) != 0 && errno != EEXIST)
      return "cannot create directory '" + cur + "': " + std::strerror(errno);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return "cannot create directory '" + path + "': a file of that name is there";
  return "";
}

RunDirFd::RunDirFd(const std::string& path, const DirIdentity& created_earlier) : path_(path) {
  if (std::string err = make_dirs(parent_of(path)); !err.empty()) {
    error_ = err;
    return;
  }
  if (::mkdir(path.c_str(), kDirMode) == 0) {
    created_ = true;
  } else if (errno != EEXIST) {
    error_ = "cannot create directory '" + path + "': " + std::strerror(errno);
    return;
  }
  // O_NOFOLLOW: a run directory planted as a symlink (by anyone) is refused, not written through.
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    error_ = errno == ELOOP || errno == ENOTDIR
                 ? "'" + path + "' is a symbolic link or not a directory; not writing through it"
                 : "cannot open directory '" + path + "': " + std::strerror(errno);
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    error_ = "'" + path + "' is not a directory";
    ::close(fd);
    return;
  }
  identity_ = {st.st_dev, st.st_ino};
  bool ours = st.st_uid == ::geteuid() || created_ || (created_earlier.ino != 0 && identity_ == created_earlier);
  if (!ours) {
    error_ = "'" + path + "' belongs to another user (uid " + std::to_string(st.st_uid) + "); not writing there";
    ::close(fd);
    return;
  }
  fd_ = fd;
}

RunDirFd::~RunDirFd() {
  if (fd_ >= 0) ::close(fd_);
}

std::string RunDirFd::write_atomically(const std::string& name, const std::string& data,
                                       Durability durability) const {
  std::string tmp = "." + name + ".tmp";
  constexpr int kFlags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  int fd = ::openat(fd_, tmp.c_str(), kFlags, kFileMode);
  if (fd < 0 && errno == EEXIST) {
    // Our own leftover from a failed write, or something planted (symlink, FIFO): unlinking
    // removes the name only, never touches what a symlink points to.
    ::unlinkat(fd_, tmp.c_str(), 0);
    fd = ::openat(fd_, tmp.c_str(), kFlags, kFileMode);
  }
  if (fd < 0) return "cannot write '" + path_ + "/" + tmp + "': " + std::strerror(errno);
  std::string err = write_all(fd, data);
  if (err.empty()) err = sync_if(durability, fd);
  if (::close(fd) != 0 && err.empty()) err = std::strerror(errno);
  if (err.empty() && ::renameat(fd_, tmp.c_str(), fd_, name.c_str()) != 0) err = std::strerror(errno);
  if (err.empty()) (void)sync_if(durability, fd_);  // the rename itself; the data is safe already
  if (!err.empty()) {
    ::unlinkat(fd_, tmp.c_str(), 0);
    return "cannot write '" + path_ + "/" + name + "': " + err;
  }
  return "";
}

std::string RunDirFd::append_whole(const std::string& name, const std::string& data, bool fresh,
                                   Durability durability) const {
  int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_CREAT;
  if (fresh) {
    ::unlinkat(fd_, name.c_str(), 0);  // a planted name goes; never opened
    flags |= O_EXCL;
  }
  int fd = ::openat(fd_, name.c_str(), flags, kFileMode);
  if (fd < 0) return "cannot write '" + path_ + "/" + name + "': " + std::strerror(errno);
  struct stat st {};
  std::string err;
  if (::fstat(fd, &st) != 0) err = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) err = "not a regular file";
  if (err.empty()) err = write_all(fd, data);
  if (err.empty()) err = sync_if(durability, fd);
  if (!err.empty() && S_ISREG(st.st_mode)) (void)::ftruncate(fd, st.st_size);  // no torn frame stays
  if (::close(fd) != 0 && err.empty()) err = std::strerror(errno);
  if (err.empty() && fresh) (void)sync_if(durability, fd_);  // a new name in the directory
  return err.empty() ? "" : "cannot write '" + path_ + "/" + name + "': " + err;
}

int RunDirFd::remove_stale_temp_files(int rank, long own_pid) const {
  int dup_fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (dup_fd < 0) return 0;
  DIR* d = ::fdopendir(dup_fd);
  if (!d) {
    ::close(dup_fd);
    return 0;
  }
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    int file_rank = -1, seg = -1, consumed = 0;
    long pid = 0;
    if (std::sscanf(e->d_name, ".rank%d-%ld-seg%d.json.tmp%n", &file_rank, &pid, &seg, &consumed) != 3) continue;
    if (e->d_name[consumed] != '\0' || file_rank != rank || pid == own_pid || !pid_is_dead(pid)) continue;
    if (::unlinkat(fd_, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace laggard
