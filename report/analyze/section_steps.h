// NVTX sections cut by training step: the CPU time each rank spent in each section during each
// step, the per-step signals the verdict's excess detection reads (CPU-only runs included).
#pragma once

#include <vector>

#include "excess.h"
#include "model.h"
#include "steps.h"

namespace laggard::report {

// One signal per NVTX section (the step section included), rows = the steps every rank has.
// An occurrence counts in the step whose host interval holds its end (a range started by a
// prefetching thread belongs to the step that waited for it); sampled occurrences count with
// their weight. A rank that never ran a section has NaN there; one that ran it in other steps
// has 0 in the steps it skipped.
std::vector<Signal> section_signals(const RunModel& model, const StepSet& steps);

}  // namespace laggard::report
