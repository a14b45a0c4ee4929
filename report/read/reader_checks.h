// Checks across a run once its files are read (reader.cpp): windows whose times disagree with
// the rest of their rank, ranks whose clock disagrees with the other ranks', communicators
// claiming more ranks than the run has, and missing ranks of a huge claimed world. Each finding
// is a problem entry; none sizes an allocation from a value in a file.
#pragma once

#include "model.h"

namespace laggard::report {

// A rank's windows (sorted by index) that lie far from where its other windows put them: a
// clock step or a corrupt file. They are left out.
void drop_window_time_outliers(RankData& rank, std::vector<Problem>& problems);

// A rank whose data starts further from the other ranks' than the run lasts (a host clock off
// by a year, or near 1970) has all its times shifted to start with theirs.
void align_rank_clocks(RunModel& model);

// Collectives of communicators that claim more than `max_ranks` ranks (the run's world size when
// the files state it) are left out. threads: as ReadOptions::threads (0: one per core).
void check_comm_sizes(RunModel& model, int max_ranks, unsigned threads = 0);

// missing_rank entries for the ranks below model.world_size without data: one per rank for the
// first few, then one entry with the rest as ranges.
void list_missing_ranks(RunModel& model);

}  // namespace laggard::report
