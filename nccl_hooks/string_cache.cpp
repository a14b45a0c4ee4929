#include "string_cache.h"

#include <cstring>

namespace laggard::nccl {

uint16_t StringCache::intern(const char* s) {
  if (!s) return kNone;
  size_t i = slot_of(s);
  for (int probes = 0; probes < kSlots; ++probes, i = (i + 1) & (kSlots - 1)) {
    const char* k = keys_[i].load(std::memory_order_acquire);
    if (k == s) return ids_[i].load(std::memory_order_relaxed);
    if (!k) break;
  }
  // First time this pointer is seen: rare, so a lock is fine here.
  std::lock_guard<std::mutex> lock(mu_);
  i = slot_of(s);
  for (int probes = 0; probes < kSlots; ++probes, i = (i + 1) & (kSlots - 1)) {
    const char* k = keys_[i].load(std::memory_order_relaxed);
    if (k == s) return ids_[i].load(std::memory_order_relaxed);
    if (k) continue;
    // Another pointer with the same text (e.g. a second copy of libnccl) shares the id.
    uint16_t id = find_text(s);
    if (id == kNone) {
      int n = count_.load(std::memory_order_relaxed);
      if (n >= kMaxStrings) return kNone;
      std::strncpy(texts_[n], s, kMaxLen);
      texts_[n][kMaxLen] = '\0';
      id = static_cast<uint16_t>(n);
      count_.store(n + 1, std::memory_order_release);
    }
    if (keys_used_ >= kSlots * 3 / 4) return id;  // keep probes short; later lookups come here
    ++keys_used_;
    ids_[i].store(id, std::memory_order_relaxed);
    keys_[i].store(s, std::memory_order_release);
    return id;
  }
  return kNone;
}

uint16_t StringCache::find_text(const char* s) const {
  int n = count_.load(std::memory_order_relaxed);
  for (int id = 0; id < n; ++id)
    if (std::strncmp(texts_[id], s, kMaxLen) == 0) return static_cast<uint16_t>(id);
  return kNone;
}

const char* StringCache::text(uint16_t id) const {
  return id < count_.load(std::memory_order_acquire) ? texts_[id] : "";
}

}  // namespace laggard::nccl
