// Writes a rank's windows to disk. Each flush rewrites the rank's current segment file
// (temp file + rename, so readers and crashes never see half a file); a segment holds up to
// windows_per_file windows or max_segment_bytes, then the next segment file starts. So a
// killed process loses at most the open window, memory stays bounded, and a long run makes
// one file per segment rather than one per flush.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "records.h"
#include "window.h"

namespace laggard {

constexpr int kSchemaVersion = 4;

struct FileInfo {
  std::string run_id, run_id_source;
  int rank = -1, local_rank = -1, world_size = -1;
  std::string rank_source;
  std::string host;
  long pid = 0;
  int64_t process_start_ns = 0;  // epoch ns when laggard started in this process
  int64_t epoch_offset_ns = 0;   // CLOCK_REALTIME - CLOCK_MONOTONIC
  double flush_s = 0;
  std::string sections_filter;
  int max_occurrences = 0;
  std::string nvtx_status;       // "on", or "off: why"
  bool cupti_enabled = false;    // LAGGARD_CUPTI
  int profiling_interval = 1;    // LAGGARD_PROFILING_INTERVAL
  std::string nccl_status;       // "on" (offered to NCCL as its profiler plugin), or "off: why"
};

class SegmentWriter {
 public:
  SegmentWriter(std::string run_dir, FileInfo info, int windows_per_file,
                size_t max_segment_bytes = 4u << 20);

  // Adds a closed window and rewrites the current segment. `final`: the process is exiting
  // cleanly; `signal`: non-zero when written because of that signal. Returns "" or an error.
  std::string write(const WindowSnapshot& w, const DropCounters& totals, bool final, int signal);

  const std::string& run_dir() const { return run_dir_; }
  std::string current_path() const;

 private:
  std::string render_header(const DropCounters& totals, bool final, int signal, int64_t last_end_ns) const;

  std::string run_dir_;
  FileInfo info_;
  int windows_per_file_;
  size_t max_segment_bytes_;
  int segment_ = 0;
  std::vector<std::string> windows_json_;  // the current segment's windows, rendered
  size_t windows_bytes_ = 0;
  bool dir_ready_ = false;
  GpuStatus gpu_status_;                   // latest reported by the cupti source
};

// Renders one window as a JSON object (exposed for tests).
std::string render_window(const WindowSnapshot& w);

// mkdir -p. Returns "" or an error message naming the path.
std::string make_dirs(const std::string& path);

}  // namespace laggard
