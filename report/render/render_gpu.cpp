#include "render_gpu.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "json_text.h"
#include "score_text.h"
#include "text_lists.h"
#include "units.h"

namespace laggard::report {
namespace {

using nlohmann::json;

std::string score_str(const std::optional<double>& s, double threshold) { return s ? score_text(*s, threshold) : "-"; }

std::string shorten(std::string s, size_t max) {
  if (s.size() <= max) return s;
  return s.substr(0, max - 3) + "...";
}

const char* kind_name(GpuKind k) {
  return k == GpuKind::memcpy ? "memcpy" : k == GpuKind::memset ? "memset" : "kernel";
}

// Ranks in the order the per-rank table shows them when it cannot show all: lowest GPU score
// (relative or individual) first, ranks without data last.
std::vector<const RankGpu*> weakest_first(const GpuScoreReport& gpu) {
  std::vector<const RankGpu*> rows;
  for (const RankGpu& r : gpu.ranks) rows.push_back(&r);
  auto key = [](const RankGpu* r) {
    return !r->has_data ? 3.0 : r->score.relative ? std::min(*r->score.relative, r->score.individual.value_or(2.0))
                                                  : r->score.individual.value_or(2.0);
  };
  std::stable_sort(rows.begin(), rows.end(), [&](auto* a, auto* b) { return key(a) < key(b); });
  return rows;
}

struct SectionRow {
  std::string name;
  int ranks = 0, worst = -1;
  double worst_rel = 2;
  uint64_t kernels = 0;
  int64_t ns = 0;
};

std::vector<SectionRow> section_rows(const GpuScoreReport& gpu) {
  std::map<std::string, SectionRow> by_name;
  for (const RankGpu& r : gpu.ranks)
    for (const auto& [name, s] : r.sections) {
      SectionRow& row = by_name[name];
      row.name = name;
      ++row.ranks;
      row.kernels += s.kernels;
      row.ns += s.kernel_ns;
      if (s.relative && *s.relative < row.worst_rel) {
        row.worst_rel = *s.relative;
        row.worst = r.rank;
      }
    }
  std::vector<SectionRow> rows;
  for (auto& [name, row] : by_name) rows.push_back(std::move(row));
  return rows;
}

void no_gpu_text(const GpuScoreReport& gpu, std::ostream& out) {
  std::set<std::string> statuses;
  for (const RankGpu& r : gpu.ranks)
    if (!r.cupti_status.empty()) statuses.insert(r.cupti_status);
  out << "\nGPU: no kernels captured";
  if (!statuses.empty()) {
    out << " (CUPTI:";
    for (const auto& s : statuses) out << " [" << s << "]";
    out << ")";
  }
  out << '\n';
}

// What limits how far a rank's GPU numbers can be trusted, in a few words.
std::string rank_gpu_notes(const RankGpu& r) {
  std::string notes;
  if (r.cupti_status.rfind("starved", 0) == 0) notes += "CUPTI " + r.cupti_status.substr(0, r.cupti_status.find(':')) + "; ";
  if (r.cupti_status.rfind("shared", 0) == 0) notes += "CUPTI " + r.cupti_status.substr(0, r.cupti_status.find(',')) + "; ";
  if (r.missed_launches) notes += fmt::format("{} launches not recorded; ", r.missed_launches);
  if (r.lost) notes += fmt::format("{} lost; ", r.lost);
  if (r.unmatched) notes += fmt::format("{} unattributed; ", r.unmatched);
  if (r.buffer_full) notes += fmt::format("buffers full {}x; ", r.buffer_full);
  if (r.sampled_windows < r.windows) notes += fmt::format("{}/{} windows sampled; ", r.sampled_windows, r.windows);
  if (r.graph_count) notes += fmt::format("{} in CUDA graphs; ", r.graph_count);
  if (!notes.empty()) notes.resize(notes.size() - 2);
  return notes;
}

void rank_gpu_row(const RankGpu& r, const ScoreOptions& thresholds, std::ostream& out) {
  if (!r.has_data) {
    out << fmt::format("  {:>5}  {:<16} {}\n", r.rank, r.host,
                       r.cupti_status.empty() ? "(no GPU data)" : "(no GPU data; CUPTI " + r.cupti_status + ")");
    return;
  }
  out << fmt::format("  {:>5}  {:<16} {:>9} {:>10.3f} {:>9.3f} {:>9.3f} {:>5} {:>5}  {:>7.2f}%  {}\n", r.rank, r.host,
                     r.kernel_count, ms(r.kernel_ns), ms(r.nccl_ns),
                     ms(r.memcpy_ns + r.memset_ns), score_str(r.score.relative, thresholds.relative_threshold),
                     score_str(r.score.individual, thresholds.individual_threshold), 100.0 * r.completeness,
                     rank_gpu_notes(r));
}

// Every rank in small jobs; the `top` with the lowest GPU scores in large ones.
void gpu_ranks_text(const GpuScoreReport& gpu, size_t top, const ScoreOptions& thresholds, std::ostream& out) {
  out << fmt::format("  {:>5}  {:<16} {:>9} {:>10} {:>9} {:>9} {:>5} {:>5}  {:>8}  {}\n", "RANK", "HOST", "KERNELS",
                     "KERNEL ms", "NCCL ms", "COPY ms", "REL", "IND", "COMPLETE", "NOTES");
  std::vector<const RankGpu*> rows;
  for (const RankGpu& r : gpu.ranks) rows.push_back(&r);
  const size_t shown = rows_shown(rows.size(), top);
  if (shown < rows.size()) {
    rows = weakest_first(gpu);
    rows.resize(shown);
    out << fmt::format("  (the {} ranks with the lowest GPU scores of {})\n", shown, gpu.ranks.size());
  }
  for (const RankGpu* r : rows) rank_gpu_row(*r, thresholds, out);
  if (shown == gpu.ranks.size()) return;
  std::vector<int> without;
  for (const RankGpu& r : gpu.ranks)
    if (!r.has_data) without.push_back(r.rank);
  out << more_line(gpu.ranks.size(), shown, "ranks");
  if (!without.empty()) out << "  no GPU data: " << counted_ranks(without) << '\n';
}

// Per section: the weakest rank by relative GPU score (the weakest sections when there are many).
void gpu_sections_text(const GpuScoreReport& gpu, size_t top, const ScoreOptions& thresholds, std::ostream& out) {
  std::vector<SectionRow> sections = section_rows(gpu);
  if (sections.empty()) return;
  out << "\n  GPU scores per section (kernels launched inside it):\n";
  out << fmt::format("  {:<32} {:>5} {:>10} {:>12}  {:<18}\n", "SECTION", "RANKS", "KERNELS", "KERNEL ms/rk",
                     "WORST RANK (REL)");
  const size_t section_count = sections.size(), sections_shown = rows_shown(section_count, top);
  if (sections_shown < sections.size()) {
    std::stable_sort(sections.begin(), sections.end(), [](auto& a, auto& b) { return a.worst_rel < b.worst_rel; });
    sections.resize(sections_shown);
  }
  for (const SectionRow& row : sections)
    out << fmt::format("  {:<32} {:>5} {:>10} {:>12.3f}  {:<18}\n", shorten(row.name, 32), row.ranks, row.kernels,
                       row.ranks ? ms(row.ns) / row.ranks : 0.0,
                       row.worst >= 0
                           ? fmt::format("{} ({})", row.worst, score_text(row.worst_rel, thresholds.relative_threshold))
                           : std::string("-"));
  out << more_line(section_count, sections_shown, "sections");
}

void top_kernels_text(const GpuScoreReport& gpu, size_t top, std::ostream& out) {
  out << "\n  Top kernels per section (all ranks, by total GPU time):\n";
  size_t listed = 0;
  for (const auto& [section, kernels] : gpu.top_kernels) {
    if (listed++ == rows_shown(gpu.top_kernels.size(), top)) {
      out << more_line(gpu.top_kernels.size(), listed - 1, "sections");
      break;
    }
    out << "  " << section << '\n';
    for (const GpuTopKernel& k : kernels) {
      std::string tag = k.nccl ? " [nccl]" : "";
      out << fmt::format("    {:>10.3f} ms {:>8}x  {}{}\n", ms(k.total_ns), k.count,
                         shorten(demangle(k.name), 90), tag);
    }
  }
}

}  // namespace

void render_gpu_text(const RunModel&, const GpuScoreReport& gpu, std::ostream& out, size_t top,
                     const ScoreOptions& thresholds) {
  if (!gpu.any) {
    no_gpu_text(gpu, out);
    return;
  }
  out << "\nGPU (CUPTI; scores as NVRx computes them, NCCL kernels excluded):\n";
  gpu_ranks_text(gpu, top, thresholds, out);
  gpu_sections_text(gpu, top, thresholds, out);
  top_kernels_text(gpu, top, out);
}

namespace {

void write_gpu_score(JsonWriter& w, const GpuScore& s) {
  w.begin_object();
  w.field("individual_score", s.individual)
      .field("kernel_ms", ms(s.kernel_ns))
      .field("kernels", s.kernels)
      .field("relative_score", s.relative);
  w.end_object();
}

void write_gpu_sections(JsonWriter& w, const std::map<std::string, GpuScore>& m) {
  w.begin_object();
  for (const auto& [name, s] : m) write_gpu_score(w.key(name), s);
  w.end_object();
}

// Keys sorted, as nlohmann's std::map gives them (the writer checks).
void write_gpu_rank(JsonWriter& w, const RankGpu& r) {
  w.begin_object();
  w.field("buffer_full", r.buffer_full).field("completeness", r.completeness);
  w.key("cupti");
  if (r.cupti_status.empty())
    w.null();
  else
    w.value(r.cupti_status);
  w.field("graph_kernels", r.graph_count)
      .field("has_data", r.has_data)
      .field("host", r.host)
      .field("individual_score", r.score.individual)
      .field("kernel_ms", ms(r.kernel_ns))
      .field("kernels", r.kernel_count)
      .field("lost_records", r.lost)
      .field("memcpy_count", r.memcpy_count)
      .field("memcpy_ms", ms(r.memcpy_ns))
      .field("memset_count", r.memset_count)
      .field("memset_ms", ms(r.memset_ns))
      .field("missed_launches", r.missed_launches)
      .field("nccl_kernels", r.nccl_count)
      .field("nccl_ms", ms(r.nccl_ns))
      .field("rank", r.rank)
      .field("records", r.records)
      .field("relative_score", r.score.relative)
      .field("sampled_windows", r.sampled_windows);
  write_gpu_sections(w.key("sections"), r.sections);
  w.field("unmatched_correlation", r.unmatched).field("windows", r.windows);
  w.end_object();
}

void write_gpu_window_rank(JsonWriter& w, const GpuWindowRank& wr) {
  w.begin_object();
  w.field("individual_score", wr.score.individual)
      .field("kernels", wr.score.kernels)
      .field("rank", wr.rank)
      .field("relative_score", wr.score.relative);
  write_gpu_sections(w.key("sections"), wr.sections);
  w.end_object();
}

json top_kernels_json(const GpuScoreReport& gpu) {
  json top = json::object();
  for (const auto& [section, kernels] : gpu.top_kernels) {
    json list = json::array();
    for (const GpuTopKernel& k : kernels)
      list.push_back({{"name", k.name},
                      {"demangled", demangle(k.name)},
                      {"kind", kind_name(k.kind)},
                      {"nccl", k.nccl},
                      {"count", k.count},
                      {"total_ms", ms(k.total_ns)},
                      {"ranks", k.ranks}});
    top[section] = std::move(list);
  }
  return top;
}

}  // namespace

void write_gpu_json(JsonWriter& w, const GpuScoreReport& gpu) {
  w.begin_object();
  w.field("any", gpu.any);
  w.key("ranks").parallel_array(gpu.ranks.size(), [&](size_t i, JsonWriter& e) { write_gpu_rank(e, gpu.ranks[i]); });
  w.field("top_kernels", top_kernels_json(gpu));  // a few kernels per section: small
  w.key("windows").begin_array();
  for (size_t k = 0; k < gpu.windows.size(); ++k) {
    const std::vector<GpuWindowRank>& ranks = gpu.windows[k];
    w.begin_object();
    w.field("index", k);
    w.key("ranks").parallel_array(ranks.size(), [&](size_t i, JsonWriter& e) { write_gpu_window_rank(e, ranks[i]); });
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

json render_gpu_json(const RunModel&, const GpuScoreReport& gpu) {
  return parsed([&](JsonWriter& w) { write_gpu_json(w, gpu); });
}

}  // namespace laggard::report
