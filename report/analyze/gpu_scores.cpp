#include "gpu_scores.h"

#include <cxxabi.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <set>
#include <tuple>
#include <unordered_map>

#include "parallel.h"
#include "stats.h"

namespace laggard::report {
namespace {

// NVRx's kernel identity: name plus launch shape.
struct KernelKey {
  uint32_t name;
  uint32_t grid[3], block[3];
  // Name, then grid, then block: the order of std::tie(name, grid..., block...), written out
  // because this comparison is the hot spot of the scores at 10,000 ranks.
  bool operator<(const KernelKey& o) const {
    if (name != o.name) return name < o.name;
    for (int d = 0; d < 3; ++d)
      if (grid[d] != o.grid[d]) return grid[d] < o.grid[d];
    for (int d = 0; d < 3; ++d)
      if (block[d] != o.block[d]) return block[d] < o.block[d];
    return false;
  }
  bool operator==(const KernelKey& o) const {
    return name == o.name && std::equal(grid, grid + 3, o.grid) && std::equal(block, block + 3, o.block);
  }
};

// A kernel of the run: its key's place among all the run's keys in key order (RunKernels), so that
// maps of different ranks are sorted, walked and merged by one integer, and an entry takes 32 bytes
// instead of 56 (issue 29: the maps were 290 MB of 960 x 903 x 50's fresh memory, 520 MB of
// 100,000 ranks of summaries').
using KernelId = uint32_t;

struct KernelAcc {
  KernelId kernel;
  double median = 0;  // weighted median of the window medians it gathers
  double total_ns = 0;
  uint64_t count = 0;
};
static_assert(sizeof(KernelAcc) == 32);
// Flat and sorted by kernel (no node per kernel): at 10,000 ranks the maps were the hot spot.
using KernelMap = std::vector<KernelAcc>;

struct Scoped {
  KernelMap whole;
  std::vector<std::pair<int, KernelMap>> by_window;  // (report window, kernels), by window
  // A rank inside one report window: that window's statistics are `whole`, not a copy (at
  // 100,000 ranks of summaries the copies were 1 GB of the stage's peak).
  int whole_is_window = -1;

  // f(report window, kernels) for each window, in window order.
  template <class F>
  void each_window(F&& f) const {
    if (whole_is_window >= 0) f(whole_is_window, whole);
    for (const auto& [k, m] : by_window) f(k, m);
  }
};

struct RankKernelTotals {
  Scoped all;
  std::map<std::string, Scoped> sections;
};

using Reference = std::vector<std::pair<KernelId, double>>;  // sorted by kernel

// NVRx's weighted average; no value when no kernel has a reference.
std::optional<double> weighted_score(const KernelMap& mine, const Reference& ref) {
  double num = 0, den = 0;
  int common = 0;
  auto r = ref.begin();  // both sorted by key: one walk through each
  for (const KernelAcc& acc : mine) {
    while (r != ref.end() && r->first < acc.kernel) ++r;
    if (r == ref.end() || r->first != acc.kernel) continue;
    const double* best = &r->second;
    ++common;
    double med = acc.median;
    double ratio = med > 0 ? std::min(1.0, *best / med) : 1.0;
    num += ratio * acc.total_ns;
    den += acc.total_ns;
  }
  if (!common) return std::nullopt;
  return den > 0 ? num / den : 1.0;
}

// Lowest median per kernel over the given ranks' maps, for kernels every one of them ran.
Reference common_minimum(const std::vector<const KernelMap*>& maps) {
  Reference ref;
  if (maps.empty()) return ref;
  const KernelMap& first = *maps.front();
  std::vector<double> best(first.size());
  std::vector<char> everywhere(first.size(), 1);
  for (size_t k = 0; k < first.size(); ++k) best[k] = first[k].median;
  for (size_t i = 1; i < maps.size(); ++i) {  // every map sorted by key: one walk through each
    const KernelMap& other = *maps[i];
    auto o = other.begin();
    for (size_t k = 0; k < first.size(); ++k) {
      while (o != other.end() && o->kernel < first[k].kernel) ++o;
      if (o != other.end() && o->kernel == first[k].kernel) best[k] = std::min(best[k], o->median);
      else everywhere[k] = 0;
    }
  }
  for (size_t k = 0; k < first.size(); ++k)
    if (everywhere[k]) ref.emplace_back(first[k].kernel, best[k]);
  return ref;
}

// One compute kernel statistic of a capture window on its way into the rank's scopes: it counts in
// scope 0 (all compute kernels) and in its section's, each for the whole run and for its report window.
struct StatEntry {
  uint32_t key;  // in RankBuild::keys
  int scope;     // 1 + index of its section in RankBuild::sections
  int window;    // report window; -1: the rank's run lies in one report window (no window maps)
  double median, count, total_ns;
  uint64_t executions;
};

struct KernelKeyHash {
  size_t operator()(const KernelKey& k) const {
    uint64_t h = k.name;
    for (int d = 0; d < 3; ++d) h = (h ^ (uint64_t(k.grid[d]) << 32 | k.block[d])) * 0x9e3779b97f4a7c15u;
    return static_cast<size_t>(h ^ (h >> 29));
  }
};

// Every compute kernel (name and launch shape) of the run, in key order: a kernel's place here is its
// KernelId. Gathered on every core, each core's share of the ranks on its own, as RankBuild gathers
// a rank's (a capture window usually lists the kernels of the one before in the same order, so most
// statistics cost one compare).
class RunKernels {
 public:
  explicit RunKernels(const RunModel& model) {
    const size_t n = model.ranks.size(), parts = std::min<size_t>(n, 4 * size_t(analysis_threads()));
    std::vector<std::vector<KernelKey>> found(parts);
    parallel_for(parts, [&](size_t c) { found[c] = distinct_keys(model, n * c / parts, n * (c + 1) / parts); });
    for (const std::vector<KernelKey>& keys : found) sorted_.insert(sorted_.end(), keys.begin(), keys.end());
    std::sort(sorted_.begin(), sorted_.end());
    sorted_.erase(std::unique(sorted_.begin(), sorted_.end()), sorted_.end());
    ids_.reserve(sorted_.size());
    for (size_t i = 0; i < sorted_.size(); ++i) ids_.emplace(sorted_[i], static_cast<KernelId>(i));
  }
  // A kernel of the run's (read-only: any thread).
  KernelId id_of(const KernelKey& k) const { return ids_.at(k); }

  static KernelKey key_of(const KernelWindowStats& s) {
    return KernelKey{s.name, {s.grid[0], s.grid[1], s.grid[2]}, {s.block[0], s.block[1], s.block[2]}};
  }

 private:
  static std::vector<KernelKey> distinct_keys(const RunModel& model, size_t first_rank, size_t last_rank);
  std::vector<KernelKey> sorted_;
  std::unordered_map<KernelKey, KernelId, KernelKeyHash> ids_;
};

// A rank's statistics, kept per thread from rank to rank (build_rank empties it). Each kernel
// (name and launch shape) gets a dense id once, so grouping the statistics by kernel, scope and
// report window takes counting passes instead of a sort of every statistic: a sort grew faster
// than the windows (issue 29: 24 ranks x 903 kernels x 200 windows spent 3.4 s of CPU in it).
struct RankBuild {
  std::vector<StatEntry> entries;  // in the order of the rank's capture windows
  std::vector<uint32_t> sections;  // string ids, in order of first appearance
  std::vector<KernelKey> keys;     // the rank's kernels, in order of first appearance
  std::unordered_map<KernelKey, uint32_t, KernelKeyHash> key_ids;
  // The ids of the previous capture window's statistics, by position, and this window's: a window
  // usually lists the kernels of the one before in the same order, so most need no lookup.
  std::vector<uint32_t> before, now;

  void next_capture_window() {
    before.swap(now);
    now.clear();
  }
  uint32_t key_id(const KernelKey& k) {
    const size_t at = now.size();
    if (at < before.size() && keys[before[at]] == k) return now.emplace_back(before[at]);
    auto [it, added] = key_ids.try_emplace(k, static_cast<uint32_t>(keys.size()));
    if (added) keys.push_back(k);
    return now.emplace_back(it->second);
  }
  void clear() {
    entries.clear();
    sections.clear();
    keys.clear();
    key_ids.clear();
    before.clear();
    now.clear();
  }
};

// Folds entries of one (scope, window), grouped by kernel (equal ids together), into a KernelMap:
// one KernelAcc per kernel, in the order of the groups.
KernelMap fold(const std::vector<KernelId>& kernels, const StatEntry* b, const StatEntry* e,
               std::vector<std::pair<double, double>>& scratch) {
  size_t n = b != e;
  for (const StatEntry* it = b; it != e && it + 1 != e; ++it) n += it->key != (it + 1)->key;
  KernelMap m;
  m.reserve(n);  // sized once: every rank's maps are held until scored (issue 29: grown, 18 % of the peak)
  while (b != e) {
    const StatEntry* same = b;
    KernelAcc a{kernels[b->key]};
    scratch.clear();
    for (; same != e && same->key == b->key; ++same) {
      scratch.emplace_back(same->median, same->count);
      a.total_ns += same->total_ns;
      a.count += same->executions;
    }
    a.median = scratch.size() == 1 ? scratch[0].first : weighted_median_sorting(scratch);
    m.push_back(a);
    b = same;
  }
  return m;
}

// The entries in kernel order (`place`: each id's position in it), each kernel's in their order:
// a counting pass over the rank's kernels where the entries are many, a sort where they are few (a
// section's: a run can have hundreds of sections, each with a few of the rank's kernels).
void by_kernel(const StatEntry* b, const StatEntry* e, const std::vector<uint32_t>& place, std::vector<StatEntry>& out) {
  if (size_t(e - b) < place.size() / 4) {
    out.assign(b, e);
    std::stable_sort(out.begin(), out.end(), [&](const StatEntry& x, const StatEntry& y) { return place[x.key] < place[y.key]; });
    return;
  }
  out.resize(size_t(e - b));  // every element is written below: no copy first
  thread_local std::vector<uint32_t> start;
  start.assign(place.size() + 1, 0);
  for (const StatEntry* x = b; x != e; ++x) ++start[place[x->key] + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  for (const StatEntry* x = b; x != e; ++x) out[start[place[x->key]]++] = *x;
}

// The entries of each section's scope together (1 + index in RankBuild::sections), each scope's
// in their order; scope_start[s] is where scope s begins.
void by_scope(const RankBuild& rb, std::vector<StatEntry>& out, std::vector<uint32_t>& scope_start) {
  scope_start.assign(rb.sections.size() + 2, 0);
  for (const StatEntry& x : rb.entries) ++scope_start[x.scope + 1];
  for (size_t i = 1; i < scope_start.size(); ++i) scope_start[i] += scope_start[i - 1];
  out.resize(rb.entries.size());
  std::vector<uint32_t> at(scope_start.begin(), scope_start.end() - 1);
  for (const StatEntry& x : rb.entries) out[at[x.scope]++] = x;
}

// One scope's report windows, each folded in kernel order. The entries come in capture-window
// order, so a window's are usually one run already.
void fold_windows(const std::vector<KernelId>& kernels, const std::vector<uint32_t>& place, const StatEntry* first,
                  const StatEntry* last, std::vector<std::pair<double, double>>& scratch, Scoped& sc) {
  thread_local std::vector<StatEntry> in;
  in.clear();
  for (const StatEntry* x = first; x != last; ++x)
    if (x->window >= 0) in.push_back(*x);
  auto window_order = [](const StatEntry& a, const StatEntry& b) { return a.window < b.window; };
  if (!std::is_sorted(in.begin(), in.end(), window_order)) std::stable_sort(in.begin(), in.end(), window_order);
  auto kernel_order = [&](const StatEntry& a, const StatEntry& b) { return place[a.key] < place[b.key]; };
  for (auto b = in.begin(); b != in.end();) {
    auto e = std::find_if(b, in.end(), [&](const StatEntry& x) { return x.window != b->window; });
    std::stable_sort(b, e, kernel_order);  // a window's kernels: few
    sc.by_window.emplace_back(b->window, fold(kernels, &*b, &*b + (e - b), scratch));
    b = e;
  }
}

// The rank's gathered statistics as its scopes, whole run and per report window.
RankKernelTotals build_rank(const StringTable& strings, const RunKernels& run, RankBuild& rb,
                            std::vector<std::pair<double, double>>& scratch) {
  // kernels[id]: the rank's kernel id in the run's; place[id]: its position in key order (the maps').
  thread_local std::vector<KernelId> kernels;
  thread_local std::vector<uint32_t> order, place;
  kernels.resize(rb.keys.size());
  for (uint32_t i = 0; i < kernels.size(); ++i) kernels[i] = run.id_of(rb.keys[i]);
  order.resize(rb.keys.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return kernels[a] < kernels[b]; });
  place.resize(order.size());
  for (uint32_t i = 0; i < order.size(); ++i) place[order[i]] = i;
  RankKernelTotals acc;
  thread_local std::vector<StatEntry> grouped, sorted;
  thread_local std::vector<uint32_t> scope_start;
  by_scope(rb, grouped, scope_start);
  for (size_t scope = 0; scope + 1 < scope_start.size(); ++scope) {
    // Scope 0 (all compute kernels) takes every entry; a section's scope its own.
    const StatEntry* first = scope == 0 ? rb.entries.data() : grouped.data() + scope_start[scope];
    const StatEntry* last = scope == 0 ? rb.entries.data() + rb.entries.size() : grouped.data() + scope_start[scope + 1];
    if (first == last) continue;
    const uint32_t section = scope == 0 ? 0 : rb.sections[scope - 1];
    Scoped& sc = scope == 0 ? acc.all : acc.sections[section == StringTable::kNone ? kNoSection : strings.at(section)];
    by_kernel(first, last, place, sorted);
    sc.whole = fold(kernels, sorted.data(), sorted.data() + sorted.size(), scratch);
    fold_windows(kernels, place, first, last, scratch, sc);
  }
  rb.clear();
  return acc;
}

uint64_t count_of(const KernelMap& m) {
  uint64_t n = 0;
  for (const KernelAcc& a : m) n += a.count;
  return n;
}

int64_t time_of(const KernelMap& m) {
  double t = 0;
  for (const KernelAcc& a : m) t += a.total_ns;
  return static_cast<int64_t>(t);
}

uint64_t counter(const Counts& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

}  // namespace

std::string demangle(const std::string& name) {
  if (name.rfind("_Z", 0) != 0) return name;
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string r = status == 0 && out ? std::string(out) : name;
  std::free(out);
  return r;
}

namespace {

// A kernel's run-wide totals per section, and the ranks that ran it.
struct TopAcc {
  GpuTopKernel kernel;
  size_t last_rank = SIZE_MAX;  // rank index that counted last (ranks come in order)
};
// Keyed by (section string, name string) ids: no string compared per statistic.
using TopMap = std::unordered_map<uint64_t, TopAcc>;

// What the steps of compute_gpu_scores pass on to each other.
struct GpuWork {
  const RunModel& model;
  ScoreReport& rep;
  GpuScoreReport& out;
  int nwin = 1;
  double window_ns = 1e10;
  std::vector<RankKernelTotals> acc;                     // per rank index
  TopMap top;
  std::vector<std::map<int, GpuWindowRank>> per_window;  // per rank index
  // Where each rank's scores sit in out.windows: (window, index in it), by window.
  std::vector<std::vector<std::pair<int, size_t>>> rank_windows;
};

int report_window(const GpuWork& w, const CaptureWindow& cw) {
  double mid = (double(cw.start_ns) + double(cw.end_ns)) / 2;
  int k = static_cast<int>(std::floor((mid - double(w.rep.start_ns)) / w.window_ns));
  return std::clamp(k, 0, w.nwin - 1);
}

// Compute kernels are scored; copies, memsets and NCCL kernels are only counted.
bool is_compute(const KernelWindowStats& s) {
  return s.kind != GpuKind::memcpy && s.kind != GpuKind::memset && !s.nccl;
}

std::vector<KernelKey> RunKernels::distinct_keys(const RunModel& model, size_t first_rank, size_t last_rank) {
  RankBuild seen;  // the ranks' windows as if one rank's: its keys, in order of first sight
  for (size_t ri = first_rank; ri < last_rank; ++ri)
    for (const CaptureWindow& cw : model.ranks[ri].windows) {
      seen.next_capture_window();
      for (const KernelWindowStats& s : cw.kernel_stats)
        if (is_compute(s)) seen.key_id(key_of(s));
    }
  return std::move(seen.keys);
}

// The run-wide totals of each statistic's (section, kernel), looked up once per kernel position: a
// capture window usually lists the kernels of the one before in the same order, so its entry is
// the one at the same position there (issue 29: a hash lookup per statistic, 1.7 M of them at 960 x
// 903 x 50, in a loop that runs on one core). The map's entries stay where they are as it grows.
class TopLookup {
 public:
  explicit TopLookup(TopMap& top) : top_(top) {}
  void next_capture_window() {
    before_.swap(now_);
    now_.clear();
  }
  TopAcc& of(const KernelWindowStats& s) {
    const uint64_t key = uint64_t(s.section) << 32 | s.name;
    const size_t at = now_.size();
    TopAcc* t = at < before_.size() && before_[at].first == key ? before_[at].second : &top_[key];
    now_.emplace_back(key, t);
    return *t;
  }

 private:
  TopMap& top_;
  std::vector<std::pair<uint64_t, TopAcc*>> before_, now_;
};

// Counts and times of one kernel statistic on the rank.
void count_stats(size_t ri, const KernelWindowStats& s, TopAcc& t, RankGpu& g) {
  g.has_data = true;
  g.records += s.count;
  t.kernel.count += s.count;
  t.kernel.total_ns += s.total_ns;
  t.kernel.nccl = s.nccl;
  t.kernel.kind = s.kind;
  if (t.last_rank != ri) {
    t.last_rank = ri;
    ++t.kernel.ranks;
  }
  if (s.graph) g.graph_count += s.count;
  if (s.kind == GpuKind::memcpy) {
    g.memcpy_count += s.count;
    g.memcpy_ns += s.total_ns;
    return;
  }
  if (s.kind == GpuKind::memset) {
    g.memset_count += s.count;
    g.memset_ns += s.total_ns;
    return;
  }
  if (s.nccl) {
    g.nccl_count += s.count;
    g.nccl_ns += s.total_ns;
    return;
  }
  g.kernel_count += s.count;
  g.kernel_ns += s.total_ns;
}

// A compute kernel's statistic into the rank's scopes: all kernels and its section, each for
// the whole run and for report window k (not when the rank's run is one report window).
void add_entry(RankBuild& rb, int k, const KernelWindowStats& s, bool whole_only) {
  auto found = std::find(rb.sections.begin(), rb.sections.end(), s.section);
  const int scope = 1 + static_cast<int>(found - rb.sections.begin());
  if (found == rb.sections.end()) rb.sections.push_back(s.section);
  const uint32_t key = rb.key_id(RunKernels::key_of(s));
  rb.entries.push_back(StatEntry{key, scope, whole_only ? -1 : k, double(s.median_ns), double(s.count),
                                 double(s.total_ns), s.count});
}

// The report window all of a rank's capture windows fall in, or -1 when they span several.
int only_window(const GpuWork& w, const RankData& r) {
  int only = -2;
  for (const CaptureWindow& cw : r.windows) {
    if (cw.kernel_stats.empty()) continue;
    const int k = report_window(w, cw);
    if (only == -2) only = k;
    else if (only != k) return -1;
  }
  return only < 0 ? -1 : only;
}

// Rank ri's counts, its statistics' run-wide totals added in `top`.
RankGpu rank_gpu(const RankData& r, size_t ri, TopLookup& top) {
  RankGpu g;
  g.rank = r.rank;
  g.host = r.host;
  g.cupti_status = r.cupti_status;
  for (const CaptureWindow& cw : r.windows) {
    if (!cw.kernel_stats.empty() || cw.gpu_sampled) ++g.windows;
    if (cw.gpu_sampled) ++g.sampled_windows;
    g.missed_launches += cw.gpu_missed_launches;
    top.next_capture_window();
    for (const KernelWindowStats& s : cw.kernel_stats) count_stats(ri, s, top.of(s), g);
  }
  g.lost = counter(r.dropped, "cupti_records_dropped") + counter(r.dropped, "gpu_no_timestamp");
  g.unmatched = counter(r.dropped, "unmatched_correlation");
  g.buffer_full = counter(r.dropped, "gpu_buffer_full");
  g.completeness = g.records + g.lost ? double(g.records) / double(g.records + g.lost) : 1.0;
  return g;
}

// One part's totals (its ranks come after those already in `into`) added to the run's: counts and
// times are integers, so the sums are those of one pass in rank order; a later part's ranks are
// others, so their counts add; the kind is the last statistic's, as count_stats leaves it.
void add_top(const TopMap& part, TopMap& into) {
  for (const auto& [key, t] : part) {
    GpuTopKernel& k = into[key].kernel;
    k.count += t.kernel.count;
    k.total_ns += t.kernel.total_ns;
    k.ranks += t.kernel.ranks;
    k.nccl = t.kernel.nccl;
    k.kind = t.kernel.kind;
  }
}

// Per rank, per scope, whole run and per report window.
void gather(GpuWork& w) {
  const size_t n = w.model.ranks.size();
  w.acc.resize(n);
  const RunKernels kernels(w.model);
  // Each rank's scopes on every core (each index writes only its own).
  parallel_for(n, [&](size_t ri) {
    // Kept from rank to rank on each thread (build_rank empties them): a rank of 50 windows x 50
    // kernels has 5,000 entries, 280 KB grown from nothing again for every rank before.
    thread_local RankBuild rb;
    thread_local std::vector<std::pair<double, double>> scratch;
    rb.clear();  // a rank that threw left its entries
    // A rank inside one report window (every rank of a short run): its window's statistics are
    // its whole run's, the same entries in the same order, so they are folded once and shared
    // (half the sorting and folding of the stage at 10,000 ranks of summaries).
    const int only = only_window(w, w.model.ranks[ri]);
    for (const CaptureWindow& cw : w.model.ranks[ri].windows) {
      const int k = report_window(w, cw);
      rb.next_capture_window();
      for (const KernelWindowStats& s : cw.kernel_stats)
        if (is_compute(s)) add_entry(rb, k, s, only >= 0);
    }
    w.acc[ri] = build_rank(w.model.strings, kernels, rb, scratch);
    if (only >= 0) {
      auto window_is_whole = [&](Scoped& sc) {
        if (!sc.whole.empty()) sc.whole_is_window = only;
      };
      window_is_whole(w.acc[ri].all);
      for (auto& [name, sc] : w.acc[ri].sections) window_is_whole(sc);
    }
  });
  // Counts and the run-wide kernel totals: each part of the ranks on a core of its own, its totals
  // then added in rank order (2026-11-29: one core's loop over every statistic, a third of a second
  // at 100,000 ranks of summaries).
  const size_t parts = std::min<size_t>(n, 4 * size_t(analysis_threads()));
  std::vector<TopMap> part_top(parts);
  std::vector<RankGpu> gpus(n);
  parallel_for(parts, [&](size_t c) {
    TopLookup top(part_top[c]);
    for (size_t ri = n * c / parts; ri < n * (c + 1) / parts; ++ri) gpus[ri] = rank_gpu(w.model.ranks[ri], ri, top);
  });
  for (TopMap& part : part_top) add_top(part, w.top);
  for (RankGpu& g : gpus) {
    w.out.any |= g.has_data;
    w.out.ranks.push_back(std::move(g));
  }
  w.out.windows.resize(w.nwin);
}

// Scores for one scope: `pick` selects the scope's Scoped of a rank (null: rank lacks it).
template <class Pick, class StoreWhole, class StoreWindow>
void score_scope(const GpuWork& w, Pick pick, StoreWhole store_whole, StoreWindow store_window) {
  std::vector<const KernelMap*> whole_maps;
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    if (const Scoped* s = pick(ri); s && !s->whole.empty()) whole_maps.push_back(&s->whole);
  // Each rank's windows once (not every window of every rank): ranks stay in order per window.
  std::vector<std::vector<const KernelMap*>> window_maps(w.nwin);
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    if (const Scoped* s = pick(ri))
      s->each_window([&](int k, const KernelMap& m) {
        if (!m.empty()) window_maps[k].push_back(&m);
      });
  // The references, whole run and per window, then the ranks, each on every core: every index
  // writes only its own results (parallel.h), so the scores do not depend on the threads.
  Reference whole_ref;
  std::vector<Reference> window_ref(w.nwin);
  parallel_for(size_t(w.nwin) + 1, [&](size_t k) {
    if (k == size_t(w.nwin)) whole_ref = common_minimum(whole_maps);
    else window_ref[k] = common_minimum(window_maps[k]);
  });
  parallel_for(w.acc.size(), [&](size_t ri) {
    const Scoped* s = pick(ri);
    if (!s || s->whole.empty()) return;
    GpuScore whole;
    whole.kernels = count_of(s->whole);
    whole.kernel_ns = time_of(s->whole);
    whole.relative = weighted_score(s->whole, whole_ref);
    // NVRx's rank historical minimum, updated before scoring; kept from rank to rank on each thread
    // (a new one per rank and scope grew by doubling: about 2.4 M allocations at 100,000 ranks of
    // summaries, 4 scopes and 6 doublings each).
    thread_local Reference best_so_far;
    best_so_far.clear();
    s->each_window([&](int k, const KernelMap& m) {
      for (const KernelAcc& a : m) {
        auto it = std::lower_bound(best_so_far.begin(), best_so_far.end(), a.kernel,
                                   [](const auto& e, KernelId k) { return e.first < k; });
        if (it == best_so_far.end() || it->first != a.kernel) best_so_far.insert(it, {a.kernel, a.median});
        else it->second = std::min(it->second, a.median);
      }
      GpuScore ws;
      ws.kernels = count_of(m);
      ws.kernel_ns = time_of(m);
      ws.relative = weighted_score(m, window_ref[k]);
      ws.individual = weighted_score(m, best_so_far);
      if (ws.individual) whole.individual = std::min(whole.individual.value_or(1.0), *ws.individual);
      store_window(ri, k, ws);
    });
    store_whole(ri, whole);
  });
}

// Every rank's scores: all compute kernels, then each section's.
void score_all(GpuWork& w) {
  w.per_window.resize(w.acc.size());
  score_scope(
      w, [&](size_t ri) -> const Scoped* { return &w.acc[ri].all; },
      [&](size_t ri, const GpuScore& s) { w.out.ranks[ri].score = s; },
      [&](size_t ri, int k, const GpuScore& s) { w.per_window[ri][k].score = s; });
  std::set<std::string> sections;
  for (const RankKernelTotals& a : w.acc)
    for (const auto& [name, s] : a.sections) sections.insert(name);
  for (const std::string& name : sections) {
    score_scope(
        w,
        [&](size_t ri) -> const Scoped* {
          auto it = w.acc[ri].sections.find(name);
          return it == w.acc[ri].sections.end() ? nullptr : &it->second;
        },
        [&](size_t ri, const GpuScore& s) { w.out.ranks[ri].sections[name] = s; },
        [&](size_t ri, int k, const GpuScore& s) { w.per_window[ri][k].sections[name] = s; });
  }
  w.rank_windows.resize(w.acc.size());
  for (size_t ri = 0; ri < w.acc.size(); ++ri)
    for (auto& [k, wr] : w.per_window[ri]) {
      wr.rank = w.out.ranks[ri].rank;
      w.rank_windows[ri].emplace_back(k, w.out.windows[k].size());
      w.out.windows[k].push_back(std::move(wr));
    }
}

std::optional<double> window_score(const GpuWork& w, std::pair<int, size_t> at, const std::string& section,
                                   bool relative) {
  const GpuWindowRank& wr = w.out.windows[at.first][at.second];
  const GpuScore* s = &wr.score;
  if (!section.empty()) {
    auto it = wr.sections.find(section);
    if (it == wr.sections.end()) return std::nullopt;
    s = &it->second;
  }
  return relative ? s->relative : s->individual;
}

// Stragglers, as for sections: the whole-run score decides, the windows say when.
void flag_stragglers(GpuWork& w) {
  auto flag = [&](size_t ri, const std::string& section, const GpuScore& s) {
    const RankGpu& g = w.out.ranks[ri];
    auto one = [&](const char* metric, std::optional<double> score, double thr, bool relative) {
      if (!score || *score >= thr) return;
      Straggler st{g.rank, g.host, "gpu", section, metric, *score, thr, {}};
      for (auto at : w.rank_windows[ri])
        if (auto ws = window_score(w, at, section, relative); ws && *ws < thr) st.windows.push_back(at.first);
      w.rep.stragglers.push_back(std::move(st));
    };
    one("relative", s.relative, w.rep.options.relative_threshold, true);
    one("individual", s.individual, w.rep.options.individual_threshold, false);
  };
  for (size_t ri = 0; ri < w.out.ranks.size(); ++ri) {
    flag(ri, "", w.out.ranks[ri].score);
    for (const auto& [name, s] : w.out.ranks[ri].sections) flag(ri, name, s);
  }
  std::stable_sort(w.rep.stragglers.begin(), w.rep.stragglers.end(),
                   [](const Straggler& a, const Straggler& b) { return a.score < b.score; });
}

void list_top_kernels(GpuWork& w, size_t top_n) {
  std::map<std::string, std::vector<GpuTopKernel>> by_section;
  for (auto& [ids, t] : w.top) {
    const auto section = static_cast<uint32_t>(ids >> 32), name = static_cast<uint32_t>(ids);
    t.kernel.name = w.model.strings.at(name);
    by_section[section == StringTable::kNone ? kNoSection : w.model.strings.at(section)].push_back(t.kernel);
  }
  for (auto& [section, list] : by_section) {
    std::sort(list.begin(), list.end(), [](const GpuTopKernel& a, const GpuTopKernel& b) {
      return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
    });
    if (list.size() > top_n) list.resize(top_n);
    w.out.top_kernels[section] = std::move(list);
  }
}

}  // namespace

GpuScoreReport compute_gpu_scores(const RunModel& model, ScoreReport& rep, size_t top_n) {
  GpuScoreReport out;
  GpuWork w{model, rep, out};
  w.nwin = std::max<int>(1, static_cast<int>(rep.windows.size()));
  w.window_ns = rep.window_s > 0 ? rep.window_s * 1e9 : 1e10;
  gather(w);
  score_all(w);
  flag_stragglers(w);
  list_top_kernels(w, top_n);
  return out;
}

}  // namespace laggard::report
