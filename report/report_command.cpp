#include "report_command.h"

#include <fstream>

#include "render.h"
#include "render_comm.h"

namespace laggard::cli {

int report_command(const ReportOptions& o, std::ostream& out, std::ostream& err) {
  report::RunModel model;
  try {
    model = report::read_run(o.dir, o.read);
  } catch (const std::exception& e) {
    err << "laggard report: " << e.what() << '\n';
    return 2;
  }
  report::ScoreReport scores = report::compute_scores(model, o.scores);
  report::CommReport comm = report::analyze_collectives(model, scores);
  scores.stragglers.insert(scores.stragglers.end(), comm.stragglers.begin(), comm.stragglers.end());

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
    j["comm"] = report::render_comm_json(model, comm);
    *dest << j.dump(2) << '\n';
  } else {
    report::render_text(model, scores, *dest);
    report::render_comm_text(model, comm, *dest);
  }
  dest->flush();
  if (model.ranks.empty()) return 2;
  return o.fail_on_stragglers && !scores.stragglers.empty() ? 3 : 0;
}

}  // namespace laggard::cli
