// `laggard trace DIR -o trace.json`: every rank's NVTX sections, GPU activities and NCCL
// collectives on one timeline, in the Chrome trace event format (open in ui.perfetto.dev or
// chrome://tracing). One process per rank; threads are host threads, GPU streams and one row
// per NCCL communicator; an arrow leads from each CUDA launch call to the GPU work it launched.
#pragma once

#include <ostream>

#include "model.h"

namespace laggard::report {

// Writes the trace; returns the number of events.
size_t render_trace(const RunModel& model, std::ostream& out);

}  // namespace laggard::report
