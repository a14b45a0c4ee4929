// `laggard watch DIR`: re-reads a run's rank files while the job writes them and shows a live view
// (scores, stragglers, the newest window), redrawn in place on a terminal and printed as one plain
// snapshot per refresh otherwise; with --serve it also serves /metrics for Prometheus.
#pragma once

#include <ostream>
#include <string>

#include "render_prometheus.h"

#include "reader.h"
#include "scores.h"

namespace laggard::cli {

struct WatchOptions {
  std::string dir;
  report::ReadOptions read;
  report::ScoreOptions scores;
  std::string step_section;
  double interval_s = 2;
  std::string serve;     // HOST:PORT; empty: no server
  int count = 0;         // refreshes before exiting; 0: until SIGINT / SIGTERM
  size_t top = 0;        // rows per table; 0: fit the terminal (20 when not a terminal)
  size_t max_section_series = report::kDefaultMaxSectionSeries;  // --serve: per-section samples per family
};

// Exit codes: 0 stopped by SIGINT/SIGTERM or after `count` refreshes, 2 bad options or the
// server cannot listen. A run that has no rank files yet is waited for, not an error.
int watch_command(const WatchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
