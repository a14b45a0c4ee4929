// Lists of ranks and the like, summarised for the text report so that it reads the same at 8
// ranks and at 10,000 (issue 14): rank ranges ("0-511,513-959"), bounded in length, and the
// rule for how many rows a per-rank table shows.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace laggard::report {

// Sorted, deduplicated ranges: {0,1,2,3,5,7,8} -> "0-3,5,7-8"; negative values (unknown) as "?".
// Past max_chars the list stops at a whole range and says how many ranks it left out:
// "0,2,4,... (+4990 more)".
std::string rank_ranges(std::vector<int> ranks, size_t max_chars = 160);

// "1024 ranks: 0-511,513-1024" (the count first, then the ranges).
std::string counted_ranks(const std::vector<int>& ranks, size_t max_chars = 160);

// Rows a per-rank (or per-host, per-item) table shows: all of them when there are at most
// max(16, top), else `top` (the rest are in --format json and csv).
size_t rows_shown(size_t rows, size_t top);

// "  ... 9990 more ranks (--top shows more; all are in --format json or csv)\n", or "" when none
// were left out.
std::string more_line(size_t total, size_t shown, const char* what);

}  // namespace laggard::report
