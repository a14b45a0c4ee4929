// Turns simulated steps into the capture side's own window snapshots (preload/flush/window.h), so the
// files come out of the real writer (preload/files/writer.cpp) exactly as liblaggard.so writes them.
#pragma once

#include <string>

#include "simulate.h"
#include "writer.h"

namespace laggard::gen {

struct RankTotals {
  uint64_t records = 0;  // per-kernel GPU records written
  uint64_t windows = 0;
};

// The header fields of rank `rank`'s files.
FileInfo file_info(const Job& job, int rank);

// Writes every window of `rank` into run_dir through SegmentWriter. Returns "" or an error.
std::string write_rank(const Job& job, int rank, const std::string& run_dir, RankTotals* totals);

}  // namespace laggard::gen
