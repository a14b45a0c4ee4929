// Paused periods (schema version 5, docs/schema.md "Version 5: pause and resume"): the parts
// of each window during which `laggard ctl` had capture paused, joined into periods per rank.
#pragma once

#include <nlohmann/json.hpp>

#include "model.h"

namespace laggard::report {

// Reads a window's "paused" array into cw.paused; throws on an impossible span (the window
// is then left out, as for any impossible value). Spans are clipped to the window.
void read_paused_window(const nlohmann::json& paused, CaptureWindow& cw);

// Joins the windows' spans into rank.paused: a span ending at its window's end and the next
// window's span of the same command continuing from that window's start are one period.
void join_paused_periods(RankData& rank);

}  // namespace laggard::report
