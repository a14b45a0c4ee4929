#include "render_prometheus.h"

#include <cmath>
#include <functional>

#include <fmt/format.h>

namespace laggard::report {
namespace {

struct MetricDef {
  const char* name;
  const char* help;
};

// One table of every metric: the renderer, prometheus_metric_names() and the docs agree.
constexpr MetricDef kRunInfo{"laggard_run_info", "Run being watched (value 1); labels run_id and dir."};
constexpr MetricDef kRanks{"laggard_ranks", "Ranks read from the run directory."};
constexpr MetricDef kWorldSize{"laggard_world_size", "World size recorded in the rank files (-1: unknown)."};
constexpr MetricDef kProblems{"laggard_problems", "Problems met reading the run (missing ranks, unreadable files, ...)."};
constexpr MetricDef kReadSeconds{"laggard_read_duration_seconds", "Time the last re-read and scoring of the run took."};
constexpr MetricDef kReadTime{"laggard_last_read_timestamp_seconds", "When the run was last re-read (Unix time)."};
constexpr MetricDef kStragglers{"laggard_stragglers", "Straggler findings (all scopes), as laggard report lists them."};
constexpr MetricDef kFinal{"laggard_rank_final", "1 when the rank's process exited cleanly and wrote its last window."};
constexpr MetricDef kDataEnd{"laggard_rank_data_end_timestamp_seconds", "End of the rank's newest window (Unix time)."};
constexpr MetricDef kWindows{"laggard_rank_windows", "Capture windows read for the rank."};
constexpr MetricDef kStraggler{"laggard_straggler", "1 when some straggler finding names the rank, else 0."};
constexpr MetricDef kRelative{"laggard_section_relative_score",
                              "NVRx relative score of an NVTX section over the run (1 best, 0 worst)."};
constexpr MetricDef kIndividual{"laggard_section_individual_score",
                                "NVRx individual score of an NVTX section: its worst report window against its own best."};
constexpr MetricDef kWindowRelative{"laggard_section_window_relative_score",
                                    "NVRx relative score of an NVTX section in the newest report window the rank ran it."};
constexpr MetricDef kMedian{"laggard_section_median_seconds", "Median duration of an NVTX section over the run."};
constexpr MetricDef kGpuRelative{"laggard_gpu_relative_score", "NVRx relative GPU score over all compute kernels."};
constexpr MetricDef kGpuIndividual{"laggard_gpu_individual_score", "NVRx individual GPU score over all compute kernels."};
constexpr MetricDef kGpuSectionRelative{"laggard_gpu_section_relative_score",
                                        "NVRx relative GPU score of the kernels launched inside an NVTX section."};
constexpr MetricDef kSteps{"laggard_steps", "Training steps found for the rank."};
constexpr MetricDef kStepMedian{"laggard_step_median_seconds", "Median step time of the rank."};
constexpr MetricDef kStepLast{"laggard_step_last_seconds", "Time of the rank's newest step."};
constexpr MetricDef kBlame{"laggard_nccl_blame_seconds",
                           "Time the rank made the others wait in NCCL collectives (it arrived last)."};
constexpr MetricDef kWaited{"laggard_nccl_wait_seconds", "Time the rank waited for others in NCCL collectives."};
constexpr MetricDef kLast{"laggard_nccl_last_arrivals", "Matched NCCL collectives in which the rank arrived last."};
constexpr MetricDef kCollectives{"laggard_nccl_collectives", "Matched NCCL collectives the rank took part in."};
constexpr MetricDef kMinRelative{"laggard_rank_min_section_relative_score",
                                 "Lowest NVRx relative score of the rank's NVTX sections over the run."};
constexpr MetricDef kMinIndividual{"laggard_rank_min_section_individual_score",
                                   "Lowest NVRx individual score of the rank's NVTX sections."};
constexpr MetricDef kMinWindowRelative{"laggard_rank_min_section_window_relative_score",
                                       "Lowest NVRx relative score of the rank's NVTX sections in their newest report window."};
constexpr MetricDef kLeftOut{"laggard_section_series_left_out",
                             "Per-section samples of non-straggler ranks left out to keep the series count bounded "
                             "(laggard watch --max-section-series)."};

constexpr const MetricDef* kAll[] = {&kRunInfo, &kRanks, &kWorldSize, &kProblems, &kReadSeconds, &kReadTime,
                                     &kStragglers, &kFinal, &kDataEnd, &kWindows, &kStraggler, &kRelative,
                                     &kIndividual, &kWindowRelative, &kMedian, &kGpuRelative, &kGpuIndividual,
                                     &kGpuSectionRelative, &kSteps, &kStepMedian, &kStepLast, &kBlame, &kWaited,
                                     &kLast, &kCollectives, &kMinRelative, &kMinIndividual, &kMinWindowRelative,
                                     &kLeftOut};

// Length of the valid UTF-8 sequence at s[i], 0 when there is none (RFC 3629: no overlongs, no
// surrogates, nothing past U+10FFFF).
size_t utf8_sequence(std::string_view s, size_t i) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  auto cont = [&](size_t k, unsigned lo = 0x80, unsigned hi = 0xBF) { return k < s.size() && b(k) >= lo && b(k) <= hi; };
  unsigned c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0) && cont(i + 2) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;
  if (c >= 0xE1 && c <= 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xF0) return cont(i + 1, 0x90) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

// Sample values as Go's strconv.ParseFloat reads them; never NaN or Inf from us.
std::string value_text(double v) {
  if (!std::isfinite(v)) return "NaN";
  return fmt::format("{}", v);
}

class Exposition {
 public:
  // Starts a metric family: HELP and TYPE once, before its samples.
  void family(const MetricDef& m) {
    fmt::format_to(std::back_inserter(out_), "# HELP {} {}\n# TYPE {} gauge\n", m.name, m.help, m.name);
    current_ = m.name;
  }
  void sample(const std::vector<std::pair<const char*, std::string_view>>& labels, double value) {
    out_ += current_;
    if (!labels.empty()) {
      out_ += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i) out_ += ',';
        fmt::format_to(std::back_inserter(out_), "{}=\"{}\"", labels[i].first, prometheus_label_value(labels[i].second));
      }
      out_ += '}';
    }
    out_ += ' ';
    out_ += value_text(value);
    out_ += '\n';
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  const char* current_ = "";
};

// One family over all ranks: value(rank) gives nothing (no sample) or the value.
template <class F>
void per_rank(Exposition& e, const MetricDef& m, const WatchState& st, F value) {
  e.family(m);
  for (const WatchRank& r : st.ranks) {
    std::optional<double> v = value(r);
    if (!v) continue;
    std::string rank = std::to_string(r.rank);
    e.sample({{"rank", rank}, {"host", r.host}}, *v);
  }
}

// One family over (rank, section) pairs of a per-section map: every rank's while the pairs fit
// the budget, else only the stragglers' (Prometheus keeps a series per label set: 10,000 ranks x
// 50 sections would be 500,000 per family). Returns the samples left out.
template <class Map, class F>
size_t per_section(Exposition& e, const MetricDef& m, const WatchState& st, Map WatchRank::*sections, F value,
                   size_t budget) {
  size_t pairs = 0;
  for (const WatchRank& r : st.ranks) pairs += (r.*sections).size();
  const bool all = pairs <= budget;
  size_t left_out = 0;
  e.family(m);
  for (const WatchRank& r : st.ranks) {
    std::string rank = std::to_string(r.rank);
    for (const auto& [name, s] : r.*sections) {
      std::optional<double> v = value(s);
      if (!v) continue;
      if (all || r.straggler) e.sample({{"rank", rank}, {"host", r.host}, {"section", name}}, *v);
      else ++left_out;
    }
  }
  return left_out;
}

// The lowest of a per-section score of the rank; none when no section has one.
template <class F>
std::optional<double> lowest(const WatchRank& r, F score) {
  std::optional<double> low;
  for (const auto& [name, s] : r.sections)
    if (std::optional<double> v = score(s); v && (!low || *v < *low)) low = v;
  return low;
}

}  // namespace

const std::vector<std::string>& prometheus_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const MetricDef* m : kAll) v.push_back(m->name);
    return v;
  }();
  return names;
}

std::string prometheus_label_value(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD REPLACEMENT CHARACTER
      ++i;
      continue;
    }
    char c = s[i];
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string render_prometheus(const WatchState& st, double read_duration_s, int64_t read_at_ns,
                              size_t max_section_series) {
  using Opt = std::optional<double>;
  auto seconds = [](double ns) { return ns / 1e9; };
  Exposition e;
  e.family(kRunInfo);
  if (!st.run_id.empty()) e.sample({{"run_id", st.run_id}, {"dir", st.dir}}, 1);
  e.family(kRanks);
  e.sample({}, double(st.ranks.size()));
  e.family(kWorldSize);
  e.sample({}, st.world_size);
  e.family(kProblems);
  e.sample({}, double(st.problems));
  e.family(kStragglers);
  e.sample({}, double(st.stragglers.size()));
  e.family(kReadSeconds);
  e.sample({}, read_duration_s);
  e.family(kReadTime);
  e.sample({}, read_at_ns / 1e9);

  per_rank(e, kStraggler, st, [](const WatchRank& r) -> Opt { return r.straggler ? 1 : 0; });
  per_rank(e, kFinal, st, [](const WatchRank& r) -> Opt { return r.final ? 1 : 0; });
  per_rank(e, kWindows, st, [](const WatchRank& r) -> Opt { return double(r.windows); });
  per_rank(e, kDataEnd, st, [](const WatchRank& r) -> Opt { return r.data_end_ns ? Opt(r.data_end_ns / 1e9) : Opt(); });
  auto relative = [](const WatchSection& s) { return s.relative; };
  auto individual = [](const WatchSection& s) { return s.individual; };
  auto window_relative = [](const WatchSection& s) { return s.window_relative; };
  per_rank(e, kMinRelative, st, [&](const WatchRank& r) { return lowest(r, relative); });
  per_rank(e, kMinIndividual, st, [&](const WatchRank& r) { return lowest(r, individual); });
  per_rank(e, kMinWindowRelative, st, [&](const WatchRank& r) { return lowest(r, window_relative); });
  const size_t budget = max_section_series;
  size_t left_out = per_section(e, kRelative, st, &WatchRank::sections, relative, budget);
  left_out += per_section(e, kIndividual, st, &WatchRank::sections, individual, budget);
  left_out += per_section(e, kWindowRelative, st, &WatchRank::sections, window_relative, budget);
  left_out += per_section(e, kMedian, st, &WatchRank::sections,
                          [&](const WatchSection& s) -> Opt { return seconds(s.median_ns); }, budget);
  per_rank(e, kGpuRelative, st, [](const WatchRank& r) { return r.gpu.relative; });
  per_rank(e, kGpuIndividual, st, [](const WatchRank& r) { return r.gpu.individual; });
  left_out += per_section(e, kGpuSectionRelative, st, &WatchRank::gpu_sections,
                          [](const WatchGpu& g) { return g.relative; }, budget);
  e.family(kLeftOut);
  e.sample({}, double(left_out));
  per_rank(e, kSteps, st, [](const WatchRank& r) -> Opt { return double(r.steps); });
  per_rank(e, kStepMedian, st, [&](const WatchRank& r) { return r.step_median_ns ? Opt(seconds(*r.step_median_ns)) : Opt(); });
  per_rank(e, kStepLast, st, [&](const WatchRank& r) { return r.step_last_ns ? Opt(seconds(*r.step_last_ns)) : Opt(); });
  per_rank(e, kBlame, st, [&](const WatchRank& r) { return r.nccl_data ? Opt(seconds(r.nccl_blame_ns)) : Opt(); });
  per_rank(e, kWaited, st, [&](const WatchRank& r) { return r.nccl_data ? Opt(seconds(r.nccl_waited_ns)) : Opt(); });
  per_rank(e, kLast, st, [](const WatchRank& r) { return r.nccl_data ? Opt(double(r.nccl_last)) : Opt(); });
  per_rank(e, kCollectives, st, [](const WatchRank& r) { return r.nccl_data ? Opt(double(r.nccl_collectives)) : Opt(); });
  return e.take();
}

}  // namespace laggard::report
