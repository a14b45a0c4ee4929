#include "render_nvrx.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace laggard::report {
namespace {

using nlohmann::json;

json score(double v) { return std::isnan(v) ? json(nullptr) : json(v); }

json per_rank(const std::map<int, double>& scores) {
  json out = json::object();
  for (const auto& [rank, v] : scores) out[std::to_string(rank)] = score(v);
  return out;
}

json per_section(const std::map<std::string, std::map<int, double>>& scores) {
  json out = json::object();
  for (const auto& [name, ranks] : scores) out[name] = per_rank(ranks);
  return out;
}

json ids(const std::set<NvrxStragglerId>& s) {
  json out = json::array();
  for (const auto& [rank, node] : s) out.push_back({{"rank", rank}, {"node", node}});
  return out;
}

json ids_per_section(const std::map<std::string, std::set<NvrxStragglerId>>& s) {
  json out = json::object();
  for (const auto& [name, set] : s) out[name] = ids(set);
  return out;
}

// "rank 2 (node1, 0.6667), rank 3 (node1, 0.7012)", or "none".
std::string list(const std::set<NvrxStragglerId>& s, const std::map<int, double>& scores) {
  std::string out;
  for (const auto& [rank, node] : s) {
    auto it = scores.find(rank);
    out += fmt::format("{}rank {} ({}{})", out.empty() ? "" : ", ", rank, node,
                       it != scores.end() ? fmt::format(", {:.4f}", it->second) : "");
  }
  return out.empty() ? "none" : out;
}

}  // namespace

json nvrx_json(const NvrxRunReport& n) {
  json out = {{"available", n.available},
              {"definitions", "NVRx's (nvidia-resiliency-ext d8686d9c, attribution/straggler): ReportGenerator with "
                              "gather_on_rank0=True and all scores, Report.identify_stragglers"},
              {"schedule", n.schedule},
              {"iter_interval", n.iter_interval},
              {"unreported_steps", n.unreported_steps}};
  if (!n.available) out["why_not"] = n.why_not;
  if (!n.inexact.empty()) out["inexact"] = n.inexact;
  json reports = json::array();
  for (const NvrxInterval& r : n.reports) {
    json rank_to_node = json::object();
    for (const auto& [rank, node] : r.report.rank_to_node) rank_to_node[std::to_string(rank)] = node;
    reports.push_back(
        {{"index", r.index},
         {"first_step", r.first_step >= 0 ? json(r.first_step) : json(nullptr)},
         {"last_step", r.last_step >= 0 ? json(r.last_step) : json(nullptr)},
         {"start_ns", r.start_ns},
         {"end_ns", r.end_ns},
         {"exact", r.exact},
         {"gpu_relative_perf_scores", per_rank(r.report.gpu_relative)},
         {"section_relative_perf_scores", per_section(r.report.section_relative)},
         {"gpu_individual_perf_scores", per_rank(r.report.gpu_individual)},
         {"section_individual_perf_scores", per_section(r.report.section_individual)},
         {"rank_to_node", rank_to_node},
         {"stragglers",
          {{"straggler_gpus_relative", ids(r.stragglers.gpus_relative)},
           {"straggler_gpus_individual", ids(r.stragglers.gpus_individual)},
           {"straggler_sections_relative", ids_per_section(r.stragglers.sections_relative)},
           {"straggler_sections_individual", ids_per_section(r.stragglers.sections_individual)}}}});
  }
  out["reports"] = reports;
  return out;
}

void nvrx_text(const NvrxRunReport& n, size_t top, std::ostream& out) {
  out << "\nNVRx-compatible reports (--nvrx-compatible: NVRx's scores and straggler lists by its rules):\n";
  if (!n.available) {
    out << "  not available: " << n.why_not << '\n';
    return;
  }
  out << "  " << n.schedule << '\n';
  if (!n.inexact.empty()) out << "  not exact: " << n.inexact << '\n';
  const size_t shown = std::min(n.reports.size(), std::max<size_t>(top, 1));
  if (shown < n.reports.size()) out << fmt::format("  (the last {} of {} reports; all are in --format json)\n", shown, n.reports.size());
  for (size_t i = n.reports.size() - shown; i < n.reports.size(); ++i) {
    const NvrxInterval& r = n.reports[i];
    const NvrxStragglers& s = r.stragglers;
    out << (r.first_step >= 0 ? fmt::format("  report {} (iterations {}-{}):\n", r.index, r.first_step, r.last_step)
                              : fmt::format("  report {}:\n", r.index));
    out << fmt::format("    GPU relative: {}\n", list(s.gpus_relative, r.report.gpu_relative));
    out << fmt::format("    GPU individual: {}\n", list(s.gpus_individual, r.report.gpu_individual));
    for (const auto& [name, set] : s.sections_relative)
      out << fmt::format("    section {} relative: {}\n", name, list(set, r.report.section_relative.at(name)));
    for (const auto& [name, set] : s.sections_individual)
      out << fmt::format("    section {} individual: {}\n", name, list(set, r.report.section_individual.at(name)));
    if (s.sections_relative.empty() && s.sections_individual.empty()) out << "    sections: none below the thresholds\n";
  }
  if (n.unreported_steps > 0)
    out << fmt::format("  {} iterations after the last report (NVRx reports them at its next)\n", n.unreported_steps);
}

}  // namespace laggard::report
