// The run model cut into NVRx's reports (nvrx_compat.h): where NVRx would have called
// generate_report, what each rank's Detector held by then, and the ReportGenerator over them.
#include "nvrx_compat.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

namespace laggard::report {
namespace {

constexpr int64_t kNever = std::numeric_limits<int64_t>::min();
constexpr size_t kMaxSamples = 8 * 1024;  // straggler.py: deque(maxlen=8 * 1024); CuptiManager(statsMaxLenPerKernel=8 * 1024)

// Where one report's samples end on one rank: (previous bound, bound].
struct Bound {
  int64_t after = kNever, upto = kNever;
};

// Each report's bound per rank, and what it covers.
struct Schedule {
  std::string how;
  int iter_interval = 0;
  std::vector<std::vector<Bound>> bounds;  // [report][rank index]
  std::vector<NvrxInterval> reports;       // indices, steps and times filled; scores not yet
  int unreported_steps = 0;
};

int64_t data_end(const RankData& rd) {
  int64_t end = 0;
  for (const CaptureWindow& w : rd.windows) end = std::max(end, w.end_ns);
  return end;
}

// After iteration i (0-based), a rank's call to generate_report comes before its next iteration
// starts (its data's end after the last one).
int64_t after_step(const StepSet& steps, const RunModel& m, size_t r, int i) {
  const auto& s = steps.per_rank[r];
  return i + 1 < static_cast<int>(s.size()) ? s[i + 1].start_ns : data_end(m.ranks[r]);
}

// The iterations after which NVRx reports: every N-th call of generate_report_if_interval_elapsed
// once the interval is known (interval_tracker.py iter_increase, is_interval_elapsed: call c, 1-based,
// reports when c % N == 0, and the interval is set at call 16 + 1), or the usage guide's
// `training_iter % every == 0`.
std::vector<int> report_steps(const RunModel& m, const StepSet& steps, const NvrxOptions& o, Schedule& s) {
  const int n = steps.count();
  std::vector<int> after;
  if (o.every > 0) {
    s.how = fmt::format("generate_report() after every {} iterations (iterations 0, {}, {}, ...)", o.every, o.every,
                        2 * o.every);
    for (int i = 0; i < n; i += o.every) after.push_back(i);
    return after;
  }
  std::vector<std::vector<double>> times;  // seconds between consecutive calls: step start to step start
  for (size_t r = 0; r < m.ranks.size() && r < steps.per_rank.size(); ++r) {
    std::vector<double> t;
    for (int k = 0; k + 1 < n && k < 16; ++k)
      t.push_back(double(steps.per_rank[r][k + 1].start_ns - steps.per_rank[r][k].start_ns) * 1e-9);
    times.push_back(std::move(t));
  }
  s.iter_interval = nvrx_iter_interval(times, o.interval_s);
  s.how = s.iter_interval > 0
              ? fmt::format("generate_report_if_interval_elapsed() with report_time_interval={:g} s: every {} "
                            "iterations, estimated from the first 16 step times",
                            o.interval_s, s.iter_interval)
              : fmt::format("generate_report_if_interval_elapsed() with report_time_interval={:g} s: the run has "
                            "fewer than the 17 iterations NVRx times before its first report",
                            o.interval_s);
  if (s.iter_interval <= 0) return after;
  for (int call = 17; call <= n; ++call)
    if (call % s.iter_interval == 0) after.push_back(call - 1);
  return after;
}

Schedule schedule_by_steps(const RunModel& m, const StepSet& steps, const NvrxOptions& o) {
  Schedule s;
  const std::vector<int> after = report_steps(m, steps, o, s);
  int first = 0;
  for (int i : after) {
    NvrxInterval rep;
    rep.index = static_cast<int>(s.reports.size());
    rep.first_step = steps.per_rank[0][first].index;
    rep.last_step = steps.per_rank[0][i].index;
    rep.start_ns = steps.per_rank[0][first].start_ns;
    rep.end_ns = steps.per_rank[0][i].end_ns;
    std::vector<Bound> b(m.ranks.size());
    for (size_t r = 0; r < m.ranks.size(); ++r) {
      b[r].after = s.bounds.empty() ? kNever : s.bounds.back()[r].upto;
      b[r].upto = after_step(steps, m, r, i);
    }
    s.bounds.push_back(std::move(b));
    s.reports.push_back(std::move(rep));
    first = i + 1;
  }
  s.unreported_steps = steps.count() - first;
  return s;
}

// No steps: report windows of window_s from the run's first window, the same for every rank.
Schedule schedule_by_windows(const RunModel& m, double window_s) {
  Schedule s;
  int64_t start = std::numeric_limits<int64_t>::max(), end = 0;
  for (const RankData& rd : m.ranks)
    for (const CaptureWindow& w : rd.windows) start = std::min(start, w.start_ns), end = std::max(end, w.end_ns);
  if (end <= start || window_s <= 0) return s;
  const int64_t len = std::max<int64_t>(1, static_cast<int64_t>(window_s * 1e9));
  s.how = fmt::format("no steps: one report per report window of {:g} s", window_s);
  for (int64_t t = start; t < end && s.reports.size() < 100000; t += len) {
    NvrxInterval rep;
    rep.index = static_cast<int>(s.reports.size());
    rep.start_ns = t;
    rep.end_ns = std::min(end, t + len);
    s.bounds.push_back(std::vector<Bound>(m.ranks.size(), Bound{t == start ? kNever : t, rep.end_ns}));
    s.reports.push_back(std::move(rep));
  }
  return s;
}

bool inside(const Bound& b, int64_t t) { return t > b.after && t <= b.upto; }

// The last kMaxSamples (by time) of each name.
template <class T>
void keep_last(std::vector<std::pair<int64_t, T>>& v) {
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  if (v.size() > kMaxSamples) v.erase(v.begin(), v.end() - static_cast<long>(kMaxSamples));
}

// What one rank's Detector holds at one report: its sections' elapsed times (ended in the report)
// and its kernels' durations (launched in it from inside an NVTX section: NVRx profiles only inside
// detection sections). `why` says what keeps it from being exact.
NvrxRankInput rank_input(const RunModel& m, const RankData& rd, const Bound& b, std::string& why) {
  NvrxRankInput in;
  in.rank = rd.rank;
  in.node = rd.host;
  std::map<std::string, std::vector<std::pair<int64_t, double>>> sections;
  std::map<std::string, std::vector<std::pair<int64_t, float>>> kernels;
  for (const CaptureWindow& w : rd.windows) {
    if (w.end_ns <= b.after || w.start_ns > b.upto) continue;
    for (const SectionWindow& sw : w.sections) {
      if (sw.median_from_sample) why = "some sections kept a sample of their occurrences (median_from_sample)";
      for (const Occurrence& o : sw.occurrences)
        if (inside(b, o.start_ns + o.dur_ns)) sections[sw.name].push_back({o.start_ns + o.dur_ns, double(o.dur_ns) * 1e-6});
    }
    if (!w.gpu_sampled && !w.kernel_stats.empty()) {
      // No per-kernel records: the window's statistics stand in (its median for each execution).
      why = "some windows had no per-kernel records (LAGGARD_PROFILING_INTERVAL): their kernel statistics stand in";
      const int64_t mid = w.start_ns + (w.end_ns - w.start_ns) / 2;
      if (!inside(b, mid)) continue;
      for (const KernelWindowStats& k : w.kernel_stats) {
        if (k.kind != GpuKind::kernel || k.section == StringTable::kNone) continue;
        const std::string key = nvrx_kernel_key(m.strings.at(k.name), k.block, k.grid);
        for (uint64_t i = 0; i < k.count && i < kMaxSamples; ++i) kernels[key].push_back({mid, nvrx_kernel_us(k.median_ns)});
      }
      continue;
    }
    if (w.dropped.count("gpu_records_not_stored") && w.dropped.at("gpu_records_not_stored") > 0)
      why = "some windows stored only part of their kernel records (gpu_records_not_stored)";
    for (const GpuActivity& a : w.gpu) {
      if (a.kind != GpuKind::kernel || a.section == StringTable::kNone) continue;
      const int64_t launched = a.api_start_ns > 0 ? a.api_start_ns : a.start_ns;
      if (!inside(b, launched)) continue;
      kernels[nvrx_kernel_key(m.strings.at(a.name), a.block, a.grid)].push_back({a.end_ns, nvrx_kernel_us(a.end_ns - a.start_ns)});
    }
  }
  for (auto& [name, v] : sections) {
    keep_last(v);
    std::vector<double> xs;
    for (auto& [t, x] : v) xs.push_back(x);
    in.sections[name] = nvrx_section_stat(std::move(xs));
  }
  for (auto& [key, v] : kernels) {
    keep_last(v);
    std::vector<float> xs;
    for (auto& [t, x] : v) xs.push_back(x);
    in.kernels[key] = nvrx_kernel_stat(std::move(xs));
  }
  return in;
}

}  // namespace

NvrxRunReport analyze_nvrx(const RunModel& model, const StepSet& steps, double window_s, const NvrxOptions& o) {
  NvrxRunReport out;
  if (model.ranks.empty()) {
    out.why_not = "no ranks";
    return out;
  }
  const bool by_steps = steps.count() > 0 && steps.per_rank.size() == model.ranks.size();
  Schedule s = by_steps ? schedule_by_steps(model, steps, o) : schedule_by_windows(model, window_s);
  out.schedule = s.how;
  out.iter_interval = s.iter_interval;
  out.unreported_steps = s.unreported_steps;
  if (s.reports.empty()) {
    out.why_not = s.how.empty() ? "no data" : "no report: " + s.how;
    return out;
  }
  NvrxReportGenerator gen;
  for (size_t i = 0; i < s.reports.size(); ++i) {
    NvrxInterval& rep = s.reports[i];
    std::vector<NvrxRankInput> inputs;
    std::string why;
    for (size_t r = 0; r < model.ranks.size(); ++r) inputs.push_back(rank_input(model, model.ranks[r], s.bounds[i][r], why));
    rep.exact = why.empty();
    if (!why.empty()) out.inexact = why;
    rep.report = gen.generate(inputs);
    rep.stragglers = nvrx_identify_stragglers(rep.report, o.thresholds);
  }
  out.reports = std::move(s.reports);
  out.available = true;
  return out;
}

}  // namespace laggard::report
