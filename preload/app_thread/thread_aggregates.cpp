#include "thread_aggregates.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <thread>

namespace laggard {
namespace {

constexpr size_t kInitialSlots = 64;  // power of two

long membarrier(int cmd) { return ::syscall(__NR_membarrier, cmd, 0, 0); }

}  // namespace

void ThreadAggregates::init_handover() {
  if (membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0)
    writers_fence_.store(false, std::memory_order_seq_cst);
}

void ThreadAggregates::quiesce() {
  if (writers_fence_.load(std::memory_order_relaxed) || membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0)
    handover_fence();  // pairs with the writers' fences
}

void ThreadAggregates::Table::clear() {
  if (used == 0) return;
  for (Slot& s : slots) s = Slot{};
  used = 0;
}

ThreadAggregates::ThreadAggregates() {
  for (Table& t : tables_) {
    t.slots.resize(kInitialSlots);
    t.mask = kInitialSlots - 1;
  }
}

void ThreadAggregates::grow(Table& t) {
  std::vector<Slot> old(t.slots.size() * 2);
  old.swap(t.slots);
  size_t mask = t.mask = t.slots.size() - 1;
  for (const Slot& s : old) {
    if (!s.key) continue;
    size_t i = slot_of(s.key, mask);
    while (t.slots[i].key) i = (i + 1) & mask;
    t.slots[i] = s;
  }
}

RangeTotals& ThreadAggregates::find_or_insert(Table& t, uint64_t key) {
  size_t mask = t.slots.size() - 1;
  size_t i = slot_of(key, mask);
  for (;; i = (i + 1) & mask) {
    Slot& s = t.slots[i];
    if (s.key == key) return s.totals;
    if (s.key == 0) break;
  }
  const uint64_t folded = (uint64_t(kFolded) << 32 | kFolded) + 1;
  if (t.used >= kMaxKeys && key != folded) return find_or_insert(t, folded);
  if (2 * (t.used + 1) > t.slots.size()) {  // keep probes short: at most half full
    grow(t);
    return find_or_insert(t, key);
  }
  ++t.used;
  t.slots[i].key = key;
  return t.slots[i].totals;
}

void ThreadAggregates::flip() {
  generation_.store(generation_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

ThreadAggregates::Table* ThreadAggregates::wait_for_old() {
  // After quiesce() the owner writes the new table; one that was already busy in the old one
  // finishes within a few instructions unless descheduled, or stopped in a signal handler that
  // waits for this flush (then it finishes only after the flush gives up on it).
  std::optional<std::chrono::steady_clock::time_point> since;
  for (int spins = 0; busy_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins <= 64) continue;
    std::this_thread::yield();
    if (!owners_may_be_stopped_.load(std::memory_order_relaxed)) continue;
    auto now = std::chrono::steady_clock::now();
    if (!since) since = now;
    else if (now - *since > std::chrono::nanoseconds(kStoppedOwnerPatienceNs)) return nullptr;
  }
  return &tables_[(generation_.load(std::memory_order_relaxed) - 1) & 1];
}

}  // namespace laggard
