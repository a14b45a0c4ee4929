// Single-producer single-consumer ring: the owning thread appends, the flush thread drains.
// Wait-free on both sides; a full ring rejects the record so the caller can count the drop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace laggard {

template <class T, size_t N>
class SpscRing {
  static_assert((N & (N - 1)) == 0, "capacity must be a power of two");
  static_assert(std::is_trivially_copyable_v<T>, "records are copied as bytes");

 public:
  bool push(const T& v) {
    uint64_t h = head_.load(std::memory_order_relaxed);
    if (h - tail_.load(std::memory_order_acquire) >= N) return false;
    std::memcpy(buf_ + (h & (N - 1)) * sizeof(T), &v, sizeof(T));
    head_.store(h + 1, std::memory_order_release);
    return true;
  }

  template <class F>
  size_t drain(F&& f) {
    uint64_t t = tail_.load(std::memory_order_relaxed);
    const uint64_t h = head_.load(std::memory_order_acquire);
    size_t n = 0;
    for (; t != h; ++t, ++n) {
      T v;
      std::memcpy(&v, buf_ + (t & (N - 1)) * sizeof(T), sizeof(T));
      f(v);
    }
    tail_.store(t, std::memory_order_release);
    return n;
  }

  static constexpr size_t capacity() { return N; }

 private:
  // Raw bytes, neither zeroed nor constructed: a new thread's ring (128 KiB of ranges) costs no
  // page until it is used (issue 24: zeroing it made every new thread under laggard pay
  // page faults for the whole ring).
  alignas(T) unsigned char buf_[N * sizeof(T)];
  alignas(64) std::atomic<uint64_t> head_{0};
  alignas(64) std::atomic<uint64_t> tail_{0};
};

}  // namespace laggard
