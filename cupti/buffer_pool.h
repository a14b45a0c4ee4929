// Activity buffers handed to CUPTI: allocated on demand up to a fixed number, reused after CUPTI
// returns them. When all are out, a request is declined (CUPTI then drops records and counts
// them) rather than growing memory without bound; declined requests are counted too.
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

  // Null when max_buffers are all handed out (counted in declined()).
  uint8_t* acquire();
  // Buffers that did not come from acquire() are ignored.
  void release(uint8_t* buffer);

  size_t buffer_bytes() const { return bytes_; }
  uint64_t declined() const { return declined_.load(std::memory_order_relaxed); }
  size_t allocated() const;
  size_t outstanding() const;

 private:
  const size_t bytes_, max_;
  mutable std::mutex mu_;
  std::vector<uint8_t*> all_, free_;
  std::atomic<uint64_t> declined_{0};
};

}  // namespace laggard::cupti
