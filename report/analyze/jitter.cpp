#include "jitter.h"

#include <algorithm>
#include <stdexcept>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "parallel.h"
#include "stats.h"

namespace laggard::report {

// What JitterByRank::Ranks holds, so outside the anonymous namespace (-Wsubobject-linkage).
namespace jitter_parts {

struct CollectiveArrival {
  double arrival = -1;       // since the previous NCCL kernel's end on this rank
  double idle_before = 0;    // on its stream
  bool launched_late = false;
};

// One rank's GPU activities, indexed once for every step.
struct RankIndex {
  const GpuTimeline* timeline = nullptr;  // shared with the breakdown
  std::vector<std::pair<size_t, size_t>> steps;  // per step: its launches, positions (GpuTimeline::at)
  std::vector<double> final_ttke;                // per step
  std::vector<CollectiveArrival> arrivals;       // per step
  // Launch-to-start delays of the kernels launched in the steps, summed up here per rank rather
  // than kept per kernel across the run (43 M doubles at the GTC 2020 shape).
  double median_delay_ns = 0, near_zero_delay_share = 0;
};

}  // namespace jitter_parts

namespace {

using jitter_parts::CollectiveArrival;
using jitter_parts::RankIndex;

// Flat arrays and sort-based grouping throughout (issue 14): a kernel position across ranks is a
// slot, a dense id of (kernel name, n-th launch of that name in the step) given once per run, so
// the per-record work is array indexing, never a tree map or an allocation.

// One kernel of one rank's step, with the talk's derived quantities. 32 bytes: every step writes
// one per kernel of every rank and reads it back twice, so its size is the analysis' memory
// traffic (issue 29). The kernel's name is its slot's (Slots::keys); its launch position in the step
// is its index in the rank's array, and its TTKE the running sum there (add_ttke), neither stored.
struct Obs {
  double dur, gap;
  uint32_t slot;  // Slots::kUnassigned until the step's new kernel positions get theirs
  uint32_t section;
  bool nccl;
  GpuKind kind;
};
static_assert(sizeof(Obs) == 32);

// A kernel's time to kernel end in its step (the talk's TTKE): the gaps and lengths of the step's
// kernels up to it, NCCL kernels left out. Added up in launch order, as the final TTKE is.
[[gnu::always_inline]] inline double add_ttke(double ttke, const Obs& o) { return o.nccl ? ttke : ttke + (o.gap + o.dur); }

// A kernel whose (name, occurrence) had no slot yet when its step was observed (the first steps).
struct NewPosition {
  uint32_t at;     // in the rank's Obs of the step
  uint32_t name;
  int occurrence;  // n-th launch of that name in the step
};

// What scan_records finds in a rank's records, besides each step's final TTKE.
struct ScannedRecords {
  std::vector<std::pair<int64_t, int64_t>> nccl_by_start;  // the rank's NCCL kernels' (start, end)
  std::vector<size_t> first_nccl;  // per step: the position of its first NCCL kernel, or its range's end
  // The steps' kernels' launch-to-start delays (those < 0 are unknown, left out): room for one per
  // record of each step, sized once and written in place (push_back was an out-of-line call per record).
  std::unique_ptr<double[]> delays;
  size_t n_delays = 0;
  size_t near_zero = 0;  // of the delays, those under 10 us
};

// The launch-to-start delays gathered from every step, summed up.
void summarize_launch_delays(RankIndex& x, const ScannedRecords& scanned) {
  const double* delays = scanned.delays.get();
  const size_t n = scanned.n_delays;
  x.near_zero_delay_share = n == 0 ? 0 : double(scanned.near_zero) / double(n);
  thread_local MedianGuess guess;  // from the last rank on this thread: ranks' delays are alike
  x.median_delay_ns = median_guessed(n, [delays](size_t i) { return delays[i]; }, guess);
}

// The step's first NCCL kernel (at `at`; the range's end: none), seen from the rank's previous sync
// point. nccl_by_start: the rank's NCCL kernels' (start, end), by start.
CollectiveArrival arrival_of(const RankIndex& x, const std::vector<std::pair<int64_t, int64_t>>& nccl_by_start,
                             std::pair<size_t, size_t> range, size_t at) {
  CollectiveArrival out;
  if (at == range.second) return out;
  const GpuSpan first = x.timeline->at(at);
  auto it = std::lower_bound(nccl_by_start.begin(), nccl_by_start.end(), first.start_ns,
                             [](const std::pair<int64_t, int64_t>& a, int64_t start) { return a.first < start; });
  if (it == nccl_by_start.begin()) return out;
  out.arrival = double(first.start_ns - (it - 1)->second);
  if (const std::optional<GpuSpan> prev = x.timeline->previous_of(at)) {
    out.idle_before = std::max<double>(0, double(first.start_ns - prev->end_ns));
    out.launched_late = first.api_end_ns > prev->end_ns;
  }
  return out;
}

// Idle time on the stream before the kernel; NCCL kernels get 0, as in the talk.
double gap_before(const GpuSpan& a, const std::optional<GpuSpan>& prev) {
  return !a.nccl && prev ? std::max<double>(0, double(a.start_ns - prev->end_ns)) : 0;
}

// One step's sums while its records are walked, a local of the walk and so in registers: as members
// of RankIndex and ScannedRecords, every record's addition waited for the one before through memory,
// since the delays' stores might alias them (2026-11-29: with fill_cell's sums below, the GPU
// timelines stage at 960 ranks took 1.51-1.53 s of CPU before, 1.43-1.44 s after).
struct StepWalk {
  double ttke = 0;               // the final TTKE so far
  size_t first_nccl = SIZE_MAX;  // the step's first NCCL kernel, if any
  double* delays = nullptr;      // where the next launch delay goes
  size_t near_zero = 0;
};

StepWalk start_walk(const ScannedRecords& scanned) {
  StepWalk w;
  w.delays = scanned.delays.get() + scanned.n_delays;
  return w;
}

void finish_walk(RankIndex& x, size_t k, const StepWalk& w, ScannedRecords& scanned) {
  x.final_ttke[k] = w.ttke;
  scanned.first_nccl[k] = w.first_nccl == SIZE_MAX ? x.steps[k].second : w.first_nccl;
  scanned.n_delays = static_cast<size_t>(w.delays - scanned.delays.get());
  scanned.near_zero += w.near_zero;
}

// Record i, launched in the step walked: its part of the step's final TTKE (NCCL kernels left out),
// added in launch order; its launch delay; the step's first NCCL kernel when it is that.
[[gnu::always_inline]] inline void add_to_step(const GpuTimeline& t, size_t i, const GpuSpan& a, StepWalk& w) {
  if (a.api_end_ns) {
    const double delay = double(a.start_ns - a.api_end_ns);
    if (delay >= 0) {
      *w.delays++ = delay;
      w.near_zero += delay < 10'000;
    }
  }
  if (a.nccl) {
    if (w.first_nccl == SIZE_MAX) w.first_nccl = i;
    return;
  }
  w.ttke += gap_before(a, t.previous_of(i)) + double(a.end_ns - a.start_ns);
}

// The steps' launches follow each other (each range begins at or after the one before ends): the
// usual case, where one pass over the records serves every step.
bool ranges_in_order(const std::vector<std::pair<size_t, size_t>>& ranges) {
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].first < ranges[k - 1].second) return false;
  return true;
}

[[gnu::always_inline]] inline void note_nccl(const GpuSpan& a, ScannedRecords& scanned) {
  if (a.nccl) scanned.nccl_by_start.emplace_back(a.start_ns, a.end_ns);
}

// The rank's NCCL kernels, each step's final TTKE (time to kernel end, NCCL kernels left out), its
// first NCCL kernel and its kernels' launch delays, in one pass over the records where the steps
// follow each other (issue 29: the NCCL kernels, and each step's first one, were passes of their own
// over every record), else step by step. The sums are added in launch order either way: the same doubles.
void scan_records(RankIndex& x, ScannedRecords& scanned) {
  const GpuTimeline& t = *x.timeline;
  const size_t nsteps = x.steps.size();
  x.final_ttke.resize(nsteps);
  scanned.first_nccl.resize(nsteps);
  if (!ranges_in_order(x.steps)) {
    for (size_t i = 0; i < t.size(); ++i) note_nccl(t.at(i), scanned);
    for (size_t k = 0; k < nsteps; ++k) {
      StepWalk w = start_walk(scanned);
      for (size_t i = x.steps[k].first; i < x.steps[k].second; ++i) add_to_step(t, i, t.at(i), w);
      finish_walk(x, k, w, scanned);
    }
    return;
  }
  size_t i = 0;
  for (size_t k = 0; k < nsteps; ++k) {
    const auto [first, last] = x.steps[k];
    for (; i < first; ++i) note_nccl(t.at(i), scanned);  // launched between steps
    StepWalk w = start_walk(scanned);
    for (; i < last; ++i) {
      const GpuSpan a = t.at(i);
      note_nccl(a, scanned);
      add_to_step(t, i, a, w);
    }
    finish_walk(x, k, w, scanned);
  }
  for (; i < t.size(); ++i) note_nccl(t.at(i), scanned);
}

RankIndex index_rank(const GpuTimeline& timeline, const StepSet& steps, size_t r, int nsteps) {
  RankIndex x;
  x.timeline = &timeline;
  x.steps.reserve(nsteps);
  for (int k = 0; k < nsteps; ++k) x.steps.push_back(timeline.launched_in(steps.per_rank[r][k]));
  ScannedRecords scanned;
  size_t launched = 0;  // in the steps, a record counted once per step it is in (steps may overlap)
  for (const auto& [first, last] : x.steps) launched += last - first;
  scanned.delays.reset(new double[launched]);  // at most one a launch; not zeroed
  scan_records(x, scanned);
  // By start only, as when these were pointers: the same permutation, ties included.
  std::sort(scanned.nccl_by_start.begin(), scanned.nccl_by_start.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  x.arrivals.reserve(nsteps);
  for (int k = 0; k < nsteps; ++k)
    x.arrivals.push_back(arrival_of(x, scanned.nccl_by_start, x.steps[k], scanned.first_nccl[k]));
  summarize_launch_delays(x, scanned);
  return x;
}

const std::string& section_name(const RunModel& m, uint32_t section) {
  static const std::string none = "(no section)";
  return section == StringTable::kNone ? none : m.strings.at(section);
}

// Kernel positions of the whole run: (name, occurrence) -> dense slot id, and what the run's
// per-rank totals are kept in.
class Slots {
 public:
  explicit Slots(size_t names) : by_name_(names + 1) {}

  uint32_t slot_of(uint32_t name, int occurrence) {
    std::vector<uint32_t>& ids = by_name_[std::min<size_t>(name, by_name_.size() - 1)];
    while (ids.size() <= size_t(occurrence)) {
      ids.push_back(static_cast<uint32_t>(keys.size()));
      keys.push_back({name, static_cast<int>(ids.size()) - 1});
      acc.emplace_back();
    }
    return ids[occurrence];
  }
  static constexpr uint32_t kUnassigned = 0xffffffffu;
  // The slot, or kUnassigned when (name, occurrence) has none yet: read-only, so any thread.
  uint32_t find(uint32_t name, int occurrence) const {
    const std::vector<uint32_t>& ids = by_name_[std::min<size_t>(name, by_name_.size() - 1)];
    return size_t(occurrence) < ids.size() ? ids[occurrence] : kUnassigned;
  }
  size_t size() const { return keys.size(); }
  // Slot ids ordered by (name, occurrence): the order of the analysis' reports.
  std::vector<uint32_t> by_key(std::vector<uint32_t> ids) const {
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) {
      return keys[a].name != keys[b].name ? keys[a].name < keys[b].name : keys[a].occurrence < keys[b].occurrence;
    });
    return ids;
  }

  struct Key {
    uint32_t name;
    int occurrence;
  };
  struct Acc {  // what the slot is (its per-rank sums are in RankStepSeries::slot_sums)
    bool nccl = false;
    uint32_t section = StringTable::kNone;
  };
  std::vector<Key> keys;
  std::vector<Acc> acc;

 private:
  std::vector<std::vector<uint32_t>> by_name_;
};

// The occurrences of the names in out[0, n) counted into seen, from their slots.
void count_names(const std::vector<Obs>& out, size_t n, const Slots& slots, std::vector<int>& seen) {
  for (size_t p = 0; p < n; ++p) ++seen[std::min<size_t>(slots.keys[out[p].slot].name, seen.size() - 1)];
}

// One rank's kernels of one step into `out`, each with its slot where the run has one already, else
// kUnassigned and an entry in `fresh` (cleared first). On entry `out` holds the rank's kernels of an
// earlier step, every one with its slot (or nothing): while this step launches the same names in the
// same order, each kernel's (name, occurrence) is the one at its position there, so its slot is read
// there before it is overwritten (issue 29: counting every name's launches and looking its slot up
// were most of this loop at 960 x 903 x 50, for steps that repeat). From the first difference on,
// launches are counted per name in seen (all zero on entry and on return).
void observe(const RankIndex& x, std::pair<size_t, size_t> range, const Slots& slots, std::vector<int>& seen,
             std::vector<Obs>& out, std::vector<NewPosition>& fresh) {
  fresh.clear();
  const size_t n = range.second - range.first, earlier = out.size();
  out.resize(n);
  bool counting = false;  // the names differ from the earlier step's at or before this position
  for (size_t pos = 0; pos < n; ++pos) {
    const size_t i = range.first + pos;
    const GpuSpan a = x.timeline->at(i);
    const double dur = double(a.end_ns - a.start_ns);
    const double gap = gap_before(a, x.timeline->previous_of(i));
    uint32_t slot = pos < earlier && !counting ? out[pos].slot : Slots::kUnassigned;
    if (slot == Slots::kUnassigned || slots.keys[slot].name != a.name) [[unlikely]] {
      if (!counting) count_names(out, pos, slots, seen);
      counting = true;
      const int occurrence = seen[std::min<size_t>(a.name, seen.size() - 1)]++;  // kNone: the last entry
      slot = slots.find(a.name, occurrence);
      if (slot == Slots::kUnassigned) fresh.push_back({static_cast<uint32_t>(pos), a.name, occurrence});
    }
    out[pos] = Obs{dur, gap, slot, a.section, a.nccl, a.kind};
  }
  if (!counting) return;
  for (const Obs& o : out)
    if (o.slot != Slots::kUnassigned) seen[std::min<size_t>(slots.keys[o.slot].name, seen.size() - 1)] = 0;
  for (const NewPosition& f : fresh) seen[std::min<size_t>(f.name, seen.size() - 1)] = 0;
}

// One rank's kernels at one slot, summed over the steps.
struct SlotSums {
  double dur = 0, gap = 0, pos = 0;
  int n = 0;
};

// Per rank over the steps, for RankJitter and the slot summaries.
struct RankStepSeries {
  std::vector<double> end_div, dur_excess, gap_excess, step_ns, arrival_excess;
  std::vector<SlotSums> slot_sums;  // by slot id; one rank's cells together: fill_cell walks them in launch order
  int worst = 0, last = 0, with_collective = 0;
};

// One rank's kernel at a slot, as the cross-rank medians read it. Together, not one array per
// quantity: the scatter below writes one cache line a kernel instead of four (issue 29: it was a
// fifth of the analysis at 960 x 903 x 50).
struct SlotValues {
  double dur, gap, ttke, pos;
};

// The quantity when a slot's values all have the same (a kernel at the same position on every rank,
// the usual case for positions; gaps of 0 on every rank, the usual case for a GPU-bound job's
// kernels: half of the slots at 960 x 903 x 50), found without copying or selecting. Stops at the
// first value that differs, so other slots pay next to nothing.
template <class Get>
std::optional<double> same_everywhere(size_t n, Get get) {
  if (n == 0) return std::nullopt;
  const double v = get(0);
  for (size_t i = 1; i < n; ++i)
    if (get(i) != v) return std::nullopt;
  return v;
}

// One quantity of a slot's values, as the medians read it.
auto quantity_of(const SlotValues* first, double SlotValues::*quantity) {
  return [first, quantity](size_t i) { return first[i].*quantity; };
}
auto value_of(const double* first) {
  return [first](size_t i) { return first[i]; };
}

// The median of one quantity over a slot's values (in a scratch copy: the values keep their order).
double median_of(const SlotValues* first, const SlotValues* last, double SlotValues::*quantity) {
  const size_t n = size_t(last - first);
  if (const std::optional<double> v = same_everywhere(n, quantity_of(first, quantity))) return *v;
  thread_local std::vector<double> scratch;
  scratch.clear();
  for (const SlotValues* v = first; v != last; ++v) scratch.push_back(v->*quantity);
  return median_in_place(scratch);
}

// The median of n values, found from where it was in the last step (a kernel position's durations,
// gaps and TTKEs change little from step to step).
template <class Get>
double median_near(size_t n, Get get, MedianGuess& guess) {
  if (const std::optional<double> v = same_everywhere(n, get)) return *v;
  return median_guessed(n, get, guess);
}

// One step's kernels on every present rank, grouped by slot: medians across ranks per slot.
struct StepGroups {
  std::vector<uint32_t> slots;  // the slots seen in a step that scatters, by key (then `order`'s start)
  std::vector<uint32_t> order;  // the same by median launch position
  std::vector<double> med_dur, med_gap, med_ttke, med_pos;  // indexed by slot id (this step's slots valid)
  std::vector<MedianGuess> guess_dur, guess_gap, guess_ttke;  // by slot id: where the last step's medians were
  // Scratch, kept between steps so that a step allocates nothing.
  std::vector<SlotValues> values;
  std::vector<uint32_t> start;  // per slot: where its values begin in `values`
  size_t total = 0;             // values in it
  uint32_t end_of(uint32_t s, size_t nslots) const { return s + 1 < nslots ? start[s + 1] : uint32_t(total); }
  struct Chunk {                // a run of present ranks, grouped on one core
    size_t first, last;         // positions in `present`
    std::vector<uint32_t> count, at;  // per slot: its kernels in the chunk, where the chunk writes them
    std::vector<const Obs*> last_seen;  // per slot: the chunk's last kernel there
    // Per slot: where the chunk's values began and ended in the last step, and where observe_step
    // writes this step's while its ranks' kernels are in cache (place_kernels).
    std::vector<uint32_t> last_from, last_end, ahead;
  };
  std::vector<Chunk> chunks;
  size_t placed_for = 0;      // present ranks of the last step (0: none placed yet)
  bool placed_ahead = false;  // this step's values are in place already: its counts were the last step's
  // The slots of the last step's first present rank, in launch order; each rank of this step is
  // compared with them while its kernels are observed. Where every present rank launched exactly
  // these (the usual step, once the first has given the run its slots), the step is in one order and
  // its medians are taken position by position from the ranks' own kernels (group_in_one_order),
  // with nothing scattered into `values` (issue 29: that scatter was 0.37 s of 3.2 at 960 x 903 x 50).
  std::vector<uint32_t> last_order;
  // This step; until observe_step sets it, the last step's (after a step in one order, the next one
  // counts and places nothing while it is observed).
  bool one_order = false;
  // In a step in one order: every present rank's TTKE up to position ttke_next (ttke_medians_through).
  std::vector<double> ttke_running, ttke_values;
  size_t ttke_next = 0;
};

// f(i) for every i in [0, n): on every core where the values behind them are enough to pay for
// waking the other cores, else on this one (a step of 16 ranks' 300 kernels is not: issue 29, 200
// steps of them took 0.06 s of CPU more on every core than on one).
constexpr size_t kValuesWorthTheCores = 8192;
template <class F>
void each_maybe_on_every_core(size_t n, size_t values, F&& f) {
  if (values < kValuesWorthTheCores) {
    for (size_t i = 0; i < n; ++i) f(i);
    return;
  }
  parallel_for(n, std::forward<F>(f));
}

// Positions a step in one order takes its medians over at once: their values on 960 ranks (two
// quantities, 16 positions: 240 KB) stay in a core's second-level cache.
constexpr size_t kPositionsAtOnce = 16;

// One rank's kernels into their slots' values, each at its slot's `at` (advanced), with its TTKE and
// launch position. Bounded: a slot's values are written only below its `end` (observe_step's writes
// ahead, each chunk inside the places it had in the last step).
template <bool kBounded>
[[gnu::always_inline]] inline void place_kernels(const std::vector<Obs>& mine, uint32_t* at, const uint32_t* end,
                                                 SlotValues* values) {
  double ttke = 0;
  for (size_t pos = 0; pos < mine.size(); ++pos) {
    const Obs& o = mine[pos];
    ttke = add_ttke(ttke, o);
    const uint32_t i = at[o.slot]++;
    if (!kBounded || i < end[o.slot]) values[i] = {o.dur, o.gap, ttke, double(pos)};
  }
}

constexpr double kNotYet = std::numeric_limits<double>::quiet_NaN();  // a TTKE median not taken yet

// Ranks split into one run per core: each is counted and scattered on its own; the runs' places
// in the slot arrays follow rank order, as one thread would have put them.
void split_into_chunks(size_t present, size_t nslots, StepGroups& g) {
  const size_t n = std::max<size_t>(1, std::min<size_t>(analysis_threads(), present));
  g.chunks.resize(n);
  for (size_t c = 0; c < n; ++c) {
    StepGroups::Chunk& ch = g.chunks[c];
    ch.first = present * c / n;
    ch.last = present * (c + 1) / n;
    ch.count.assign(nslots, 0);
    ch.last_seen.assign(nslots, nullptr);
  }
}

// Where each slot's values go (slots in id order), and each chunk's share of them.
size_t place_slots(size_t nslots, StepGroups& g) {
  g.slots.clear();
  g.start.assign(nslots, 0);
  uint32_t at = 0;
  for (uint32_t s = 0; s < nslots; ++s) {
    g.start[s] = at;
    for (const StepGroups::Chunk& ch : g.chunks) at += ch.count[s];
    if (at > g.start[s]) g.slots.push_back(s);
  }
  for (size_t c = 0; c < g.chunks.size(); ++c) {
    g.chunks[c].at.resize(nslots);
    for (uint32_t s = 0; s < nslots; ++s)
      g.chunks[c].at[s] = c == 0 ? g.start[s] : g.chunks[c - 1].at[s] + g.chunks[c - 1].count[s];
  }
  return at;
}

// The last rank (in rank order) that ran a slot in this step says what the slot is.
void note_slot_kinds(Slots& slots, const StepGroups& g) {
  for (uint32_t s : g.slots)
    for (auto ch = g.chunks.rbegin(); ch != g.chunks.rend(); ++ch)
      if (const Obs* o = ch->last_seen[s]) {
        slots.acc[s].nccl = o->nccl;
        slots.acc[s].section = o->section;
        break;
      }
}

// One rank's kernels into its chunk's per-slot counts (the chunk's ranks in rank order).
void count_kernels(const std::vector<Obs>& obs, StepGroups::Chunk& ch) {
  for (const Obs& o : obs) {
    ++ch.count[o.slot];
    ch.last_seen[o.slot] = &o;
  }
}

// Whether a rank's kernels of the step are at exactly these slots, in this order.
bool in_order(const std::vector<Obs>& obs, const std::vector<uint32_t>& slots) {
  if (obs.size() != slots.size()) return false;
  for (size_t pos = 0; pos < obs.size(); ++pos)
    if (obs[pos].slot != slots[pos]) return false;
  return true;
}

// A step whose present ranks all launched last_order's slots in that order: each slot is at the
// same position on every rank, so its medians are taken from the ranks' kernels at that position,
// gathered a few positions at a time into a buffer that stays in cache. The same values as
// group_step's scatter gives each slot, so the same medians; every rank's position is its own.
void group_in_one_order(const std::vector<std::vector<Obs>>& obs, const std::vector<size_t>& present, Slots& slots,
                        StepGroups& g) {
  const std::vector<uint32_t>& order = g.last_order;
  const std::vector<Obs>& last_rank = obs[present.back()];  // the last rank in rank order says what a slot is
  for (size_t p = 0; p < order.size(); ++p) {
    slots.acc[order[p]].nccl = last_rank[p].nccl;
    slots.acc[order[p]].section = last_rank[p].section;
  }
  const size_t np = present.size();
  each_maybe_on_every_core((order.size() + kPositionsAtOnce - 1) / kPositionsAtOnce, order.size() * np, [&](size_t b) {
    const size_t first = b * kPositionsAtOnce, n = std::min(kPositionsAtOnce, order.size() - first);
    thread_local std::vector<double> values;
    if (values.size() < 2 * kPositionsAtOnce * np) values.resize(2 * kPositionsAtOnce * np);
    double *dur = values.data(), *gap = dur + kPositionsAtOnce * np;  // position j's values at j * np
    for (size_t i = 0; i < np; ++i) {
      const Obs* o = obs[present[i]].data() + first;
      for (size_t j = 0; j < n; ++j) {
        dur[j * np + i] = o[j].dur;
        gap[j * np + i] = o[j].gap;
      }
    }
    for (size_t j = 0; j < n; ++j) {
      const uint32_t s = order[first + j];
      g.med_dur[s] = median_near(np, value_of(dur + j * np), g.guess_dur[s]);
      g.med_gap[s] = median_near(np, value_of(gap + j * np), g.guess_gap[s]);
      g.med_ttke[s] = kNotYet;
      g.med_pos[s] = double(first + j);
    }
  });
  g.order = order;  // by median position: every slot's is its own position
  g.placed_for = 0;  // no values placed: the next step that scatters places none ahead
  g.ttke_running.assign(np, 0);
  g.ttke_next = 0;
}

// The step's kernels, counted per slot in every chunk (observe_step has, unless the step had new
// kernel positions), gathered by slot across ranks: medians across ranks per slot.
void group_step(const std::vector<std::vector<Obs>>& obs, const std::vector<size_t>& present, size_t nslots,
                Slots& slots, StepGroups& g) {
  for (auto* m : {&g.med_dur, &g.med_gap, &g.med_ttke, &g.med_pos})
    if (m->size() < nslots) m->resize(nslots, 0);
  for (auto* m : {&g.guess_dur, &g.guess_gap, &g.guess_ttke})
    if (m->size() < nslots) m->resize(nslots);
  if (g.one_order) return group_in_one_order(obs, present, slots, g);
  const size_t total = place_slots(nslots, g);
  note_slot_kinds(slots, g);
  g.values.resize(total);
  for (StepGroups::Chunk& ch : g.chunks) {  // where the next step's values are likely to go
    ch.last_from = ch.at;
    ch.last_end.resize(nslots);
    for (uint32_t s = 0; s < nslots; ++s) ch.last_end[s] = ch.at[s] + ch.count[s];
  }
  g.placed_for = present.size();
  if (!g.placed_ahead)
    parallel_for(g.chunks.size(), [&](size_t c) {
      StepGroups::Chunk& ch = g.chunks[c];
      for (size_t i = ch.first; i < ch.last; ++i) place_kernels<false>(obs[present[i]], ch.at.data(), nullptr, g.values.data());
    });
  g.total = total;
  // Each slot's medians on its own part of the arrays: independent, on every core. The TTKE
  // median is taken only where first_divergence asks for it (median_ttke).
  parallel_for(g.slots.size(), [&](size_t i) {
    const uint32_t s = g.slots[i];
    const uint32_t lo = g.start[s], hi = g.end_of(s, nslots);
    const SlotValues *first = g.values.data() + lo, *last = g.values.data() + hi;
    g.med_dur[s] = median_near(hi - lo, quantity_of(first, &SlotValues::dur), g.guess_dur[s]);
    g.med_gap[s] = median_near(hi - lo, quantity_of(first, &SlotValues::gap), g.guess_gap[s]);
    g.med_ttke[s] = kNotYet;
    g.med_pos[s] = median_of(first, last, &SlotValues::pos);
  });
  g.slots = slots.by_key(std::move(g.slots));
  g.order = g.slots;
  std::stable_sort(g.order.begin(), g.order.end(), [&](uint32_t a, uint32_t b) { return g.med_pos[a] < g.med_pos[b]; });
  // What the next step's ranks are compared with: most steps launch what this one did.
  const std::vector<Obs>& first_rank = obs[present.front()];
  g.last_order.resize(first_rank.size());
  for (size_t p = 0; p < first_rank.size(); ++p) g.last_order[p] = first_rank[p].slot;
}

// What every step of the analysis reads and fills.
struct JitterRun {
  const RunModel& model;
  const StepSet& steps;
  const size_t nranks;
  const int nsteps;
  JitterReport& rep;
  std::vector<RankIndex> ranks;
  Slots slots;
  std::vector<RankStepSeries> racc;
  // Per step, reused: each present rank's kernels, and their grouping across ranks.
  std::vector<std::vector<Obs>> obs;
  std::vector<std::vector<NewPosition>> fresh;  // each present rank's kernels without a slot yet
  StepGroups groups;
};

// The typical step (median final TTKE over the steps' cross-rank medians) sets the default threshold.
double divergence_threshold(const JitterRun& run, const JitterOptions& opt) {
  if (opt.divergence_ns > 0) return opt.divergence_ns;
  std::vector<double> step_medians;
  for (int k = 0; k < run.nsteps; ++k) {
    std::vector<double> finals;
    for (const RankIndex& x : run.ranks)
      if (x.steps[k].first < x.steps[k].second) finals.push_back(x.final_ttke[k]);
    if (!finals.empty()) step_medians.push_back(median(std::move(finals)));
  }
  return std::max(20'000.0, 0.05 * median(std::move(step_medians)));
}

// The present ranks' kernels of step k, with their slots, counted per slot in each chunk of ranks
// while they are still in cache (group_step's first pass). Where the last step's counts per slot
// are likely this one's (as many ranks: most steps have the same kernels), each rank's values are
// also written then, at the places the last step's had (issue 29: group_step read every kernel
// back from memory to place it). Each chunk writes only inside its own last places; where any count
// turns out to differ, group_step places them all again.
void observe_step(JitterRun& run, int k, const std::vector<size_t>& present) {
  StepGroups& g = run.groups;
  split_into_chunks(present.size(), run.slots.size(), g);
  const bool count_now = !g.one_order;  // the last step's; else counted only where this step turns out otherwise
  const bool ahead = count_now && g.placed_for == present.size();  // the same chunks as the last step's
  std::vector<uint8_t> unassigned(g.chunks.size(), 0);  // the chunk has kernels at positions without a slot yet
  std::vector<uint8_t> other_order(g.chunks.size(), 0);  // the chunk has a rank whose slots are not last_order
  parallel_for(g.chunks.size(), [&](size_t c) {
    thread_local std::vector<int> seen;  // all zero between calls (observe resets what it used)
    if (seen.size() != run.model.strings.size() + 1) seen.assign(run.model.strings.size() + 1, 0);
    StepGroups::Chunk& ch = g.chunks[c];
    if (ahead) ch.ahead = ch.last_from;
    for (size_t i = ch.first; i < ch.last; ++i) {
      const size_t r = present[i];
      observe(run.ranks[r], run.ranks[r].steps[k], run.slots, seen, run.obs[r], run.fresh[r]);
      unassigned[c] |= !run.fresh[r].empty();
      if (unassigned[c]) continue;
      if (!other_order[c]) other_order[c] = !in_order(run.obs[r], g.last_order);
      if (!count_now) continue;
      count_kernels(run.obs[r], ch);
      if (ahead) place_kernels<true>(run.obs[r], ch.ahead.data(), ch.last_end.data(), g.values.data());
    }
  });
  const bool none_unassigned = std::find(unassigned.begin(), unassigned.end(), 1) == unassigned.end();
  g.one_order = none_unassigned && !g.last_order.empty() &&
                std::find(other_order.begin(), other_order.end(), 1) == other_order.end();
  g.placed_ahead = ahead && none_unassigned &&
                   std::all_of(g.chunks.begin(), g.chunks.end(), [](const StepGroups::Chunk& ch) { return ch.ahead == ch.last_end; });
  if (none_unassigned && (count_now || g.one_order)) return;
  // Kernel positions not seen before get slots here, in rank order: ids do not depend on threads.
  for (size_t r : present)
    for (const NewPosition& f : run.fresh[r]) run.obs[r][f.at].slot = run.slots.slot_of(f.name, f.occurrence);
  split_into_chunks(present.size(), run.slots.size(), g);
  parallel_for(g.chunks.size(), [&](size_t c) {
    for (size_t i = g.chunks[c].first; i < g.chunks[c].last; ++i) count_kernels(run.obs[present[i]], g.chunks[c]);
  });
}

// Arrival at the step's first collective, compared across the ranks that have one.
struct StepArrivals {
  size_t with = 0;  // present ranks with a collective
  double median_arrival = 0, median_idle_before = 0;
  size_t last;      // the latest arrival (nranks: none)
};

StepArrivals step_arrivals(const JitterRun& run, int k, const std::vector<size_t>& present) {
  std::vector<double> arr, idle_before;
  StepArrivals a;
  a.last = run.nranks;
  for (size_t r : present) {
    const CollectiveArrival& x = run.ranks[r].arrivals[k];
    if (x.arrival < 0) continue;
    arr.push_back(x.arrival);
    idle_before.push_back(x.idle_before);
    if (a.last == run.nranks || x.arrival > run.ranks[a.last].arrivals[k].arrival) a.last = r;
  }
  a.with = arr.size();
  a.median_arrival = median(std::move(arr));
  a.median_idle_before = median(std::move(idle_before));
  return a;
}

// Sums per section id, few per step: a short list, turned into the report's map at the end. The
// sum of the section being added to is held apart (SectionSums::Running) and put back when the
// section changes: a step's kernels come section by section, so most adds are one addition in a
// register (issue 29: looking the section up in the list and adding in memory, every kernel, was a
// third of fill_cell). Running is the caller's local, passed by value: as a member of the list it
// stayed in memory, the loop's other stores of doubles possibly aliasing it, and each add waited
// for the one before (2026-11-29). Each section's values are still added one by one in launch
// order: the same doubles.
class SectionSums {
 public:
  struct Running {
    uint64_t section = UINT64_MAX;  // no section id: the first add looks its section up
    double sum = 0;
  };
  [[gnu::always_inline]] void add(Running& now, uint32_t section, double v) {
    if (section != now.section) [[unlikely]] now = switch_to(now, section);
    now.sum += v;
  }
  void into(Running last, const RunModel& m, std::map<std::string, double>& out) {
    put_back(last);
    for (const auto& [s, sum] : sums_) out[section_name(m, s)] += sum;
  }

 private:
  void put_back(Running now) {
    for (auto& [s, sum] : sums_)
      if (s == now.section) sum = now.sum;
  }
  Running switch_to(Running now, uint32_t section) {
    put_back(now);
    for (const auto& [s, sum] : sums_)
      if (s == section) return {section, sum};
    sums_.emplace_back(section, -0.0);  // -0.0 + v is v, whatever v
    return {section, -0.0};
  }
  std::vector<std::pair<uint32_t, double>> sums_;
};

// Rank r's cell of step k: its excesses over the cross-rank medians, and the run-wide sums.
void fill_cell(JitterRun& run, int k, size_t r, double divergence, const StepArrivals& arrivals,
               RankStepJitter& cell) {
  RankStepSeries& acc = run.racc[r];
  const StepGroups& g = run.groups;
  acc.end_div.push_back(divergence);
  cell.present = true;
  cell.end_divergence_ns = divergence;
  const CollectiveArrival& mine = run.ranks[r].arrivals[k];
  if (mine.arrival >= 0 && arrivals.with > 1) {
    cell.arrival_ns = mine.arrival;
    cell.arrival_excess_ns = mine.arrival - arrivals.median_arrival;
    cell.last_arrival = r == arrivals.last;
    cell.precollective_idle_excess_ns = mine.idle_before - arrivals.median_idle_before;
    cell.collective_launched_late = mine.launched_late;
    acc.arrival_excess.push_back(cell.arrival_excess_ns);
    ++acc.with_collective;
    acc.last += cell.last_arrival;
  }
  if (acc.slot_sums.size() < run.slots.size()) acc.slot_sums.resize(run.slots.size());
  double de = 0, ge = 0;
  SectionSums duration_by_section, gap_by_section;
  SectionSums::Running duration_now, gap_now;  // locals: in registers
  double memory_excess = cell.memory_excess_ns;
  for (size_t pos = 0; pos < run.obs[r].size(); ++pos) {
    const Obs& o = run.obs[r][pos];
    // NCCL kernels last until the slowest rank arrives: their length is the victims'
    // waiting, not this rank's work (NVRx and the talk leave them out too).
    const double excess = o.nccl ? 0 : o.dur - g.med_dur[o.slot];
    const double gap_excess = o.gap - g.med_gap[o.slot];
    de += excess;
    ge += gap_excess;
    if (!o.nccl) gap_by_section.add(gap_now, o.section, gap_excess);
    if (o.kind != GpuKind::kernel) memory_excess += excess;
    else if (!o.nccl) duration_by_section.add(duration_now, o.section, excess);
    SlotSums& s = acc.slot_sums[o.slot];  // rank r's own: ranks fill their cells at once
    s.dur += o.dur;
    s.gap += o.gap;
    s.pos += double(pos);
    ++s.n;
  }
  cell.memory_excess_ns = memory_excess;
  duration_by_section.into(duration_now, run.model, cell.duration_excess_by_section);
  gap_by_section.into(gap_now, run.model, cell.gap_excess_by_section);
  acc.dur_excess.push_back(de);
  acc.gap_excess.push_back(ge);
  cell.duration_excess_ns = de;
  cell.gap_excess_ns = ge;
}

// In a step in one order: the TTKE medians of every position up to `pos`, each rank's running TTKE
// carried on from the positions before (those have theirs already). first_divergence asks in rising
// order and often stops early, so the positions are taken in blocks that double, from
// kPositionsAtOnce to 128 (a step where no rank diverges asks for all of them: 903 at 960 ranks, in
// 11 blocks), each on every core where its values pay for it: the ranks' running sums split between
// the cores, then the medians.
void ttke_medians_through(const std::vector<std::vector<Obs>>& obs, const std::vector<size_t>& present, size_t pos,
                          StepGroups& g) {
  const size_t np = present.size(), parts = std::min<size_t>(analysis_threads(), np);
  while (g.ttke_next <= pos) {
    const size_t first = g.ttke_next;
    const size_t n = std::min({std::max(kPositionsAtOnce, first), size_t{128}, g.last_order.size() - first});
    g.ttke_values.resize(n * np);  // position j's values at j * np
    each_maybe_on_every_core(parts, n * np, [&](size_t part) {
      for (size_t i = np * part / parts; i < np * (part + 1) / parts; ++i) {
        const Obs* o = obs[present[i]].data() + first;
        double ttke = g.ttke_running[i];
        for (size_t j = 0; j < n; ++j) g.ttke_values[j * np + i] = ttke = add_ttke(ttke, o[j]);
        g.ttke_running[i] = ttke;
      }
    });
    each_maybe_on_every_core(n, n * np, [&](size_t j) {
      const uint32_t s = g.last_order[first + j];
      g.med_ttke[s] = median_near(np, value_of(g.ttke_values.data() + j * np), g.guess_ttke[s]);
    });
    g.ttke_next = first + n;
  }
}

// The cross-rank TTKE median at a slot, taken the first time it is asked for in this step.
double median_ttke(JitterRun& run, const std::vector<size_t>& present, uint32_t s) {
  StepGroups& g = run.groups;
  if (!std::isnan(g.med_ttke[s])) return g.med_ttke[s];
  if (g.one_order) {
    ttke_medians_through(run.obs, present, static_cast<size_t>(g.med_pos[s]), g);
  } else {
    const uint32_t lo = g.start[s], hi = g.end_of(s, run.slots.size());
    g.med_ttke[s] = median_near(hi - lo, quantity_of(g.values.data() + lo, &SlotValues::ttke), g.guess_ttke[s]);
  }
  return g.med_ttke[s];
}

// The first kernel position (in median launch order) where the worst rank's TTKE left the pack.
void first_divergence(JitterRun& run, const std::vector<size_t>& present, size_t worst, StepJitter& sj) {
  StepGroups& g = run.groups;
  // By slot; NaN: the worst rank has no kernel there.
  std::vector<double> ttke_at(run.slots.size(), std::numeric_limits<double>::quiet_NaN());
  double ttke = 0;
  for (const Obs& o : run.obs[worst]) {
    ttke = add_ttke(ttke, o);
    ttke_at[o.slot] = ttke;
  }
  for (size_t i = 0; i < g.order.size(); ++i) {
    const uint32_t s = g.order[i];
    if (!std::isnan(ttke_at[s]) && ttke_at[s] - median_ttke(run, present, s) > run.rep.divergence_threshold_ns) {
      sj.first_diverging_slot = static_cast<int>(i);
      sj.first_diverging_kernel = run.model.strings.at(run.slots.keys[s].name);
      return;
    }
  }
}

// Step k across ranks: one row of the matrix and one StepJitter.
void analyze_step(JitterRun& run, int k) {
  std::vector<size_t> present;
  std::vector<double> host_times;
  for (size_t r = 0; r < run.nranks; ++r) {
    const Step& st = run.steps.per_rank[r][k];
    host_times.push_back(double(st.end_ns - st.start_ns));
    run.racc[r].step_ns.push_back(host_times.back());
    if (run.ranks[r].steps[k].first < run.ranks[r].steps[k].second) present.push_back(r);
  }
  if (present.empty()) return;
  observe_step(run, k, present);
  group_step(run.obs, present, run.slots.size(), run.slots, run.groups);
  StepJitter sj;
  sj.step = run.steps.per_rank[present[0]][k].index;
  sj.ranks = static_cast<int>(present.size());
  sj.step_time_spread_ns = *std::max_element(host_times.begin(), host_times.end()) -
                           *std::min_element(host_times.begin(), host_times.end());
  std::vector<double> fin;
  for (size_t r : present) fin.push_back(run.ranks[r].final_ttke[k]);
  sj.median_ttke_ns = median(std::move(fin));
  const StepArrivals arrivals = step_arrivals(run, k, present);

  std::vector<RankStepJitter> row(run.nranks);
  size_t worst = present[0];
  for (size_t r : present)
    if (run.ranks[r].final_ttke[k] - sj.median_ttke_ns > run.ranks[worst].final_ttke[k] - sj.median_ttke_ns) worst = r;
  parallel_for(present.size(), [&](size_t i) {
    const size_t r = present[i];
    fill_cell(run, k, r, run.ranks[r].final_ttke[k] - sj.median_ttke_ns, arrivals, row[r]);
  });
  run.rep.matrix.push_back(std::move(row));
  ++run.racc[worst].worst;
  sj.worst_rank = run.model.ranks[worst].rank;
  sj.worst_divergence_ns = run.ranks[worst].final_ttke[k] - sj.median_ttke_ns;
  first_divergence(run, present, worst, sj);
  run.rep.steps.push_back(sj);
}

RankJitter rank_summary(const JitterRun& run, size_t r) {
  const RankData& d = run.model.ranks[r];
  const RankStepSeries& acc = run.racc[r];
  RankJitter rj;
  rj.rank = d.rank;
  rj.host = d.host;
  if (!run.ranks[r].timeline->empty()) rj.device = run.ranks[r].timeline->at(0).device;
  rj.median_end_divergence_ns = median(acc.end_div);
  rj.steps_worst = acc.worst;
  rj.duration_excess_ns = median(acc.dur_excess);
  rj.gap_excess_ns = median(acc.gap_excess);
  rj.median_launch_delay_ns = run.ranks[r].median_delay_ns;
  rj.near_zero_launch_delay_share = run.ranks[r].near_zero_delay_share;
  rj.median_step_ns = median(acc.step_ns);
  rj.median_arrival_excess_ns = median(acc.arrival_excess);
  rj.last_arrival_share = acc.with_collective ? double(acc.last) / acc.with_collective : 0;
  return rj;
}

std::vector<HostJitter> host_summaries(const std::vector<RankJitter>& ranks) {
  std::map<std::string, std::vector<const RankJitter*>> by_host;
  for (const RankJitter& rj : ranks) by_host[rj.host].push_back(&rj);
  std::vector<HostJitter> out;
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
    hj.median_end_divergence_ns = median(std::move(v));
    hj.worst_rank = worst->rank;
    out.push_back(hj);
  }
  return out;
}

// Kernel positions over the whole run: each rank's mean over steps, then across ranks.
std::vector<KernelSlotStats> slot_summaries(const JitterRun& run) {
  std::vector<uint32_t> ids(run.slots.size());
  for (uint32_t i = 0; i < ids.size(); ++i) ids[i] = i;
  std::vector<KernelSlotStats> out;
  for (uint32_t id : run.slots.by_key(std::move(ids))) {
    const Slots::Acc& s = run.slots.acc[id];
    KernelSlotStats ks;
    ks.name = run.model.strings.at(run.slots.keys[id].name);
    ks.section = section_name(run.model, s.section);
    ks.nccl = s.nccl;
    std::vector<double> durs, gaps, poss;
    for (size_t r = 0; r < run.nranks; ++r) {
      const std::vector<SlotSums>& sums = run.racc[r].slot_sums;
      if (id >= sums.size() || !sums[id].n) continue;
      const SlotSums& x = sums[id];
      const double d = x.dur / x.n, g = x.gap / x.n;
      const int rank = run.model.ranks[r].rank;
      durs.push_back(d);
      gaps.push_back(g);
      poss.push_back(x.pos / x.n);
      if (ks.min_rank < 0 || d < ks.min_duration_ns) { ks.min_rank = rank; ks.min_duration_ns = d; }
      if (ks.max_rank < 0 || d > ks.max_duration_ns) { ks.max_rank = rank; ks.max_duration_ns = d; }
      if (ks.max_gap_rank < 0 || g > ks.max_gap_ns) { ks.max_gap_rank = rank; ks.max_gap_ns = g; }
    }
    ks.median_duration_ns = median(std::move(durs));
    ks.median_gap_ns = median(std::move(gaps));
    ks.slot = static_cast<int>(std::lround(median(std::move(poss))));
    out.push_back(ks);
  }
  std::stable_sort(out.begin(), out.end(), [](const KernelSlotStats& a, const KernelSlotStats& b) { return a.slot < b.slot; });
  return out;
}

}  // namespace

// What JitterByRank keeps of each rank until finish.
struct JitterByRank::Ranks {
  std::vector<RankIndex> index;
};

JitterByRank::JitterByRank(const RunModel& model, const StepSet& steps)
    : model_(model),
      steps_(steps),
      nsteps_(steps.per_rank.size() == model.ranks.size() ? steps.count() : 0),  // as the breakdown's
      ranks_(std::make_unique<Ranks>()) {
  ranks_->index.resize(model.ranks.size());
}

JitterByRank::~JitterByRank() = default;

namespace {

RankIndex checked_index(const GpuTimeline& g, const StepSet& steps, size_t r, int nsteps) {
  if (g.previous.size() != g.size()) throw std::logic_error("jitter: a GPU timeline without stream predecessors");
  return index_rank(g, steps, r, nsteps);
}

}  // namespace

// A rank without records is indexed in finish, and only where another rank has records (a run of
// summaries needs none: 100,000 of them took a step list and its sums each, 2026-11-29).
void JitterByRank::add(size_t r, const GpuTimeline& g) {
  if (nsteps_ > 0 && !g.empty()) ranks_->index.at(r) = checked_index(g, steps_, r, nsteps_);
}

JitterReport JitterByRank::finish(const std::vector<GpuTimeline>& timelines, const JitterOptions& opt) {
  JitterReport rep;
  const int nsteps = nsteps_;
  const size_t nranks = model_.ranks.size();
  if (nsteps == 0) {
    rep.why_not = "no steps were found: " + steps_.source;
    return rep;
  }
  if (timelines.size() != nranks) throw std::logic_error("jitter: not one GPU timeline per rank");
  if (std::all_of(timelines.begin(), timelines.end(), [](const GpuTimeline& g) { return g.empty(); })) {
    rep.why_not = "no per-kernel GPU records (no GPU, CUPTI off, or no sampled window)";
    return rep;
  }
  JitterRun run{model_, steps_, nranks, nsteps, rep, std::move(ranks_->index), Slots(model_.strings.size()), {}, {}, {}, {}};
  parallel_for(nranks, [&](size_t r) {
    if (run.ranks[r].steps.size() != size_t(nsteps)) run.ranks[r] = checked_index(timelines[r], steps_, r, nsteps);  // no add(r)
    run.ranks[r].timeline = &timelines[r];  // the one add(r) saw may have moved since
  });
  rep.divergence_threshold_ns = divergence_threshold(run, opt);
  run.racc.resize(nranks);
  run.obs.resize(nranks);
  run.fresh.resize(nranks);
  for (int k = 0; k < nsteps; ++k) analyze_step(run, k);
  for (size_t r = 0; r < nranks; ++r) rep.ranks.push_back(rank_summary(run, r));
  rep.hosts = host_summaries(rep.ranks);
  rep.kernels = slot_summaries(run);
  rep.available = true;
  return rep;
}

JitterReport analyze_jitter(const RunModel& model, const StepSet& steps, const JitterOptions& opt) {
  return analyze_jitter(model, steps, index_gpu_all(model), opt);
}

JitterReport analyze_jitter(const RunModel& model, const StepSet& steps, const std::vector<GpuTimeline>& timelines,
                            const JitterOptions& opt) {
  return JitterByRank(model, steps).finish(timelines, opt);  // finish indexes every rank add() did not see
}

}  // namespace laggard::report
