#include "recorder.h"

#include <algorithm>

namespace laggard {

Recorder::Recorder(const NameTable& names, int max_occurrences, int64_t epoch_offset_ns,
                   int64_t start_mono_ns, size_t window_budget)
    : names_(names),
      max_occurrences_(static_cast<size_t>(max_occurrences)),
      window_budget_(window_budget),
      epoch_offset_ns_(epoch_offset_ns),
      window_start_mono_(start_mono_ns) {}

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

void Recorder::add(const RangeRecord& r) {
  has_data_ = true;
  int64_t dur = r.end_ns - r.start_ns;
  if (dur < 0) dur = 0;
  SectionAgg& a = open_[{r.name_id, r.parent_id}];
  if (a.count == 0) {
    a.min_ns = a.max_ns = dur;
  } else {
    a.min_ns = std::min(a.min_ns, dur);
    a.max_ns = std::max(a.max_ns, dur);
  }
  ++a.count;
  a.total_ns += dur;
  Occurrence occ{r.start_ns, dur, r.tid};
  if (a.kept.size() < max_occurrences_) {
    a.kept.push_back(occ);
  } else {
    // Reservoir sampling (Algorithm R): every occurrence is kept with equal probability.
    uint64_t j = next_random() % a.count;
    if (j < a.kept.size()) a.kept[j] = occ;
    ++window_drops_.occurrences_sampled;
  }
}

void Recorder::drain() {
  std::vector<ThreadBuffer*> live;
  {
    std::lock_guard<std::mutex> lock(threads_mu_);
    live.reserve(threads_.size());
    for (auto& t : threads_) live.push_back(t.get());
  }
  std::vector<const ThreadBuffer*> finished;
  for (ThreadBuffer* t : live) {
    // Read `exited` before draining: anything pushed before the flag was set is drained now.
    bool exited = t->exited.load(std::memory_order_acquire);
    t->ranges.drain([this](const RangeRecord& r) { add(r); });
    Baseline& b = baselines_[t];
    auto delta = [](const std::atomic<uint64_t>& now, uint64_t& seen) {
      uint64_t v = now.load(std::memory_order_relaxed);
      uint64_t d = v - seen;
      seen = v;
      return d;
    };
    window_drops_.ring_full += delta(t->ring_full, b.ring_full);
    window_drops_.stack_overflow += delta(t->stack_overflow, b.stack_overflow);
    window_drops_.unbalanced_pop += delta(t->unbalanced_pop, b.unbalanced_pop);
    window_drops_.unmatched_end += delta(t->unmatched_end, b.unmatched_end);
    if (exited) {
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
      window_drops_.occurrences_sampled += a.kept.size() - share;
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
  for (auto& [key, a] : open_) {
    SectionWindowStats s;
    s.name = names_.name(key.first);
    if (key.second != kNoName) s.parent = names_.name(key.second);
    s.count = a.count;
    s.total_ns = a.total_ns;
    s.min_ns = a.min_ns;
    s.max_ns = a.max_ns;
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
    if (!durs.empty()) {
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
  open_.clear();
  w.dropped = window_drops_;
  w.dropped += extra;
  window_drops_ = DropCounters{};
  return w;
}

}  // namespace laggard
