#include "nccl_gpu_checks.h"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>

#include <fmt/format.h>

namespace laggard::report {
namespace {

// A rank's ops with GPU times, per GPU (a process driving several GPUs has one clock and one
// proxy lag per GPU; device -1: unknown, one GPU).
std::map<int, std::vector<Collective*>> with_gpu_times(RankData& r) {
  std::map<int, std::vector<Collective*>> by_device;
  for (CaptureWindow& w : r.windows)
    for (Collective& c : w.collectives)
      if (c.gpu_start_ns && c.gpu_end_ns >= c.gpu_start_ns) by_device[c.device].push_back(&c);
  return by_device;
}

// One communicator's ops as the GPU ran them: ops of one NCCL plan (group) run in one kernel
// and overlap, so they count as one interval (earliest start, latest end); plans run one after
// another, in upload order.
struct PlanSpan {
  int64_t upload = 0, start = 0, end = 0;
  std::vector<Collective*> ops;
};

std::vector<PlanSpan> plan_spans(std::vector<Collective*>& list) {
  std::stable_sort(list.begin(), list.end(),
                   [](const Collective* a, const Collective* b) { return a->upload_start_ns < b->upload_start_ns; });
  std::vector<PlanSpan> spans;
  std::map<uint64_t, size_t> span_of_group;
  for (Collective* c : list) {
    size_t i = spans.size();
    if (c->group) {
      auto [it, added] = span_of_group.emplace(c->group, spans.size());
      i = it->second;
    }
    if (i == spans.size()) spans.push_back({c->upload_start_ns, c->gpu_start_ns, c->gpu_end_ns, {}});
    PlanSpan& s = spans[i];
    s.start = std::min(s.start, c->gpu_start_ns);
    s.end = std::max(s.end, c->gpu_end_ns);
    s.ops.push_back(c);
  }
  return spans;
}

// The second smallest of a window of values: the proxy's most prompt reads nearby, yet robust to
// one bad neighbour. (A quantile would flag the prompt reads of a proxy whose lag grows or
// shrinks: the slow rank's, whose samples must not be lost.) Any range [l, r) in O(log n) from a
// segment tree of each range's two smallest (duplicates counted, as a multiset would): the
// sliding windows below kept a std::multiset each, a node allocated per op and window, 3 % of a
// report of 10,000 ranks of summaries (issue 29).
class SecondSmallest {
 public:
  explicit SecondSmallest(const std::vector<int64_t>& values) : n_(values.size()), node_(2 * n_) {
    for (size_t i = 0; i < n_; ++i) node_[n_ + i] = {values[i], kNone};
    for (size_t i = n_; i-- > 1;) node_[i] = merge(node_[2 * i], node_[2 * i + 1]);
  }
  // The second smallest of values [l, r), which holds at least two.
  int64_t of(size_t l, size_t r) const {
    Two acc;
    for (l += n_, r += n_; l < r; l >>= 1, r >>= 1) {  // bottom-up: merge is commutative
      if (l & 1) acc = merge(acc, node_[l++]);
      if (r & 1) acc = merge(acc, node_[--r]);
    }
    return acc.second;
  }

 private:
  static constexpr int64_t kNone = INT64_MAX;
  struct Two {
    int64_t first = kNone, second = kNone;  // first <= second
  };
  static Two merge(const Two& a, const Two& b) {
    return a.first <= b.first ? Two{a.first, std::min(a.second, b.first)} : Two{b.first, std::min(a.first, b.second)};
  }
  size_t n_;
  std::vector<Two> node_;
};

// GPU times later than the callback that reported them, against the proxy's usual delay around
// them (callback - GPU time: the clocks' offset plus the proxy's lag; the offset drifts slowly,
// so the baseline is local). Each side's baseline comes from the ops within baseline_window_ns
// of it, and at least the `neighbours` nearest: a proxy starved of CPU for a while (all its
// reads late, a prompt one here and there) still has its prompt reads in the baseline, and a
// prompt op among late neighbours is not taken for another work's time (issue 27, seen under
// load).
template <class HostOf, class GpuOf>
void flag_after_callback(std::vector<Collective*> ops, HostOf host_of, GpuOf gpu_of, const NcclGpuCheckOptions& o) {
  ops.erase(std::remove_if(ops.begin(), ops.end(), [&](Collective* c) { return !host_of(*c); }), ops.end());
  std::sort(ops.begin(), ops.end(), [&](Collective* a, Collective* b) { return host_of(*a) < host_of(*b); });
  const size_t n = ops.size();
  std::vector<int64_t> delay(n), host(n);
  for (size_t i = 0; i < n; ++i) {
    host[i] = host_of(*ops[i]);
    delay[i] = host[i] - gpu_of(*ops[i]);
  }
  // A proxy starved of CPU reads late most of the time and promptly now and then: an op may sit
  // below its neighbours' floor by about as much as their reads vary. Only more than that (and
  // than callback_tolerance_ns) says another work's time: a later work is a whole step later.
  std::vector<int64_t> sorted = delay;
  std::sort(sorted.begin(), sorted.end());
  const double tolerance = std::max<double>(
      double(o.callback_tolerance_ns), n ? double(sorted[n / 2] - sorted[std::min<size_t>(1, n - 1)]) : 0.0);
  const size_t k = static_cast<size_t>(std::max(1, o.neighbours));
  // Windows [lo, i) and (i, hi), both bounds only move forward.
  const SecondSmallest second_smallest(delay);
  size_t lo = 0, hi = 0, time_lo = 0;
  for (size_t i = 0; i < n; ++i) {
    while (time_lo < i && host[time_lo] < host[i] - o.baseline_window_ns) ++time_lo;
    lo = std::max(lo, std::min(i > k ? i - k : 0, time_lo));
    hi = std::max(hi, i + 1);
    while (hi < n && (hi <= i + k || host[hi] <= host[i] + o.baseline_window_ns)) ++hi;
    // Below the usual delay on both sides: a step in the proxy's lag (it fell behind, or caught
    // up) is below one side only. Ops without enough neighbours on either side are not judged.
    if (i - lo < 4 || hi - (i + 1) < 4 || ops[i]->gpu_time_suspect) continue;
    if (delay[i] < second_smallest.of(lo, i) - tolerance && delay[i] < second_smallest.of(i + 1, hi) - tolerance)
      ops[i]->gpu_time_suspect = "after_callback";
  }
}

}  // namespace

void shift_far_gpu_clock(RankData& r, std::vector<Problem>& problems, const NcclGpuCheckOptions& o) {
  for (auto& [device, ops] : with_gpu_times(r)) shift_far_gpu_clock(r, device, ops, problems, o);
}

void shift_far_gpu_clock(RankData& r, int device, const std::vector<Collective*>& ops, std::vector<Problem>& problems,
                         const NcclGpuCheckOptions& o) {
  int64_t by_callback = INT64_MAX, by_upload = INT64_MAX;
  for (const Collective* c : ops) {
    if (c->chan_host_stop_ns) by_callback = std::min(by_callback, c->chan_host_stop_ns - c->gpu_end_ns);
    by_upload = std::min(by_upload, c->upload_start_ns - c->gpu_start_ns);
  }
  const bool callbacks = by_callback != INT64_MAX;
  const int64_t shift = callbacks ? by_callback : by_upload;  // host - GPU
  if (ops.empty() || (shift <= o.far_clock_ns && shift >= -o.far_clock_ns)) return;
  for (Collective* c : ops) {
    c->gpu_start_ns += shift;
    c->gpu_end_ns += shift;
  }
  if (!r.nccl_gpu_shift_ns) r.nccl_gpu_shift_ns = shift;
  problems.push_back({"nccl_gpu_clock", r.rank, "",
                      fmt::format("rank {}{}: this GPU's NCCL timestamps are {:.1f} s off the host clock; shifted so {}",
                                  r.rank, device >= 0 ? fmt::format(" (GPU {})", device) : std::string(),
                                  double(-shift) / 1e9,
                                  callbacks ? "each ends no later than the host callback that reported it"
                                            : "the earliest collective starts at its plan upload")});
}

void flag_implausible_gpu_times(RankData& r, std::vector<Problem>& problems, const NcclGpuCheckOptions& o) {
  std::map<std::string, uint64_t> counts;
  for (auto& [device, ops] : with_gpu_times(r)) {
    flag_implausible_gpu_times(ops, o);
    for (const Collective* c : ops)
      if (c->gpu_time_suspect) ++counts[c->gpu_time_suspect];
  }
  if (counts.empty()) return;
  std::string what;
  for (const auto& [why, n] : counts) what += fmt::format("{}{} {}", what.empty() ? "" : ", ", n, why);
  problems.push_back({"nccl_gpu_time_suspect", r.rank, "",
                      fmt::format("rank {}: NCCL operations left out of blame and of the clock fit ({}): partial = "
                                  "channels missing, after_callback = GPU time later than the callback that reported "
                                  "it, out_of_order = overlaps its communicator's neighbour (timestamps of other work), "
                                  "shifted = NCCL's work counter was shifted by a Broadcast from several roots "
                                  "(NVIDIA/nccl#2368)",
                                  r.rank, what)});
}

void flag_implausible_gpu_times(std::vector<Collective*>& ops, const NcclGpuCheckOptions& o) {
  for (Collective* c : ops) {
    if (c->gpu_shifted) c->gpu_time_suspect = "shifted";  // kept only on request (LAGGARD_NCCL_KERNEL_EVENTS=1)
    else if (c->channels >= 0 && c->nchannels > 0 && c->channels < c->nchannels) c->gpu_time_suspect = "partial";
  }
  flag_after_callback(
      ops, [](const Collective& c) { return c.chan_host_stop_ns; }, [](const Collective& c) { return c.gpu_end_ns; },
      o);
  flag_after_callback(
      ops, [](const Collective& c) { return c.chan_host_start_ns; },
      [](const Collective& c) { return c.gpu_start_ns; }, o);

  // One communicator's plans run one after another, in the order they were uploaded.
  std::map<uint32_t, std::vector<Collective*>> by_comm;
  for (Collective* c : ops)
    if (!c->gpu_time_suspect && !c->p2p) by_comm[c->comm].push_back(c);
  auto flag = [](PlanSpan& s) {
    for (Collective* c : s.ops)
      if (!c->gpu_time_suspect) c->gpu_time_suspect = "out_of_order";
  };
  for (auto& [comm, list] : by_comm) {
    std::vector<PlanSpan> spans = plan_spans(list);
    for (size_t i = 1; i < spans.size(); ++i)
      if (spans[i].start < spans[i - 1].end - o.order_tolerance_ns) {
        flag(spans[i]);
        flag(spans[i - 1]);
      }
  }
}

namespace {

// Whether the rank ran any NCCL kernel. Asked only when it decides something: a pass over every
// per-kernel record was 5 % of the reading stage's CPU at 960 x 903 x 50 (issue 29).
bool ran_nccl_kernels(const RankData& r) {
  auto nccl = [](const auto& a) { return a.nccl; };
  for (const CaptureWindow& w : r.windows)
    if (std::any_of(w.kernel_stats.begin(), w.kernel_stats.end(), nccl) ||
        std::any_of(w.gpu.begin(), w.gpu.end(), nccl) || std::ranges::any_of(r.spans_of(w), nccl))
      return true;
  return false;
}

}  // namespace

void check_nccl_plugin(const RankData& r, std::vector<Problem>& problems) {
  int table = 0;
  std::string kernel_events, displaced;
  bool any_nccl_object = false;
  for (const CaptureWindow& w : r.windows) {
    table = std::max(table, w.nccl_table);
    if (!w.nccl_kernel_events.empty()) kernel_events = w.nccl_kernel_events;
    if (!w.nccl_displaced.empty()) displaced = w.nccl_displaced;
    any_nccl_object |= w.nccl_table > 0 || !w.collectives.empty() || !w.p2p.empty();
  }
  if (r.nccl_status == "on" && !any_nccl_object && ran_nccl_kernels(r))
    problems.push_back({"nccl_plugin_not_loaded", r.rank, "",
                        fmt::format("rank {} ran NCCL kernels but NCCL never initialized laggard's profiler plugin "
                                    "(NCCL <= 2.26 knows only v3 tables; 2.27.3 opens neither STATIC_PLUGIN nor "
                                    "absolute paths; from 2.29 an env plugin, NCCL_ENV_PLUGIN, may name another "
                                    "profiler): no collectives recorded", r.rank)});
  if (!displaced.empty())
    problems.push_back({"nccl_profiler_displaced", r.rank, "",
                        fmt::format("rank {}: NCCL would have loaded {} as its profiler plugin; laggard took its place "
                                    "(NCCL loads one) and does not call it: set NCCL_PROFILER_PLUGIN to it, or "
                                    "LAGGARD_NCCL=0, to keep it", r.rank, displaced)});
  if (kernel_events.rfind("off", 0) == 0)
    problems.push_back({"nccl_kernel_events_off", r.rank, "",
                        fmt::format("rank {}: NCCL collectives recorded without GPU times, so nobody is blamed from "
                                    "them: kernel events {}", r.rank, kernel_events)});
}

}  // namespace laggard::report
