// Renders the NCCL analysis (comm_analysis.h): a text section after the main report, and the
// "comm" object of the JSON report.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "comm_analysis.h"
#include "json_text.h"
#include "model.h"

namespace laggard::report {

// Prints nothing when the run has no NCCL data.
// `top` bounds the per-rank rows of large runs; member lists are rank ranges with counts.
void render_comm_text(const RunModel& model, const CommReport& comm, std::ostream& out, size_t top = 10);
// The "comm" object of the JSON report, its per-rank arrays on every core.
void write_comm_json(JsonWriter& w, const RunModel& model, const CommReport& comm);

}  // namespace laggard::report
