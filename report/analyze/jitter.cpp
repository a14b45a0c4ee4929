#include "jitter.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "stats.h"

namespace laggard::report {
namespace {

struct Key {
  uint32_t name;
  int occurrence;
  bool operator<(const Key& o) const { return name != o.name ? name < o.name : occurrence < o.occurrence; }
};

struct Obs {
  int pos;
  double dur, gap, ttke;
  double delay;      // < 0: unknown
  bool nccl;
  GpuKind kind;
  uint32_t section;
};

using RankStep = std::map<Key, Obs>;

struct CollectiveArrival {
  double arrival = -1;       // since the previous NCCL kernel's end on this rank
  double idle_before = 0;    // on its stream
  bool launched_late = false;
};

// The step's first NCCL kernel, seen from the rank's previous sync point.
CollectiveArrival arrival_of(const GpuTimeline& g, const std::vector<const GpuActivity*>& nccl_by_start,
                             const std::vector<const GpuActivity*>& in_step) {
  CollectiveArrival out;
  const GpuActivity* first = nullptr;
  for (const GpuActivity* a : in_step)
    if (a->nccl) { first = a; break; }
  if (!first) return out;
  auto it = std::lower_bound(nccl_by_start.begin(), nccl_by_start.end(), first,
                             [](const GpuActivity* x, const GpuActivity* y) { return x->start_ns < y->start_ns; });
  if (it == nccl_by_start.begin()) return out;
  out.arrival = double(first->start_ns - (*(it - 1))->end_ns);
  if (const GpuActivity* prev = g.previous_on_stream(first)) {
    out.idle_before = std::max<double>(0, double(first->start_ns - prev->end_ns));
    out.launched_late = first->api_end_ns > prev->end_ns;
  }
  return out;
}

// One rank's kernels of one step, with the talk's derived quantities.
RankStep observe(const GpuTimeline& g, const Step& step, double* final_ttke) {
  RankStep out;
  std::map<uint32_t, int> seen;
  double ttke = 0;
  int pos = 0;
  for (const GpuActivity* a : g.in_step(step)) {
    double dur = double(a->end_ns - a->start_ns);
    double gap = 0;
    if (!a->nccl)
      if (const GpuActivity* prev = g.previous_on_stream(a)) gap = std::max<double>(0, double(a->start_ns - prev->end_ns));
    if (!a->nccl) ttke += gap + dur;
    double delay = a->api_end_ns ? double(a->start_ns - a->api_end_ns) : -1;
    out[{a->name, seen[a->name]++}] = Obs{pos++, dur, gap, ttke, delay, a->nccl, a->kind, a->section};
  }
  *final_ttke = ttke;
  return out;
}

double median_of(const std::vector<double>& v) { return median(v); }

}  // namespace

JitterReport analyze_jitter(const RunModel& model, const StepSet& steps, const JitterOptions& opt) {
  JitterReport rep;
  const int nsteps = steps.count();
  const size_t nranks = model.ranks.size();
  if (nsteps == 0) {
    rep.why_not = "no steps were found: " + steps.source;
    return rep;
  }
  std::vector<GpuTimeline> gpu;
  std::vector<std::vector<const GpuActivity*>> nccl(nranks);
  bool any = false;
  for (size_t r = 0; r < nranks; ++r) {
    gpu.push_back(index_gpu(model.ranks[r]));
    any |= !gpu.back().empty();
    for (const GpuActivity* a : gpu.back().by_launch)
      if (a->nccl) nccl[r].push_back(a);
    std::sort(nccl[r].begin(), nccl[r].end(), [](auto* x, auto* y) { return x->start_ns < y->start_ns; });
  }
  if (!any) {
    rep.why_not = "no per-kernel GPU records (no GPU, CUPTI off, or no sampled window)";
    return rep;
  }

  // Pass 1: the typical step (median final TTKE) sets the default divergence threshold.
  std::vector<double> step_medians;
  for (int k = 0; k < nsteps; ++k) {
    std::vector<double> finals;
    for (size_t r = 0; r < nranks; ++r) {
      double f = 0;
      if (!observe(gpu[r], steps.per_rank[r][k], &f).empty()) finals.push_back(f);
    }
    if (!finals.empty()) step_medians.push_back(median_of(finals));
  }
  rep.divergence_threshold_ns =
      opt.divergence_ns > 0 ? opt.divergence_ns : std::max(20'000.0, 0.05 * median_of(step_medians));

  // Pass 2: per step, across ranks.
  struct RankAcc {
    std::vector<double> end_div, dur_excess, gap_excess, delays, step_ns, arrival_excess;
    int worst = 0, last = 0, with_collective = 0;
  };
  std::vector<RankAcc> racc(nranks);
  struct SlotAcc {
    std::vector<double> dur_sum, gap_sum, pos_sum;
    std::vector<int> n;
    bool nccl = false;
    uint32_t section = StringTable::kNone;
  };
  std::map<Key, SlotAcc> slots;

  for (int k = 0; k < nsteps; ++k) {
    std::vector<RankStep> obs(nranks);
    std::vector<double> finals(nranks, 0);
    std::vector<size_t> present;
    std::vector<double> host_times;
    std::vector<CollectiveArrival> arrivals(nranks);
    for (size_t r = 0; r < nranks; ++r) {
      const Step& st = steps.per_rank[r][k];
      host_times.push_back(double(st.end_ns - st.start_ns));
      racc[r].step_ns.push_back(host_times.back());
      obs[r] = observe(gpu[r], st, &finals[r]);
      if (!obs[r].empty()) present.push_back(r);
      arrivals[r] = arrival_of(gpu[r], nccl[r], gpu[r].in_step(st));
    }
    if (present.empty()) continue;
    std::vector<RankStepJitter> row(nranks);
    StepJitter sj;
    sj.step = steps.per_rank[present[0]][k].index;
    sj.ranks = static_cast<int>(present.size());
    sj.step_time_spread_ns = *std::max_element(host_times.begin(), host_times.end()) -
                             *std::min_element(host_times.begin(), host_times.end());
    std::vector<double> fin;
    for (size_t r : present) fin.push_back(finals[r]);
    sj.median_ttke_ns = median_of(fin);

    // Cross-rank medians per kernel key.
    std::map<Key, std::vector<const Obs*>> by_key;
    for (size_t r : present)
      for (auto& [key, o] : obs[r]) by_key[key].push_back(&o);
    std::map<Key, double> med_dur, med_gap, med_ttke, med_pos;
    for (auto& [key, v] : by_key) {
      std::vector<double> d, g, t, p;
      for (const Obs* o : v) {
        d.push_back(o->dur);
        g.push_back(o->gap);
        t.push_back(o->ttke);
        p.push_back(o->pos);
      }
      med_dur[key] = median_of(d);
      med_gap[key] = median_of(g);
      med_ttke[key] = median_of(t);
      med_pos[key] = median_of(p);
    }
    std::vector<Key> order;
    for (auto& [key, p] : med_pos) order.push_back(key);
    std::stable_sort(order.begin(), order.end(), [&](const Key& a, const Key& b) { return med_pos[a] < med_pos[b]; });

    // Arrival at the step's first collective, compared across the ranks that have one.
    std::vector<double> arr, idle_before;
    for (size_t r : present)
      if (arrivals[r].arrival >= 0) {
        arr.push_back(arrivals[r].arrival);
        idle_before.push_back(arrivals[r].idle_before);
      }
    const double med_arrival = median_of(arr), med_idle_before = median_of(idle_before);
    size_t last = nranks;
    for (size_t r : present)
      if (arrivals[r].arrival >= 0 && (last == nranks || arrivals[r].arrival > arrivals[last].arrival)) last = r;

    size_t worst = present[0];
    for (size_t r : present) {
      double div = finals[r] - sj.median_ttke_ns;
      racc[r].end_div.push_back(div);
      if (div > finals[worst] - sj.median_ttke_ns) worst = r;
      RankStepJitter& cell = row[r];
      cell.present = true;
      cell.end_divergence_ns = div;
      if (arrivals[r].arrival >= 0 && arr.size() > 1) {
        cell.arrival_ns = arrivals[r].arrival;
        cell.arrival_excess_ns = arrivals[r].arrival - med_arrival;
        cell.last_arrival = r == last;
        cell.precollective_idle_excess_ns = arrivals[r].idle_before - med_idle_before;
        cell.collective_launched_late = arrivals[r].launched_late;
        racc[r].arrival_excess.push_back(cell.arrival_excess_ns);
        ++racc[r].with_collective;
        racc[r].last += cell.last_arrival;
      }
      double de = 0, ge = 0;
      for (auto& [key, o] : obs[r]) {
        // NCCL kernels last until the slowest rank arrives: their length is the victims'
        // waiting, not this rank's work (NVRx and the talk leave them out too).
        double excess = o.nccl ? 0 : o.dur - med_dur[key];
        de += excess;
        ge += o.gap - med_gap[key];
        if (!o.nccl)
          cell.gap_excess_by_section[o.section == StringTable::kNone ? "(no section)" : model.strings.at(o.section)] +=
              o.gap - med_gap[key];
        if (o.kind != GpuKind::kernel) cell.memory_excess_ns += excess;
        else if (!o.nccl)
          cell.duration_excess_by_section[o.section == StringTable::kNone ? "(no section)" : model.strings.at(o.section)] +=
              excess;
        if (o.delay >= 0) racc[r].delays.push_back(o.delay);
        SlotAcc& s = slots[key];
        if (s.n.empty()) {
          s.dur_sum.assign(nranks, 0);
          s.gap_sum.assign(nranks, 0);
          s.pos_sum.assign(nranks, 0);
          s.n.assign(nranks, 0);
        }
        s.dur_sum[r] += o.dur;
        s.gap_sum[r] += o.gap;
        s.pos_sum[r] += o.pos;
        ++s.n[r];
        s.nccl = o.nccl;
        s.section = o.section;
      }
      racc[r].dur_excess.push_back(de);
      racc[r].gap_excess.push_back(ge);
      cell.duration_excess_ns = de;
      cell.gap_excess_ns = ge;
    }
    rep.matrix.push_back(std::move(row));
    ++racc[worst].worst;
    sj.worst_rank = model.ranks[worst].rank;
    sj.worst_divergence_ns = finals[worst] - sj.median_ttke_ns;
    for (size_t i = 0; i < order.size(); ++i) {
      auto it = obs[worst].find(order[i]);
      if (it == obs[worst].end()) continue;
      if (it->second.ttke - med_ttke[order[i]] > rep.divergence_threshold_ns) {
        sj.first_diverging_slot = static_cast<int>(i);
        sj.first_diverging_kernel = model.strings.at(order[i].name);
        break;
      }
    }
    rep.steps.push_back(sj);
  }

  for (size_t r = 0; r < nranks; ++r) {
    const RankData& d = model.ranks[r];
    RankJitter rj;
    rj.rank = d.rank;
    rj.host = d.host;
    if (!gpu[r].by_launch.empty()) rj.device = gpu[r].by_launch.front()->device;
    rj.median_end_divergence_ns = median_of(racc[r].end_div);
    rj.steps_worst = racc[r].worst;
    rj.duration_excess_ns = median_of(racc[r].dur_excess);
    rj.gap_excess_ns = median_of(racc[r].gap_excess);
    rj.median_launch_delay_ns = median_of(racc[r].delays);
    size_t near_zero = 0;
    for (double x : racc[r].delays) near_zero += x < 10'000;
    rj.near_zero_launch_delay_share = racc[r].delays.empty() ? 0 : double(near_zero) / racc[r].delays.size();
    rj.median_step_ns = median_of(racc[r].step_ns);
    rj.median_arrival_excess_ns = median_of(racc[r].arrival_excess);
    rj.last_arrival_share = racc[r].with_collective ? double(racc[r].last) / racc[r].with_collective : 0;
    rep.ranks.push_back(rj);
  }

  std::map<std::string, std::vector<const RankJitter*>> by_host;
  for (const RankJitter& rj : rep.ranks) by_host[rj.host].push_back(&rj);
  for (auto& [host, rs] : by_host) {
    HostJitter hj;
    hj.host = host;
    hj.ranks = static_cast<int>(rs.size());
    std::vector<double> v;
    const RankJitter* worst = rs[0];
    for (const RankJitter* rj : rs) {
      v.push_back(rj->median_end_divergence_ns);
      if (rj->median_end_divergence_ns > worst->median_end_divergence_ns) worst = rj;
    }
    hj.median_end_divergence_ns = median_of(v);
    hj.worst_rank = worst->rank;
    rep.hosts.push_back(hj);
  }

  // Kernel positions over the whole run: each rank's mean over steps, then across ranks.
  for (auto& [key, s] : slots) {
    KernelSlotStats ks;
    ks.name = model.strings.at(key.name);
    ks.section = s.section == StringTable::kNone ? "(no section)" : model.strings.at(s.section);
    ks.nccl = s.nccl;
    std::vector<double> durs, gaps, poss;
    for (size_t r = 0; r < nranks; ++r) {
      if (!s.n[r]) continue;
      double d = s.dur_sum[r] / s.n[r], g = s.gap_sum[r] / s.n[r];
      durs.push_back(d);
      gaps.push_back(g);
      poss.push_back(s.pos_sum[r] / s.n[r]);
      if (ks.min_rank < 0 || d < ks.min_duration_ns) { ks.min_rank = model.ranks[r].rank; ks.min_duration_ns = d; }
      if (ks.max_rank < 0 || d > ks.max_duration_ns) { ks.max_rank = model.ranks[r].rank; ks.max_duration_ns = d; }
      if (ks.max_gap_rank < 0 || g > ks.max_gap_ns) { ks.max_gap_rank = model.ranks[r].rank; ks.max_gap_ns = g; }
    }
    ks.median_duration_ns = median_of(durs);
    ks.median_gap_ns = median_of(gaps);
    ks.slot = static_cast<int>(std::lround(median_of(poss)));
    rep.kernels.push_back(ks);
  }
  std::stable_sort(rep.kernels.begin(), rep.kernels.end(),
                   [](const KernelSlotStats& a, const KernelSlotStats& b) { return a.slot < b.slot; });
  rep.available = true;
  return rep;
}

}  // namespace laggard::report
