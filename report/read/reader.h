// Reads a run directory of per-rank files (docs/schema.md) into a RunModel. Never throws for
// bad input: unreadable, truncated or foreign files and missing ranks become Problems.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "model.h"

namespace laggard::report {

struct ReadOptions {
  std::string run_id;        // pick this run when DIR holds several; empty: the newest
  int expect_world_size = -1;  // overrides the world size found in the files
  uint64_t max_file_bytes = uint64_t{256} << 20;  // larger rank files are refused unread (a problem entry)
  unsigned threads = 0;      // files parsed at once; 0: one per core
  // Keep per-kernel GPU records as GpuSpan (CaptureWindow::gpu_spans), what the analyses read,
  // instead of GpuActivity: about half the memory. Not for the Chrome trace or the HTML page.
  bool compact_gpu = false;
  // Called after each file is parsed (from the parsing threads, one call at a time).
  std::function<void(size_t files_done, size_t files_total, uint64_t bytes_done, uint64_t bytes_total)> on_progress;
};

// Throws std::runtime_error only when there is nothing to report at all (no such directory,
// no rank files); the message is meant for the user.
RunModel read_run(const std::string& dir, const ReadOptions& opts = {});

}  // namespace laggard::report
