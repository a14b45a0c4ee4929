#include "recorder.h"

#include <algorithm>

namespace laggard {

Recorder::Recorder(NameTable& names, int max_occurrences, int64_t epoch_offset_ns,
                   int64_t start_mono_ns, size_t window_budget)
    : names_(names),
      max_occurrences_(static_cast<size_t>(max_occurrences)),
      window_budget_(window_budget),
      epoch_offset_ns_(epoch_offset_ns),
      window_start_mono_(start_mono_ns) {
  ThreadAggregates::init_handover();
}

ThreadBuffer* Recorder::register_thread(uint32_t tid) {
  auto buf = std::make_unique<ThreadBuffer>(tid);
  ThreadBuffer* raw = buf.get();
  std::lock_guard<std::mutex> lock(threads_mu_);
  threads_.push_back(std::move(buf));
  return raw;
}

uint64_t Recorder::next_random() {
  // xorshift64*: reservoir sampling only needs cheap, decent randomness.
  rng_ ^= rng_ >> 12;
  rng_ ^= rng_ << 25;
  rng_ ^= rng_ >> 27;
  return rng_ * 0x2545f4914f6cdd1dull;
}

void Recorder::add_totals(uint32_t name, uint32_t parent, const RangeTotals& t) {
  has_data_ = true;
  if (name == ThreadAggregates::kFolded) name = names_.other_id(), parent = kNoName;
  open_[{name, parent}].totals.merge(t);
}

void Recorder::add_sample(const RangeRecord& r) {
  int64_t dur = r.end_ns - r.start_ns;
  if (dur < 0) dur = 0;
  SectionAgg& a = open_[{r.name_id, r.parent_id}];
  ++a.sampled;
  Occurrence occ{r.start_ns, dur, r.tid};
  if (a.kept.size() < max_occurrences_) {
    a.kept.push_back(occ);
  } else {
    // Reservoir sampling (Algorithm R): every occurrence is kept with equal probability.
    uint64_t j = next_random() % a.sampled;
    if (j < a.kept.size()) a.kept[j] = occ;
  }
}

// A sample goes to the window that counts it, else the window would store an occurrence its
// count does not include (which the reader refuses). Relative to the generation this drain took:
// a range counted in it joins now; one counted after the flip (in the generation the next drain
// takes) can reach the ring before it is drained: it waits for that drain; one counted in an
// earlier drain's generation whose sample reached the ring only after that drain (its thread
// was descheduled between counting and pushing) is left out of the sample: its count went to a
// window that may be closed (found by TSan, which slows that gap). An exited thread's two
// generations are both taken at its last drain.
void Recorder::take_samples(ThreadBuffer& t, bool exited) {
  const uint8_t taken = t.totals.taken_generation();
  auto place = [&](const RangeRecord& r) {
    const auto ahead = static_cast<int8_t>(static_cast<uint8_t>(r.counted_in - taken));
    if (ahead == 0 || (exited && ahead == -1)) add_sample(r);
    else if (ahead > 0 && !exited) t.counted_next.push_back(r);
  };
  std::vector<RangeRecord> waiting;
  waiting.swap(t.counted_next);
  for (const RangeRecord& r : waiting) place(r);
  t.ranges.drain(place);
}

void Recorder::drain() {
  std::vector<ThreadBuffer*> live;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    live.reserve(threads_.size());
    for (auto& t : threads_) live.push_back(t.get());
  }
  std::vector<const ThreadBuffer*> finished;
  // Read `exited` before draining: anything the thread did before setting it is drained now.
  std::vector<char> exited(live.size());
  for (size_t i = 0; i < live.size(); ++i) exited[i] = live[i]->exited.load(std::memory_order_acquire);
  for (ThreadBuffer* t : live) t->totals.flip();
  ThreadAggregates::quiesce();  // one barrier for all threads
  for (size_t i = 0; i < live.size(); ++i) {
    ThreadBuffer* t = live[i];
    if (exited[i]) {
      // Gone for good, so both tables are quiet: take the one it wrote before the flip too.
      t->totals.take([this](uint32_t name, uint32_t parent, const RangeTotals& tot) { add_totals(name, parent, tot); });
      t->totals.flip();
    }
    // Statistics first: a sample that arrives without its totals (added in between) would be
    // an occurrence the window's count does not include.
    // A thread stopped mid-range by a signal whose handler waits for this flush keeps its table
    // and its samples for a later drain: a sample taken now would lack its count.
    if (t->totals.take([this](uint32_t name, uint32_t parent, const RangeTotals& tot) { add_totals(name, parent, tot); }))
      take_samples(*t, exited[i]);
    Baseline& b = baselines_[t];
    auto delta = [](const std::atomic<uint64_t>& now, uint64_t& seen) {
      uint64_t v = now.load(std::memory_order_relaxed);
      uint64_t d = v - seen;
      seen = v;
      return d;
    };
    window_drops_.sections_filtered += delta(t->filtered, b.filtered);
    window_drops_.stack_overflow += delta(t->stack_overflow, b.stack_overflow);
    window_drops_.unbalanced_pop += delta(t->unbalanced_pop, b.unbalanced_pop);
    window_drops_.unmatched_end += delta(t->unmatched_end, b.unmatched_end);
    if (exited[i]) {
      // Ranges the thread left open can never close now.
      int open = t->open_depth.load(std::memory_order_relaxed);
      if (open > 0) window_drops_.unclosed_at_exit += static_cast<uint64_t>(open);
      finished.push_back(t);
    }
  }
  if (finished.empty()) return;
  std::lock_guard<std::mutex> lock(threads_mu_);
  for (const ThreadBuffer* t : finished) {
    baselines_.erase(t);
    threads_.erase(std::remove_if(threads_.begin(), threads_.end(),
                                  [t](const std::unique_ptr<ThreadBuffer>& p) { return p.get() == t; }),
                   threads_.end());
  }
}

uint64_t Recorder::open_ranges() const {
  std::lock_guard<std::mutex> lock(threads_mu_);
  uint64_t n = 0;
  for (const auto& t : threads_) {
    int d = t->open_depth.load(std::memory_order_relaxed);
    if (d > 0) n += static_cast<uint64_t>(d);
  }
  return n;
}

void Recorder::fit_window_budget() {
  size_t total = 0;
  std::vector<SectionAgg*> aggs;
  for (auto& [key, a] : open_) {
    total += a.kept.size();
    aggs.push_back(&a);
  }
  if (total <= window_budget_) return;
  // Water-filling: small sections keep everything, large ones share what is left equally.
  std::sort(aggs.begin(), aggs.end(), [](auto* x, auto* y) { return x->kept.size() < y->kept.size(); });
  size_t remaining = window_budget_;
  for (size_t i = 0; i < aggs.size(); ++i) {
    SectionAgg& a = *aggs[i];
    size_t share = std::max<size_t>(1, remaining / (aggs.size() - i));
    if (a.kept.size() > share) {
      // A uniform subsample of a uniform sample is still uniform.
      for (size_t k = 0; k < share; ++k) std::swap(a.kept[k], a.kept[k + next_random() % (a.kept.size() - k)]);
      a.kept.resize(share);
    }
    remaining -= std::min(remaining, a.kept.size());
  }
}

WindowSnapshot Recorder::close_window(int64_t now_mono_ns, const DropCounters& extra) {
  drain();
  fit_window_budget();
  WindowSnapshot w;
  w.index = window_index_++;
  w.start_ns = window_start_mono_ + epoch_offset_ns_;
  w.end_ns = now_mono_ns + epoch_offset_ns_;
  window_start_mono_ = now_mono_ns;
  w.sections.reserve(open_.size());
  std::map<std::pair<uint32_t, uint32_t>, SectionAgg> carried;
  for (auto& [key, a] : open_) {
    if (a.totals.count == 0) {
      // Samples drained before their totals: the totals come with the next drain, so the
      // samples wait for them in the next window, once (a thread's folded totals never come).
      if (!a.waited) {
        a.waited = true;
        carried.emplace(key, std::move(a));
      }
      continue;
    }
    SectionWindowStats s;
    NameInfo info = names_.info(key.first);
    s.name = std::move(info.display);
    s.domain = std::move(info.domain);
    s.folded = info.folded;
    if (s.folded) window_drops_.names_overflow += a.totals.count;
    if (key.second != kNoName) s.parent = names_.name(key.second);
    s.count = a.totals.count;
    s.total_ns = a.totals.total_ns;
    s.min_ns = a.totals.min_ns;
    s.max_ns = a.totals.max_ns;
    s.median_from_sample = a.kept.size() < a.totals.count;
    // Not stored: left out of a full ring or of the reservoir; the statistics stay exact.
    if (s.median_from_sample) window_drops_.occurrences_sampled += a.totals.count - a.kept.size();
    std::sort(a.kept.begin(), a.kept.end(),
              [](const Occurrence& x, const Occurrence& y) { return x.start_ns < y.start_ns; });
    std::vector<int64_t> durs;
    durs.reserve(a.kept.size());
    for (const Occurrence& o : a.kept) {
      s.start_ns.push_back(o.start_ns + epoch_offset_ns_);
      s.dur_ns.push_back(o.dur_ns);
      s.tid.push_back(o.tid);
      durs.push_back(o.dur_ns);
    }
    if (durs.empty()) {
      s.median_ns = a.totals.total_ns / static_cast<int64_t>(a.totals.count);  // no sample: the mean
    } else {
      size_t mid = durs.size() / 2;
      std::nth_element(durs.begin(), durs.begin() + mid, durs.end());
      int64_t hi = durs[mid];
      if (durs.size() % 2 == 0) {
        int64_t lo = *std::max_element(durs.begin(), durs.begin() + mid);
        s.median_ns = lo + (hi - lo) / 2;
      } else {
        s.median_ns = hi;
      }
    }
    w.sections.push_back(std::move(s));
  }
  open_ = std::move(carried);
  w.dropped = window_drops_;
  w.dropped += extra;
  window_drops_ = DropCounters{};
  return w;
}

}  // namespace laggard
