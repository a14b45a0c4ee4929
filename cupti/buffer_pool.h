// Activity buffers handed to CUPTI: allocated on demand up to a fixed number, reused after CUPTI
// returns them. When all are out, a request is declined (CUPTI then drops records and counts
// them) rather than growing memory without bound; declined requests are counted too.
//
// Declining is only safe from CUPTI API version 27 (CUDA 12.9) on: an older CUPTI can crash when
// a request comes back without a buffer (pytorch/kineto baea3804, kCuptiBufferRejectionMinVersion,
// CuptiActivityApi.cpp:28 and :165-172). For such a CUPTI the caller asks with may_decline =
// false and gets an overflow buffer instead, counted, and freed (not pooled) when it comes back,
// so the pool returns to its bound once CUPTI returns what it holds.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

namespace laggard::cupti {

class BufferPool {
 public:
  BufferPool(size_t buffer_bytes, size_t max_buffers);
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;

  // Null when max_buffers are all handed out and may_decline (counted in declined()); otherwise
  // an overflow buffer (counted in overflowed()), null only when memory is exhausted.
  uint8_t* acquire(bool may_decline = true);
  // Buffers that did not come from acquire() are ignored.
  void release(uint8_t* buffer);
  // Whether `buffer` came from acquire() and has not been released.
  bool owns(const uint8_t* buffer) const;
  // CUPTI was torn down (another client's cuptiFinalize): the buffers it held may never come
  // back. They leave the pool (new ones may be allocated in their place) but are not freed, in
  // case CUPTI returns them after all; their count is returned.
  size_t forget_outstanding();

  size_t buffer_bytes() const { return bytes_; }
  uint64_t declined() const { return declined_.load(std::memory_order_relaxed); }
  uint64_t overflowed() const { return overflowed_.load(std::memory_order_relaxed); }
  size_t allocated() const;
  size_t outstanding() const;

 private:
  uint8_t* allocate_locked(std::vector<uint8_t*>& into);

  const size_t bytes_, max_;
  mutable std::mutex mu_;
  std::vector<uint8_t*> all_, free_, overflow_;  // overflow_: outstanding buffers beyond the pool
  std::atomic<uint64_t> declined_{0}, overflowed_{0};
};

}  // namespace laggard::cupti
