#include "buffer_pool.h"

#include <algorithm>
#include <cstdlib>
#include <new>

namespace laggard::cupti {
namespace {
constexpr size_t kAlign = 8;  // CUPTI requires 8-byte aligned activity buffers

bool contains(const std::vector<uint8_t*>& v, const uint8_t* p) { return std::find(v.begin(), v.end(), p) != v.end(); }
}  // namespace

BufferPool::BufferPool(size_t buffer_bytes, size_t max_buffers)
    : bytes_((buffer_bytes + kAlign - 1) / kAlign * kAlign), max_(max_buffers) {}

BufferPool::~BufferPool() {
  for (uint8_t* b : all_) std::free(b);
  for (uint8_t* b : overflow_) std::free(b);
}

// Allocates one buffer and records it in `into`; null when memory is exhausted.
uint8_t* BufferPool::allocate_locked(std::vector<uint8_t*>& into) {
  auto* b = static_cast<uint8_t*>(std::aligned_alloc(kAlign, bytes_));
  if (!b) return nullptr;
  try {
    into.push_back(b);
    free_.reserve(all_.size());  // release() must not allocate
    return b;
  } catch (const std::bad_alloc&) {
    if (!into.empty() && into.back() == b) into.pop_back();
    std::free(b);
    return nullptr;
  }
}

uint8_t* BufferPool::acquire(bool may_decline) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_.empty()) {
    uint8_t* b = free_.back();
    free_.pop_back();
    return b;
  }
  if (all_.size() < max_)
    if (uint8_t* b = allocate_locked(all_)) return b;
  declined_.fetch_add(1, std::memory_order_relaxed);
  if (may_decline) return nullptr;
  uint8_t* b = allocate_locked(overflow_);
  if (b) overflowed_.fetch_add(1, std::memory_order_relaxed);
  return b;
}

void BufferPool::release(uint8_t* buffer) {
  if (!buffer) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = std::find(overflow_.begin(), overflow_.end(), buffer); it != overflow_.end()) {
    overflow_.erase(it);
    std::free(buffer);
    return;
  }
  if (!contains(all_, buffer)) return;
  if (contains(free_, buffer)) return;  // double release
  free_.push_back(buffer);
}

bool BufferPool::owns(const uint8_t* buffer) const {
  if (!buffer) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return contains(overflow_, buffer) || (contains(all_, buffer) && !contains(free_, buffer));
}

size_t BufferPool::forget_outstanding() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t*> kept;
  size_t lost = 0;
  for (uint8_t* b : all_) {
    if (contains(free_, b)) kept.push_back(b);
    else {
      overflow_.push_back(b);  // not freed: should CUPTI return it after all, release() frees it
      ++lost;
    }
  }
  all_.swap(kept);
  return lost;
}

size_t BufferPool::allocated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size();
}

size_t BufferPool::outstanding() const {
  std::lock_guard<std::mutex> lock(mu_);
  return all_.size() - free_.size() + overflow_.size();
}

}  // namespace laggard::cupti
