#include "report_command.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "bury.h"
#include "render.h"
#include "render_analyses.h"
#include "render_comm.h"
#include "render_csv.h"
#include "render_html.h"
#include "render_trace.h"
#include "health_analysis.h"
#include "host_collectives.h"
#include "json_text.h"
#include "parallel.h"
#include "progress.h"
#include "stacks.h"
#include "text_escape.h"
#include "text_lists.h"

namespace laggard::cli {
namespace {

// The GPU health table of a large run: the GPUs with problems first, at most `top` rows when
// there are many (text_lists.h), and a line for the rest.
void health_text(const report::HealthReport& health, size_t top, std::ostream& out) {
  report::HealthReport shown = health;
  const size_t rows = report::rows_shown(health.gpus.size(), top);
  if (rows < health.gpus.size()) {
    std::stable_sort(shown.gpus.begin(), shown.gpus.end(),
                     [](auto& a, auto& b) { return a.problems.size() > b.problems.size(); });
    shown.gpus.resize(rows);
  }
  report::render_health_text(shown, out);
  if (health.present) out << report::more_line(health.gpus.size(), rows, "GPUs");
}

// Reading reports files and megabytes done; the bar shows only on a terminal, after a second.
// Elsewhere nothing is counted (issue 29: the counter takes every file's size before reading,
// on one thread, and a lock per file: 10-15 ms at 10,000 files).
report::ReadOptions with_progress(report::ReadOptions read, ProgressBar& bar) {
  if (!bar.terminal()) return read;
  read.on_progress = [&bar](size_t files, size_t total, uint64_t bytes, uint64_t total_bytes) {
    double fraction = total_bytes ? double(bytes) / double(total_bytes) : double(files) / double(total);
    bar.update("reading", fraction, fmt::format("{}/{} files, {:.0f}/{:.0f} MB", files, total, bytes / 1e6,
                                                total_bytes / 1e6));
  };
  return read;
}

// --html FILE: the page beside the usual output; a file that cannot be written is an error.
bool write_html(const report::RunModel& model, const report::ScoreReport& scores, const report::Analyses& analyses,
                const report::HealthReport& health, const ReportOptions& o, const std::string& cut_text,
                std::ostream& err) {
  std::ofstream file(o.html, std::ios::binary);
  if (file) {
    report::HtmlOptions h;
    h.top = std::max<size_t>(o.top, 20);
    h.cut = cut_text;
    report::render_html(model, scores, analyses, health, file, h);
    file.close();
  }
  if (!file) {
    err << "laggard report: cannot write '" << o.html << "'\n";
    return false;
  }
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(o.html, ec);
  err << "laggard report: wrote the HTML report to " << o.html;
  if (!ec) err << fmt::format(" ({:.0f} KB)", double(bytes) / 1e3);
  err << " (one self-contained page: open it in a browser)\n";
  return true;
}

}  // namespace

int report_command(const ReportOptions& o, std::ostream& out, std::ostream& err) {
  report::RunModel model;
  ProgressBar bar(err, &err == &std::cerr && stderr_is_terminal());
  StageTimer timer(err);
  timer.next("reading");
  try {
    report::ReadOptions read = o.read;
    // The analyses need only GpuSpans; the HTML page's charts, HTA's own numbers and NVRx's kernel
    // keys (launch shape) read full records.
    read.compact_gpu = o.html.empty() && !o.analyses.hta_compatible && !o.analyses.nvrx_compatible;
    model = report::read_run(o.dir, with_progress(read, bar));
  } catch (const std::exception& e) {
    bar.clear();
    err << "laggard report: " << e.what() << '\n';
    return 2;
  }
  bar.clear();  // the report and its warnings start on a clean line
  ReportOptions analysing = o;  // the bar goes on through the analyses of a long merge
  analysing.on_stage = [&bar, &timer](const std::string& name) {
    timer.next(name.empty() ? "writing" : name);
    if (name.empty()) bar.clear();
    else bar.update("analysing: " + name, -1);
  };
  analysing.analyses.on_stage = analysing.on_stage;
  try {  // the last line of defence: a message and exit code 2, never an abort
    const int rc = report_model(model, analysing, out, err);
    if (o.exits_after) bury(std::move(model));
    return rc;
  } catch (const std::exception& e) {
    err << "laggard report: internal error: " << e.what() << '\n';
    return 2;
  }
}

// A warning goes to stderr and into the report's problems, so JSON readers see it too.
static void warn(report::RunModel& model, std::ostream& err, const std::string& kind, const std::string& message) {
  err << "laggard report: warning: " << message << '\n';
  model.problems.push_back({kind, -1, "", message});
}

namespace {

// What the --ranks/--steps/--hosts cut leaves: the steps to analyse and the words that say it.
struct Cut {
  report::StepSet steps;
  std::string text;
};

// Applies the cut to the model (warning about parts of it the run does not have); nullopt after
// an error was written.
std::optional<Cut> apply_cuts(report::RunModel& model, const ReportOptions& o, std::ostream& err) {
  try {
    for (const std::string& w : report::cut_warnings(model, o.cut)) warn(model, err, "cut_not_in_run", w);
    if (!o.cut.empty()) {
      model = report::apply_cut(model, o.cut);
      if (model.ranks.empty()) {
        err << "laggard report: the cut leaves no rank\n";
        return std::nullopt;
      }
    }
    report::StepSet all = report::detect_steps(model, o.analyses.step_section);
    if (!o.analyses.step_section.empty() && all.count() == 0)
      warn(model, err, "step_section_not_found",
           "--step-section '" + o.analyses.step_section + "' matches no NVTX section with occurrences: no steps");
    if (o.cut.steps) {
      size_t most = 0;
      for (const auto& r : all.per_rank) most = std::max(most, r.size());
      if (static_cast<size_t>(o.cut.steps->second) >= most)
        warn(model, err, "steps_beyond_run",
             fmt::format("--steps {}:{} goes beyond the run, which has {} step(s) (0-{}) by {}", o.cut.steps->first,
                         o.cut.steps->second, most, most ? most - 1 : 0, all.source));
      model = report::cut_to_steps(model, all, *o.cut.steps);
    }
    std::string text = report::describe_cut(o.cut, all);
    return Cut{report::apply_cut(std::move(all), o.cut), std::move(text)};  // no copy of every rank's steps
  } catch (const std::exception& e) {
    err << "laggard report: " << e.what() << '\n';
    return std::nullopt;
  }
}

// Every analysis of the report, in the order each needs the others.
struct Results {
  report::ScoreReport scores;
  report::Analyses analyses;
  report::HealthReport health;
};

// The collectives analysis on a thread of its own while `beside` runs (issue 29: it is mostly one
// thread's work, 0.3 s at 10,000 ranks of summaries, 4 s at 100,000). It reads only the report
// windows of the section scores (report_windows_of), so beside it run the section scores, the GPU
// scores and the analyses that need neither (steps, jitter, breakdown). Where no thread can be
// started, one after the other.
template <class F>
report::CommReport collectives_beside(const report::RunModel& model, const report::ScoreReport& windows, F&& beside) {
  auto comm = report::run_beside([&] { return report::analyze_run_collectives(model, windows); });
  beside();  // if it throws, comm's destructor waits for the thread first
  return comm.get();
}

Results analyse(const report::RunModel& model, const ReportOptions& o, report::StepSet steps) {
  auto stage = [&o](const char* name) {
    if (o.on_stage) o.on_stage(name);
  };
  Results r;
  stage("section scores (collectives beside)");
  const report::ScoreReport windows = report::report_windows_of(model, o.scores);
  report::GpuScoreReport gpu;
  report::CommReport comm = collectives_beside(model, windows, [&] {
    r.scores = report::compute_scores(model, o.scores);
    stage("GPU scores (collectives beside)");
    gpu = report::compute_gpu_scores(model, r.scores);
    stage("steps (collectives beside)");
    r.analyses = report::analyses_before_verdict(model, r.scores, o.analyses, std::move(steps));
    stage("the rest of the collectives");
  });
  r.scores.stragglers.insert(r.scores.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  report::decide_verdict(r.analyses, model, r.scores, o.analyses, std::move(gpu), std::move(comm));
  stage("GPU health");
  r.health = report::analyze_gpu_health(model);
  report::link_gpu_health(r.analyses.verdict, r.health);
  stage("");  // the output starts on a clean line
  return r;
}

void write_json_report(const report::RunModel& model, const Results& r, const std::string& cut_text,
                       const ReportOptions& o, std::ostream& dest) {
  auto stage = [&o](const char* name) {
    if (o.on_stage) o.on_stage(name);
  };
  stage("JSON report: parts");
  // The small members as DOM; the per-rank arrays are written straight to text below, each on
  // every core (issue 29: the whole report as a DOM was 350 MB at 30,000 ranks).
  report::JsonObjectParts j = report::render_json_parts(model, r.scores);
  if (!cut_text.empty()) j.add("cut", cut_text);
  j.merge(report::render_analyses_json_parts(model, r.analyses));
  j.add_written("comm", [&](report::JsonWriter& w) { report::write_comm_json(w, model, r.analyses.comm); });
  j.add("hang_reports", report::mention_hangs_json(model));
  j.add("gpu_health", report::render_health_json(r.health));
  stage("JSON report: text");
  report::JsonWriter w(dest);
  j.write(w);
  w.flush();
  dest << '\n';
  if (o.exits_after) bury(std::move(j));
}

void write_text_report(const report::RunModel& model, const Results& r, const std::string& cut_text, size_t top,
                       std::ostream& dest) {
  if (!cut_text.empty())
    dest << "laggard report: cut to " << report::escape_text(cut_text) << "; every part below covers only that\n";
  report::render_text(model, r.scores, dest, &r.analyses, top);
  report::render_comm_text(model, r.analyses.comm, dest, top);
  health_text(r.health, top, dest);
  report::mention_hangs_text(model, dest);
}

int exit_code(const report::RunModel& model, const Results& r, const ReportOptions& o, bool html_written) {
  if (!html_written || model.ranks.empty()) return 2;
  return o.fail_on_stragglers && !r.scores.stragglers.empty() ? 3 : 0;
}

}  // namespace

int report_model(report::RunModel& model, const ReportOptions& o, std::ostream& out, std::ostream& err) {
  if (o.format == "csv" && o.output.empty()) {
    err << "laggard report: --format csv writes one file per table: name their directory with -o DIR\n";
    return 2;
  }
  std::optional<Cut> cut = apply_cuts(model, o, err);
  if (!cut) return 2;
  if (o.format == "text") model = report::escaped_for_text(std::move(model));  // names from files reach a terminal
  Results r = analyse(model, o, std::move(cut->steps));  // kept in r.analyses.steps
  // The page first: a reader of stdout that stops early (| head) must not cost the file.
  const bool html_written =
      o.html.empty() || write_html(model, r.scores, r.analyses, r.health, o, cut->text, err);

  if (o.format == "csv") {  // one file per table in the directory -o names
    if (std::string e = report::write_csv_tables(report::render_csv(model, r.scores, r.analyses, cut->text), o.output);
        !e.empty()) {
      err << "laggard report: " << e << '\n';
      return 2;
    }
    return exit_code(model, r, o, html_written);
  }
  std::ofstream file;
  if (!o.output.empty()) {
    file.open(o.output);
    if (!file) {
      err << "laggard report: cannot write '" << o.output << "'\n";
      return 2;
    }
  }
  std::ostream& dest = o.output.empty() ? out : file;
  if (o.format == "json") write_json_report(model, r, cut->text, o, dest);
  else write_text_report(model, r, cut->text, o.top, dest);
  dest.flush();
  const int rc = exit_code(model, r, o, html_written);
  if (o.exits_after) bury(std::move(r));
  return rc;
}

int trace_command(const TraceOptions& o, std::ostream& err) {
  report::RunModel model;
  try {
    model = report::read_run(o.dir, {o.run_id, -1});
  } catch (const std::exception& e) {
    err << "laggard trace: " << e.what() << '\n';
    return 2;
  }
  return trace_model(model, o, err);
}

int trace_model(report::RunModel& model, const TraceOptions& o, std::ostream& err) {
  try {
    for (const std::string& w : report::cut_warnings(model, o.cut)) err << "laggard trace: warning: " << w << '\n';
    model = report::apply_cut(model, o.cut);
    if (o.cut.steps) {  // --steps bounds the trace's size: only those steps' events
      report::StepSet steps = report::detect_steps(model, o.step_section);
      if (steps.count() == 0) {
        err << "laggard trace: --steps: the run has no steps (no NVTX section marks one; try --step-section)\n";
        return 2;
      }
      size_t most = 0;
      for (const auto& r : steps.per_rank) most = std::max(most, r.size());
      if (static_cast<size_t>(o.cut.steps->first) >= most) {
        err << fmt::format("laggard trace: --steps {}:{}: the run has {} step(s) (0-{}); nothing to write\n",
                           o.cut.steps->first, o.cut.steps->second, most, most - 1);
        return 2;
      }
      model = report::cut_to_steps(model, steps, *o.cut.steps);
    }
  } catch (const std::exception& e) {
    err << "laggard trace: " << e.what() << '\n';
    return 2;
  }
  if (model.ranks.empty()) {
    err << "laggard trace: nothing to write: the run has none of the ranks asked for\n";
    return 2;
  }
  std::ofstream file(o.output);
  if (!file) {
    err << "laggard trace: cannot write '" << o.output << "'\n";
    return 2;
  }
  size_t events = report::render_trace(model, file);
  file.close();
  if (!file) {
    err << "laggard trace: writing '" << o.output << "' failed\n";
    return 2;
  }
  err << "laggard trace: " << events << " events from " << model.ranks.size() << " ranks in " << o.output
      << " (open in ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

int diff_command(const DiffOptions& o, std::ostream& out, std::ostream& err) {
  report::RunModel a, b;
  try {
    a = report::read_run(o.dir_a, {o.run_a, -1});
    b = report::read_run(o.dir_b, {o.run_b, -1});
  } catch (const std::exception& e) {
    err << "laggard diff: " << e.what() << '\n';
    return 2;
  }
  if (o.format != "json") {
    a = report::escaped_for_text(std::move(a));
    b = report::escaped_for_text(std::move(b));
  }
  report::RunDiff d = report::diff_runs(a, b, o.threshold);
  if (o.format == "json") out << report::render_diff_json(d).dump(2) << '\n';
  else report::render_diff_text(d, o.top, out);
  return 0;
}

}  // namespace laggard::cli
