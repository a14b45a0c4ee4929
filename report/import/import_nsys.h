// Nsight Systems SQLite exports (`nsys export --type sqlite`, or the .sqlite `nsys stats` leaves)
// -> ImportedRank. Tables: CUPTI_ACTIVITY_KIND_KERNEL / MEMCPY / MEMSET / RUNTIME, NVTX_EVENTS,
// StringIds, TARGET_INFO_GPU, PROCESSES, TARGET_INFO_SESSION_START_TIME; any of them may be
// missing, and columns differ between nsys versions (a missing column reads as unknown).
#pragma once

#include <string>

#include "import_rank.h"

namespace laggard::report {

struct NsysOptions {
  int rank = -1;  // >= 0: this rank; else from the file name ("rank3", "rank-3", "rank_3")
};

// Throws std::runtime_error with one clear sentence for a file that is not SQLite, an SQLite
// database that is not an Nsight Systems export, or a file whose rank cannot be told.
ImportedRank import_nsys(const std::string& file, const NsysOptions& options = {});

// The rank a file name states ("run-rank3.sqlite" -> 3), or -1.
int rank_from_file_name(const std::string& path);

// r.rank and r.rank_source from `option` (--rank) when >= 0, else from the file name (-1: neither).
void take_rank_from_option_or_name(ImportedRank& r, int option, const std::string& file);

}  // namespace laggard::report
