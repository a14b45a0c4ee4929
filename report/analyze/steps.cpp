#include "steps.h"

#include <algorithm>
#include <climits>
#include <map>

#include "parallel.h"

namespace laggard::report {
namespace {

std::vector<Step> section_steps(const RankData& r, const std::string& name) {
  std::vector<Step> out;
  for (const CaptureWindow& w : r.windows)
    for (const SectionWindow& s : w.sections)
      if (s.name == name)
        for (const Occurrence& o : s.occurrences) out.push_back({0, o.start_ns, o.start_ns + o.dur_ns});
  std::sort(out.begin(), out.end(), [](const Step& a, const Step& b) { return a.start_ns < b.start_ns; });
  for (size_t i = 0; i < out.size(); ++i) out[i].index = static_cast<int>(i);
  return out;
}

struct Op {
  uint64_t key;      // what must repeat: (communicator, func), or the NCCL kernel's name
  int64_t start_ns;  // GPU start (plugin) / launch (CUPTI)
  int64_t end_ns;
};

// The rank's collectives with GPU times from the NCCL plugin, else its NCCL kernels from CUPTI.
// The plugin's host times are NCCL's plan upload (after the launch, or in a host callback at
// graph replay), not the enqueue: they do not mark where a step starts.
std::vector<Op> collective_ops(const RankData& r) {
  std::vector<Op> ops;
  for (const CaptureWindow& w : r.windows)
    for (const Collective& c : w.collectives)
      if (c.gpu_start_ns && c.gpu_end_ns >= c.gpu_start_ns)
        ops.push_back({(uint64_t(c.comm) << 32) | c.func, c.gpu_start_ns, c.gpu_end_ns});
  if (ops.empty())
    for (const CaptureWindow& w : r.windows) {
      for (const GpuActivity& a : w.gpu)
        if (a.nccl) ops.push_back({a.name, a.api_start_ns ? a.api_start_ns : a.start_ns, a.end_ns});
      for (const GpuSpan& a : r.spans_of(w))
        if (a.nccl) ops.push_back({a.name, a.api_start_ns ? a.api_start_ns : a.start_ns, a.end_ns});
    }
  std::sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.start_ns < b.start_ns; });
  return ops;
}

// Steps from collectives: the shortest period P with which the rank's sequence of
// collectives repeats; a step starts where each period's first op starts.
std::vector<Step> collective_steps(const RankData& r, int* period_out) {
  std::vector<Op> ops = collective_ops(r);
  const size_t n = ops.size();
  if (n < 4) return {};
  auto same = [&](size_t i, size_t j) { return ops[i].key == ops[j].key; };
  for (size_t p = 1; p <= n / 2; ++p) {
    size_t match = 0;
    for (size_t i = 0; i + p < n; ++i) match += same(i, i + p);
    if (match * 10 >= (n - p) * 9) {  // 90 %: tolerate a ragged start or end
      std::vector<Step> out;
      for (size_t i = 0; i + p <= n; i += p) {
        int64_t end = i + p < n ? ops[i + p].start_ns : ops[n - 1].end_ns;
        out.push_back({static_cast<int>(out.size()), ops[i].start_ns, std::max(end, ops[i].start_ns)});
      }
      *period_out = static_cast<int>(p);
      return out;
    }
  }
  return {};
}

// Each rank's steps, found on every core (issue 29: one thread took 25-40 ms at 10,000 ranks of
// summaries, reading every rank's collectives from memory the caches no longer hold).
template <class F>
std::vector<std::vector<Step>> steps_per_rank(const RunModel& model, F&& steps_of) {
  std::vector<std::vector<Step>> out(model.ranks.size());
  parallel_for(out.size(), [&](size_t i) { out[i] = steps_of(model.ranks[i], i); });
  return out;
}

}  // namespace

int StepSet::count() const {
  if (per_rank.empty()) return 0;
  size_t n = SIZE_MAX;
  for (const auto& r : per_rank) n = std::min(n, r.size());
  return static_cast<int>(n);
}

StepSet detect_steps(const RunModel& model, const std::string& step_section) {
  StepSet set;
  std::string name = step_section;
  if (!name.empty()) {
    set.source = "NVTX section '" + name + "' (--step-section)";
  } else {
    // The most frequent top-level section; ties go to the longer one (a step encloses its parts).
    // Counts within one occurrence per rank tie: in a run still being written (`laggard watch`) a
    // short top-level range of the next step (a data load) may have closed while its step is open.
    std::map<std::string, std::pair<uint64_t, int64_t>> top;  // name -> (count, total)
    for (const RankData& r : model.ranks)
      for (const CaptureWindow& w : r.windows)
        for (const SectionWindow& s : w.sections)
          if (s.parent.empty()) {
            top[s.name].first += s.count;
            top[s.name].second += s.total_ns;
          }
    uint64_t most = 0;
    for (const auto& [n, ct] : top) most = std::max(most, ct.first);
    const uint64_t open_slack = model.ranks.size();
    int64_t best_total = -1;
    for (const auto& [n, ct] : top)
      if (ct.first > 1 /* a step repeats */ && ct.first + open_slack >= most && ct.second > best_total) {
        best_total = ct.second;
        name = n;
      }
    if (!name.empty()) set.source = "NVTX section '" + name + "' (most frequent top-level section)";
  }
  if (!name.empty()) {
    set.section = name;
    set.per_rank = steps_per_rank(model, [&](const RankData& r, size_t) { return section_steps(r, name); });
    if (set.count() > 0 || !step_section.empty()) return set;
    set.per_rank.clear();
    set.section.clear();
  }
  std::vector<int> periods(model.ranks.size(), 0);
  set.per_rank = steps_per_rank(model, [&](const RankData& r, size_t i) { return collective_steps(r, &periods[i]); });
  int period = 0;  // the last rank's that found one, as when the ranks were taken in order
  for (int p : periods)
    if (p) period = p;
  if (set.count() > 0) {
    set.source = "repeating sequence of " + std::to_string(period) + " NCCL collective(s)";
    return set;
  }
  set.per_rank.clear();
  set.source = "none (no repeated top-level NVTX section and no repeating NCCL collectives)";
  return set;
}

}  // namespace laggard::report
