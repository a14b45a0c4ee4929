// Per-thread NVTX push/pop nesting. Single-threaded by construction (one per thread), fixed
// size so a push never allocates. Domains keep separate nesting: a pop of domain D closes the
// innermost open range of D even if another domain's range was pushed after it, and a range's
// parent is the innermost open range of its own domain (issue 25: laggard's automatic "torch"
// sections never nest under a user's "data_load" of the default domain, nor the reverse).
//
// Hot path (issue 29): push() and close() are inline; each open range carries its domain's
// innermost kept section and every domain's (inner, inner_any), so a push, a pop and
// innermost_kept() look at the top of the stack only (a scan down to the range's own domain
// only where domains interleave). A range's start is kept as the clock's raw stamp
// (tsc_clock.h: counter ticks while the line is on), converted to ns only when needed.
#pragma once

#include <cstdint>

#include "name_table.h"
#include "records.h"
#include "tsc_clock.h"

namespace laggard {

class RangeStack {
 public:
  static constexpr int kMaxDepth = 128;

  // Returns the 0-based nesting level of the new range (NVTX's return value for push).
  // `epoch`: pause_state.h's value at the call; a range is recorded only when its push and
  // pop see the same even (capturing) value, so nesting stays balanced across pause/resume.
  int push(const NameEntry* name, const void* domain, int64_t now_ns, uint32_t epoch = 0) {
    return push_stamp(name, domain, TscClock::Stamp{now_ns, false}, epoch);
  }
  __attribute__((always_inline)) int push_stamp(const NameEntry* name, const void* domain, TscClock::Stamp start,
                                                uint32_t epoch) {
    const int level = depth_;
    if (__builtin_expect(level < kMaxDepth, 1)) {
      uint32_t below = kNoName, below_any = kNoName;
      if (level > 0) {
        below_any = open_[level - 1].inner_any;
        below = open_[level - 1].domain == domain ? open_[level - 1].inner : inner_below(level - 1, domain);
      }
      const uint32_t self = name->kept ? name->id : kNoName;
      Open& o = open_[level];
      o.name = name;
      o.domain = domain;
      o.start = start.value;
      o.inner = self != kNoName ? self : below;
      o.inner_any = self != kNoName ? self : below_any;
      o.epoch = epoch;
      o.ticks = start.ticks;
    } else {
      ++overflowed_;  // still counted in depth_ so the matching pop stays balanced
    }
    depth_ = level + 1;
    return level;
  }

  // Closes the innermost open range of `domain`. Returns its level, or -1 when none is open
  // (unbalanced pop, counted). *emit is set when a kept range was closed and *out filled.
  int pop(const void* domain, int64_t now_ns, uint32_t tid, RangeRecord* out, bool* emit, uint32_t epoch = 0);

  // What close() did.
  enum class Closed : uint8_t {
    kept,        // a kept range closed: record it
    unbalanced,  // nothing of the domain was open (counted in unbalanced())
    filtered,    // a range LAGGARD_SECTIONS did not keep (counted in filtered())
    quiet,       // paused during it, or never stored (beyond kMaxDepth): not recorded, not counted
  };
  struct Done {
    TscClock::Stamp start;  // kept only
    uint32_t name_id;       // kept only
    uint32_t parent_id;     // kept only
    int level;              // NVTX's return value for pop: the closed range's level, or -1
    Closed what;
  };
  // pop() without a timestamp: the caller reads the clock only for a kept range.
  __attribute__((always_inline)) Done close(const void* domain, uint32_t epoch) {
    Done d;
    int top = depth_ - 1;
    if (__builtin_expect(top < 0, 0)) {
      ++unbalanced_;
      d.level = -1;
      d.what = Closed::unbalanced;
      return d;
    }
    if (__builtin_expect(top >= kMaxDepth, 0)) {  // the range being closed was never stored
      depth_ = top;
      d.level = top;
      d.what = Closed::quiet;
      return d;
    }
    int i = top;
    if (__builtin_expect(open_[i].domain != domain, 0)) {
      i = find(i - 1, domain);
      if (i < 0) {
        ++unbalanced_;
        d.level = -1;
        d.what = Closed::unbalanced;
        return d;
      }
    }
    const Open& o = open_[i];
    if (__builtin_expect(o.epoch != epoch || (epoch & 1u), 0)) {
      d.what = Closed::quiet;  // capture was paused during it: closed, not recorded, not counted as filtered
    } else if (__builtin_expect(o.name->kept, 1)) {
      d.start = TscClock::Stamp{o.start, o.ticks};
      d.name_id = o.name->id;
      // The innermost kept range of the domain below this one: the same as at its push, since a
      // range of its own domain below it cannot close before it does.
      d.parent_id = i == 0 ? kNoName : open_[i - 1].domain == domain ? open_[i - 1].inner : inner_below(i - 1, domain);
      d.what = Closed::kept;
    } else {
      ++filtered_;
      d.what = Closed::filtered;
    }
    if (__builtin_expect(i != top, 0)) remove_below_top(i);
    depth_ = top;
    d.level = i;
    return d;
  }

  // Innermost open kept section on this thread (kNoName when none): what a launch belongs to.
  uint32_t innermost_kept() const {
    const int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
    return stored > 0 ? open_[stored - 1].inner_any : kNoName;
  }
  // ... of one domain: a new range's parent.
  uint32_t innermost_kept_of(const void* domain) const {
    const int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
    return stored > 0 ? inner_below(stored - 1, domain) : kNoName;
  }

  // Copies the stored open ranges, outermost first, into out (at most max); returns how many.
  // Reads only this object and the range clock's atomics: usable from a signal handler on the
  // owning thread (hang reports).
  struct OpenRange {
    const NameEntry* name;
    int64_t start_ns;  // mono
  };
  int snapshot(OpenRange* out, int max) const;

  int depth() const { return depth_; }
  uint64_t overflowed() const { return overflowed_; }
  uint64_t unbalanced() const { return unbalanced_; }
  uint64_t filtered() const { return filtered_; }  // closed ranges LAGGARD_SECTIONS did not keep

 private:
  struct Open {
    const NameEntry* name;
    const void* domain;
    int64_t start;       // TscClock::Stamp's value: counter ticks when `ticks`, else CLOCK_MONOTONIC ns
    uint32_t inner;      // innermost kept range of this domain up to and including this one
    uint32_t inner_any;  // innermost kept range of any domain up to and including this one
    uint32_t epoch;      // pause_state.h's value at push time
    bool ticks;
  };
  // The innermost kept range of `domain` at or below index i (kNoName when none).
  uint32_t inner_below(int i, const void* domain) const {
    for (; i >= 0; --i)
      if (open_[i].domain == domain) return open_[i].inner;
    return kNoName;
  }
  int find(int i, const void* domain) const {
    while (i >= 0 && open_[i].domain != domain) --i;
    return i;
  }
  void remove_below_top(int i);  // another domain's ranges sit above i: shift them down

  Open open_[kMaxDepth];
  int depth_ = 0;     // logical depth, may exceed kMaxDepth
  uint64_t overflowed_ = 0;
  uint64_t unbalanced_ = 0;
  uint64_t filtered_ = 0;
};

}  // namespace laggard
