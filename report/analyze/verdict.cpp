#include "verdict.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "score_text.h"  // scores near a threshold show the digits that decide (issue 10)
#include "section_steps.h"
#include "stats.h"
#include "units.h"
#include "verdict_context.h"

namespace laggard::report {
namespace {

constexpr double kHuge = 1e9;

struct Decomposition {
  double excess = 0, compute = 0, memory = 0, gaps = 0, pre_collective = 0;
  double launched_late_share = 0;
  std::map<std::string, double> compute_by_section, gaps_by_section;
  Cause cause = Cause::unknown;
  double share = 0;
  std::string section;
};

// Medians over the given steps of rank r's cells, then the cause that explains most.
Decomposition decompose(const JitterReport& j, size_t r, const std::vector<int>& step_rows, bool use_arrival,
                        double cause_share) {
  Decomposition d;
  std::vector<double> ex, co, me, ga, pre;
  int late = 0, with_coll = 0;
  std::map<std::string, std::vector<double>> cs, gs;
  for (int k : step_rows) {
    const RankStepJitter& c = j.matrix[k][r];
    if (!c.present) continue;
    ex.push_back(use_arrival && c.arrival_ns >= 0 ? c.arrival_excess_ns : c.end_divergence_ns);
    co.push_back(c.duration_excess_ns - c.memory_excess_ns);
    me.push_back(c.memory_excess_ns);
    ga.push_back(c.gap_excess_ns);
    if (c.arrival_ns >= 0) {
      pre.push_back(c.precollective_idle_excess_ns);
      ++with_coll;
      late += c.collective_launched_late;
    }
    for (auto& [s, v] : c.duration_excess_by_section) cs[s].push_back(v);
    for (auto& [s, v] : c.gap_excess_by_section) gs[s].push_back(v);
  }
  d.excess = median(ex);
  d.compute = median(co);
  d.memory = median(me);
  d.gaps = median(ga);
  d.pre_collective = median(pre);
  d.launched_late_share = with_coll ? double(late) / with_coll : 0;
  for (auto& [s, v] : cs) d.compute_by_section[s] = median(v);
  for (auto& [s, v] : gs) d.gaps_by_section[s] = median(v);

  // A collective launched after the stream went idle was late because of the host; one that
  // was queued in time but still started late waited on communication or a dependency.
  bool host_late = d.launched_late_share >= 0.5;
  double host = d.gaps + (host_late ? std::max(0.0, d.pre_collective) : 0);
  double comm = host_late ? 0 : std::max(0.0, d.pre_collective);
  std::pair<double, Cause> options[] = {{d.compute, Cause::gpu_compute},
                                        {host, Cause::host},
                                        {comm, Cause::communication},
                                        {d.memory, Cause::memory}};
  auto best = *std::max_element(std::begin(options), std::end(options),
                                [](auto& a, auto& b) { return a.first < b.first; });
  d.share = d.excess > 0 ? std::clamp(best.first / d.excess, 0.0, 1.0) : 0;
  d.cause = d.share >= cause_share ? best.second : Cause::unknown;
  // The section named is the one holding most of the cause's time, if it holds a real part of it.
  auto argmax = [](const std::map<std::string, double>& m, double total) {
    std::string name;
    double v = 0;
    for (auto& [k, x] : m)
      if (x > v) { v = x; name = k; }
    return v >= 0.25 * total ? name : std::string();
  };
  if (d.cause == Cause::gpu_compute) d.section = argmax(d.compute_by_section, d.compute);
  if (d.cause == Cause::host && d.gaps >= d.pre_collective) d.section = argmax(d.gaps_by_section, d.gaps);
  return d;
}

std::string top_kernel_of(const JitterReport& j, int rank, const std::string& section) {
  const KernelSlotStats* best = nullptr;
  for (const KernelSlotStats& k : j.kernels)
    if (k.max_rank == rank && !k.nccl && (section.empty() || k.section == section) &&
        (!best || k.max_duration_ns - k.median_duration_ns > best->max_duration_ns - best->median_duration_ns))
      best = &k;
  return best ? best->name : "";
}

std::string explain(const Decomposition& d, const RankJitter& rj, const JitterReport& j, const BreakdownReport& b,
                    size_t r) {
  const std::string where = d.section.empty() ? "" : ", most in " + d.section;
  switch (d.cause) {
    case Cause::gpu_compute: {
      std::string k = top_kernel_of(j, rj.rank, d.section);
      return fmt::format("{:.0f} % of it is GPU compute: its kernels take {:.3f} ms longer per step than the median "
                         "rank's{}{}; median launch delay {:.3f} ms",
                         100 * d.share, ms(d.compute), where, k.empty() ? "" : " (" + k + ")",
                         ms(rj.median_launch_delay_ns));
    }
    case Cause::host: {
      if (d.pre_collective > d.gaps)
        return fmt::format("{:.0f} % of it is its host launching the step's collective {:.3f} ms late while the GPU "
                           "sat idle: host/CPU",
                           100 * d.share, ms(d.pre_collective));
      double hw = 0;
      if (b.available && r < b.ranks.size() && b.ranks[r].temporal.span_ns > 0)
        hw = b.ranks[r].idle.host_wait_ns / b.ranks[r].temporal.span_ns;
      return fmt::format("{:.0f} % of it is the GPU idling between kernels ({:.3f} ms more per step{}); {:.0f} % of "
                         "its kernels started < 10 us after their launch and host wait is {:.0f} % of its GPU time: "
                         "host-bound",
                         100 * d.share, ms(d.gaps), where, 100 * rj.near_zero_launch_delay_share, 100 * hw);
    }
    case Cause::communication:
      return fmt::format("{:.0f} % of it is waiting before its collective although the host launched it in time "
                         "({:.3f} ms): communication, or a dependency on another stream",
                         100 * d.share, ms(d.pre_collective));
    case Cause::memory:
      return fmt::format("{:.0f} % of it is memory copies/sets taking {:.3f} ms longer per step", 100 * d.share,
                         ms(d.memory));
    case Cause::unknown:
    case Cause::gpu_health:      // set later from NVML telemetry (link_gpu_health), never decided here
    case Cause::cpu_contention:  // set later from the ranks' CPU wait (verdict_contention.cpp)
      break;
  }
  return fmt::format("no single cause explains it (GPU compute {:.3f} ms, host gaps {:.3f} ms, before the "
                     "collective {:.3f} ms, memory {:.3f} ms)",
                     ms(d.compute), ms(d.gaps), ms(d.pre_collective), ms(d.memory));
}

void fill_evidence(Finding& f, const Decomposition& d, const RankJitter& rj) {
  f.evidence["excess_ms"] = ms(d.excess);
  f.evidence["gpu_compute_excess_ms"] = ms(d.compute);
  f.evidence["host_gap_excess_ms"] = ms(d.gaps);
  f.evidence["precollective_idle_excess_ms"] = ms(d.pre_collective);
  f.evidence["memory_excess_ms"] = ms(d.memory);
  f.evidence["collective_launched_late_share"] = d.launched_late_share;
  f.evidence["last_arrival_share"] = rj.last_arrival_share;
  f.evidence["median_launch_delay_ms"] = ms(rj.median_launch_delay_ns);
  f.evidence["near_zero_launch_delay_share"] = rj.near_zero_launch_delay_share;
}

// The fields every finding from the per-step decomposition shares.
Finding finding_of(const Decomposition& d, const RankJitter& rj, const char* kind) {
  Finding f;
  f.rank = rj.rank;
  f.host = rj.host;
  f.device = rj.device;
  f.cause = d.cause;
  f.kind = kind;
  f.section = d.section;
  f.impact_ns = d.excess;
  f.cause_share = d.share;
  fill_evidence(f, d, rj);
  return f;
}

// Longest run of consecutive report windows in a sorted list of window indices.
int longest_run(const std::vector<int>& windows) {
  int run = 0, best = 0;
  for (size_t i = 0; i < windows.size(); ++i) {
    run = (i > 0 && windows[i] == windows[i - 1] + 1) ? run + 1 : 1;
    best = std::max(best, run);
  }
  return best;
}

}  // namespace

const char* cause_name(Cause c) {
  switch (c) {
    case Cause::gpu_compute: return "gpu_compute";
    case Cause::host: return "host";
    case Cause::communication: return "communication";
    case Cause::memory: return "memory_copies";
    case Cause::unknown: return "unknown";
    case Cause::gpu_health: return "gpu_health";
    case Cause::cpu_contention: return "cpu_contention";
  }
  return "unknown";
}

double robust_z(double x, const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  double m = median(xs);
  std::vector<double> dev;
  for (double v : xs) dev.push_back(std::fabs(v - m));
  double mad = median(dev);
  if (mad <= 0) return x > m ? kHuge : x < m ? -kHuge : 0;
  return (x - m) / (1.4826 * mad);
}

void add_excess_evidence(Finding& f, const Excess& x, double step_ns) {
  const double steps = x.last - x.first + 1;
  f.evidence["z"] = std::min(x.z, kHuge);
  f.evidence["noise_ms"] = ms(x.noise_ns);
  f.evidence["own_noise_ms"] = ms(x.own_noise_ns);
  f.evidence["own_shift_ms"] = ms(x.own_shift_ns);
  f.evidence["lost_ms_per_step"] = ms(x.median_excess_ns);
  f.evidence["mean_excess_ms"] = ms(x.mean_excess_ns);
  f.evidence["lost_share_of_step"] = x.cost_share;
  f.evidence["lost_ms_total"] = ms(x.mean_excess_ns * steps);
  f.evidence["steps_affected"] = steps;
  f.evidence["median_step_ms"] = ms(step_ns);
}

std::string excess_sentence(const Excess& x, double step_ns, int total_steps) {
  const int steps = x.last - x.first + 1;
  return fmt::format("the job loses {:.3f} ms per step ({:.1f} % of the {:.3f} ms step) in {} of {} steps, {:.1f} ms "
                     "in all; z {:.1f} against a per-step noise of {:.3f} ms (the rank's own {:.3f} ms)",
                     ms(x.median_excess_ns), 100 * x.cost_share, ms(step_ns), steps, total_steps,
                     ms(x.mean_excess_ns * steps), std::min(x.z, kHuge), ms(x.noise_ns), ms(x.own_noise_ns));
}

namespace {

double median_step_ns(const StepSet& steps) {
  const int nsteps = steps.count();  // once: it scans every rank
  std::vector<double> step_times;
  step_times.reserve(steps.per_rank.size() * size_t(std::max(0, nsteps)));
  for (const auto& rs : steps.per_rank)
    for (int k = 0; k < nsteps; ++k) step_times.push_back(double(rs[k].end_ns - rs[k].start_ns));
  return median(std::move(step_times));
}

std::vector<Threshold> thresholds_of(const VerdictContext& c) {
  const VerdictOptions& o = c.options;
  std::vector<Threshold> t = {
      {"z_crit", c.criteria.z_crit,
       fmt::format("a rank's median excess over a run of steps must be this many standard errors above the per-step "
                   "noise (robust: 1.4826 MAD across ranks and the rank's own steps); Bonferroni for {:g} false "
                   "findings per run, at least {:g}",
                   o.excess.false_alarm_rate, o.excess.min_z)},
      {"min_cost_share", o.excess.min_cost_share,
       fmt::format("and cost the job at least this share of the median step time ({:.3f} ms): every rank waits for "
                   "the slowest (--min-cost)",
                   ms(c.signals.step_ns))},
      {"min_excess_ms", ms(c.criteria.min_excess_ns),
       fmt::format("the material excess per step: max(min_cost_share x step, {:.3f} ms)", ms(o.min_impact_ns))},
      {"min_steps", double(c.excess.min_steps),
       "a transient lasts at least this many consecutive steps (or 2 report windows): one noisy step is ignored"},
      {"cusum_k_ms", ms(c.criteria.cusum_k_ns), "CUSUM allowance (half the material excess) that finds transient runs"},
      {"min_consecutive_windows", double(o.min_consecutive_windows),
       "an individual-score finding needs this many consecutive report windows below the threshold"},
      {"cause_share", o.cause_share, "a cause is named only when it explains at least this share of the excess"},
      {"relative_threshold", c.scores.options.relative_threshold,
       "NVRx relative section score below which a rank is slow"},
      {"individual_threshold", c.scores.options.individual_threshold,
       "NVRx individual section score below which a rank is slower than its own best"},
  };
  if (c.jitter.available)
    t.push_back({"divergence_ms", ms(c.jitter.divergence_threshold_ns),
                 "time-to-kernel-end divergence that counts as a rank leaving the pack"});
  return t;
}

// Per step, a rank's lateness: its arrival at the collective when every rank has one, else
// its time-to-kernel-end divergence. use_arrival: most steps have collectives.
Signal lateness_signal(const JitterReport& j, size_t nranks, bool* use_arrival) {
  Signal s;
  int arrival_steps = 0;
  for (const auto& row : j.matrix) {
    int with = 0, present = 0;
    for (const RankStepJitter& c : row) {
      present += c.present;
      with += c.arrival_ns >= 0;
    }
    const bool arrival = with >= 2 && with == present;
    arrival_steps += arrival;
    std::vector<double> xs(nranks, std::nan(""));
    for (size_t r = 0; r < nranks && r < row.size(); ++r)
      if (row[r].present) xs[r] = arrival ? row[r].arrival_excess_ns : row[r].end_divergence_ns;
    s.ns.push_back(std::move(xs));
  }
  *use_arrival = arrival_steps * 2 >= static_cast<int>(j.matrix.size());
  return s;
}

Finding lateness_finding(const VerdictContext& c, const Excess& x, bool use_arrival) {
  const JitterReport& j = c.jitter;
  std::vector<int> rows;
  for (int k = x.first; k <= x.last; ++k) rows.push_back(k);
  Decomposition d = decompose(j, x.rank, rows, use_arrival, c.options.cause_share);
  const RankJitter& rj = j.ranks[x.rank];
  Finding f = finding_of(d, rj, x.whole_run ? "persistent" : "transient");
  f.impact_ns = x.median_excess_ns;
  f.steps_affected = x.last - x.first + 1;
  add_excess_evidence(f, x, c.signals.step_ns);
  const std::string loss = excess_sentence(x, c.signals.step_ns, static_cast<int>(j.matrix.size()));
  const std::string why = explain(d, rj, j, c.breakdown, x.rank);
  if (!x.whole_run) {
    f.first_step = j.steps[x.first].step;
    f.last_step = j.steps[x.last].step;
    f.summary = fmt::format("{} is {:.3f} ms late in steps {}-{} only; {}; {}", rank_name(f.rank, f.host, f.device),
                            ms(x.median_excess_ns), f.first_step, f.last_step, loss, why);
    return f;
  }
  const std::string lead =
      use_arrival ? fmt::format("arrives {:.3f} ms after the median rank at the step's collective (last at {:.0f} % of "
                                "steps)",
                                ms(x.median_excess_ns), 100 * rj.last_arrival_share)
                  : fmt::format("finishes its step's GPU work {:.3f} ms after the median rank", ms(x.median_excess_ns));
  f.summary = fmt::format("{} {}; {}; {}", rank_name(f.rank, f.host, f.device), lead, loss, why);
  return f;
}

// Lateness at the step's collective (or TTKE divergence), from the per-kernel GPU records.
void add_lateness_findings(const VerdictContext& c, FindingSet& out) {
  if (!c.jitter.available || c.jitter.matrix.empty()) return;
  bool use_arrival = false;
  const Signal s = lateness_signal(c.jitter, c.model.ranks.size(), &use_arrival);
  std::vector<double> starts;  // for the 2-window rule, when the rows are the step set's
  if (!c.steps.per_rank.empty() && static_cast<int>(s.ns.size()) == c.steps.count())
    for (int k = 0; k < c.steps.count(); ++k) starts.push_back(double(c.steps.per_rank[0][k].start_ns));
  for (const Excess& x : detect_excess(s, c.signals.step_ns, c.criteria, c.excess, starts))
    if (x.rank < c.jitter.ranks.size()) out.add(lateness_finding(c, x, use_arrival), x.rank);
}

// NVRx GPU scores (from the per-window kernel statistics, so also without per-kernel
// records): kernels slower than on the fastest rank.
void add_gpu_score_findings(const VerdictContext& c, FindingSet& out) {
  const size_t nranks = c.model.ranks.size();
  for (const Straggler& s : c.scores.stragglers) {
    if (s.scope != "gpu") continue;
    const size_t r = c.rank_index(s.rank);
    if (r == nranks) continue;
    if (out.has[r]) {
      for (Finding* f : out.of_rank(r)) f->evidence["gpu_" + s.metric + "_score" + (s.section.empty() ? "" : "_" + s.section)] = s.score;
      continue;
    }
    if (s.metric == "individual" && longest_run(s.windows) < c.options.min_consecutive_windows) continue;
    Finding f;
    f.rank = s.rank;
    f.host = s.host;
    f.cause = Cause::gpu_compute;
    f.cause_share = 1;
    f.kind = s.metric == "relative" ? "persistent" : "transient";
    f.section = s.section;
    // Extra kernel time per step: its kernel time there, times the share it would save at the
    // reference speed.
    if (c.gpu && r < c.gpu->ranks.size()) {
      const RankGpu& g = c.gpu->ranks[r];
      auto it = g.sections.find(s.section);
      double kernel_ns = s.section.empty() ? double(g.score.kernel_ns)
                         : it != g.sections.end() ? double(it->second.kernel_ns)
                                                  : 0.0;
      f.impact_ns = kernel_ns * (1 - s.score) / std::max(1, c.steps.count());
      if (c.signals.step_ns > 0 && f.impact_ns < c.criteria.min_excess_ns) continue;  // not material to the job
    }
    f.evidence["gpu_" + s.metric + "_score"] = s.score;
    const std::string where = s.section.empty() ? "its kernels" : "its kernels in " + s.section;
    f.summary = s.metric == "relative"
                    ? fmt::format("{}: {} run {:.2f}x as long as on the fastest rank (NVRx GPU "
                                  "relative score {}, time-weighted over kernels, NCCL excluded)",
                                  rank_name(s.rank, s.host), where, s.score > 0 ? 1 / s.score : 0.0, score_text(s.score, s.threshold))
                    : fmt::format("{}: {} became {:.2f}x slower than their own best in {} report "
                                  "windows (NVRx GPU individual score {})",
                                  rank_name(s.rank, s.host), where, s.score > 0 ? 1 / s.score : 0.0, s.windows.size(),
                                  score_text(s.score, s.threshold));
    out.add(std::move(f), r);
  }
}

// Cause of an NVRx section finding: does its extra CPU time match extra GPU compute launched from it?
std::string nvrx_section_cause(const VerdictContext& c, size_t r, const std::string& section, double impact,
                               Finding& f) {
  if (!c.breakdown.available) {
    f.cause = Cause::unknown;
    return "CPU time only: no GPU records to tell GPU work from host work";
  }
  double compute = 0;
  if (c.jitter.available) {
    std::vector<double> xs;
    for (const auto& row : c.jitter.matrix)
      if (row[r].present) {
        auto it = row[r].duration_excess_by_section.find(section);
        xs.push_back(it == row[r].duration_excess_by_section.end() ? 0 : it->second);
      }
    compute = median(xs);
  }
  f.cause_share = impact > 0 ? std::clamp(compute / impact, 0.0, 1.0) : 0;
  f.cause = f.cause_share >= c.options.cause_share ? Cause::gpu_compute : Cause::host;
  std::string text = f.cause == Cause::gpu_compute
                         ? fmt::format("{:.0f} % of it is GPU compute launched from this section", 100 * f.cause_share)
                         : fmt::format("its GPU kernels explain only {:.0f} % of it: host/CPU time", 100 * f.cause_share);
  if (f.cause == Cause::host) f.cause_share = 1 - f.cause_share;
  return text;
}

// Per-step evidence needs steps and three ranks to tell which one is slow.
bool per_step_evidence(const VerdictContext& c) { return !c.signals.sections.empty() && c.model.ranks.size() >= 3; }

// NVTX section scores (CPU time), for ranks the per-step evidence could not judge.
void add_nvrx_section_findings(const VerdictContext& c, FindingSet& out) {
  const size_t nranks = c.model.ranks.size();
  const bool judged = per_step_evidence(c);
  for (const Straggler& s : c.scores.stragglers) {
    if (s.scope != "section" || is_waiting_section(s.section)) continue;
    const size_t r = c.rank_index(s.rank);
    if (r == nranks) continue;
    if (out.has[r] || judged) {
      for (Finding* f : out.of_rank(r)) f->evidence["nvtx_" + s.metric + "_score_" + s.section] = s.score;
      continue;
    }
    // Hysteresis: the rank must stay below its own best for consecutive windows.
    if (s.metric == "individual" && longest_run(s.windows) < c.options.min_consecutive_windows) continue;
    const RankScores& rs = c.scores.ranks[r];
    auto it = rs.sections.find(s.section);
    if (it == rs.sections.end()) continue;
    const double median_ns = it->second.median_ns;
    const double impact = median_ns * (1 - s.score);
    if (c.signals.step_ns > 0 && impact < c.criteria.min_excess_ns) continue;  // not material to the job
    if (waited_in_section(c, r, s.section, 0, c.steps.count() - 1) >= c.options.cause_share * impact)
      continue;  // it waited there for a later rank at a collective (issue 25)
    Finding f;
    f.rank = s.rank;
    f.host = s.host;
    f.kind = s.metric == "relative" ? "section" : "transient";
    f.section = s.section;
    f.impact_ns = impact;
    f.evidence["nvtx_" + s.metric + "_score"] = s.score;
    f.evidence["section_median_ms"] = ms(median_ns);
    const std::string cause_text = nvrx_section_cause(c, r, s.section, impact, f);
    f.summary = s.metric == "relative"
                    ? fmt::format("{} section {} is {:.2f}x slower than the fastest rank (CPU time, "
                                  "NVRx relative score {}); {}",
                                  rank_name(s.rank, s.host), s.section, s.score > 0 ? 1 / s.score : 0.0,
                                  score_text(s.score, s.threshold), cause_text)
                    : fmt::format("{} section {} became {:.2f}x slower than its own best in {} report "
                                  "windows (NVRx individual score {}); {}",
                                  rank_name(s.rank, s.host), s.section, s.score > 0 ? 1 / s.score : 0.0, s.windows.size(),
                                  score_text(s.score, s.threshold), cause_text);
    out.add(std::move(f), r);
  }
}

// Report windows in which the rank's NVRx relative score of a section was below the threshold,
// with the lowest score and the median it had there.
struct WindowDip {
  std::vector<int> windows;
  double score = 1, median_ns = 0;
};

std::map<std::pair<int, std::string>, WindowDip> window_dips(const ScoreReport& scores) {
  std::map<std::pair<int, std::string>, WindowDip> dips;
  for (const WindowScores& w : scores.windows)
    for (const RankScores& rs : w.ranks)
      for (const auto& [name, sc] : rs.sections)
        if (sc.relative && *sc.relative < scores.options.relative_threshold) {
          WindowDip& d = dips[{rs.rank, name}];
          d.windows.push_back(w.index);
          if (*sc.relative < d.score) {
            d.score = *sc.relative;
            d.median_ns = sc.median_ns;
          }
        }
  return dips;
}

// Without per-step evidence, a transient straggler still shows in the per-window NVRx relative
// scores (issue 10: a rank 2x slower for a third of the run scores 0.50 in those windows while
// its whole-run score is fine): consecutive windows below the threshold make a finding.
void add_window_score_findings(const VerdictContext& c, FindingSet& out) {
  if (per_step_evidence(c)) return;
  for (const auto& [key, d] : window_dips(c.scores)) {
    if (is_waiting_section(key.second)) continue;
    const size_t r = c.rank_index(key.first);
    if (r == c.model.ranks.size() || out.has[r] || longest_run(d.windows) < c.options.min_consecutive_windows)
      continue;
    const double impact = d.median_ns * (1 - d.score);
    if (c.signals.step_ns > 0 && impact < c.criteria.min_excess_ns) continue;
    if (waited_in_section(c, r, key.second, 0, c.steps.count() - 1) >= c.options.cause_share * impact)
      continue;  // waiting at a collective (issue 25)
    Finding f;
    f.rank = key.first;
    f.host = c.model.ranks[r].host;
    f.kind = "transient";
    f.section = key.second;
    f.impact_ns = impact;
    f.evidence["nvtx_window_relative_score"] = d.score;
    f.evidence["windows_below"] = double(d.windows.size());
    const std::string cause = nvrx_section_cause(c, r, f.section, impact, f);
    f.summary = fmt::format("{} section {} was {:.2f}x slower than the fastest rank in {} report windows "
                            "(from window {}; NVRx relative score {} there, CPU time); {}",
                            rank_name(f.rank, f.host), f.section, d.score > 0 ? 1 / d.score : 0.0, d.windows.size(),
                            d.windows.front(), score_text(d.score, c.scores.options.relative_threshold), cause);
    out.add(std::move(f), r);
  }
}

// NCCL: ranks that arrive last at a communicator's collectives persistently. Joined to the
// rank's finding when there is one (it usually says why), else a finding of its own when no
// per-kernel GPU records could judge the rank's lateness.
void add_comm_findings(const VerdictContext& c, FindingSet& out) {
  const size_t nranks = c.model.ranks.size();
  const JitterReport& j = c.jitter;
  for (const Straggler& s : c.scores.stragglers) {
    if (s.scope != "comm" || !c.comm) continue;
    const size_t r = c.rank_index(s.rank);
    if (r == nranks || r >= c.comm->ranks.size()) continue;
    const CommRankStats& cr = c.comm->ranks[r];
    const double share = 1 - s.score;
    // Per collective, not per step: steps found from collectives alone can be rough.
    const double per_op = cr.collectives ? cr.blame_ns / double(cr.collectives) : 0;
    std::string clause = fmt::format("it arrives last at {:.0f} % of the collectives of {} and the other ranks "
                                     "waited {:.3f} ms for it in all ({:.3f} ms per collective)",
                                     100 * share, s.section.rfind("comm ", 0) == 0 ? s.section.substr(5) : s.section,
                                     ms(cr.blame_ns), ms(per_op));
    if (out.has[r]) {
      for (Finding* f : out.of_rank(r)) {
        if (!f->evidence.count("comm_last_share"))
          f->summary += (c.comm->source == "host" ? "; collectives: " : "; NCCL: ") + clause;
        f->evidence["comm_last_share"] = share;
        f->evidence["comm_blame_ms"] = ms(cr.blame_ns);
      }
      continue;
    }
    // With per-kernel GPU records the lateness signal has already judged every rank's arrival
    // against the run's noise; "last" by a 20 us margin alone is no evidence among 64 noisy ranks.
    if (j.available && !j.matrix.empty()) continue;
    // What a collective loses to it (its lead over the median rank, not the sum of every rank's
    // wait, which grows with the rank count) must be material to the job, as for every finding.
    if (c.signals.step_ns > 0 && cr.lateness_ns < c.criteria.min_excess_ns) continue;
    Finding f;
    f.rank = s.rank;
    f.host = s.host;
    f.kind = "persistent";
    f.impact_ns = cr.lateness_ns;
    f.evidence["comm_lateness_ms"] = ms(cr.lateness_ns);
    f.evidence["comm_last_share"] = share;
    f.evidence["comm_blame_ms"] = ms(cr.blame_ns);
    f.evidence["comm_waited_ms"] = ms(cr.waited_ns);
    f.evidence["comm_collectives"] = double(cr.collectives);
    std::string why = "no GPU records to tell whether its GPU or its host is late";
    if (j.available && !j.matrix.empty()) {
      std::vector<int> rows;
      for (int k = 0; k < static_cast<int>(j.matrix.size()); ++k) rows.push_back(k);
      Decomposition d = decompose(j, r, rows, true, c.options.cause_share);
      f.cause = d.cause;
      f.cause_share = d.share;
      f.section = d.section;
      fill_evidence(f, d, j.ranks[r]);
      why = explain(d, j.ranks[r], j, c.breakdown, r);
    }
    f.summary = fmt::format("{}: {}; when last it arrives {:.3f} ms after the median rank, what each "
                            "of those collectives loses; {}",
                            rank_name(f.rank, f.host), clause, ms(cr.lateness_ns), why);
    out.add(std::move(f), r);
  }
}

// Most lost time first: the loss per affected step times the steps affected.
void rank_by_cost(std::vector<Finding>& findings, int nsteps) {
  std::stable_sort(findings.begin(), findings.end(), [&](const Finding& a, const Finding& b) {
    auto weight = [&](const Finding& f) {
      const double steps_hit = f.steps_affected > 0 ? f.steps_affected
                               : f.first_step >= 0 ? f.last_step - f.first_step + 1
                                                   : std::max(1, nsteps);
      return f.impact_ns * steps_hit;
    };
    return weight(a) > weight(b);
  });
}

}  // namespace

StepSignals step_signals(const RunModel& model, const StepSet& steps) {
  StepSignals s;
  s.step_ns = median_step_ns(steps);
  s.sections = section_signals(model, steps);
  take_out_cpu_wait(model, steps, s);
  return s;
}

Verdict decide(const RunModel& model, const StepSet& steps, const ScoreReport& scores, const JitterReport& j,
               const BreakdownReport& b, const VerdictOptions& opt, const GpuScoreReport* gpu,
               const CommReport* comm, std::optional<StepSignals> signals) {
  VerdictContext c{model, steps, scores, j, b, opt, gpu, comm,
                   signals ? std::move(*signals) : step_signals(model, steps)};
  for (size_t r = 0; r < model.ranks.size(); ++r) c.index_of_rank.emplace(model.ranks[r].rank, r);
  c.excess = opt.excess;
  if (c.excess.window_ns <= 0) c.excess.window_ns = scores.window_s * 1e9;
  const double tests = double(model.ranks.size()) * double(c.signals.sections.size() + 1) * std::max(1, steps.count());
  c.criteria = excess_criteria(c.excess, c.signals.step_ns, tests);
  c.criteria.min_excess_ns = std::max(c.criteria.min_excess_ns, opt.min_impact_ns);
  c.criteria.cusum_k_ns = 0.5 * c.criteria.min_excess_ns;

  FindingSet out;
  out.has.assign(model.ranks.size(), false);
  out.rank_of.assign(model.ranks.size(), -1);
  add_lateness_findings(c, out);
  if (model.ranks.size() >= 3) add_section_findings(c, out);
  add_gpu_score_findings(c, out);
  add_nvrx_section_findings(c, out);
  add_window_score_findings(c, out);
  add_comm_findings(c, out);
  name_cpu_contention(c, out);
  rank_by_cost(out.findings, steps.count());

  Verdict v;
  v.findings = std::move(out.findings);
  v.thresholds = thresholds_of(c);
  return v;
}

}  // namespace laggard::report
