#include "breakdown.h"

#include <algorithm>
#include <cmath>

#include "stats.h"

namespace laggard::report {

Temporal& Temporal::operator+=(const Temporal& o) {
  span_ns += o.span_ns;
  compute_ns += o.compute_ns;
  comm_ns += o.comm_ns;
  memory_ns += o.memory_ns;
  idle_ns += o.idle_ns;
  return *this;
}

IdleSplit& IdleSplit::operator+=(const IdleSplit& o) {
  host_wait_ns += o.host_wait_ns;
  kernel_wait_ns += o.kernel_wait_ns;
  other_ns += o.other_ns;
  return *this;
}

TypeTotals& TypeTotals::operator+=(const TypeTotals& o) {
  comp_ns += o.comp_ns;
  comm_ns += o.comm_ns;
  mem_ns += o.mem_ns;
  comp += o.comp;
  comm += o.comm;
  mem += o.mem;
  return *this;
}

namespace {

const char* type_of(const GpuActivity& a) { return is_compute(a) ? "COMP" : a.nccl ? "COMM" : "MEM"; }

struct Unions {
  std::vector<Interval> comp, comm, mem;
};

Unions unions(const GpuTimeline& g, int64_t lo, int64_t hi) {
  std::vector<Interval> c, n, m;
  for (const GpuActivity* a : g.by_launch) {
    if (a->end_ns <= lo || a->start_ns >= hi) continue;
    Interval i{std::max(a->start_ns, lo), std::min(a->end_ns, hi)};
    (is_compute(*a) ? c : a->nccl ? n : m).push_back(i);
  }
  return {merge(c), merge(n), merge(m)};
}

Temporal temporal_of(const Unions& u, int64_t span) {
  Temporal t;
  t.span_ns = double(span);
  auto comm_only = subtract(u.comm, u.comp);
  auto busy_cc = merge([&] {
    auto v = u.comp;
    v.insert(v.end(), u.comm.begin(), u.comm.end());
    return v;
  }());
  auto mem_only = subtract(u.mem, busy_cc);
  t.compute_ns = double(length(u.comp));
  t.comm_ns = double(length(comm_only));
  t.memory_ns = double(length(mem_only));
  t.idle_ns = std::max(0.0, t.span_ns - t.compute_ns - t.comm_ns - t.memory_ns);
  return t;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p * double(v.size()))) ;
  return v[std::min(v.size() - 1, i ? i - 1 : 0)];
}

}  // namespace

IdleSplit split_idle(const GpuTimeline& g, int64_t lo, int64_t hi, int64_t kernel_wait_ns) {
  IdleSplit s;
  for (const auto& [key, acts] : g.by_stream) {
    for (size_t i = 1; i < acts.size(); ++i) {
      const GpuActivity& prev = *acts[i - 1];
      const GpuActivity& next = *acts[i];
      int64_t gs = std::max(prev.end_ns, lo), ge = std::min(next.start_ns, hi);
      if (ge <= gs) continue;
      double gap = double(ge - gs);
      if (next.api_end_ns && next.api_end_ns > gs) {  // host wait is tested first, as HTA does
        double host = std::min<double>(double(next.api_end_ns - gs), gap);
        s.host_wait_ns += host;
        s.other_ns += gap - host;
      } else if (next.start_ns - prev.end_ns < kernel_wait_ns) {
        s.kernel_wait_ns += gap;
      } else {
        s.other_ns += gap;
      }
    }
  }
  return s;
}

BreakdownReport analyze_breakdown(const RunModel& model, const StepSet& steps, const BreakdownOptions& opt) {
  BreakdownReport rep;
  rep.options = opt;
  std::vector<GpuTimeline> gpu;
  bool any = false;
  for (const RankData& r : model.ranks) {
    gpu.push_back(index_gpu(r));
    any |= !gpu.back().empty();
  }
  if (!any) {
    rep.why_not = "no per-kernel GPU records (no GPU, CUPTI off, or no sampled window)";
    return rep;
  }

  struct KAcc {
    std::string type;
    uint64_t count = 0;
    std::map<size_t, double> per_rank;
  };
  std::map<std::string, KAcc> kernels;
  TypeTotals all_types;
  for (size_t r = 0; r < model.ranks.size(); ++r) {
    const GpuTimeline& g = gpu[r];
    RankBreakdown rb;
    rb.rank = model.ranks[r].rank;
    rb.host = model.ranks[r].host;
    std::vector<double> delays, runtimes;
    for (const Interval& span : g.sampled) {
      Unions u = unions(g, span.start, span.end);
      rb.temporal += temporal_of(u, span.end - span.start);
      rb.idle += split_idle(g, span.start, span.end, opt.kernel_wait_ns);
    }
    {
      Unions u = unions(g, INT64_MIN, INT64_MAX);
      double comm = double(length(u.comm));
      if (comm > 0) rb.overlap = double(length(intersect(u.comm, u.comp))) / comm;
    }
    for (const GpuActivity* a : g.by_launch) {
      double dur = double(a->end_ns - a->start_ns);
      std::string type = type_of(*a);
      if (type == "COMP") { rb.types.comp_ns += dur; ++rb.types.comp; }
      else if (type == "COMM") { rb.types.comm_ns += dur; ++rb.types.comm; }
      else { rb.types.mem_ns += dur; ++rb.types.mem; }
      TypeTotals& sec = rep.by_section[a->section == StringTable::kNone ? "(no section)" : model.strings.at(a->section)];
      TypeTotals one;
      (type == "COMP" ? one.comp_ns : type == "COMM" ? one.comm_ns : one.mem_ns) = dur;
      (type == "COMP" ? one.comp : type == "COMM" ? one.comm : one.mem) = 1;
      sec += one;
      KAcc& k = kernels[model.strings.at(a->name)];
      k.type = type;
      ++k.count;
      k.per_rank[r] += dur;
      if (a->api_end_ns) {
        ++rb.launch.with_launch;
        double delay = double(a->start_ns - a->api_end_ns);
        double runtime = double(a->api_end_ns - a->api_start_ns);
        delays.push_back(delay);
        runtimes.push_back(runtime);
        rb.launch.short_kernels += dur < runtime;
        rb.launch.delay_outliers += delay > opt.launch_delay_cutoff_ns;
        rb.launch.runtime_outliers += runtime > opt.runtime_cutoff_ns;
      }
    }
    rb.launch.median_delay_ns = median(delays);
    rb.launch.p95_delay_ns = percentile(delays, 0.95);
    rb.launch.median_runtime_ns = median(runtimes);
    all_types += rb.types;
    rep.ranks.push_back(rb);
  }

  std::map<std::string, HostBreakdown> hosts;
  for (const RankBreakdown& rb : rep.ranks) {
    HostBreakdown& h = hosts[rb.host];
    h.host = rb.host;
    ++h.ranks;
    h.temporal += rb.temporal;
    h.idle += rb.idle;
  }
  for (auto& [n, h] : hosts) rep.hosts.push_back(h);

  for (auto& [name, k] : kernels) {
    TopKernel t;
    t.name = name;
    t.type = k.type;
    t.count = k.count;
    for (auto& [r, ns] : k.per_rank) {
      t.total_ns += ns;
      if (t.min_rank < 0 || ns < t.min_rank_ns) { t.min_rank = model.ranks[r].rank; t.min_rank_ns = ns; }
      if (t.max_rank < 0 || ns > t.max_rank_ns) { t.max_rank = model.ranks[r].rank; t.max_rank_ns = ns; }
    }
    double type_total = t.type == "COMP" ? all_types.comp_ns : t.type == "COMM" ? all_types.comm_ns : all_types.mem_ns;
    t.share_of_type = type_total > 0 ? t.total_ns / type_total : 0;
    rep.top.push_back(t);
  }
  std::sort(rep.top.begin(), rep.top.end(), [](const TopKernel& a, const TopKernel& b) { return a.total_ns > b.total_ns; });
  if (rep.top.size() > opt.top_kernels) rep.top.resize(opt.top_kernels);

  for (int k = 0; k < steps.count(); ++k) {
    StepBreakdown sb;
    sb.step = steps.per_rank.empty() || steps.per_rank[0].size() <= size_t(k) ? k : steps.per_rank[0][k].index;
    std::vector<double> idle, host_wait;
    for (size_t r = 0; r < model.ranks.size(); ++r) {
      const Step& st = steps.per_rank[r][k];
      double len = double(st.end_ns - st.start_ns);
      if (len <= 0 || gpu[r].in_step(st).empty()) continue;
      Temporal t = temporal_of(unions(gpu[r], st.start_ns, st.end_ns), st.end_ns - st.start_ns);
      double share = t.idle_ns / len;
      idle.push_back(share);
      host_wait.push_back(split_idle(gpu[r], st.start_ns, st.end_ns, opt.kernel_wait_ns).host_wait_ns / len);
      if (sb.max_idle_rank < 0 || share > sb.max_idle_share) {
        sb.max_idle_rank = model.ranks[r].rank;
        sb.max_idle_share = share;
      }
    }
    if (idle.empty()) continue;
    sb.median_idle_share = median(idle);
    sb.median_host_wait_share = median(host_wait);
    rep.steps.push_back(sb);
  }
  rep.available = true;
  return rep;
}

}  // namespace laggard::report
