// Writes a rank's windows to disk. FileFormat::json: each flush rewrites the rank's current segment file
// (temp file + rename, so readers and crashes never see half a file); a segment holds up to
// windows_per_file windows or max_segment_bytes, then the next segment file starts. So a
// killed process loses at most the open window, memory stays bounded, and a long run makes
// one file per segment rather than one per flush.
//
// A write that fails (full or hung file system, directory removed) loses nothing at once: the
// segment stays in memory and every later flush rewrites it, also after the next segment has
// started. Only when more than max_unwritten_bytes wait does the oldest go, and the header's
// windows_lost counts what went (schema v4).
//
// FileFormat::binary (schema v5; what the library writes unless LAGGARD_FILE_FORMAT=json, issue 14) appends each window once as a
// self-checking frame instead (frame_out.h): nothing is rewritten, a crash mid-append leaves
// whole windows, and GPU records are compact columns. Failed appends wait in memory likewise.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "records.h"
#include "safe_write.h"
#include "window.h"

namespace laggard {

constexpr int kSchemaVersion = 5;

enum class FileFormat { json, binary };

struct FileInfo {
  std::string run_id, run_id_source;
  int rank = -1, local_rank = -1, world_size = -1;
  std::string rank_source;
  std::string host;
  long pid = 0;
  long ppid = 0;                 // parent process: tells an exec'd child from the rank (schema v4)
  // This process image (issue 24): 8 random hex digits, new in every process and at every exec,
  // so two images with one pid (a rank that exec()s itself, a pid reused in another PID
  // namespace) never share a file name and the reader never merges them. "" in older files.
  std::string image;
  uint64_t started_ticks = 0;    // the kernel's start time of the process (/proc/self/stat field
                                 // 22): the same in every image that one process exec()s
  int64_t process_start_ns = 0;  // epoch ns when laggard started in this process
  int64_t epoch_offset_ns = 0;   // CLOCK_REALTIME - CLOCK_MONOTONIC
  double flush_s = 0;
  std::string sections_filter;
  int max_occurrences = 0;
  std::string nvtx_status;       // "on", or "off: why"
  bool cupti_enabled = false;    // LAGGARD_CUPTI
  int profiling_interval = 1;    // LAGGARD_PROFILING_INTERVAL
  std::string nccl_status;       // "on" (offered to NCCL as its profiler plugin), or "off: why"
  int64_t written_ns = 0;        // 0: the time of each write; else this fixed value, so a tool
                                 // (bench/gen_synthetic) writes byte-identical files from a seed
};

class SegmentWriter {
 public:
  SegmentWriter(std::string run_dir, FileInfo info, int windows_per_file,
                size_t max_segment_bytes = 4u << 20, size_t max_unwritten_bytes = 16u << 20);

  // Adds a closed window and rewrites the current segment. `final`: the process is exiting
  // cleanly; `signal`: non-zero when written because of that signal (this write is synced).
  // Every header from then on names the signal: a window the flush thread closes between the
  // signal's flush and the process's death (a periodic one, due while that flush's fsync
  // blocked) is the newest frame the reader sees, and must not make a SIGTERM look like a
  // SIGKILL. Returns "" or an error.
  std::string write(const WindowSnapshot& w, const DropCounters& totals, bool final, int signal);

  // Before the first write: json (rewritten segments, this class's default) or binary (appended
  // frames; the library's default, preload/config/config.h).
  void set_format(FileFormat f) { format_ = f; }
  FileFormat format() const { return format_; }

  const std::string& run_dir() const { return run_dir_; }
  std::string current_path() const;
  uint64_t windows_lost() const { return windows_lost_; }
  size_t unwritten_segments() const { return unwritten_.size() + pending_frames_.size(); }

 private:
  struct Segment {
    int number = 0;
    std::vector<std::string> windows_json;  // rendered windows
    size_t bytes = 0;
    size_t on_disk = 0;                     // windows in the newest copy on disk
    int64_t data_end_ns = 0;
  };

  std::string file_name(int segment) const;
  std::string render(const Segment& seg, const DropCounters& totals, bool final, int signal) const;
  std::string render_header(int segment, const DropCounters& totals, bool final, int signal,
                            int64_t last_end_ns) const;
  void start_next_segment();
  void drop_oldest_unwritten();
  // Binary format (schema v5): each window becomes one frame, appended once.
  struct PendingFrame {
    int segment = 0;
    std::string bytes;
  };
  std::string write_binary(const WindowSnapshot& w, const DropCounters& totals, bool final, Durability durability);
  std::string write_json_segments(const DropCounters& totals, bool final, Durability durability);
  void make_room(size_t bytes);
  std::string append_pending(const RunDirFd& dir, Durability durability);

  std::string run_dir_;
  FileInfo info_;
  int windows_per_file_;
  size_t max_segment_bytes_;
  size_t max_unwritten_bytes_;
  Segment current_;
  std::deque<Segment> unwritten_;          // closed segments whose last write failed, oldest first
  size_t unwritten_bytes_ = 0;
  uint64_t windows_lost_ = 0;              // dropped unwritten (memory bound); in every header
  bool cleaned_stale_ = false;
  int signal_received_ = 0;                // the last signal a write was made for; in every later header
  DirIdentity created_dir_;                // the run directory, when this process created it
  GpuStatus gpu_status_;                   // latest reported by the cupti source
  FileFormat format_ = FileFormat::json;
  std::deque<PendingFrame> pending_frames_;  // binary: frames not yet appended, oldest first
  size_t pending_bytes_ = 0;
  int frame_windows_ = 0;                  // binary: windows in the current segment
  size_t frame_bytes_ = 0;                 // binary: bytes in the current segment
  int created_segment_ = -1;               // binary: newest segment file this process created
};

// Renders one window as a JSON object (exposed for tests).
// `gpu_records`: false leaves gpu.records out (binary frames carry them as columns).
std::string render_window(const WindowSnapshot& w, bool gpu_records = true);

}  // namespace laggard
