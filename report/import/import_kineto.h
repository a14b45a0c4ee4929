// PyTorch profiler (Kineto) JSON traces -> ImportedRank. The format as HTA reads it:
// docs/import.md and ../shared/notes/kineto-format.md (HTA hta/common/trace_parser.py, trace.py).
#pragma once

#include <string>

#include "import_rank.h"

namespace laggard::report {

struct KinetoOptions {
  int rank = -1;  // >= 0: use this rank when the file has none (never overrides the file's)
};

// Reads FILE (.json or .json.gz, streamed: the JSON is never held in memory as a document).
// Throws std::runtime_error with one clear sentence for unreadable, truncated or non-Kineto
// input, and for a trace without rank information (distributedInfo.rank) unless options.rank.
ImportedRank import_kineto(const std::string& file, const KinetoOptions& options = {});

}  // namespace laggard::report
