// Checks the reader makes across one rank's files (issue 10 items 3 and 4): which process's data
// stands for a rank that several processes wrote, and which windows a rank never got on disk.
#pragma once

#include <vector>

#include "model.h"

namespace laggard::report {

// Section occurrences a process recorded over all its windows.
uint64_t occurrence_count(const RankData& r);

// Chooses the process that stands for one rank among all that wrote it (at least one), moves it
// to the front of `procs`, and says what was chosen and why when there was a choice. The rule:
// a process started by another writer of the same rank on the same host (its ppid is that
// writer's pid: an exec'd child inheriting LD_PRELOAD and RANK) never stands for the rank; among
// the rest, the one that recorded the most occurrences.
void choose_rank_process(std::vector<RankData>& procs, std::vector<Problem>& problems);

// Window indexes count every flush from 0, so a rank's windows must be contiguous; lists the
// missing ones (and the windows the writer itself counted as lost) as a missing_windows problem.
void check_window_continuity(const RankData& rank, std::vector<Problem>& problems);

}  // namespace laggard::report
