// Issue 30: tell CPU contention from a slow rank. A rank whose threads were runnable but not
// running (another process on its cores, more busy threads than cores, a noisy neighbour) loses
// time for a reason of its machine. Capture records how long the rank's threads waited on a run
// queue (docs/schema.md, "Issue 30: CPU wait"): its NVTX threads about every 50 ms, all threads per
// window. Each step of each rank gets the wait that fell in it; a finding whose rank waited, over
// its steps, at least `cause_share` of what it lost more than the median rank gets the cause
// `cpu_contention`.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "stats.h"
#include "units.h"
#include "verdict_context.h"

namespace laggard::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One stretch of measured wait: [start, end) and what was waited in it.
struct WaitSpan {
  int64_t start = 0, end = 0;
  double wait_ns = 0;
};

// The rank's measured wait in time order: the NVTX threads' ticks where the window has them (the
// threads whose sections are timed), else the window's total over all threads.
std::vector<WaitSpan> wait_spans(const RankData& rd) {
  std::vector<WaitSpan> out;
  for (const CaptureWindow& w : rd.windows) {
    if (!w.cpu_wait) continue;
    if (w.cpu_wait->nvtx_ticks.empty()) {
      out.push_back({w.start_ns, w.end_ns, double(w.cpu_wait->wait_ns)});
      continue;
    }
    int64_t prev = w.start_ns;
    for (const auto& [end, wait] : w.cpu_wait->nvtx_ticks) {
      out.push_back({prev, std::max(prev, end), double(wait)});
      prev = std::max(prev, end);
    }
  }
  std::sort(out.begin(), out.end(), [](const WaitSpan& a, const WaitSpan& b) { return a.start < b.start; });
  return out;
}

// Per step row: the wait that fell in the step (spans shared by overlap); NaN where the
// measurements cover less than half of the step.
std::vector<double> wait_per_step(const std::vector<WaitSpan>& spans, const std::vector<Step>& steps, int rows) {
  std::vector<double> out(rows, kNaN);
  size_t first = 0;
  for (int k = 0; k < rows && k < static_cast<int>(steps.size()); ++k) {
    const int64_t s = steps[k].start_ns, e = steps[k].end_ns;
    if (e <= s) continue;
    while (first < spans.size() && spans[first].end <= s) ++first;
    double wait = 0, covered = 0;
    for (size_t i = first; i < spans.size() && spans[i].start < e; ++i) {
      const double o = double(std::min(e, spans[i].end) - std::max(s, spans[i].start));
      if (o <= 0) continue;
      covered += o;
      if (spans[i].end > spans[i].start) wait += spans[i].wait_ns * o / double(spans[i].end - spans[i].start);
    }
    if (covered >= 0.5 * double(e - s)) out[k] = wait;
  }
  return out;
}

// The step rows a finding covers: all for a whole-run finding, else those numbered first..last.
bool rows_of(const VerdictContext& c, const Finding& f, int* first, int* last) {
  const int n = c.steps.count();
  if (n <= 0 || c.steps.per_rank.empty()) return false;
  if (f.first_step < 0) {
    if (f.kind != "persistent") return false;
    *first = 0, *last = n - 1;
    return true;
  }
  *first = *last = -1;
  for (int k = 0; k < n; ++k) {
    const int idx = c.steps.per_rank[0][k].index;
    if (idx == f.first_step) *first = k;
    if (idx == f.last_step) *last = k;
  }
  return *first >= 0 && *last >= *first;
}

// What the finding cost in all, ns.
double loss_of(const Finding& f) {
  if (auto it = f.evidence.find("lost_ms_total"); it != f.evidence.end()) return it->second * 1e6;
  const int steps = f.steps_affected > 0 ? f.steps_affected : f.first_step >= 0 ? f.last_step - f.first_step + 1 : 1;
  return f.impact_ns * steps;
}

// The median of a row's measured values; NaN with fewer than three (a median rank needs three).
double row_median(const std::vector<double>& row) {
  std::vector<double> xs;
  for (double v : row)
    if (!std::isnan(v)) xs.push_back(v);
  return xs.size() < 3 ? kNaN : median(xs);
}

// Each (step, rank) cell's excess over the step's median rank (NaN where either is unknown),
// less the rank's own usual excess (its median over the steps).
std::vector<std::vector<double>> within_rank_excess(const std::vector<std::vector<double>>& rows, size_t nsteps) {
  std::vector<std::vector<double>> e(nsteps);
  size_t nranks = 0;
  for (size_t k = 0; k < nsteps && k < rows.size(); ++k) {
    const double m = row_median(rows[k]);
    e[k].assign(rows[k].size(), kNaN);
    nranks = std::max(nranks, rows[k].size());
    if (std::isnan(m)) continue;
    for (size_t r = 0; r < rows[k].size(); ++r)
      if (!std::isnan(rows[k][r])) e[k][r] = rows[k][r] - m;
  }
  std::vector<double> xs;  // one rank's cells at a time, reused: no allocation per rank
  for (size_t r = 0; r < nranks; ++r) {
    xs.clear();
    for (const auto& row : e)
      if (r < row.size() && !std::isnan(row[r])) xs.push_back(row[r]);
    if (xs.empty()) continue;
    const double usual = median_in_place(xs);
    for (auto& row : e)
      if (r < row.size()) row[r] -= usual;
  }
  return e;
}

// How much of a rank's extra wait (over the median rank's, per step) shows in a section's extra
// time: the least-squares slope through the origin of the one on the other, over every rank and
// step, between 0 (the section does not follow the wait) and 1 (it holds all of it). A section
// whose one sleep or kernel launch a step sits behind a busy CPU follows a share of the step's wait.
// Both are taken as changes against the rank's own usual excess: a rank that is slower in the
// section all along and waited in a few steps (elsewhere) made the section "follow" the wait, and
// the rank's slowdown was taken out with it in those steps (slope 0.97: a whole-run slowdown came
// out as a transient of steps 0-33, Issue30.ALateWaitOutsideASection...). w: the wait's
// within_rank_excess over the same steps as the section's rows, the same for every section.
double slope(const Signal& s, const std::vector<std::vector<double>>& w) {
  const size_t nsteps = std::min(s.ns.size(), w.size());
  const std::vector<std::vector<double>> x = within_rank_excess(s.ns, nsteps);
  double xy = 0, xx = 0;
  for (size_t k = 0; k < nsteps; ++k)
    for (size_t r = 0; r < x[k].size() && r < w[k].size(); ++r) {
      if (std::isnan(x[k][r]) || std::isnan(w[k][r])) continue;
      xy += x[k][r] * w[k][r];
      xx += w[k][r] * w[k][r];
    }
  return xx > 0 ? std::clamp(xy / xx, 0.0, 1.0) : 0;
}

void judge(const VerdictContext& c, Finding& f) {
  const size_t r = c.rank_index(f.rank);
  int first = 0, last = 0;
  if (r >= c.model.ranks.size() || !rows_of(c, f, &first, &last)) return;
  double own = 0, typical = 0;
  int measured = 0;
  for (int k = first; k <= last && k < static_cast<int>(c.signals.cpu_wait.size()); ++k) {
    const double m = row_median(c.signals.cpu_wait[k]);
    if (std::isnan(c.signals.cpu_wait[k][r]) || std::isnan(m)) continue;
    own += c.signals.cpu_wait[k][r];
    typical += m;
    ++measured;
  }
  if (2 * measured < last - first + 1) return;  // not measured over most of its steps
  const double extra = own - typical, loss = loss_of(f);
  f.evidence["cpu_wait_ms"] = ms(own);
  f.evidence["cpu_wait_median_rank_ms"] = ms(typical);
  f.evidence["cpu_wait_extra_ms"] = ms(extra);
  // Section findings were found with the wait they follow taken out (verdict_sections.cpp).
  if (f.evidence.count("cpu_wait_slope") || f.cause == Cause::cpu_contention || loss <= 0 || extra <= 0) return;
  const double share = std::min(1.0, extra / loss);
  if (share < c.options.cause_share) return;
  f.cause = Cause::cpu_contention;
  f.cause_share = share;
  f.summary += fmt::format("; CPU contention: its threads waited {:.1f} ms more for a CPU than the median rank's "
                           "in those steps ({:.1f} ms against {:.1f} ms), {:.0f} % of the {:.1f} ms it lost: its "
                           "host was busy with other work",
                           ms(extra), ms(own), ms(typical), 100 * share, ms(loss));
}

}  // namespace

void take_out_cpu_wait(const RunModel& model, const StepSet& steps, StepSignals& signals) {
  const int rows = steps.count();
  if (rows <= 0) return;
  bool measured = false;
  std::vector<std::vector<double>> wait(rows, std::vector<double>(model.ranks.size(), kNaN));
  for (size_t r = 0; r < model.ranks.size() && r < steps.per_rank.size(); ++r) {
    const std::vector<WaitSpan> spans = wait_spans(model.ranks[r]);
    if (spans.empty()) continue;
    measured = true;
    const std::vector<double> w = wait_per_step(spans, steps.per_rank[r], rows);
    for (int k = 0; k < rows; ++k) wait[k][r] = w[k];
  }
  if (!measured) return;
  signals.cpu_wait = std::move(wait);
  signals.sections_less_wait = signals.sections;
  // What every section is compared with, once: the sections' rows are the same steps (section_signals).
  const std::vector<std::vector<double>> wait_excess = within_rank_excess(signals.cpu_wait, signals.cpu_wait.size());
  std::vector<double> wait_median(signals.cpu_wait.size());
  for (size_t k = 0; k < wait_median.size(); ++k) wait_median[k] = row_median(signals.cpu_wait[k]);
  for (Signal& s : signals.sections_less_wait) {
    const double b = slope(s, wait_excess);
    signals.wait_slope[s.name] = b;
    for (size_t k = 0; k < s.ns.size() && k < signals.cpu_wait.size(); ++k) {
      const double mw = wait_median[k];
      for (size_t r = 0; r < s.ns[k].size(); ++r)
        if (!std::isnan(mw) && !std::isnan(signals.cpu_wait[k][r])) s.ns[k][r] -= b * (signals.cpu_wait[k][r] - mw);
    }
  }
}

double extra_cpu_wait(const VerdictContext& c, size_t r, int first, int last) {
  double extra = 0;
  for (int k = std::max(0, first); k <= last && k < static_cast<int>(c.signals.cpu_wait.size()); ++k) {
    const double m = row_median(c.signals.cpu_wait[k]);
    if (r < c.signals.cpu_wait[k].size() && !std::isnan(c.signals.cpu_wait[k][r]) && !std::isnan(m)) extra += c.signals.cpu_wait[k][r] - m;
  }
  return extra;
}

void name_cpu_contention(const VerdictContext& c, FindingSet& out) {
  if (c.signals.cpu_wait.empty()) return;
  for (Finding& f : out.findings) judge(c, f);
}

}  // namespace laggard::report
