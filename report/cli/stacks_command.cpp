#include "stacks.h"

namespace laggard::cli {

int stacks_command(const StacksOptions& o, std::ostream& out, std::ostream& err) {
  report::HangSet set = report::read_hang_reports(o.dir);
  if (set.ranks.empty()) {
    for (const std::string& p : set.problems) err << "laggard stacks: " << p << '\n';
    err << "laggard stacks: no hang reports (hang-*.json) in '" << o.dir
        << "' or its run directories (set LAGGARD_HANG_S to enable the watchdog)\n";
    return 2;
  }
  if (o.symbolize) report::symbolize_hangs(set);
  report::HangAnalysis a = report::analyze_hangs(set);
  if (o.format == "json") out << report::render_stacks_json(set, a).dump(2) << '\n';
  else report::render_stacks_text(set, a, out);
  return 0;
}

}  // namespace laggard::cli
