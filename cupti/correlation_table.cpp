#include "correlation_table.h"

namespace laggard::cupti {

CorrelationTable::CorrelationTable(size_t slots_pow2) : slots_(new Slot[slots_pow2]), mask_(slots_pow2 - 1) {}

bool CorrelationTable::enter(uint32_t id, uint32_t section, uint32_t tid, int64_t now_ns) {
  if (id == kEmpty || id == kBusy) return false;
  Slot& s = slots_[id & mask_];
  uint32_t prev = s.id.load(std::memory_order_relaxed);
  if (prev == id) return false;  // nested call of the same launch: the outer one already wrote
  // Mark busy so a reader never takes half-written fields for the new id (or the old one). A seqlock
  // without fences (Boehm, "Can seqlocks get along with programming language memory models?", 2012):
  // each field is stored with release, so a reader that acquires a new field value also sees kBusy.
  // On x86-64 release stores and acquire loads are plain moves, as cheap as the fences were, and
  // ThreadSanitizer models them (it does not model atomic_thread_fence).
  s.id.store(kBusy, std::memory_order_relaxed);
  s.section.store(section, std::memory_order_release);
  s.tid.store(tid, std::memory_order_release);
  s.start_ns.store(now_ns, std::memory_order_release);
  s.end_ns.store(0, std::memory_order_release);
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
  // Acquire loads (see enter): the re-check below cannot move above them.
  LaunchInfo li{s.section.load(std::memory_order_acquire), s.tid.load(std::memory_order_acquire),
                s.start_ns.load(std::memory_order_acquire), s.end_ns.load(std::memory_order_acquire)};
  // Seqlock-style re-check: if a newer launch took the slot meanwhile, the fields may be its.
  if (s.id.load(std::memory_order_relaxed) != id) return false;
  *out = li;
  return true;
}

}  // namespace laggard::cupti
