// The `laggard watch` view: one screen of the watch state (scores, stragglers, the newest report
// window). The same text serves the terminal (redrawn in place) and plain snapshots (pipes, logs).
// Names from the files are escaped for the terminal (text_escape.h).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "watch_state.h"

namespace laggard::report {

struct WatchViewOptions {
  size_t rows = 20;          // at most this many rows per table
  double interval_s = 2;     // shown in the header
  std::string serving;       // "http://127.0.0.1:9400/metrics" when --serve is on
  int64_t now_ns = 0;        // wall clock of this refresh (ages are measured from it)
};

void render_watch(const WatchState& state, const WatchViewOptions& options, std::ostream& out);

}  // namespace laggard::report
