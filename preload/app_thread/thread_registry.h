// Progress and open sections of every thread that uses NVTX, for the hang watchdog.
// A fixed table of slots that are never freed: the watchdog (flush thread) sums the progress
// counters, and the stack-capture signal handler finds its own thread's range stack by tid,
// without locks, allocation or TLS (none of which a signal handler may use).
#pragma once

#include <atomic>
#include <cstdint>

#include "range_stack.h"

namespace laggard::watch {

struct alignas(64) ThreadSlot {
  std::atomic<uint32_t> tid{0};                 // 0: free
  std::atomic<const RangeStack*> stack{nullptr};
  std::atomic<uint64_t> events{0};              // written by the owning thread only; never reset
};

constexpr int kMaxThreadSlots = 1024;

// Cold path (a thread's first NVTX call). Null when the table is full: that thread's progress
// is then counted in a shared counter instead.
ThreadSlot* claim_slot(uint32_t tid, const RangeStack* stack);
// At thread exit, before the stack it points to is freed.
void release_slot(ThreadSlot* slot);

extern std::atomic<uint64_t> g_unslotted_events;
// Progress of NCCL's collectives, bumped by the NCCL source's harvest on the flush thread when
// operations started, moved or finished (never on NCCL's callback threads: one counter bumped
// by every thread would be a shared cache line on the hot path, issue 29).
extern std::atomic<uint64_t> g_collective_events;

// Hot path: one plain load and store on a line only this thread writes (no lock prefix).
__attribute__((always_inline)) inline void note_progress(ThreadSlot* slot) {
  if (__builtin_expect(slot != nullptr, 1))
    slot->events.store(slot->events.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  else
    g_unslotted_events.fetch_add(1, std::memory_order_relaxed);
}

inline void note_collective_event(uint64_t n = 1) { g_collective_events.fetch_add(n, std::memory_order_relaxed); }

// Sum of every progress counter: changes whenever any thread or collective made progress.
uint64_t total_progress();

// Async-signal-safe: the slot of thread `tid`, or null.
const ThreadSlot* find_slot(uint32_t tid);

// The ids of up to `max` threads that use NVTX now (flush thread: the CPU-wait source samples them).
int nvtx_thread_ids(uint32_t* out, int max);

}  // namespace laggard::watch
