#include "start_end_table.h"

namespace laggard {

StartEndTable::StartEndTable(size_t slots_pow2)
    : slots_(new Slot[slots_pow2]), mask_(slots_pow2 - 1) {}

uint64_t StartEndTable::take_id(IdBlock* block) {
  if (!block) return next_id_.fetch_add(1, std::memory_order_relaxed);
  if (block->next == block->end) {
    block->next = next_id_.fetch_add(kIdBlock, std::memory_order_relaxed);
    block->end = block->next + kIdBlock;
  }
  return block->next++;
}

uint64_t StartEndTable::start(const NameEntry* name, int64_t now_ns, uint32_t tid, IdBlock* block, uint32_t epoch) {
  // Ids need only be unique, so an id whose slot still holds an open range is skipped rather
  // than evicting that range: a range open for long (an epoch) while other threads start and
  // end millions of ranges keeps its slot. Only a table so full that kMaxProbes ids in a row
  // land on open ranges evicts one (counted), bounding the work of this call.
  uint64_t id = 0;
  Slot* s = nullptr;
  for (int probe = 0; probe < kMaxProbes; ++probe) {
    id = take_id(block);
    s = &slots_[id & mask_];
    uint64_t free = 0;
    if (s->id.compare_exchange_strong(free, kBusy, std::memory_order_acquire)) break;
    s = nullptr;
  }
  if (!s) {
    s = &slots_[id & mask_];
    uint64_t prev = s->id.exchange(kBusy, std::memory_order_acquire);
    if (prev != 0 && prev != kBusy) evicted_.fetch_add(1, std::memory_order_relaxed);
  }
  s->name.store(name, std::memory_order_relaxed);
  s->start_ns.store(now_ns, std::memory_order_relaxed);
  s->tid.store(tid, std::memory_order_relaxed);
  s->epoch.store(epoch, std::memory_order_relaxed);
  s->id.store(id, std::memory_order_release);
  return id;
}

bool StartEndTable::end(uint64_t id, int64_t now_ns, RangeRecord* out, bool* emit, uint32_t epoch, bool* paused) {
  *emit = false;
  if (paused) *paused = false;
  if (id == 0 || id == kBusy) return false;
  Slot& s = slots_[id & mask_];
  if (s.id.load(std::memory_order_acquire) != id) return false;
  const NameEntry* name = s.name.load(std::memory_order_relaxed);
  int64_t start = s.start_ns.load(std::memory_order_relaxed);
  uint32_t tid = s.tid.load(std::memory_order_relaxed);
  uint32_t started = s.epoch.load(std::memory_order_relaxed);
  // Claim it; fails if a concurrent end or a newer start got there first, and then the
  // fields read above may be torn, so they are discarded.
  uint64_t expected = id;
  if (!s.id.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return false;
  if (started != epoch || (epoch & 1u)) {  // capture was paused during it
    if (paused) *paused = true;
  } else if (name && name->kept) {
    *out = RangeRecord{start, now_ns, name->id, kNoName, tid, 0, RangeKind::start_end};
    *emit = true;
  }
  return true;
}

uint64_t StartEndTable::open_count() const {
  uint64_t n = 0;
  for (size_t i = 0; i <= mask_; ++i) {
    uint64_t v = slots_[i].id.load(std::memory_order_relaxed);
    if (v != 0 && v != kBusy) ++n;
  }
  return n;
}

}  // namespace laggard
