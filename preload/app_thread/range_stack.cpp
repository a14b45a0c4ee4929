#include "range_stack.h"

namespace laggard {

int RangeStack::snapshot(OpenRange* out, int max) const {
  int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
  int n = stored < max ? stored : max;
  for (int i = 0; i < n; ++i)
    out[i] = OpenRange{open_[i].name, g_range_clock.stamp_ns(TscClock::Stamp{open_[i].start, open_[i].ticks})};
  return n;
}

void RangeStack::remove_below_top(int i) {
  const int top = depth_ - 1;  // stored: close() returns early beyond kMaxDepth
  for (int k = i; k < top; ++k) {
    open_[k] = open_[k + 1];
    // inner (per domain) is unchanged: no range of k's domain was removed below it (the range
    // removed is the innermost of its own domain). inner_any is rebuilt.
    const uint32_t below_any = k > 0 ? open_[k - 1].inner_any : kNoName;
    open_[k].inner_any = open_[k].name->kept ? open_[k].name->id : below_any;
  }
}

int RangeStack::pop(const void* domain, int64_t now_ns, uint32_t tid, RangeRecord* out, bool* emit, uint32_t epoch) {
  const Done d = close(domain, epoch);
  *emit = d.what == Closed::kept;
  if (*emit)
    *out = RangeRecord{g_range_clock.stamp_ns(d.start), now_ns, d.name_id, d.parent_id, tid,
                       static_cast<uint16_t>(d.level), RangeKind::push_pop};
  return d.level;
}

}  // namespace laggard
