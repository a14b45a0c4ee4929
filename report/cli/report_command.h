// `laggard report DIR`: read, score, render.
#pragma once

#include <ostream>
#include <functional>
#include <string>

#include "analyses.h"
#include "cut.h"
#include "reader.h"
#include "scores.h"

namespace laggard::cli {

struct ReportOptions {
  std::string dir;
  std::string format = "text";   // text | json | csv
  std::string output;            // file; empty: stdout. csv: the directory for one file per table
  std::string html;              // also write the HTML page here (render_html.h); empty: none
  // Told the name of each analysis as it starts, and "" before any output (the progress bar).
  std::function<void(const std::string&)> on_stage;
  report::ReadOptions read;
  report::ScoreOptions scores;
  report::AnalysisOptions analyses;
  report::Cut cut;
  size_t top = 5;
  bool fail_on_stragglers = false;
  // The process exits right after the report (the `laggard report` command): its model, analyses
  // and DOM are left to the exit instead of freed one block at a time (bury.h).
  bool exits_after = false;
};

struct DiffOptions {
  std::string dir_a, dir_b;
  std::string run_a, run_b;
  std::string format = "text";
  double threshold = 0.05;
  size_t top = 20;
};

struct TraceOptions {
  std::string dir;
  std::string run_id;
  std::string output;  // -o FILE, required
  report::Cut cut;  // ranks, and steps (each rank's own steps, as `report --steps`)
  std::string step_section;  // marks a step for cut.steps (default: as the report finds it)
};

// Exit codes: 0 done, 2 nothing readable or output not writable.
int trace_command(const TraceOptions& options, std::ostream& err);
// The same from a run model already read (options.dir and options.run_id are not used).
int trace_model(report::RunModel& model, const TraceOptions& options, std::ostream& err);

// Exit codes: 0 done, 2 nothing readable.
int diff_command(const DiffOptions& options, std::ostream& out, std::ostream& err);

// Exit codes: 0 done, 2 nothing readable, 3 stragglers found with fail_on_stragglers.
int report_command(const ReportOptions& options, std::ostream& out, std::ostream& err);
// The same from a run model already read (options.dir and options.read are not used).
int report_model(report::RunModel& model, const ReportOptions& options, std::ostream& out, std::ostream& err);

}  // namespace laggard::cli
