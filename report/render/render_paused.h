// Paused periods in the report (`laggard ctl`, docs/report.md "Pausing capture"): shown as
// capture switched off on purpose, never as missing data. Ranks pause within a poll interval
// of each other, so periods are grouped by the command that caused them.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "model.h"

namespace laggard::report {

struct PausedGroup {
  std::string command;  // "pause" or "window"
  uint64_t seq = 0;
  int64_t start_ns = 0, end_ns = 0;  // earliest start, latest end over its ranks
  bool ongoing = false;              // some rank was still paused when its data ended
  std::vector<int> ranks;
};

// One group per (command, seq) in time order.
std::vector<PausedGroup> paused_groups(const RunModel& model);

// JSON: an array of {command, seq, start_ns, end_ns, start_s, dur_s, ongoing, rank_count, ranks}
// with start_s counted from the run's start.
nlohmann::json paused_json(const RunModel& model);

// Text: nothing when capture was never paused; else a "Paused capture" block of at most
// max_lines groups.
void render_paused_text(const RunModel& model, std::ostream& out, size_t max_lines = 10);

}  // namespace laggard::report
