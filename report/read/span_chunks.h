// A rank's records from several files joined into one array (issue 29). The library starts a
// rank's next file every LAGGARD_WINDOWS_PER_FILE windows (30: five minutes at the default flush)
// or 4 MB (preload/files/writer.h), so most real runs have several files per rank; kept one
// array per file, every rank with a second file lost the analyses' fast paths
// (gpu_timeline.h: a reference of 8 bytes per record, records counted one by one instead of by
// label), and the report's time grew faster than its records (bench/scale: 24 x 903 x 200
// steps, two files a rank, took 2.6x the CPU of 100 steps in one file).
#pragma once

#include <cstdint>

#include "model.h"

namespace laggard::report {

// Whether a rank's arrays of these sizes (records, labels) fit one array, joined by
// SpanChunk::append: positions and label ids are 32-bit.
bool spans_fit_one_array(uint64_t records, uint64_t labels);

}  // namespace laggard::report
