// ROOM files/ -- THE ONE WAY laggard writes a file. Every file the capture side writes
// (segments, binary frames, hang reports, anything added later) goes through RunDirFd below;
// tests/unit/safe_write_test.cpp fails when a source under preload/, cupti/, nccl_hooks/ or nvml/
// opens, renames or unlinks a path anywhere else. Runs on the flush thread only (and on the exit
// path once the flush thread has stopped), never on an application thread or in a handler.
//
// The run directory is verified (a real directory, not a symbolic link, owned by this user) and
// every file is created relative to its descriptor with O_EXCL|O_NOFOLLOW, so a planted symlink,
// FIFO or foreign directory is never followed, opened or written through.
//
// Durability (fsync policy): a write with Durability::synced is fsync'ed, and so is the directory
// after its rename, before the call returns. The writer asks for it on a rank's last write (exit,
// SIGTERM/SIGINT) and the watchdog for every hang report: both may be the last thing a dying job
// leaves, and a node that is rebooted next must still have them. Per-window writes are not
// synced: a crashed or killed process loses nothing the kernel already holds, and an fsync every
// flush costs seconds a minute on a busy parallel file system.
//
// Modes: directories are created 0755 and files 0644, both reduced by the process umask (a
// umask of 077 gives 0700/0600); nothing is made writable by others.
//
// Descriptors: every caller in capture runs RunDirFd on the private-table thread
// (private_fds.h), so laggard's descriptors are not in the application's table at all. What
// follows (issue 24) still holds there, and is what protects the application where the kernel
// gives no private table: laggard's are few, high and long-lived, and never the application's
// last. The run directory and the binary segment being appended stay open between flushes, moved
// above the application's range (F_DUPFD_CLOEXEC at min(1024, RLIMIT_NOFILE - 8)); before each
// use they are checked to still be laggard's (same device and inode, close-on-exec set), so an
// application that closes or dup2()s over them is noticed, not written through. A descriptor is
// opened only while at least kFdReserve more stay free below RLIMIT_NOFILE for the application;
// otherwise the write waits in memory for a later flush, as for a failing file system.
#pragma once

#include <sys/types.h>

#include <string>

namespace laggard {

enum class Durability { cached, synced };

// A directory's identity, to recognize one this process created itself.
struct DirIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const DirIdentity&) const = default;
};

// mkdir -p with mode 0755 (before umask). Symlinks among the *parents* are followed: they are
// the user's own choice of where LAGGARD_OUT lives. Returns "" or an error naming the path.
std::string make_dirs(const std::string& path);

// Descriptors laggard leaves free for the application whatever it writes.
constexpr int kFdReserve = 2;

// Whether laggard may open `take` more descriptors now: at least take + kFdReserve are free
// below RLIMIT_NOFILE (always true for a limit above 65536, where counting would cost more than
// it could save). Each check costs one fcntl per descriptor looked at.
bool fd_room(int take);

// fd, or -1 (closed again, errno EMFILE) when opening it left fewer than kFdReserve descriptors
// free: the check before an open cannot see an application filling its descriptors meanwhile (a
// flush that checked before the application lowered its limit opened after it took all but one).
// For reads that can wait for the next flush.
int keep_if_room(int fd);

// fd moved above the application's usual range (close-on-exec); fd itself when it cannot be.
int move_fd_high(int fd);

// The run directory's long-lived descriptor, borrowed while this object lives, if a RunDirFd has
// opened `path` in the calling thread's descriptor table (private_fds.h) and it still is that
// directory (else fd() is -1). For readers beside the writer (control/): they need no
// descriptor of their own. Never close fd().
class BorrowedRunDir {
 public:
  explicit BorrowedRunDir(const std::string& path);
  ~BorrowedRunDir();
  BorrowedRunDir(const BorrowedRunDir&) = delete;
  BorrowedRunDir& operator=(const BorrowedRunDir&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// In a forked child (one thread, inert): closes laggard's long-lived descriptors without
// taking any lock a parent's thread may have held at fork.
void forget_descriptors_after_fork();

// A verified run directory, opened once per process and kept (see "Descriptors" above).
class RunDirFd {
 public:
  // Creates `path` (and its parents) when missing, then opens and verifies it: a directory,
  // not a symlink, owned by this user, or the very directory this process created earlier
  // (`created_earlier`; root on a root-squashed NFS owns nothing it creates). `error()` says
  // why not when that failed.
  explicit RunDirFd(const std::string& path, const DirIdentity& created_earlier = {});
  ~RunDirFd();  // the kept descriptor stays open for the next write
  RunDirFd(const RunDirFd&) = delete;
  RunDirFd& operator=(const RunDirFd&) = delete;

  bool ok() const { return fd_ >= 0; }
  const std::string& error() const { return error_; }
  // Set when this call created the directory: pass it back as created_earlier next time.
  bool created() const { return created_; }
  const DirIdentity& identity() const { return identity_; }

  // Writes `data` to `name` atomically: a new temp file `.NAME.tmp` (O_CREAT|O_EXCL|O_NOFOLLOW;
  // whatever sits at that name is unlinked first, never opened), then renameat over `name`,
  // which replaces a symlink there rather than following it. Returns "" or an error.
  std::string write_atomically(const std::string& name, const std::string& data,
                               Durability durability = Durability::cached) const;

  // Appends `data` to `name` whole or not at all (schema v5 segments). `fresh`: the first
  // append this process makes to `name`: whatever sits there is unlinked and a new file created
  // (O_EXCL|O_NOFOLLOW), as for temp files. Later appends reuse that descriptor while the name
  // still leads to the same file, else open it O_APPEND|O_NOFOLLOW and refuse anything but a
  // regular file; a failed or short write is cut off again (ftruncate), so the file stays a
  // sequence of whole frames. Returns "" or an error.
  std::string append_whole(const std::string& name, const std::string& data, bool fresh,
                           Durability durability = Durability::cached) const;

  // Removes `.rankNNNNN-PID-seg*.json.tmp` files of `rank` whose PID is not a live process on
  // this host (left by a SIGKILL mid-write). Returns how many were removed.
  int remove_stale_temp_files(int rank, long own_pid) const;

 private:
  int fd_ = -1;
  bool owned_ = false;  // not the kept run directory: closed with this object
  bool created_ = false;
  DirIdentity identity_;
  std::string path_, error_;
};

}  // namespace laggard
