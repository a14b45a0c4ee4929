// `laggard watch --serve`: the watch state in the Prometheus text exposition format, version 0.0.4
// (prometheus/docs content/docs/instrumenting/exposition_formats.md): "# HELP" and "# TYPE" lines,
// then one sample per line, `name{label="value",...} value`. Every name is `laggard_*`; labels are
// `rank`, `host`, `section`. Section and host names come from trace files and are untrusted: label
// values escape `\`, `"` and newline as the format asks, and bytes that are not UTF-8 become U+FFFD
// (Prometheus rejects label values that are not valid UTF-8).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "watch_state.h"

namespace laggard::report {

// Content-Type of the exposition format this renderer writes.
inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// The names of every metric render_prometheus can write (for the dashboard test, and docs).
const std::vector<std::string>& prometheus_metric_names();

// Default of max_section_series: a family of (rank, section) samples holds every rank's while
// they are at most this many, else only the straggler ranks'; per-rank minimums
// (laggard_rank_min_section_*) always cover every rank.
inline constexpr size_t kDefaultMaxSectionSeries = 20000;

// read_duration_s: how long the last re-read of the run took; read_at_ns: when it finished.
std::string render_prometheus(const WatchState& state, double read_duration_s, int64_t read_at_ns,
                              size_t max_section_series = kDefaultMaxSectionSeries);

// A label value as the format wants it: valid UTF-8 with \ " and newline escaped.
std::string prometheus_label_value(std::string_view s);

}  // namespace laggard::report
