#include "report_command.h"

#include <fstream>

#include "render.h"
#include "render_analyses.h"
#include "render_comm.h"
#include "render_trace.h"
#include "health_analysis.h"
#include "stacks.h"

namespace laggard::cli {

int report_command(const ReportOptions& o, std::ostream& out, std::ostream& err) {
  report::RunModel model;
  try {
    model = report::read_run(o.dir, o.read);
  } catch (const std::exception& e) {
    err << "laggard report: " << e.what() << '\n';
    return 2;
  }
  report::StepSet steps;
  try {
    if (!o.cut.empty()) {
      model = report::apply_cut(model, o.cut);
      if (model.ranks.empty()) {
        err << "laggard report: the cut leaves no rank\n";
        return 2;
      }
    }
    steps = report::apply_cut(report::detect_steps(model, o.analyses.step_section), o.cut);
  } catch (const std::exception& e) {
    err << "laggard report: " << e.what() << '\n';
    return 2;
  }
  report::ScoreReport scores = report::compute_scores(model, o.scores);
  report::GpuScoreReport gpu = report::compute_gpu_scores(model, scores);  // adds GPU stragglers
  report::CommReport comm = report::analyze_collectives(model, scores);
  scores.stragglers.insert(scores.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());
  report::Analyses analyses =
      report::run_analyses(model, scores, o.analyses, &steps, std::move(gpu), std::move(comm));
  report::HealthReport health = report::analyze_gpu_health(model);
  report::link_gpu_health(analyses.verdict, health);

  std::ofstream file;
  std::ostream* dest = &out;
  if (!o.output.empty()) {
    file.open(o.output);
    if (!file) {
      err << "laggard report: cannot write '" << o.output << "'\n";
      return 2;
    }
    dest = &file;
  }
  if (o.format == "json") {
    nlohmann::json j = report::render_json(model, scores);
    j.update(report::render_analyses_json(model, analyses));
    j["comm"] = report::render_comm_json(model, analyses.comm);
    j["hang_reports"] = report::mention_hangs_json(model.dir);
    j["gpu_health"] = report::render_health_json(health);
    *dest << j.dump(2) << '\n';
  } else {
    report::render_text(model, scores, *dest, &analyses, o.top);
    report::render_comm_text(model, analyses.comm, *dest);
    report::render_health_text(health, *dest);
    report::mention_hangs_text(model.dir, *dest);
  }
  dest->flush();
  if (model.ranks.empty()) return 2;
  return o.fail_on_stragglers && !scores.stragglers.empty() ? 3 : 0;
}

int trace_command(const TraceOptions& o, std::ostream& err) {
  report::RunModel model;
  try {
    model = report::apply_cut(report::read_run(o.dir, {o.run_id, -1}), o.cut);
  } catch (const std::exception& e) {
    err << "laggard trace: " << e.what() << '\n';
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
  report::RunDiff d = report::diff_runs(a, b, o.threshold);
  if (o.format == "json") out << report::render_diff_json(d).dump(2) << '\n';
  else report::render_diff_text(d, o.top, out);
  return 0;
}

}  // namespace laggard::cli
