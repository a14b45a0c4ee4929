#include "render_csv.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "units.h"

namespace laggard::report {
namespace {

std::string num(double x) { return csv_number(x); }
std::string num(const std::optional<double>& x) { return x ? csv_number(*x) : std::string(); }
std::string integer(int64_t x) { return std::to_string(x); }
std::string count(uint64_t x) { return std::to_string(x); }
std::string flag(bool b) { return b ? "true" : "false"; }
std::string text(std::string_view s) { return csv_text(s); }

std::string space_separated(const std::vector<int>& v) {  // "0 3 5": one cell, no comma to quote
  std::string s;
  for (int x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

// What the other tables cover: a spreadsheet of a cut run must say so, as the text and HTML do.
CsvTable run(const RunModel& m, const Analyses& a, const std::string& cut) {
  CsvTable t{"run", {"key", "value"}, {}};
  t.rows.push_back({"run_dir", text(m.dir)});
  t.rows.push_back({"run_id", text(m.run_id)});
  t.rows.push_back({"ranks", count(m.ranks.size())});
  t.rows.push_back({"world_size", m.world_size >= 0 ? integer(m.world_size) : ""});
  t.rows.push_back({"steps", integer(a.steps.count())});
  t.rows.push_back({"steps_from", text(a.steps.source)});
  t.rows.push_back({"cut", text(cut)});
  return t;
}

CsvTable problems(const RunModel& m) {
  CsvTable t{"problems", {"kind", "rank", "file", "message"}, {}};
  for (const Problem& p : m.problems)
    t.rows.push_back({text(p.kind), p.rank >= 0 ? integer(p.rank) : "", text(p.file), text(p.message)});
  return t;
}

CsvTable findings(const Analyses& a) {
  CsvTable t{"findings",
             {"order", "rank", "host", "cause", "kind", "section", "first_step", "last_step", "impact_ms",
              "steps_affected", "cause_share", "summary"},
             {}};
  int order = 1;
  for (const Finding& f : a.verdict.findings)
    t.rows.push_back({integer(order++), integer(f.rank), text(f.host), text(cause_name(f.cause)), text(f.kind),
                      text(f.section), f.first_step >= 0 ? integer(f.first_step) : "",
                      f.last_step >= 0 ? integer(f.last_step) : "", num(ms(f.impact_ns)), integer(f.steps_affected),
                      num(f.cause_share), text(f.summary)});
  return t;
}

CsvTable stragglers(const ScoreReport& rep) {
  CsvTable t{"stragglers",
             {"rank", "host", "scope", "section", "metric", "score", "threshold", "whole_run", "windows"},
             {}};
  auto add = [&](const Straggler& s, bool whole_run) {
    t.rows.push_back({integer(s.rank), text(s.host), text(s.scope), text(s.section), text(s.metric), num(s.score),
                      num(s.threshold), flag(whole_run), space_separated(s.windows)});
  };
  for (const Straggler& s : rep.stragglers) add(s, true);
  for (const Straggler& s : rep.window_stragglers) add(s, false);
  return t;
}

CsvTable sections(const ScoreReport& rep) {
  CsvTable t{"sections",
             {"section", "domain", "parent", "ranks", "min_median_ms", "median_median_ms", "max_median_ms",
              "worst_rank", "worst_relative_score"},
             {}};
  for (const SectionSummary& s : rep.sections)
    t.rows.push_back({text(s.name), text(s.domain), text(s.parent), integer(s.ranks), num(ms(s.min_median_ns)),
                      num(ms(s.median_median_ns)), num(ms(s.max_median_ns)),
                      s.worst_rank >= 0 ? integer(s.worst_rank) : "", s.worst_rank >= 0 ? num(s.worst_relative) : ""});
  return t;
}

const std::vector<std::string> kScoreColumns = {"count", "samples", "median_ms", "share", "relative_score",
                                                "individual_score"};

void score_cells(const SectionScore& s, std::vector<std::string>& row) {
  row.insert(row.end(), {count(s.count), count(s.samples), num(ms(s.median_ns)), num(s.share), num(s.relative),
                         num(s.individual)});
}

CsvTable rank_sections(const ScoreReport& rep) {
  CsvTable t{"rank_sections", {"rank", "host", "section"}, {}};
  t.header.insert(t.header.end(), kScoreColumns.begin(), kScoreColumns.end());
  for (const RankScores& r : rep.ranks)
    for (const auto& [name, s] : r.sections) {
      std::vector<std::string> row = {integer(r.rank), text(r.host), text(name)};
      score_cells(s, row);
      t.rows.push_back(std::move(row));
    }
  return t;
}

CsvTable window_scores(const ScoreReport& rep) {
  CsvTable t{"window_scores", {"window", "start_ns", "end_ns", "rank", "host", "section"}, {}};
  t.header.insert(t.header.end(), kScoreColumns.begin(), kScoreColumns.end());
  for (const WindowScores& w : rep.windows)
    for (const RankScores& r : w.ranks)
      for (const auto& [name, s] : r.sections) {
        std::vector<std::string> row = {integer(w.index), integer(w.start_ns), integer(w.end_ns), integer(r.rank),
                                        text(r.host), text(name)};
        score_cells(s, row);
        t.rows.push_back(std::move(row));
      }
  return t;
}

CsvTable gpu_ranks(const GpuScoreReport& gpu) {
  CsvTable t{"gpu_ranks",
             {"rank", "host", "cupti", "has_data", "windows", "sampled_windows", "kernels", "kernel_ms",
              "nccl_kernels", "nccl_ms", "memcpy_count", "memcpy_ms", "memset_count", "memset_ms", "graph_kernels",
              "relative_score", "individual_score", "completeness", "records", "lost_records",
              "unmatched_correlation", "buffer_full"},
             {}};
  for (const RankGpu& r : gpu.ranks)
    t.rows.push_back({integer(r.rank), text(r.host), text(r.cupti_status), flag(r.has_data), integer(r.windows),
                      integer(r.sampled_windows), count(r.kernel_count), num(ms(double(r.kernel_ns))),
                      count(r.nccl_count), num(ms(double(r.nccl_ns))), count(r.memcpy_count),
                      num(ms(double(r.memcpy_ns))), count(r.memset_count), num(ms(double(r.memset_ns))),
                      count(r.graph_count), num(r.score.relative), num(r.score.individual), num(r.completeness),
                      count(r.records), count(r.lost), count(r.unmatched), count(r.buffer_full)});
  return t;
}

CsvTable gpu_rank_sections(const GpuScoreReport& gpu) {
  CsvTable t{"gpu_rank_sections",
             {"rank", "host", "section", "kernels", "kernel_ms", "relative_score", "individual_score"},
             {}};
  for (const RankGpu& r : gpu.ranks)
    for (const auto& [name, s] : r.sections)
      t.rows.push_back({integer(r.rank), text(r.host), text(name), count(s.kernels), num(ms(double(s.kernel_ns))),
                        num(s.relative), num(s.individual)});
  return t;
}

CsvTable comm_ranks(const CommReport& comm) {
  CsvTable t{"comm_ranks",
             {"rank", "host", "collectives", "last_count", "last_share", "blame_ms", "waited_ms", "kernel_ms",
              "clock_offset_ms", "clock_drift_ppm", "clock_samples", "suspect", "nccl_plugin", "p2p_ops",
              "p2p_bytes"},
             {}};
  for (const CommRankStats& r : comm.ranks)
    t.rows.push_back({integer(r.rank), text(r.host), count(r.collectives), count(r.last),
                      num(r.collectives ? double(r.last) / double(r.collectives) : 0.0), num(ms(r.blame_ns)),
                      num(ms(r.waited_ns)), num(ms(r.kernel_ns)), num(ms(r.clock_offset_ns)), num(r.clock_drift_ppm),
                      count(r.clock_samples), count(r.suspect), text(r.nccl_plugin), count(r.p2p_ops),
                      count(r.p2p_bytes)});
  return t;
}

CsvTable jitter_steps(const JitterReport& j) {
  CsvTable t{"jitter_steps",
             {"step", "ranks", "median_ttke_ms", "worst_rank", "worst_divergence_ms", "first_diverging_position",
              "first_diverging_kernel", "step_time_spread_ms"},
             {}};
  for (const StepJitter& s : j.steps)
    t.rows.push_back({integer(s.step), integer(s.ranks), num(ms(s.median_ttke_ns)), integer(s.worst_rank),
                      num(ms(s.worst_divergence_ns)), s.first_diverging_slot >= 0 ? integer(s.first_diverging_slot) : "",
                      text(s.first_diverging_kernel), num(ms(s.step_time_spread_ns))});
  return t;
}

CsvTable jitter_ranks(const JitterReport& j) {
  CsvTable t{"jitter_ranks",
             {"rank", "host", "device", "median_end_divergence_ms", "steps_worst", "duration_excess_ms",
              "gap_excess_ms", "median_launch_delay_ms", "near_zero_launch_delay_share", "median_step_ms",
              "median_arrival_excess_ms", "last_arrival_share"},
             {}};
  for (const RankJitter& r : j.ranks)
    t.rows.push_back({integer(r.rank), text(r.host), integer(r.device), num(ms(r.median_end_divergence_ns)),
                      integer(r.steps_worst), num(ms(r.duration_excess_ns)), num(ms(r.gap_excess_ns)),
                      num(ms(r.median_launch_delay_ns)), num(r.near_zero_launch_delay_share),
                      num(ms(r.median_step_ns)), num(ms(r.median_arrival_excess_ns)), num(r.last_arrival_share)});
  return t;
}

CsvTable breakdown_ranks(const BreakdownReport& b) {
  CsvTable t{"breakdown_ranks",
             {"rank", "host", "span_ms", "compute_ms", "comm_ms", "memory_ms", "idle_ms", "host_wait_ms",
              "kernel_wait_ms", "other_idle_ms", "overlap", "launches", "short_kernels", "delay_outliers",
              "runtime_outliers", "median_launch_delay_ms"},
             {}};
  for (const RankBreakdown& r : b.ranks)
    t.rows.push_back({integer(r.rank), text(r.host), num(ms(r.temporal.span_ns)), num(ms(r.temporal.compute_ns)),
                      num(ms(r.temporal.comm_ns)), num(ms(r.temporal.memory_ns)), num(ms(r.temporal.idle_ns)),
                      num(ms(r.idle.host_wait_ns)), num(ms(r.idle.kernel_wait_ns)), num(ms(r.idle.other_ns)),
                      num(r.overlap), count(r.launch.with_launch), count(r.launch.short_kernels),
                      count(r.launch.delay_outliers), count(r.launch.runtime_outliers),
                      num(ms(r.launch.median_delay_ns))});
  return t;
}

}  // namespace

std::string csv_text(std::string_view s) {
  std::string cell;
  // OWASP: a leading = + - @ tab or CR makes spreadsheets read a formula; NUL is on ASVS's list.
  if (!s.empty() && std::string_view("=+-@\t\r\0", 7).find(s.front()) != std::string_view::npos) cell += '\'';
  cell.append(s);
  // Quoted also when it holds ';': where a spreadsheet splits on it (a ';' locale), an unquoted
  // "a;=cmd" would start a formula cell (issue 24).
  if (cell.find_first_of(",;\"\r\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + '"';
}

std::string csv_number(double x) { return std::isfinite(x) ? fmt::format("{}", x) : std::string(); }

std::string CsvTable::str() const {
  std::string out;
  auto line = [&out](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + cells[i];
    out += '\n';
  };
  std::vector<std::string> names;
  for (const std::string& h : header) names.push_back(csv_text(h));
  line(names);
  for (const auto& row : rows) line(row);
  return out;
}

std::vector<CsvTable> render_csv(const RunModel& model, const ScoreReport& scores, const Analyses& a,
                                 const std::string& cut) {
  return {run(model, a, cut),    problems(model),       findings(a),         stragglers(scores),         sections(scores),
          rank_sections(scores), window_scores(scores), gpu_ranks(a.gpu),        gpu_rank_sections(a.gpu),
          comm_ranks(a.comm),    jitter_steps(a.jitter), jitter_ranks(a.jitter), breakdown_ranks(a.breakdown)};
}

std::string write_csv_tables(const std::vector<CsvTable>& tables, const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return fmt::format("cannot create the directory '{}' for the CSV files{}", dir, ec ? ": " + ec.message() : "");
  for (const CsvTable& t : tables) {
    const std::string path = (std::filesystem::path(dir) / (t.name + ".csv")).string();
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << t.str();
    f.close();
    if (!f) return fmt::format("cannot write '{}'", path);
  }
  return "";
}

}  // namespace laggard::report
