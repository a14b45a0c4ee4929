#include "thread_registry.h"

namespace laggard::watch {
namespace {
ThreadSlot g_slots[kMaxThreadSlots];
}  // namespace

std::atomic<uint64_t> g_unslotted_events{0};
std::atomic<uint64_t> g_collective_events{0};

ThreadSlot* claim_slot(uint32_t tid, const RangeStack* stack) {
  for (ThreadSlot& s : g_slots) {
    uint32_t expected = 0;
    if (s.tid.load(std::memory_order_relaxed) == 0 &&
        s.tid.compare_exchange_strong(expected, tid, std::memory_order_acq_rel)) {
      s.stack.store(stack, std::memory_order_release);
      return &s;
    }
  }
  return nullptr;
}

void release_slot(ThreadSlot* slot) {
  if (!slot) return;
  slot->stack.store(nullptr, std::memory_order_release);
  slot->tid.store(0, std::memory_order_release);
}

uint64_t total_progress() {
  uint64_t sum = g_unslotted_events.load(std::memory_order_relaxed) +
                 g_collective_events.load(std::memory_order_relaxed);
  for (const ThreadSlot& s : g_slots) sum += s.events.load(std::memory_order_relaxed);
  return sum;
}

const ThreadSlot* find_slot(uint32_t tid) {
  for (const ThreadSlot& s : g_slots)
    if (s.tid.load(std::memory_order_acquire) == tid) return &s;
  return nullptr;
}

int nvtx_thread_ids(uint32_t* out, int max) {
  int n = 0;
  for (const ThreadSlot& s : g_slots) {
    if (n >= max) break;
    if (uint32_t tid = s.tid.load(std::memory_order_relaxed)) out[n++] = tid;
  }
  return n;
}

}  // namespace laggard::watch
