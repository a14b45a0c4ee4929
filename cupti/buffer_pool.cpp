#include "buffer_pool.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace laggard::cupti {
namespace {
constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned activity buffers
}

BufferPool::BufferPool(size_t buffer_bytes, size_t max_buffers)
    : bytes_((buffer_bytes + kAlign - 1) / kAlign * kAlign), max_(max_buffers) {}

BufferPool::~BufferPool() {
  for (uint8_t* b : all_) std::free(b);
}

uint8_t* BufferPool::acquire() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (all_.size() < max_) {
    auto* b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes_));
    if (b) {
      try {
        all_.push_back(b);
        free_.reserve(all_.size());  // release() must not allocate
        return b;
      } catch (const std::bad_alloc&) {
        if (!all_.empty() && all_.back() == b) all_.pop_back();
        std::free(b);
      }
    }
  }
  declined_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void BufferPool::release(uint8_t* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (std::find(all_.begin(), all_.end(), buffer) == all_.end()) return;
  if (std::find(free_.begin(), free_.end(), buffer) != free_.end()) return;  // double release
  free_.push_back(buffer);
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

size_t BufferPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size() - free_.size();
}

}  // namespace laggard::cupti
