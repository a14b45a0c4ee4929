#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "render_analyses.h"
#include "render_gpu.h"
#include "render_nvrx.h"
#include "text_lists.h"
#include "units.h"

namespace laggard::report {
namespace {

std::string pct(double x) { return fmt::format("{:.0f}%", 100 * x); }

template <class T, class Less>
std::vector<const T*> top_n(const std::vector<T>& v, size_t n, Less less) {
  std::vector<const T*> out;
  for (const T& x : v) out.push_back(&x);
  std::stable_sort(out.begin(), out.end(), [&](const T* a, const T* b) { return less(*a, *b); });
  if (out.size() > n) out.resize(n);
  return out;
}

void jitter_text(const Analyses& a, size_t top, std::ostream& out) {
  const JitterReport& j = a.jitter;
  out << "\nJitter per step and kernel position (GTC 2020 method):\n";
  if (!j.available) {
    out << "  not available: " << j.why_not << '\n';
    return;
  }
  out << fmt::format("  divergence threshold {:.3f} ms\n", ms(j.divergence_threshold_ns));
  out << fmt::format("  Worst steps (time to kernel end, NCCL zeroed, vs the cross-rank median):\n");
  out << fmt::format("  {:>5} {:>5} {:<12} {:>4} {:>11} {:<28} {:>10}\n", "STEP", "RANK", "HOST", "GPU",
                     "DIVERGE ms", "FIRST DIVERGING KERNEL (POS)", "SPREAD ms");
  for (const StepJitter* s : top_n(j.steps, top, [](auto& x, auto& y) { return x.worst_divergence_ns > y.worst_divergence_ns; })) {
    const RankJitter* rj = nullptr;
    for (const RankJitter& r : j.ranks)
      if (r.rank == s->worst_rank) rj = &r;
    std::string first = s->first_diverging_slot >= 0
                            ? fmt::format("{} ({})", s->first_diverging_kernel, s->first_diverging_slot)
                            : "-";
    out << fmt::format("  {:>5} {:>5} {:<12} {:>4} {:>11.3f} {:<28} {:>10.3f}\n", s->step, s->worst_rank,
                       rj ? rj->host : "", rj ? rj->device : -1, ms(s->worst_divergence_ns), first,
                       ms(s->step_time_spread_ns));
  }
  out << "  Worst ranks (medians over steps):\n";
  out << fmt::format("  {:>5} {:<12} {:>4} {:>11} {:>11} {:>10} {:>9} {:>10} {:>8}\n", "RANK", "HOST", "GPU",
                     "ARRIVAL ms", "DIVERGE ms", "KERNEL ms", "GAP ms", "LAUNCH ms", "LAST");
  for (const RankJitter* r : top_n(j.ranks, top, [](auto& x, auto& y) {
         return std::max(x.median_arrival_excess_ns, x.median_end_divergence_ns) >
                std::max(y.median_arrival_excess_ns, y.median_end_divergence_ns);
       }))
    out << fmt::format("  {:>5} {:<12} {:>4} {:>+11.3f} {:>+11.3f} {:>+10.3f} {:>+9.3f} {:>10.3f} {:>8}\n", r->rank,
                       r->host, r->device, ms(r->median_arrival_excess_ns), ms(r->median_end_divergence_ns),
                       ms(r->duration_excess_ns), ms(r->gap_excess_ns), ms(r->median_launch_delay_ns),
                       pct(r->last_arrival_share));
  out << "  Hosts:\n";
  for (const HostJitter* h : top_n(j.hosts, top, [](auto& x, auto& y) { return x.median_end_divergence_ns > y.median_end_divergence_ns; }))
    out << fmt::format("  {:<12} {:>3} ranks, median divergence {:+.3f} ms, worst rank {}\n", h->host, h->ranks,
                       ms(h->median_end_divergence_ns), h->worst_rank);
  out << "  Kernels with the widest spread across ranks (mean per step):\n";
  out << fmt::format("  {:>4} {:<36} {:<12} {:>10} {:>16} {:>16}\n", "POS", "KERNEL", "SECTION", "MEDIAN ms",
                     "MIN ms (RANK)", "MAX ms (RANK)");
  for (const KernelSlotStats* k : top_n(j.kernels, top, [](auto& x, auto& y) {
         return x.max_duration_ns - x.min_duration_ns > y.max_duration_ns - y.min_duration_ns;
       }))
    out << fmt::format("  {:>4} {:<36} {:<12} {:>10.3f} {:>16} {:>16}\n", k->slot, k->name.substr(0, 36),
                       k->section.substr(0, 12), ms(k->median_duration_ns),
                       fmt::format("{:.3f} ({})", ms(k->min_duration_ns), k->min_rank),
                       fmt::format("{:.3f} ({})", ms(k->max_duration_ns), k->max_rank));
}

void breakdown_text(const Analyses& a, size_t top, std::ostream& out) {
  const BreakdownReport& b = a.breakdown;
  out << "\nGPU time breakdown (HTA's method, laggard's variant: over the captured windows, host wait only until\n"
         "  the launch call returned; `--hta-compatible` adds HTA's own numbers):\n";
  if (!b.available) {
    out << "  not available: " << b.why_not << '\n';
    return;
  }
  out << fmt::format("  {:>5} {:<12} {:>8} {:>6} {:>6} {:>6} | {:>9} {:>9} {:>6} | {:>8} {:>7} {:>9}\n", "RANK",
                     "HOST", "COMPUTE", "COMM", "MEM", "IDLE", "HOST-WAIT", "KERN-WAIT", "OTHER", "OVERLAP",
                     "SHORT", "DELAY>CUT");
  auto idle_share = [](const RankBreakdown& r) { return r.temporal.span_ns > 0 ? r.temporal.idle_ns / r.temporal.span_ns : 0; };
  for (const RankBreakdown* r : top_n(b.ranks, top, [&](auto& x, auto& y) { return idle_share(x) > idle_share(y); })) {
    const Temporal& t = r->temporal;
    double span = t.span_ns > 0 ? t.span_ns : 1, idle = r->idle.total() > 0 ? r->idle.total() : 1;
    out << fmt::format("  {:>5} {:<12} {:>8} {:>6} {:>6} {:>6} | {:>9} {:>9} {:>6} | {:>8} {:>7} {:>9}\n",
                       r->rank, r->host, pct(t.compute_ns / span), pct(t.comm_ns / span), pct(t.memory_ns / span),
                       pct(t.idle_ns / span), pct(r->idle.host_wait_ns / idle), pct(r->idle.kernel_wait_ns / idle),
                       pct(r->idle.other_ns / idle), r->overlap ? pct(*r->overlap) : "-", r->launch.short_kernels,
                       r->launch.delay_outliers);
  }
  out << "  (shares of profiled time; idle split as shares of idle time; worst idle first)\n";
  auto host_idle = [](const HostBreakdown& h) { return h.temporal.span_ns > 0 ? h.temporal.idle_ns / h.temporal.span_ns : 0; };
  const size_t hosts_shown = rows_shown(b.hosts.size(), top);
  for (const HostBreakdown* hp : top_n(b.hosts, hosts_shown, [&](auto& x, auto& y) { return host_idle(x) > host_idle(y); })) {
    const HostBreakdown& h = *hp;
    double span = h.temporal.span_ns > 0 ? h.temporal.span_ns : 1;
    out << fmt::format("  host {:<12} {} ranks: compute {}, comm {}, memory {}, idle {}\n", h.host, h.ranks,
                       pct(h.temporal.compute_ns / span), pct(h.temporal.comm_ns / span),
                       pct(h.temporal.memory_ns / span), pct(h.temporal.idle_ns / span));
  }
  out << more_line(b.hosts.size(), hosts_shown, "hosts");
  out << "  Top kernels (all ranks):\n";
  out << fmt::format("  {:<40} {:<5} {:>10} {:>9} {:>8} {:>20}\n", "KERNEL", "TYPE", "TOTAL ms", "COUNT", "OF TYPE",
                     "MIN..MAX RANK");
  for (const TopKernel& k : b.top)
    out << fmt::format("  {:<40} {:<5} {:>10.3f} {:>9} {:>8} {:>20}\n", k.name.substr(0, 40), k.type, ms(k.total_ns),
                       k.count, pct(k.share_of_type), fmt::format("{}..{}", k.min_rank, k.max_rank));
  if (!b.by_section.empty()) {
    out << "  GPU time by NVTX section (all ranks, ms): ";
    size_t listed = 0;
    const size_t section_limit = rows_shown(b.by_section.size(), top);
    for (const auto& [s, t] : b.by_section) {
      if (listed == section_limit) break;
      out << (listed++ ? ", " : "") << fmt::format("{} {:.1f}/{:.1f}/{:.1f}", s, ms(t.comp_ns), ms(t.comm_ns), ms(t.mem_ns));
    }
    if (listed < b.by_section.size()) out << fmt::format(", ... {} more sections", b.by_section.size() - listed);
    out << " (compute/comm/memory)\n";
  }
}

void hta_text(const HtaReport& h, size_t top, std::ostream& out) {
  out << "\nHTA-compatible breakdown (--hta-compatible: HTA's definitions and trace-loading rules, whole µs):\n";
  if (!h.available) {
    out << "  not available: " << h.why_not << '\n';
    return;
  }
  out << fmt::format("  {:>5} {:>12} {:>12} {:>12} {:>12} {:>8} {:>9} {:>7} {:>9} {:>9}\n", "RANK", "IDLE us",
                     "COMPUTE us", "NON-COMP us", "KERNEL us", "OVERLAP", "LAUNCHES", "SHORT", "RT>50us",
                     "DLY>100us");
  const size_t ranks_shown = rows_shown(h.ranks.size(), top);  // in rank order, as HTA lists them
  for (size_t i = 0; i < ranks_shown; ++i) {
    const HtaRank& r = h.ranks[i];
    if (!r.has_gpu) {
      out << fmt::format("  {:>5} (no GPU events)\n", r.rank);
      continue;
    }
    out << fmt::format("  {:>5} {:>12} {:>12} {:>12} {:>12} {:>8} {:>9} {:>7} {:>9} {:>9}\n", r.rank, r.idle_us,
                       r.compute_us, r.non_compute_us, r.kernel_time_us,
                       r.overlap_pct ? fmt::format("{:.2f}%", *r.overlap_pct) : "-", r.launch.count,
                       r.launch.short_kernels, r.launch.runtime_outliers, r.launch.delay_outliers);
  }
  out << more_line(h.ranks.size(), ranks_shown, "ranks");
  out << fmt::format("  Idle time per stream (host wait / kernel wait < {} us / other, us):\n",
                     h.options.consecutive_kernel_delay_us);
  for (size_t k = 0; k < ranks_shown; ++k)
    for (const auto& [s, i] : h.ranks[k].idle_by_stream)
      out << fmt::format("  rank {:>4} stream {:>5}: {:>12} {:>12} {:>12}\n", h.ranks[k].rank, s, i.host_wait_us,
                         i.kernel_wait_us, i.other_us);
  out << "  Kernel type breakdown (all ranks, us): ";
  bool first = true;
  for (const auto& [type, us] : h.kernel_types_us) {
    out << (first ? "" : ", ") << type << " " << us;
    first = false;
  }
  out << '\n';
  if (!h.ranks.empty() && h.ranks.front().last_step_dropped)
    out << "  (as HTA does, the last profiler step is left out: GPU work launched after it began)\n";
}

}  // namespace

void render_verdict_text(const Analyses& a, std::ostream& out) {
  const Verdict& v = a.verdict;
  out << (v.findings.empty() ? "\nVerdict: no rank stands out\n" : "\nVerdict:\n");
  int i = 1;
  for (const Finding& f : v.findings)
    out << fmt::format("  {}. [{}] {}\n", i++, cause_name(f.cause), f.summary);
}

void render_analyses_text(const RunModel& model, const Analyses& a, size_t top, std::ostream& out,
                          const ScoreOptions* thresholds) {
  render_gpu_text(model, a.gpu, out, top, thresholds ? *thresholds : ScoreOptions{});
  out << "\nSteps: " << a.steps.count() << ", from " << a.steps.source << '\n';
  jitter_text(a, top, out);
  breakdown_text(a, top, out);
  if (a.hta) hta_text(*a.hta, top, out);
  if (a.nvrx) nvrx_text(*a.nvrx, top, out);
  out << "\nThresholds:\n";
  for (const Threshold& t : a.verdict.thresholds) out << fmt::format("  {:<24} {:<10g} {}\n", t.name, t.value, t.why);
}

// A per-rank count: whole when it is (300, not 300.0), else one decimal (runs of different sizes).
std::string count_text(double n) {
  return n == std::floor(n) ? fmt::format("{:.0f}", n) : fmt::format("{:.1f}", n);
}

// B's median against A's: "+36 %"; "-" when either has none.
std::string change_text(const std::optional<double>& change) {
  return change ? fmt::format("{:+.0f} %", 100 * *change) : std::string("-");
}

void render_diff_text(const RunDiff& d, size_t top, std::ostream& out) {
  out << fmt::format("laggard diff: A = run {} ({} ranks), B = run {} ({} ranks); per rank; changed = more than {:.0f} % "
                     "of A in count, median or total, and for times also more than one occurrence's spread\n",
                     d.run_a, d.ranks_a, d.run_b, d.ranks_b, 100 * d.threshold);
  auto table = [&](const char* title, const std::vector<DiffEntry>& v) {
    size_t shown = 0, same = 0;
    out << '\n' << title << ":\n";
    out << fmt::format("  {:<8} {:<40} {:>9} {:>9} {:>11} {:>11} {:>8} {:>11}\n", "STATUS", "NAME", "COUNT A",
                       "COUNT B", "MEDIAN A ms", "MEDIAN B ms", "MEDIAN", "TOTAL +ms");
    for (const DiffEntry& e : v) {
      if (e.status == "same") { ++same; continue; }
      if (shown++ >= top) continue;
      out << fmt::format("  {:<8} {:<40} {:>9} {:>9} {:>11.3f} {:>11.3f} {:>8} {:>+11.3f}\n", e.status,
                         e.name.substr(0, 40), count_text(e.count_a), count_text(e.count_b), ms(e.median_a_ns),
                         ms(e.median_b_ns), change_text(e.median_change), ms(e.total_b_ns - e.total_a_ns));
    }
    if (shown > top) out << fmt::format("  ... {} more changes (--top)\n", shown - top);
    out << fmt::format("  {} unchanged\n", same);
  };
  table("NVTX sections", d.sections);
  table("GPU kernels", d.kernels);
}

}  // namespace laggard::report
