#include "hta_compat.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>
#include <set>

#include <fmt/format.h>

namespace laggard::report {
namespace {

// HTA's integer-µs event: ts = ceil(start), end = floor(start + dur), dur = end - ts.
struct Ev {
  int64_t ts, end;
  const GpuActivity* a;
  int type;  // bit 0 COMPUTATION, bit 1 COMMUNICATION, bit 2 MEMORY, 0 OTHER
};

int64_t ceil_us(int64_t ns) { return ns >= 0 ? (ns + 999) / 1000 : -((-ns) / 1000); }
int64_t floor_us(int64_t ns) { return ns >= 0 ? ns / 1000 : -((-ns + 999) / 1000); }

// HTA's µs times. HTA reads a Kineto trace's ts and dur as float64 µs, rounds ts up and ts + dur
// down (trace_parser.py round_down_time_stamps). A double holds an epoch-µs time such as
// 1712195495519689.047 only to 0.25 µs, so on imported Kineto traces the same float arithmetic is
// done on the file's own numbers (relative to baseTimeNanoseconds when it had one); laggard's
// other analyses use the exact ns.
class HtaClock {
 public:
  explicit HtaClock(int64_t import_base_ns) : base_(import_base_ns) {}
  int64_t ts(int64_t start_ns) const { return base_ < 0 ? ceil_us(start_ns) : int64_t(std::ceil(us(start_ns - base_))); }
  int64_t end(int64_t start_ns, int64_t end_ns) const {
    if (base_ < 0) return floor_us(end_ns);
    return int64_t(std::floor(us(start_ns - base_) + us(end_ns - start_ns)));
  }

 private:
  int64_t base_;
  // The double Python's float() makes of the trace's text "<µs>.<3 digits>".
  static double us(int64_t ns) {
    std::string text = ns < 0 ? fmt::format("-{}.{:03d}", -ns / 1000, -ns % 1000) : fmt::format("{}.{:03d}", ns / 1000, ns % 1000);
    return std::strtod(text.c_str(), nullptr);
  }
};

constexpr int kComp = 1, kComm = 2, kMem = 4;

int type_bit(const std::string& type) {
  return type == "COMPUTATION" ? kComp : type == "COMMUNICATION" ? kComm : type == "MEMORY" ? kMem : 0;
}

int type_of(const GpuActivity& a, const StringTable& strings) {
  if (a.kind != GpuKind::kernel) return kMem;  // HTA: names "Memcpy ..." / "Memset ..." are MEMORY
  if (a.nccl) return kComm;
  return type_bit(hta_kernel_type(strings.at(a.name)));
}

struct HtaInterval {
  int64_t ts, end;
};

// hta.utils.utils.merge_kernel_intervals: sorted by ts, a new group starts where ts exceeds the
// largest end so far; each group spans [min ts, max end].
std::vector<HtaInterval> hta_merge(std::vector<HtaInterval> v) {
  std::sort(v.begin(), v.end(), [](const HtaInterval& a, const HtaInterval& b) { return a.ts < b.ts; });
  std::vector<HtaInterval> out;
  int64_t cummax = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i == 0 || v[i].ts > cummax) out.push_back(v[i]);
    else {
      out.back().ts = std::min(out.back().ts, v[i].ts);
      out.back().end = std::max(out.back().end, v[i].end);
    }
    cummax = i == 0 ? v[i].end : std::max(cummax, v[i].end);
  }
  return out;
}

int64_t covered(const std::vector<HtaInterval>& merged) {
  int64_t sum = 0;
  for (const auto& i : merged) sum += i.end - i.ts;
  return sum;
}

std::vector<HtaInterval> of_type(const std::vector<Ev>& evs, int bit) {
  std::vector<HtaInterval> v;
  for (const Ev& e : evs)
    if (e.type == bit) v.push_back({e.ts, e.end});
  return hta_merge(std::move(v));
}

// The sweep of _get_gpu_kernel_type_time / get_comm_comp_overlap: +bit at each merged interval's
// start, -bit at its end; the time to the next change is credited to the running combination.
std::map<int, int64_t> sweep(const std::vector<std::pair<int, std::vector<HtaInterval>>>& by_type) {
  std::vector<std::pair<int64_t, int>> changes;
  for (const auto& [bit, merged] : by_type)
    for (const HtaInterval& i : merged) {
      changes.push_back({i.ts, bit});
      changes.push_back({i.end, -bit});
    }
  std::stable_sort(changes.begin(), changes.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::map<int, int64_t> time;
  int running = 0;
  for (size_t i = 0; i + 1 < changes.size(); ++i) {
    running += changes[i].second;
    if (running > 0) time[running] += changes[i + 1].first - changes[i].first;
  }
  return time;
}

std::string combination_name(int running) {
  std::string name;
  for (auto [bit, type] : {std::pair{kComp, "COMPUTATION"}, {kComm, "COMMUNICATION"}, {kMem, "MEMORY"}})
    if (running & bit) name += (name.empty() ? "" : " overlapping ") + std::string(type);
  return name;
}

bool many_profiler_steps(const RunModel& model) {
  for (const RankData& r : model.ranks) {
    uint64_t steps = 0;
    for (const CaptureWindow& w : r.windows)
      for (const SectionWindow& s : w.sections)
        if (s.name == "ProfilerStep") steps += s.count;
    if (steps >= 2) return true;
  }
  return false;
}

// HTA keeps GPU work launched before the last profiler step began (when there are two or more).
std::optional<int64_t> last_step_start_us(const RankData& r, const HtaClock& clock) {
  std::optional<int64_t> last;
  for (const CaptureWindow& w : r.windows)
    for (const SectionWindow& s : w.sections)
      if (s.name == "ProfilerStep")
        for (const Occurrence& o : s.occurrences) last = std::max(last.value_or(INT64_MIN), clock.ts(o.start_ns));
  return last;
}

struct RankEvents {
  std::vector<Ev> gpu;    // kernels, memcpys, memsets
  std::vector<Ev> syncs;  // stream syncs (GPU events for the temporal and type breakdowns)
};

RankEvents events_of(const RankData& r, const StringTable& strings, const HtaClock& clock, bool drop_last_step,
                     bool* dropped) {
  RankEvents out;
  std::optional<int64_t> last = drop_last_step ? last_step_start_us(r, clock) : std::nullopt;
  *dropped = drop_last_step;
  auto kept = [&](const GpuActivity& a) {
    if (!drop_last_step) return true;
    return last && a.api_end_ns != 0 && clock.ts(a.api_start_ns) < *last;
  };
  for (const CaptureWindow& w : r.windows) {
    if (!w.gpu_sampled) continue;
    for (const GpuActivity& a : w.gpu)
      if (kept(a)) out.gpu.push_back({clock.ts(a.start_ns), clock.end(a.start_ns, a.end_ns), &a, type_of(a, strings)});
    for (const GpuActivity& a : w.stream_events)
      if (kept(a))
        out.syncs.push_back({clock.ts(a.start_ns), clock.end(a.start_ns, a.end_ns), &a,
                             type_bit(hta_kernel_type(strings.at(a.name)))});
  }
  return out;
}

void temporal(const std::vector<Ev>& all, HtaRank& r) {
  std::vector<HtaInterval> v;
  for (const Ev& e : all) v.push_back({e.ts, e.end});
  std::vector<HtaInterval> merged = hta_merge(v);
  r.kernel_time_us = merged.back().end - merged.front().ts;
  r.idle_us = r.kernel_time_us - covered(merged);
  r.compute_us = covered(of_type(all, kComp));
  r.non_compute_us = r.kernel_time_us - r.compute_us - r.idle_us;
}

void idle_by_stream(const std::vector<Ev>& gpu, const HtaClock& clock, const HtaOptions& opt, HtaRank& r) {
  std::map<uint32_t, std::vector<const Ev*>> streams;
  for (const Ev& e : gpu) streams[e.a->stream].push_back(&e);
  for (auto& [stream, evs] : streams) {
    std::stable_sort(evs.begin(), evs.end(), [](const Ev* a, const Ev* b) { return a->ts < b->ts; });
    HtaIdle& idle = r.idle_by_stream[stream];
    for (size_t i = 1; i < evs.size(); ++i) {
      int64_t prev_end = evs[i - 1]->end;
      int64_t gap = evs[i]->ts - prev_end;
      const GpuActivity& a = *evs[i]->a;
      if (a.api_end_ns && clock.ts(a.api_start_ns) > prev_end) idle.host_wait_us += gap;  // tested first, as HTA
      else if (gap < opt.consecutive_kernel_delay_us) idle.kernel_wait_us += gap;
      else idle.other_us += gap;
    }
  }
}

void launch_stats(const std::vector<Ev>& gpu, const StringTable& strings, const HtaClock& clock, const HtaOptions& opt,
                  HtaRank& r) {
  static const std::set<std::string> launches = {"cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync",
                                                 "cudaMemsetAsync"};
  for (const Ev& e : gpu) {
    const GpuActivity& a = *e.a;
    if (!a.api_end_ns || !launches.count(strings.at(a.api_name))) continue;
    int64_t cpu_ts = clock.ts(a.api_start_ns), cpu_dur = clock.end(a.api_start_ns, a.api_end_ns) - cpu_ts;
    int64_t delay = std::max<int64_t>(0, e.ts - cpu_ts - cpu_dur);
    ++r.launch.count;
    r.launch.short_kernels += (e.end - e.ts) < cpu_dur;
    r.launch.runtime_outliers += cpu_dur > opt.runtime_cutoff_us;
    r.launch.delay_outliers += delay > opt.launch_delay_cutoff_us;
    r.launch.delay_sum_us += delay;
  }
}

}  // namespace

std::string hta_kernel_type(const std::string& name) {
  // hta/common/types.py: CommunicateKernelGroupingPattern, MemoryKernelGroupingPattern,
  // ComputeKernelGroupingPattern (inverse match), tested in that order with re.match (anchored),
  // spelled out: std::regex recursed per character and overflowed the stack on kernel names of
  // ~28,000 characters (issue 24). ".*X" under re.match is "X before the first newline".
  const std::string_view n(name);
  const std::string_view line = n.substr(0, n.find('\n'));
  auto starts = [&](std::string_view p) { return n.substr(0, p.size()) == p; };
  auto in_line = [&](std::string_view p) { return line.find(p) != std::string_view::npos; };
  if (starts("nccl") || starts("hip") || starts("hccl") || in_line("ncclKernel")) return "COMMUNICATION";
  if (starts("Memcpy") || starts("hipMemcpy") || starts("Memset") || starts("hipMemset") || starts("dma"))
    return "MEMORY";
  bool cuda_launch = starts("cuda") && line.substr(4).find("LaunchKernel") != std::string_view::npos;
  bool not_compute = starts("nccl") || in_line("Memcpy") || in_line("Memset") || in_line("dma") || in_line("Sync") ||
                     starts("Stream Wait Event") || cuda_launch || starts("runFunction") || starts("hip") ||
                     starts("job_exe") || starts("packet") || starts("pe_exe") || starts("cpum_exe_subgraph") ||
                     starts("hccl") || starts("collective_subgraph_execution");
  return not_compute ? "OTHER" : "COMPUTATION";
}

HtaReport analyze_hta(const RunModel& model, const HtaOptions& opt) {
  HtaReport rep;
  rep.options = opt;
  bool drop_last = many_profiler_steps(model);
  for (const RankData& rank : model.ranks) {
    HtaRank r;
    r.rank = rank.rank;
    HtaClock clock(rank.import_time_base_ns);
    RankEvents ev = events_of(rank, model.strings, clock, drop_last, &r.last_step_dropped);
    std::vector<Ev> all = ev.gpu;
    all.insert(all.end(), ev.syncs.begin(), ev.syncs.end());
    r.has_gpu = !all.empty();
    if (r.has_gpu) {
      temporal(all, r);
      idle_by_stream(ev.gpu, clock, opt, r);
      launch_stats(ev.gpu, model.strings, clock, opt, r);
      for (auto& [running, us] : sweep({{kComp, of_type(all, kComp)}, {kComm, of_type(all, kComm)}, {kMem, of_type(all, kMem)}}))
        rep.kernel_types_us[combination_name(running)] += us;
      std::vector<HtaInterval> comm = of_type(all, kComm);
      if (covered(comm) > 0) {
        std::map<int, int64_t> t = sweep({{kComm, comm}, {kComp, of_type(all, kComp)}});
        double ratio = double(t[kComm | kComp]) / double(covered(comm));
        r.overlap_pct = std::round(100 * ratio * 100) / 100;
      }
      rep.available = true;
    }
    rep.ranks.push_back(std::move(r));
  }
  if (!rep.available) rep.why_not = "no per-kernel GPU records";
  return rep;
}

}  // namespace laggard::report
