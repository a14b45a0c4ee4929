#include "safe_write.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "private_fds.h"

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

// ---- long-lived descriptors ----

struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
};

// Whether fd is still the descriptor laggard opened on (dev, ino): an application that closed
// it and opened something else at that number, or dup2()ed over it, fails one of these.
bool still_ours(int fd, FileIdentity id) {
  struct stat st;
  int flags = ::fcntl(fd, F_GETFD);
  return fd >= 0 && flags >= 0 && (flags & FD_CLOEXEC) && ::fstat(fd, &st) == 0 && st.st_dev == id.dev &&
         st.st_ino == id.ino;
}

// Whether `name` (relative to dir_fd, or a path when dir_fd is AT_FDCWD) still leads to (dev, ino).
bool name_leads_to(int dir_fd, const char* name, FileIdentity id) {
  struct stat st;
  return ::fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == id.dev && st.st_ino == id.ino;
}

// The run directory and the segment being appended, kept open between flushes. Used by the
// flush thread and the watchdog thread; the lock is held for checks and opens only.
struct KeptDescriptors {
  std::mutex mu;
  std::string dir_path;
  int dir_fd = -1;
  FileIdentity dir_id;
  int dir_users = 0;            // RunDirFd objects using dir_fd now: it is closed only at 0
  struct Retired {
    int fd, users;
  };
  std::vector<Retired> retired;  // kept directories replaced while in use, closed when unused
  std::string file_name;  // in dir_fd
  int file_fd = -1;
  FileIdentity file_id;
};
// One set per descriptor table: the shared one, and the private-table thread's (private_fds.h),
// whose numbers mean nothing in the shared table. Never destroyed: used during exit.
KeptDescriptors& kept_in(bool private_table) {
  static auto* shared = new KeptDescriptors();
  static auto* own = new KeptDescriptors();
  return private_table ? *own : *shared;
}
KeptDescriptors& kept() { return kept_in(on_private_fds_thread()); }
// Made when the library loads, before the application can have threads. Made on first use, a
// child forked while a parent's thread was making them waited forever on the initialisation
// guard (__cxa_guard_acquire) in its fork handler, forget_descriptors_after_fork (CI,
// 2026-11-28: Round3.AChildForkedWhileNvtxAttachesLaggardDoesNotHang, 1 run in 20 here).
[[gnu::constructor]] void make_kept_descriptors_at_load() { kept_in(false); }

void drop_kept_file(KeptDescriptors& k) {
  if (k.file_fd >= 0 && still_ours(k.file_fd, k.file_id)) ::close(k.file_fd);  // else no longer ours to close
  k.file_fd = -1;
  k.file_name.clear();
}

void drop_kept_dir(KeptDescriptors& k) {
  drop_kept_file(k);
  if (k.dir_fd >= 0 && still_ours(k.dir_fd, k.dir_id)) {
    if (k.dir_users == 0) ::close(k.dir_fd);
    else k.retired.push_back({k.dir_fd, k.dir_users});  // another thread writes through it right now
  }
  k.dir_fd = -1;
  k.dir_users = 0;
  k.dir_path.clear();
}

// A user of the kept directory descriptor fd is done with it.
void release_kept_dir(int fd) {
  if (fd < 0) return;
  KeptDescriptors& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  if (fd == k.dir_fd) {
    --k.dir_users;
    return;
  }
  for (size_t i = 0; i < k.retired.size(); ++i)
    if (k.retired[i].fd == fd) {
      if (--k.retired[i].users == 0) {
        ::close(fd);
        k.retired.erase(k.retired.begin() + static_cast<long>(i));
      }
      return;
    }
}

// The kept run directory descriptor for path, if it is still ours and still at path.
int kept_dir_for(KeptDescriptors& k, const std::string& path) {
  if (k.dir_fd < 0 || k.dir_path != path) return -1;
  if (still_ours(k.dir_fd, k.dir_id) && name_leads_to(AT_FDCWD, path.c_str(), k.dir_id)) return k.dir_fd;
  drop_kept_dir(k);  // removed, replaced or taken over: open it afresh
  return -1;
}

}  // namespace

bool fd_room(int take) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 65536) return true;
  const int need = take + kFdReserve;
  int free = 0;
  for (int fd = static_cast<int>(rl.rlim_cur) - 1; fd >= 0 && free < need; --fd)
    if (::fcntl(fd, F_GETFD) < 0 && errno == EBADF) ++free;
  return free >= need;
}

int keep_if_room(int fd) {
  if (fd < 0 || fd_room(0)) return fd;
  ::close(fd);
  errno = EMFILE;
  return -1;
}

int move_fd_high(int fd) {
  rlimit rl{};
  if (fd < 0 || ::getrlimit(RLIMIT_NOFILE, &rl) != 0) return fd;
  rlim_t floor = rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > 1032 ? 1024 : rl.rlim_cur - 8;
  if (rl.rlim_cur < 16 || static_cast<rlim_t>(fd) >= floor) return fd;
  int high = ::fcntl(fd, F_DUPFD_CLOEXEC, static_cast<int>(floor));
  if (high < 0) return fd;
  ::close(fd);
  return high;
}

BorrowedRunDir::BorrowedRunDir(const std::string& path) {
  KeptDescriptors& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  fd_ = kept_dir_for(k, path);
  if (fd_ >= 0) ++k.dir_users;
}

BorrowedRunDir::~BorrowedRunDir() { release_kept_dir(fd_); }

void forget_descriptors_after_fork() {
  // No lock: a parent's thread may have held it at fork. The child's table is a copy of the
  // shared one; the private-table thread's descriptors were never in it, and their numbers may
  // be the child's own files now.
  KeptDescriptors& k = kept_in(false);
  if (k.file_fd >= 0) ::close(k.file_fd);
  if (k.dir_fd >= 0) ::close(k.dir_fd);
  k.file_fd = k.dir_fd = -1;
  KeptDescriptors& own = kept_in(true);
  own.file_fd = own.dir_fd = -1;
}

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
  KeptDescriptors& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  if (int fd = kept_dir_for(k, path); fd >= 0) {
    fd_ = fd;
    identity_ = {k.dir_id.dev, k.dir_id.ino};
    ++k.dir_users;
    return;
  }
  if (!fd_room(1)) {
    error_ = "cannot open '" + path + "': the application is at its file descriptor limit; laggard writes later";
    return;
  }
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
  fd_ = move_fd_high(fd);
  if (k.dir_fd >= 0) {  // another run directory is kept (tests): this one is used once
    owned_ = true;
    return;
  }
  k.dir_fd = fd_;
  k.dir_path = path;
  k.dir_id = {st.st_dev, st.st_ino};
  k.dir_users = 1;
}

RunDirFd::~RunDirFd() {
  if (owned_) ::close(fd_);
  else release_kept_dir(fd_);
}

std::string RunDirFd::write_atomically(const std::string& name, const std::string& data,
                                       Durability durability) const {
  std::string tmp = "." + name + ".tmp";
  if (!fd_room(1)) return "cannot write '" + path_ + "/" + name + "': the application is at its file descriptor limit";
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
  KeptDescriptors& k = kept();
  std::lock_guard<std::mutex> lock(k.mu);
  int fd = -1;
  if (!fresh && k.file_fd >= 0 && k.file_name == name && k.dir_fd == fd_ && still_ours(k.file_fd, k.file_id) &&
      name_leads_to(fd_, name.c_str(), k.file_id))
    fd = k.file_fd;
  if (fd < 0) {
    drop_kept_file(k);
    if (!fd_room(1)) return "cannot write '" + path_ + "/" + name + "': the application is at its file descriptor limit";
    int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_CREAT;
    if (fresh) {
      ::unlinkat(fd_, name.c_str(), 0);  // a planted name goes; never opened
      flags |= O_EXCL;
    }
    fd = ::openat(fd_, name.c_str(), flags, kFileMode);
    if (fd < 0) return "cannot write '" + path_ + "/" + name + "': " + std::strerror(errno);
  }
  struct stat st {};
  std::string err;
  if (::fstat(fd, &st) != 0) err = std::strerror(errno);
  else if (!S_ISREG(st.st_mode)) err = "not a regular file";
  if (err.empty()) err = write_all(fd, data);
  if (err.empty()) err = sync_if(durability, fd);
  if (!err.empty() && S_ISREG(st.st_mode)) (void)::ftruncate(fd, st.st_size);  // no torn frame stays
  if (fd != k.file_fd) {
    if (err.empty() && S_ISREG(st.st_mode) && fd_ == k.dir_fd) {  // kept for the next frames
      k.file_fd = move_fd_high(fd);
      k.file_name = name;
      k.file_id = {st.st_dev, st.st_ino};
    } else if (::close(fd) != 0 && err.empty()) {
      err = std::strerror(errno);
    }
  } else if (!err.empty()) {
    drop_kept_file(k);  // reopened next time
  }
  if (err.empty() && fresh) (void)sync_if(durability, fd_);  // a new name in the directory
  return err.empty() ? "" : "cannot write '" + path_ + "/" + name + "': " + err;
}

int RunDirFd::remove_stale_temp_files(int rank, long own_pid) const {
  if (!fd_room(1)) return 0;
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
    char image[9] = {};
    // ".rank00003-1234-0a1b2c3d-seg0000.json.tmp" (issue 24) or the older ".rank00003-1234-seg0000.json.tmp"
    if (std::sscanf(e->d_name, ".rank%d-%ld-seg%d.json.tmp%n", &file_rank, &pid, &seg, &consumed) != 3 &&
        std::sscanf(e->d_name, ".rank%d-%ld-%8[0-9a-f]-seg%d.json.tmp%n", &file_rank, &pid, image, &seg,
                    &consumed) != 4)
      continue;
    if (e->d_name[consumed] != '\0' || file_rank != rank || pid == own_pid || !pid_is_dead(pid)) continue;
    if (::unlinkat(fd_, e->d_name, 0) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace laggard
