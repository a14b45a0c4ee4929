// Single-producer single-consumer ring: the owning thread appends, the flush thread drains.
// Wait-free on both sides; a full ring rejects the record so the caller can count the drop.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace laggard {

template <class T, size_t N>
class SpscRing {
  static_assert((N & (N - 1)) == 0, "capacity must be a power of two");

 public:
  bool push(const T& v) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) >= N) return false;
    buf_[h & (N - 1)] = v;
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  template <class F>
  size_t drain(F&& f) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    const uint64_t h = head_.load(std::memory_order_acquire);
    size_t n = 0;
    for (; t != h; ++t, ++n) f(buf_[t & (N - 1)]);
    tail_.store(t, std::memory_order_release);
    return n;
  }

  static constexpr size_t capacity() { return N; }

 private:
  std::array<T, N> buf_{};
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace laggard
