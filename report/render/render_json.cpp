#include "render.h"
#include "render_paused.h"
#include "units.h"

namespace laggard::report {
namespace {

using nlohmann::json;

// Keys in the order nlohmann's std::map gives them (the writer checks): sorted.
void write_section(JsonWriter& w, const SectionScore& s) {
  w.begin_object();
  w.field("count", s.count)
      .field("individual_score", s.individual)
      .field("median_from_sample", s.median_from_sample)
      .field("median_ms", ms(s.median_ns))
      .field("relative_score", s.relative)
      .field("share", s.share);
  w.end_object();
}

void write_sections(JsonWriter& w, const RankScores& r) {
  w.begin_object();
  for (const auto& [name, s] : r.sections) write_section(w.key(name), s);
  w.end_object();
}

void write_rank(JsonWriter& w, const RankScores& r, const RankData& d) {
  w.begin_object();
  w.field("dropped", d.dropped).field("final", d.final).field("folded_ranges", d.folded_ranges).field("host", r.host);
  w.key("local_rank");
  if (d.local_rank >= 0)
    w.value(d.local_rank);
  else
    w.null();
  w.field("pid", d.pid).field("rank", r.rank);
  write_sections(w.key("sections"), r);
  w.field("windows", d.windows.size());
  w.end_object();
}

void write_window(JsonWriter& w, const WindowScores& win) {
  w.begin_object();
  w.field("end_ns", win.end_ns).field("index", win.index);
  w.key("ranks").parallel_array(win.ranks.size(), [&](size_t i, JsonWriter& e) {
    e.begin_object();
    e.field("rank", win.ranks[i].rank);
    write_sections(e.key("sections"), win.ranks[i]);
    e.end_object();
  });
  w.field("start_ns", win.start_ns);
  w.end_object();
}

// `score_key`: "score" for the whole run (sorted after "scope"), "lowest_window_score" for the
// per-window stragglers (sorted before "metric").
void write_straggler(JsonWriter& w, const Straggler& s, std::string_view score_key) {
  const bool lowest = score_key == "lowest_window_score";
  w.begin_object();
  w.field("host", s.host);
  if (lowest) w.field(score_key, s.score);
  w.field("metric", s.metric).field("rank", s.rank).field("scope", s.scope);
  if (!lowest) w.field(score_key, s.score);
  w.field("section", s.section).field("threshold", s.threshold).field("windows", s.windows);
  w.end_object();
}

void write_stragglers(JsonWriter& w, const std::vector<Straggler>& v, std::string_view score_key) {
  w.parallel_array(v.size(), [&](size_t i, JsonWriter& e) { write_straggler(e, v[i], score_key); });
}

void write_problem(JsonWriter& w, const Problem& p) {
  w.begin_object();
  w.key("file");
  if (p.file.empty())
    w.null();
  else
    w.value(p.file);
  w.field("kind", p.kind).field("message", p.message);
  w.key("rank");
  if (p.rank >= 0)
    w.value(p.rank);
  else
    w.null();
  w.end_object();
}

json sections_summary_json(const ScoreReport& rep) {
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
  return sections;
}

}  // namespace

JsonObjectParts render_json_parts(const RunModel& model, const ScoreReport& rep) {
  JsonObjectParts j;
  j.add("run_id", model.run_id);
  j.add("dir", model.dir);
  j.add("world_size", model.world_size);
  j.add("window_s", rep.window_s);
  j.add("start_ns", rep.start_ns);
  j.add("end_ns", rep.end_ns);
  j.add("thresholds", {{"relative", rep.options.relative_threshold},
                       {"individual", rep.options.individual_threshold},
                       {"min_share", rep.options.min_share}});
  j.add("stragglers_below_min_share", rep.below_min_share);
  j.add_written("ranks", [&](JsonWriter& w) {
    w.parallel_array(rep.ranks.size(), [&](size_t i, JsonWriter& e) { write_rank(e, rep.ranks[i], model.ranks[i]); });
  });
  j.add("sections", sections_summary_json(rep));  // one per section name: small
  j.add_written("windows", [&](JsonWriter& w) {
    w.begin_array();
    for (const WindowScores& win : rep.windows) write_window(w, win);
    w.end_array();
  });
  j.add_written("stragglers", [&](JsonWriter& w) { write_stragglers(w, rep.stragglers, "score"); });
  j.add_written("window_stragglers",
                [&](JsonWriter& w) { write_stragglers(w, rep.window_stragglers, "lowest_window_score"); });
  j.add_written("problems", [&](JsonWriter& w) {
    w.parallel_array(model.problems.size(), [&](size_t i, JsonWriter& e) { write_problem(e, model.problems[i]); });
  });
  j.add("other_runs", model.other_runs);
  j.add("paused", paused_json(model));  // `laggard ctl`: capture off on purpose, not missing data
  return j;
}

json render_json(const RunModel& model, const ScoreReport& rep) {
  const JsonObjectParts parts = render_json_parts(model, rep);
  return parsed([&](JsonWriter& w) { parts.write(w); });
}

}  // namespace laggard::report
