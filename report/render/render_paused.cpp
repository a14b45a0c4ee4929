#include "render_paused.h"

#include <algorithm>
#include <climits>
#include <map>

#include <fmt/format.h>

namespace laggard::report {
namespace {

int64_t run_start_ns(const RunModel& model) {
  int64_t start = INT64_MAX;
  for (const RankData& r : model.ranks)
    if (r.process_start_ns > 0) start = std::min(start, r.process_start_ns);
  return start == INT64_MAX ? 0 : start;
}

std::string what(const PausedGroup& g) {
  return g.command == "window" ? fmt::format("after `laggard ctl window` #{} ended", g.seq)
                               : fmt::format("by `laggard ctl pause` #{}", g.seq);
}

}  // namespace

std::vector<PausedGroup> paused_groups(const RunModel& model) {
  std::map<std::pair<std::string, uint64_t>, PausedGroup> by_command;
  for (const RankData& r : model.ranks)
    for (const PausedPeriod& p : r.paused) {
      PausedGroup& g = by_command[{p.command, p.seq}];
      if (g.ranks.empty()) {
        g.command = p.command;
        g.seq = p.seq;
        g.start_ns = p.start_ns;
        g.end_ns = p.end_ns;
      }
      g.start_ns = std::min(g.start_ns, p.start_ns);
      g.end_ns = std::max(g.end_ns, p.end_ns);
      g.ongoing = g.ongoing || p.ongoing;
      if (g.ranks.empty() || g.ranks.back() != r.rank) g.ranks.push_back(r.rank);
    }
  std::vector<PausedGroup> out;
  for (auto& [key, g] : by_command) out.push_back(std::move(g));
  std::sort(out.begin(), out.end(), [](const PausedGroup& a, const PausedGroup& b) { return a.start_ns < b.start_ns; });
  return out;
}

nlohmann::json paused_json(const RunModel& model) {
  int64_t start = run_start_ns(model);
  nlohmann::json out = nlohmann::json::array();
  for (const PausedGroup& g : paused_groups(model))
    out.push_back({{"command", g.command},
                   {"seq", g.seq},
                   {"start_ns", g.start_ns},
                   {"end_ns", g.end_ns},
                   {"start_s", double(g.start_ns - start) / 1e9},
                   {"dur_s", double(g.end_ns - g.start_ns) / 1e9},
                   {"ongoing", g.ongoing},
                   {"rank_count", g.ranks.size()},
                   {"ranks", g.ranks}});
  return out;
}

void render_paused_text(const RunModel& model, std::ostream& out, size_t max_lines) {
  std::vector<PausedGroup> groups = paused_groups(model);
  if (groups.empty()) return;
  int64_t start = run_start_ns(model);
  out << fmt::format("  capture was paused (laggard ctl) {} time(s); no data was taken then, none is missing:\n",
                     groups.size());
  for (size_t i = 0; i < groups.size() && i < max_lines; ++i) {
    const PausedGroup& g = groups[i];
    out << fmt::format("    {:.1f} s to {:.1f} s ({:.1f} s{}) {}, on {} rank(s)\n", double(g.start_ns - start) / 1e9,
                       double(g.end_ns - start) / 1e9, double(g.end_ns - g.start_ns) / 1e9,
                       g.ongoing ? ", still paused at the end of the data" : "", what(g), g.ranks.size());
  }
  if (groups.size() > max_lines) out << fmt::format("    ... {} more (see --format json)\n", groups.size() - max_lines);
}

}  // namespace laggard::report
