#include "render.h"
#include "json_values.h"
#include "render_paused.h"
#include "units.h"

namespace laggard::report {
namespace {

using nlohmann::json;

json section_json(const SectionScore& s) {
  return {{"count", s.count},
          {"median_ms", ms(s.median_ns)},
          {"median_from_sample", s.median_from_sample},
          {"share", s.share},
          {"relative_score", json_or_null(s.relative)},
          {"individual_score", json_or_null(s.individual)}};
}

json sections_json(const RankScores& r) {
  json out = json::object();
  for (const auto& [name, s] : r.sections) out[name] = section_json(s);
  return out;
}

}  // namespace

json render_json(const RunModel& model, const ScoreReport& rep) {
  json j;
  j["run_id"] = model.run_id;
  j["dir"] = model.dir;
  j["world_size"] = model.world_size;
  j["window_s"] = rep.window_s;
  j["start_ns"] = rep.start_ns;
  j["end_ns"] = rep.end_ns;
  j["thresholds"] = {{"relative", rep.options.relative_threshold},
                     {"individual", rep.options.individual_threshold},
                     {"min_share", rep.options.min_share}};
  j["stragglers_below_min_share"] = rep.below_min_share;

  json ranks = json::array();
  for (size_t i = 0; i < rep.ranks.size(); ++i) {
    const RankScores& r = rep.ranks[i];
    const RankData& d = model.ranks[i];
    ranks.push_back({{"rank", r.rank},
                     {"host", r.host},
                     {"pid", d.pid},
                     {"local_rank", d.local_rank >= 0 ? json(d.local_rank) : json(nullptr)},
                     {"final", d.final},
                     {"windows", d.windows.size()},
                     {"dropped", d.dropped},
                     {"folded_ranges", d.folded_ranges},
                     {"sections", sections_json(r)}});
  }
  j["ranks"] = std::move(ranks);

  json sections = json::array();
  for (const SectionSummary& s : rep.sections)
    sections.push_back({{"name", s.name},
                        {"domain", s.domain.empty() ? json(nullptr) : json(s.domain)},
                        {"parent", s.parent.empty() ? json(nullptr) : json(s.parent)},
                        {"ranks", s.ranks},
                        {"median_ms",
                         {{"min", ms(s.min_median_ns)},
                          {"median", ms(s.median_median_ns)},
                          {"max", ms(s.max_median_ns)}}},
                        {"worst_rank", s.worst_rank < 0 ? json(nullptr) : json(s.worst_rank)},
                        {"worst_relative_score", s.worst_rank < 0 ? json(nullptr) : json(s.worst_relative)}});
  j["sections"] = std::move(sections);

  json windows = json::array();
  for (const WindowScores& w : rep.windows) {
    json ranks_w = json::array();
    for (const RankScores& r : w.ranks) ranks_w.push_back({{"rank", r.rank}, {"sections", sections_json(r)}});
    windows.push_back({{"index", w.index}, {"start_ns", w.start_ns}, {"end_ns", w.end_ns}, {"ranks", ranks_w}});
  }
  j["windows"] = std::move(windows);

  json stragglers = json::array();
  for (const Straggler& s : rep.stragglers)
    stragglers.push_back({{"rank", s.rank},
                          {"host", s.host},
                          {"scope", s.scope},
                          {"section", s.section},
                          {"metric", s.metric},
                          {"score", s.score},
                          {"threshold", s.threshold},
                          {"windows", s.windows}});
  j["stragglers"] = std::move(stragglers);
  json window_stragglers = json::array();
  for (const Straggler& s : rep.window_stragglers)
    window_stragglers.push_back({{"rank", s.rank}, {"host", s.host}, {"scope", s.scope}, {"section", s.section},
                                 {"metric", s.metric}, {"lowest_window_score", s.score}, {"threshold", s.threshold},
                                 {"windows", s.windows}});
  j["window_stragglers"] = std::move(window_stragglers);

  json problems = json::array();
  for (const Problem& p : model.problems)
    problems.push_back({{"kind", p.kind},
                        {"rank", p.rank >= 0 ? json(p.rank) : json(nullptr)},
                        {"file", p.file.empty() ? json(nullptr) : json(p.file)},
                        {"message", p.message}});
  j["problems"] = std::move(problems);
  j["other_runs"] = model.other_runs;
  j["paused"] = paused_json(model);  // `laggard ctl`: capture off on purpose, not missing data
  return j;
}

}  // namespace laggard::report
