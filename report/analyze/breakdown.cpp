#include "breakdown.h"

#include <algorithm>
#include <stdexcept>
#include <cmath>
#include <memory>
#include <optional>

#include "parallel.h"
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

const char* type_of(const GpuSpan& a) { return is_compute(a) ? "COMP" : a.nccl ? "COMM" : "MEM"; }

// Sorted, disjoint intervals with running lengths: how much of any [lo, hi) they cover, in
// O(log n). Clipping commutes with union and difference, so one cover per kind serves every
// window and step (issue 14: the breakdown no longer rescans a rank's activities per step).
class Cover {
 public:
  Cover() = default;
  explicit Cover(std::vector<Interval> merged) : v_(std::move(merged)), before_(v_.size() + 1, 0) {
    for (size_t i = 0; i < v_.size(); ++i) before_[i + 1] = before_[i] + (v_[i].end - v_[i].start);
  }
  const std::vector<Interval>& intervals() const { return v_; }
  int64_t length_in(int64_t lo, int64_t hi) const { return hi > lo ? below(hi) - below(lo) : 0; }

 private:
  int64_t below(int64_t t) const {  // covered length before t
    const size_t i = size_t(std::lower_bound(v_.begin(), v_.end(), t, [](const Interval& x, int64_t v) {
                                return x.start < v;
                              }) - v_.begin());
    int64_t n = before_[i];
    if (i > 0 && v_[i - 1].end > t) n -= v_[i - 1].end - t;
    return n;
  }
  std::vector<Interval> v_;
  std::vector<int64_t> before_;
};

// A rank's GPU time by kind, overlaps counted once: compute, then communication, then memory.
struct Covers {
  Cover compute, comm, comm_only, memory_only;
};

// Intervals merged as they come while their starts do not decrease (a stream's work in launch
// order, the usual case: no array of every activity to sort and merge afterwards, issue 29); from
// the first that starts earlier, gathered and merged at the end. Either way the result is merge()'s:
// the union's maximal parts, whatever the order they were added in.
class MergingIntervals {
 public:
  void reserve(size_t n) { v_.reserve(n); }
  void add(Interval i) {
    if (in_order_ && i.start >= last_start_) [[likely]] {
      last_start_ = i.start;
      if (i.end <= i.start) return;
      if (!v_.empty() && i.start <= v_.back().end) v_.back().end = std::max(v_.back().end, i.end);
      else v_.push_back(i);
      return;
    }
    in_order_ = false;
    v_.push_back(i);
  }
  std::vector<Interval> merged() && { return in_order_ ? std::move(v_) : merge(std::move(v_)); }

 private:
  std::vector<Interval> v_;
  int64_t last_start_ = INT64_MIN;
  bool in_order_ = true;
};

Covers covers_of(const GpuTimeline& g) {
  MergingIntervals c, n, m;
  c.reserve(g.size());  // most are compute kernels; room never written costs no memory
  for (size_t i = 0; i < g.size(); ++i) {
    const GpuSpan a = g.at(i);
    if (is_compute(a)) c.add({a.start_ns, a.end_ns});
    else if (a.nccl) n.add({a.start_ns, a.end_ns});
    else m.add({a.start_ns, a.end_ns});
  }
  Covers out;
  out.compute = Cover(std::move(c).merged());
  out.comm = Cover(std::move(n).merged());
  out.comm_only = Cover(subtract(out.comm.intervals(), out.compute.intervals()));
  std::vector<Interval> busy = out.compute.intervals();
  busy.insert(busy.end(), out.comm.intervals().begin(), out.comm.intervals().end());
  out.memory_only = Cover(subtract(std::move(m).merged(), merge(std::move(busy))));
  return out;
}

Temporal temporal_in(const Covers& u, int64_t lo, int64_t hi) {
  Temporal t;
  t.span_ns = double(hi - lo);
  t.compute_ns = double(u.compute.length_in(lo, hi));
  t.comm_ns = double(u.comm_only.length_in(lo, hi));
  t.memory_ns = double(u.memory_only.length_in(lo, hi));
  t.idle_ns = std::max(0.0, t.span_ns - t.compute_ns - t.comm_ns - t.memory_ns);
  return t;
}

// The part of the gap between two activities of a stream (prev, then next by start) inside [lo, hi),
// as HTA splits idle time: waiting for the host's launch, for a kernel (a short gap), or other.
[[gnu::always_inline]] inline void add_gap(const GpuSpan& prev, const GpuSpan& next, int64_t lo, int64_t hi,
                                           int64_t kernel_wait_ns, IdleSplit& s) {
  int64_t gs = std::max(prev.end_ns, lo), ge = std::min(next.start_ns, hi);
  if (ge <= gs) return;
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

// The gaps between consecutive activities of each stream, searchable by time.
class IdleIndex {
 public:
  explicit IdleIndex(const GpuTimeline& g) : lowest_prev_end_(g.by_stream.size() + g.stream_starts.size(), INT64_MAX) {
    // One flat array for all streams: stream s's acts[i] (by start) is by_stream[first + i],
    // its lowest_prev_end[i] is lowest_prev_end_[first + s + i] (one extra slot per stream).
    for (size_t s = 0; s + 1 < g.stream_starts.size(); ++s) {
      const size_t first = g.stream_starts[s], n = g.stream_starts[s + 1] - first;
      Stream st{&g, first, n, first + s};
      // lowest_prev_end[i]: the earliest end of acts[i - 1 ..]: no gap from i on starts before it.
      for (size_t i = n; i-- > 1;)
        lowest_prev_end_[st.lpe + i] = std::min(lowest_prev_end_[st.lpe + i + 1], st.act(i - 1).end_ns);
      streams_.push_back(st);
    }
  }

  // The gaps' split inside [lo, hi), visiting them in the order split_idle always has.
  IdleSplit split(int64_t lo, int64_t hi, int64_t kernel_wait_ns) const {
    IdleSplit s;
    for (const Stream& st : streams_) {
      // Gaps ending (at the next activity's start) at or before lo are empty inside [lo, hi).
      size_t below = 0, above = st.n;  // upper_bound of lo among the starts
      while (below < above) {
        const size_t mid = below + (above - below) / 2;
        if (lo < st.act(mid).start_ns) above = mid;
        else below = mid + 1;
      }
      size_t i = std::max<size_t>(below, 1);
      if (i >= st.n || lowest_prev_end_[st.lpe + i] >= hi) continue;
      GpuSpan prev = st.act(i - 1);  // each activity unpacked once, as the next gap's end and then its start
      for (; i < st.n && lowest_prev_end_[st.lpe + i] < hi; ++i) {
        const GpuSpan next = st.act(i);
        add_gap(prev, next, lo, hi, kernel_wait_ns, s);
        prev = next;
      }
    }
    return s;
  }

 private:
  struct Stream {
    const GpuTimeline* g;
    size_t first, n;  // its activities by start: by_stream[first, first + n)
    size_t lpe;       // where its lowest_prev_end starts
    [[gnu::always_inline]] GpuSpan act(size_t i) const { return g->at(g->by_stream[first + i]); }
  };
  std::vector<int64_t> lowest_prev_end_;
  std::vector<Stream> streams_;
};

// Intervals whose starts and ends both rise (a rank's merged sampled windows; its steps, most often),
// and the idle split inside each (IdleSplit per interval, out[j] for (*in)[j]).
struct SplitWithin {
  const std::vector<Interval>* in;
  std::vector<IdleSplit> out;
  size_t first = 0;  // the first interval a gap from here on can reach, on the stream being walked
};

bool in_order(const std::vector<Interval>& v) {
  for (size_t j = 1; j < v.size(); ++j)
    if (v[j].start < v[j - 1].start || v[j].end < v[j - 1].end) return false;
  return true;
}

// The idle split inside every interval of every list, in one walk over each stream's gaps (issue 29:
// the breakdown walked them once for the sampled windows and once more for the steps, through an
// index built to find a range's first gap). A gap that is not empty begins at or after the end of
// the one before it (its predecessor by start ends no earlier than it starts), so each list's first
// interval a gap can reach only moves forward; with the ends in order too, every interval looked at
// from there holds part of the gap. Each interval gets its gaps stream by stream, in start order, as
// IdleIndex::split adds them: the same sums.
void split_within(const GpuTimeline& g, int64_t kernel_wait_ns, SplitWithin* lists, size_t nlists) {
  for (size_t l = 0; l < nlists; ++l) lists[l].out.assign(lists[l].in->size(), IdleSplit{});
  for (size_t st = 0; st + 1 < g.stream_starts.size(); ++st) {
    const size_t first = g.stream_starts[st], last = g.stream_starts[st + 1];
    if (last - first < 2) continue;
    for (size_t l = 0; l < nlists; ++l) lists[l].first = 0;
    GpuSpan prev = g.at(g.by_stream[first]);
    for (size_t i = first + 1; i < last; ++i) {
      const GpuSpan next = g.at(g.by_stream[i]);
      if (prev.end_ns < next.start_ns)
        for (size_t l = 0; l < nlists; ++l) {
          SplitWithin& w = lists[l];
          const std::vector<Interval>& v = *w.in;
          while (w.first < v.size() && v[w.first].end <= prev.end_ns) ++w.first;
          for (size_t j = w.first; j < v.size() && v[j].start < next.start_ns; ++j)
            add_gap(prev, next, v[j].start, v[j].end, kernel_wait_ns, w.out[j]);
        }
      prev = next;
    }
  }
}

// Where the p-th percentile lies among n sorted values (nearest rank).
size_t percentile_rank(size_t n, double p) {
  const size_t i = static_cast<size_t>(std::ceil(p * double(n)));
  return std::min(n - 1, i ? i - 1 : 0);
}

// The launch statistics' order statistics of one rank, each found from where the last rank's was
// on this thread (ranks' launch delays are alike; the values are exact whatever the guess).
struct LaunchOrder {
  double median_delay = 0, p95_delay = 0, median_runtime = 0;
};

LaunchOrder launch_order(const double* delays, const double* runtimes, size_t n) {
  thread_local MedianGuess median_delay, p95_delay, median_runtime;
  LaunchOrder o;
  auto of = [](const double* v) { return [v](size_t i) { return v[i]; }; };
  if (n) {
    o.median_delay = median_guessed(n, of(delays), median_delay);
    o.p95_delay = kth_guessed(n, of(delays), percentile_rank(n, 0.95), p95_delay);
  }
  o.median_runtime = median_guessed(n, of(runtimes), median_runtime);
  return o;
}

// A string id as an index into dense per-id arrays (kNone: the last one).
size_t dense(uint32_t id, size_t ids) { return std::min<size_t>(id, ids); }

}  // namespace

// What BreakdownByRank::Parts holds, so outside the anonymous namespace (-Wsubobject-linkage).
namespace breakdown_parts {

struct KernelPart {  // one kernel name on one rank
  uint32_t name;
  const char* type;  // of its last record in launch order
  uint64_t count = 0;
  double ns = 0;
  size_t type_from = 0;  // 1 + the position of the record `type` is taken from
};

struct StepIdle {
  bool present = false;  // the step launched GPU work and has a length
  double idle_share = 0, host_wait_share = 0;
};

// What one rank contributes: its own breakdown, and its part of the run's totals.
struct RankPart {
  bool has_gpu = false;
  RankBreakdown rb;
  std::vector<std::pair<uint32_t, TypeTotals>> by_section;  // by section id
  std::vector<KernelPart> kernels;                          // by name id
  std::vector<StepIdle> steps;
};

}  // namespace breakdown_parts

namespace {

using breakdown_parts::KernelPart;
using breakdown_parts::RankPart;
using breakdown_parts::StepIdle;

// Per-kernel sums of one group of records that share name, section and type (a label of the
// reader's, or one record).
struct Tally {
  uint64_t count = 0;
  double ns = 0;    // sums of whole nanoseconds: exact in any order and grouping below 2^53
  size_t last = 0;  // the last record's position in launch order
};

// Dense per-id sums of one rank, kept per thread; only the ids this rank touched are read back and
// reset.
class TypeCounts {
 public:
  explicit TypeCounts(size_t ids) : ids_(ids) {
    sections_.assign(ids + 1, TypeTotals{});
    kernels_.assign(ids + 1, KernelPart{});
    touched_sections_.clear();
    touched_kernels_.clear();
  }
  void add(const GpuSpan& a, Tally t, TypeTotals& rank_types) {
    const int kind = is_compute(a) ? 0 : a.nccl ? 1 : 2;
    TypeTotals& sec = sections_[dense(a.section, ids_)];
    if (!(sec.comp + sec.comm + sec.mem)) touched_sections_.push_back(a.section);
    double* ns[] = {&rank_types.comp_ns, &rank_types.comm_ns, &rank_types.mem_ns};
    uint64_t* counts[] = {&rank_types.comp, &rank_types.comm, &rank_types.mem};
    double* sec_ns[] = {&sec.comp_ns, &sec.comm_ns, &sec.mem_ns};
    uint64_t* sec_counts[] = {&sec.comp, &sec.comm, &sec.mem};
    *ns[kind] += t.ns;
    *counts[kind] += t.count;
    *sec_ns[kind] += t.ns;
    *sec_counts[kind] += t.count;
    KernelPart& k = kernels_[dense(a.name, ids_)];
    if (!k.count) touched_kernels_.push_back(a.name);
    k.name = a.name;
    if (t.last + 1 >= k.type_from) {  // a name of several types (hostile files) takes its last record's
      k.type = type_of(a);
      k.type_from = t.last + 1;
    }
    k.count += t.count;
    k.ns += t.ns;
  }
  void into(RankPart& part) const {
    for (uint32_t id : touched_sections_) part.by_section.emplace_back(id, sections_[dense(id, ids_)]);
    for (uint32_t id : touched_kernels_) part.kernels.push_back(kernels_[dense(id, ids_)]);
  }

 private:
  size_t ids_;
  static thread_local std::vector<TypeTotals> sections_;
  static thread_local std::vector<KernelPart> kernels_;
  static thread_local std::vector<uint32_t> touched_sections_, touched_kernels_;
};
thread_local std::vector<TypeTotals> TypeCounts::sections_;
thread_local std::vector<KernelPart> TypeCounts::kernels_;
thread_local std::vector<uint32_t> TypeCounts::touched_sections_, TypeCounts::touched_kernels_;

// A record's launch call: its delay and the call's length (HTA's launch statistics).
// Room for one per record, sized once and not zeroed (written in place: with a vector's push_back the
// compiler kept reloading the arrays' ends from memory in the loop over every record, issue 29).
struct LaunchTimes {
  explicit LaunchTimes(size_t most) : delays(new double[most]), runtimes(new double[most]) {}
  std::unique_ptr<double[]> delays, runtimes;
  size_t n = 0;

  // What a loop over the records adds to, a local of the loop (held in registers): as members of
  // LaunchTimes and LaunchStats behind references, which the loop's other stores (the tallies'
  // counts) might alias, each record's counts were loaded and stored again (2026-11-29).
  // The records with a launch call are the delays written: counted at the end, not per record.
  struct Adding {
    double *delays, *runtimes;  // where the next one goes
    uint64_t short_kernels, delay_outliers, runtime_outliers;
  };
  Adding start(const LaunchStats& launch) {
    return {delays.get() + n, runtimes.get() + n, launch.short_kernels, launch.delay_outliers, launch.runtime_outliers};
  }
  void finish(const Adding& a, LaunchStats& launch) {
    const size_t added = static_cast<size_t>(a.delays - delays.get()) - n;
    n += added;
    launch.with_launch += added;
    launch.short_kernels = a.short_kernels;
    launch.delay_outliers = a.delay_outliers;
    launch.runtime_outliers = a.runtime_outliers;
  }

  [[gnu::always_inline]] static void add(const GpuSpan& a, const BreakdownOptions& opt, Adding& to) {
    if (a.api_end_ns)
      add(double(a.end_ns - a.start_ns), double(a.start_ns - a.api_end_ns), double(a.api_end_ns - a.api_start_ns), opt, to);
  }
  // The same from a packed record and its base, without unpacking it: the delay is the launch lead
  // less the call's length, the call's length is stored as it is.
  [[gnu::always_inline]] static void add(const PackedSpan& p, int64_t base, const BreakdownOptions& opt, Adding& to) {
    if (SpanChunk::api_end_of(p, base))
      add(double(p.duration_ns), double(int64_t{p.launch_lead_ns} - int64_t{p.api_duration_ns}), double(p.api_duration_ns),
          opt, to);
  }
  [[gnu::always_inline]] static void add(double dur, double delay, double runtime, const BreakdownOptions& opt,
                                         Adding& to) {
    *to.delays++ = delay;
    *to.runtimes++ = runtime;
    to.short_kernels += dur < runtime;
    to.delay_outliers += delay > opt.launch_delay_cutoff_ns;
    to.runtime_outliers += runtime > opt.runtime_cutoff_ns;
  }
};

// A rank's records kept in one file's array (the usual case) are tallied by the reader's label
// (name, section, type) and each label counted once: per record only its length is added up
// (issue 29: this loop was 8 % of 960 x 903 x 50, three-quarters of it the per-record sums by
// section and name). Records kept whole (SpanChunk::escaped) are counted one by one. Not inlined:
// inside BreakdownByRank::add its loop had too many values live, and the compiler kept the counters
// on the stack, loaded and stored every record (2026-11-29).
[[gnu::noinline]] void tally_by_label(const GpuTimeline& g, const BreakdownOptions& opt, TypeCounts& counts,
                                      RankBreakdown& rb, LaunchTimes& launches) {
  const SpanChunk& c = *g.in_chunk;
  thread_local std::vector<Tally> by_label;
  by_label.assign(c.labels.size(), Tally{});
  LaunchTimes::Adding adding = launches.start(rb.launch);
  Tally* const tallies = by_label.data();
  const size_t n = g.size(), first = g.in_chunk_first;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = first + i;
    const PackedSpan& p = c.packed[at];
    if (SpanChunk::is_escaped(p)) [[unlikely]] {
      const GpuSpan a = c.at(at);
      LaunchTimes::add(a, opt, adding);
      counts.add(a, {1, double(a.end_ns - a.start_ns), i}, rb.types);
      continue;
    }
    LaunchTimes::add(p, c.base_of(at), opt, adding);
    Tally& t = tallies[p.label];
    ++t.count;
    t.ns += double(p.duration_ns);
    t.last = i;
  }
  launches.finish(adding, rb.launch);
  for (size_t l = 0; l < by_label.size(); ++l) {
    if (!by_label[l].count) continue;
    const SpanChunk::Label& label = c.labels[l];
    GpuSpan a{};
    a.name = label.name;
    a.section = label.section;
    a.kind = label.kind;
    a.nccl = label.nccl;
    counts.add(a, by_label[l], rb.types);
  }
}

void count_types(const RunModel& model, const GpuTimeline& g, const BreakdownOptions& opt, RankPart& part) {
  TypeCounts counts(model.strings.size());
  RankBreakdown& rb = part.rb;
  LaunchTimes launches(g.size());  // sized once: grown by doubling, each rank's were copied and faulted in again
  if (g.in_chunk) {
    tally_by_label(g, opt, counts, rb, launches);
  } else {
    LaunchTimes::Adding adding = launches.start(rb.launch);
    for (size_t i = 0; i < g.size(); ++i) {
      const GpuSpan a = g.at(i);
      LaunchTimes::add(a, opt, adding);
      counts.add(a, {1, double(a.end_ns - a.start_ns), i}, rb.types);
    }
    launches.finish(adding, rb.launch);
  }
  counts.into(part);
  const LaunchOrder order = launch_order(launches.delays.get(), launches.runtimes.get(), launches.n);
  rb.launch.median_delay_ns = order.median_delay;
  rb.launch.p95_delay_ns = order.p95_delay;
  rb.launch.median_runtime_ns = order.median_runtime;
}

// steps_split: the idle split inside each step, or empty where the steps' starts or ends do not rise
// (then each step's gaps are looked up on their own).
std::vector<StepIdle> step_idle(const GpuTimeline& g, const Covers& covers, const std::vector<IdleSplit>& steps_split,
                                const std::vector<Step>& steps, int nsteps, const BreakdownOptions& opt) {
  std::vector<StepIdle> out(nsteps);
  std::optional<IdleIndex> idle;
  for (int k = 0; k < nsteps; ++k) {
    const Step& st = steps[k];
    const double len = double(st.end_ns - st.start_ns);
    auto [first, last] = g.launched_in(st);
    if (len <= 0 || first == last) continue;
    const Temporal t = temporal_in(covers, st.start_ns, st.end_ns);
    if (steps_split.empty() && !idle) idle.emplace(g);
    const IdleSplit split = steps_split.empty() ? idle->split(st.start_ns, st.end_ns, opt.kernel_wait_ns) : steps_split[k];
    out[k] = {true, t.idle_ns / len, split.host_wait_ns / len};
  }
  return out;
}

RankPart analyze_rank(const RunModel& model, const GpuTimeline& g, size_t r, const StepSet& steps, int nsteps,
                      const BreakdownOptions& opt) {
  RankPart part;
  part.has_gpu = !g.empty();
  part.rb.rank = model.ranks[r].rank;
  part.rb.host = model.ranks[r].host;
  const Covers covers = covers_of(g);
  std::vector<Interval> step_spans;
  if (g.size() > 1)  // else no gap, in any step (a rank of summaries: 10,000 of them need no list each)
    for (int k = 0; k < nsteps; ++k) step_spans.push_back({steps.per_rank[r][k].start_ns, steps.per_rank[r][k].end_ns});
  SplitWithin within[2] = {{&g.sampled, {}}, {&step_spans, {}}};
  split_within(g, opt.kernel_wait_ns, within, in_order(step_spans) ? 2 : 1);  // g.sampled is merged: in order
  for (size_t j = 0; j < g.sampled.size(); ++j) {
    part.rb.temporal += temporal_in(covers, g.sampled[j].start, g.sampled[j].end);
    part.rb.idle += within[0].out[j];
  }
  const double comm = double(length(covers.comm.intervals()));
  if (comm > 0) part.rb.overlap = double(length(intersect(covers.comm.intervals(), covers.compute.intervals()))) / comm;
  count_types(model, g, opt, part);
  if (nsteps > 0) part.steps = step_idle(g, covers, within[1].out, steps.per_rank[r], nsteps, opt);
  return part;
}

// What analyze_rank gives a rank without GPU records or sampled windows (a rank of summaries), without
// its passes: at 100,000 ranks of summaries they allocated a step list and the dense per-name sums'
// reset for every rank, for nothing (2026-11-29).
RankPart part_without_gpu(const RunModel& model, size_t r, int nsteps) {
  RankPart part;
  part.rb.rank = model.ranks[r].rank;
  part.rb.host = model.ranks[r].host;
  if (nsteps > 0) part.steps.resize(nsteps);
  return part;
}

std::vector<HostBreakdown> host_totals(const std::vector<RankBreakdown>& ranks) {
  std::map<std::string, HostBreakdown> hosts;
  for (const RankBreakdown& rb : ranks) {
    HostBreakdown& h = hosts[rb.host];
    h.host = rb.host;
    ++h.ranks;
    h.temporal += rb.temporal;
    h.idle += rb.idle;
  }
  std::vector<HostBreakdown> out;
  for (auto& [n, h] : hosts) out.push_back(h);
  return out;
}

// The run's kernels by name, each with its total per rank (ranks in order).
struct KernelTotal {
  const char* type = nullptr;
  uint64_t count = 0;
  std::vector<std::pair<size_t, double>> per_rank;
};

std::vector<TopKernel> top_kernels(const RunModel& model, const std::vector<KernelTotal>& kernels,
                                   const TypeTotals& all_types, size_t keep) {
  std::vector<uint32_t> ids;  // by name, as the report has always listed ties
  for (uint32_t id = 0; id < kernels.size(); ++id)
    if (kernels[id].count) ids.push_back(id);
  auto name_of = [&](uint32_t id) -> const std::string& { return model.strings.at(id); };
  std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return name_of(a) < name_of(b); });
  std::vector<TopKernel> top;
  for (uint32_t id : ids) {
    const KernelTotal& k = kernels[id];
    TopKernel t;
    t.name = name_of(id);
    t.type = k.type;
    t.count = k.count;
    for (auto& [r, ns] : k.per_rank) {
      t.total_ns += ns;
      if (t.min_rank < 0 || ns < t.min_rank_ns) { t.min_rank = model.ranks[r].rank; t.min_rank_ns = ns; }
      if (t.max_rank < 0 || ns > t.max_rank_ns) { t.max_rank = model.ranks[r].rank; t.max_rank_ns = ns; }
    }
    double type_total = t.type == "COMP" ? all_types.comp_ns : t.type == "COMM" ? all_types.comm_ns : all_types.mem_ns;
    t.share_of_type = type_total > 0 ? t.total_ns / type_total : 0;
    top.push_back(t);
  }
  std::sort(top.begin(), top.end(), [](const TopKernel& a, const TopKernel& b) { return a.total_ns > b.total_ns; });
  if (top.size() > keep) top.resize(keep);
  return top;
}

std::vector<StepBreakdown> step_totals(const RunModel& model, const StepSet& steps, int nsteps,
                                       const std::vector<RankPart>& parts) {
  std::vector<StepBreakdown> out;
  for (int k = 0; k < nsteps; ++k) {
    StepBreakdown sb;
    sb.step = steps.per_rank.empty() || steps.per_rank[0].size() <= size_t(k) ? k : steps.per_rank[0][k].index;
    std::vector<double> idle, host_wait;
    for (size_t r = 0; r < parts.size(); ++r) {
      const StepIdle& s = parts[r].steps[k];
      if (!s.present) continue;
      idle.push_back(s.idle_share);
      host_wait.push_back(s.host_wait_share);
      if (sb.max_idle_rank < 0 || s.idle_share > sb.max_idle_share) {
        sb.max_idle_rank = model.ranks[r].rank;
        sb.max_idle_share = s.idle_share;
      }
    }
    if (idle.empty()) continue;
    sb.median_idle_share = median(std::move(idle));
    sb.median_host_wait_share = median(std::move(host_wait));
    out.push_back(sb);
  }
  return out;
}

}  // namespace

IdleSplit split_idle(const GpuTimeline& g, int64_t lo, int64_t hi, int64_t kernel_wait_ns) {
  return IdleIndex(g).split(lo, hi, kernel_wait_ns);
}

BreakdownReport analyze_breakdown(const RunModel& model, const StepSet& steps, const BreakdownOptions& opt) {
  BreakdownByRank by_rank(model, steps, opt);
  index_gpu_all(model, [&](size_t r, const GpuTimeline& g) { by_rank.add(r, g); });
  return by_rank.finish();
}

struct BreakdownByRank::Parts {
  std::vector<breakdown_parts::RankPart> of_rank;
};

BreakdownByRank::BreakdownByRank(const RunModel& model, const StepSet& steps, const BreakdownOptions& opt)
    : model_(model),
      steps_(steps),
      options_(opt),
      nsteps_(steps.per_rank.size() == model.ranks.size() ? steps.count() : 0),
      parts_(std::make_unique<Parts>()) {
  parts_->of_rank.resize(model.ranks.size());
}

BreakdownByRank::~BreakdownByRank() = default;

void BreakdownByRank::add(size_t r, const GpuTimeline& g) {
  if (g.by_stream.size() != g.size()) throw std::logic_error("breakdown: a GPU timeline not grouped by stream");
  parts_->of_rank.at(r) = g.empty() && g.sampled.empty() ? part_without_gpu(model_, r, nsteps_)
                                                         : analyze_rank(model_, g, r, steps_, nsteps_, options_);
}

BreakdownReport BreakdownByRank::finish() {
  const RunModel& model = model_;
  std::vector<RankPart>& parts = parts_->of_rank;
  BreakdownReport rep;
  rep.options = options_;
  if (std::none_of(parts.begin(), parts.end(), [](const RankPart& p) { return p.has_gpu; })) {
    rep.why_not = "no per-kernel GPU records (no GPU, CUPTI off, or no sampled window)";
    return rep;
  }
  // The run's totals, rank by rank in order (sums of whole nanoseconds: exact in any order).
  TypeTotals all_types;
  std::vector<KernelTotal> kernels(model.strings.size() + 1);
  for (size_t r = 0; r < parts.size(); ++r) {
    RankPart& p = parts[r];
    all_types += p.rb.types;
    for (const auto& [id, totals] : p.by_section)
      rep.by_section[id == StringTable::kNone ? "(no section)" : model.strings.at(id)] += totals;
    for (const KernelPart& k : p.kernels) {
      KernelTotal& t = kernels[dense(k.name, model.strings.size())];
      t.type = k.type;
      t.count += k.count;
      t.per_rank.emplace_back(r, k.ns);
    }
    rep.ranks.push_back(std::move(p.rb));
  }
  rep.hosts = host_totals(rep.ranks);
  rep.top = top_kernels(model, kernels, all_types, options_.top_kernels);
  rep.steps = step_totals(model, steps_, nsteps_, parts);
  rep.available = true;
  return rep;
}

}  // namespace laggard::report
