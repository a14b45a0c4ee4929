#include "report_command.h"

#include <fstream>

#include "gpu_scores.h"
#include "render.h"
#include "render_gpu.h"

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
  report::GpuScoreReport gpu = report::compute_gpu_scores(model, scores);

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
    j["gpu"] = report::render_gpu_json(model, gpu);
    *dest << j.dump(2) << '\n';
  } else {
    report::render_text(model, scores, *dest);
    report::render_gpu_text(model, gpu, *dest);
  }
  dest->flush();
  if (model.ranks.empty()) return 2;
  return o.fail_on_stragglers && !scores.stragglers.empty() ? 3 : 0;
}

}  // namespace laggard::cli
