// Schema v5, "Version 5: late GPU records": a window's file may carry statistics of GPU records
// that belong to an earlier window (CUPTI delivered them after that window's file was written).
#pragma once

#include "model.h"

namespace laggard::report {

// Moves every window's gpu_late into the kernel_stats of the window it names (windows sorted by
// index). When that window is not in the data (its file was lost), they stay in the window that
// carried them, so totals never shrink. Counts, totals, min and max merge exactly; a merged
// median is the median of the part with more records.
void merge_late_gpu_stats(RankData& rank);

}  // namespace laggard::report
