#include "range_stack.h"

namespace laggard {

uint32_t RangeStack::innermost_kept() const {
  int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
  for (int i = stored - 1; i >= 0; --i)
    if (open_[i].name->kept) return open_[i].name->id;
  return kNoName;
}

uint32_t RangeStack::innermost_kept_of(const void* domain) const {
  int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
  for (int i = stored - 1; i >= 0; --i)
    if (open_[i].domain == domain && open_[i].name->kept) return open_[i].name->id;
  return kNoName;
}

int RangeStack::snapshot(OpenRange* out, int max) const {
  int stored = depth_ < kMaxDepth ? depth_ : kMaxDepth;
  int n = stored < max ? stored : max;
  for (int i = 0; i < n; ++i) out[i] = OpenRange{open_[i].name, open_[i].start_ns};
  return n;
}

int RangeStack::push(const NameEntry* name, const void* domain, int64_t now_ns, uint32_t epoch) {
  int level = depth_;
  if (depth_ < kMaxDepth) {
    open_[depth_] = Open{name, domain, now_ns, innermost_kept_of(domain), epoch};
  } else {
    ++overflowed_;  // still counted in depth_ so the matching pop stays balanced
  }
  ++depth_;
  return level;
}

int RangeStack::pop(const void* domain, int64_t now_ns, uint32_t tid, RangeRecord* out, bool* emit, uint32_t epoch) {
  *emit = false;
  if (depth_ == 0) {
    ++unbalanced_;
    return -1;
  }
  if (depth_ > kMaxDepth) {  // the range being closed was never stored
    --depth_;
    return depth_;
  }
  int i = depth_ - 1;
  while (i >= 0 && open_[i].domain != domain) --i;
  if (i < 0) {
    ++unbalanced_;
    return -1;
  }
  const Open& o = open_[i];
  if (o.epoch != epoch || (epoch & 1u)) {
    // Capture was paused during it: closed, not recorded, not counted as filtered.
  } else if (o.name->kept) {
    *out = RangeRecord{o.start_ns, now_ns, o.name->id, o.parent_id, tid,
                       static_cast<uint16_t>(i), RangeKind::push_pop};
    *emit = true;
  } else {
    ++filtered_;
  }
  for (int k = i; k + 1 < depth_; ++k) open_[k] = open_[k + 1];
  --depth_;
  return i;
}

}  // namespace laggard
