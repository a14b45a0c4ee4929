#include "correlation_table.h"

namespace laggard::cupti {

CorrelationTable::CorrelationTable(size_t slots_pow2) : slots_(new Slot[slots_pow2]), mask_(slots_pow2 - 1) {}

bool CorrelationTable::enter(uint32_t id, uint32_t section, uint32_t tid, int64_t now_ns) {
  if (id == kEmpty || id == kBusy) return false;
  Slot& s = slots_[id & mask_];
  uint32_t prev = s.id.load(std::memory_order_relaxed);
  if (prev == id) return false;  // nested call of the same launch: the outer one already wrote
  // Mark busy so a reader never takes half-written fields for the new id (or the old one).
  s.id.store(kBusy, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.section.store(section, std::memory_order_relaxed);
  s.tid.store(tid, std::memory_order_relaxed);
  s.start_ns.store(now_ns, std::memory_order_relaxed);
  s.end_ns.store(0, std::memory_order_relaxed);
  s.id.store(id, std::memory_order_release);
  return true;
}

void CorrelationTable::exit(uint32_t id, int64_t now_ns) {
  if (id == kEmpty || id == kBusy) return;
  Slot& s = slots_[id & mask_];
  if (s.id.load(std::memory_order_acquire) == id) s.end_ns.store(now_ns, std::memory_order_relaxed);
}

bool CorrelationTable::find(uint32_t id, LaunchInfo* out) const {
  if (id == kEmpty || id == kBusy) return false;
  const Slot& s = slots_[id & mask_];
  if (s.id.load(std::memory_order_acquire) != id) return false;
  LaunchInfo li{s.section.load(std::memory_order_relaxed), s.tid.load(std::memory_order_relaxed),
                s.start_ns.load(std::memory_order_relaxed), s.end_ns.load(std::memory_order_relaxed)};
  // Seqlock-style re-check: if a newer launch took the slot meanwhile, the fields may be its.
  std::atomic_thread_fence(std::memory_order_acquire);
  if (s.id.load(std::memory_order_relaxed) != id) return false;
  *out = li;
  return true;
}

}  // namespace laggard::cupti
