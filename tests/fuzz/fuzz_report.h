// What the reader targets share: one rank file (any schema version, JSON or v5 frames) through
// the whole report. The file is read as rank files are (parse_segment_text), joined by a copy
// of itself as a second rank so the cross-rank analyses run, then reported in text and JSON and
// written as a trace. Expected outcomes: the file is refused (an exception from the parser:
// what read_run turns into an unreadable_file problem) or reported; anything else (a crash, a
// sanitizer report, an exception out of the report, a leak) is a bug.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "reader_segment.h"
#include "render_trace.h"
#include "report_command.h"

namespace laggard::fuzz {

// The reader's part: the file parsed as rank files are, joined by a copy of itself as a second
// rank, and assembled into a run. False when the parser refused the file.
inline bool read_as_two_ranks(const uint8_t* data, size_t size, const char* path, laggard::report::RunModel& model) {
  namespace rep = laggard::report;
  const std::string text(reinterpret_cast<const char*>(data), size);
  model.dir = "fuzz";
  std::vector<rep::Segment> segments;
  try {
    segments.push_back(rep::parse_segment_text(text, path, model.strings));
  } catch (const std::exception&) {
    return false;  // refused: an unreadable_file problem in a real report
  }
  rep::Segment other = segments[0];
  other.rank = segments[0].rank == 0 ? 1 : 0;
  other.pid += 1;
  segments.push_back(std::move(other));
  rep::assemble_run(model, segments, {});
  return true;
}

// The rest of the pipeline on a read run: every analysis, rendered as text, JSON and a trace.
inline void report_everything(laggard::report::RunModel& model) {
  for (const char* format : {"text", "json"}) {
    laggard::cli::ReportOptions o;
    o.format = format;
    std::ostringstream out, err;
    laggard::cli::report_model(model, o, out, err);
  }
  std::ostringstream trace;
  laggard::report::render_trace(model, trace);
}

inline void report_rank_file(const uint8_t* data, size_t size, const char* path) {
  laggard::report::RunModel model;
  if (read_as_two_ranks(data, size, path, model)) report_everything(model);
}

}  // namespace laggard::fuzz
