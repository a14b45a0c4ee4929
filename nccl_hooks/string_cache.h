// Interns the strings NCCL hands the plugin (function, datatype, algorithm and protocol names)
// into small ids. NCCL passes pointers to string literals inside libnccl, so a lookup is keyed
// by the pointer: lock-free on a hit, which is every call after the first few. A miss copies
// the text into fixed storage under a mutex, so ids stay valid whatever NCCL does later.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

namespace laggard::nccl {

class StringCache {
 public:
  static constexpr uint16_t kNone = 0xffff;
  static constexpr int kMaxStrings = 256;
  static constexpr int kMaxLen = 63;

  // Any thread. Null pointer or a full table: kNone.
  uint16_t intern(const char* s);

  // Text of an id returned by intern(); "" for kNone. Any thread.
  const char* text(uint16_t id) const;
  int size() const { return count_.load(std::memory_order_acquire); }

 private:
  static constexpr int kSlots = 2 * kMaxStrings;  // open addressing, at most half full
  static size_t slot_of(const char* p) {
    uint64_t x = reinterpret_cast<uintptr_t>(p);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x & (kSlots - 1);
  }
  uint16_t find_text(const char* s) const;  // under mu_

  std::atomic<const char*> keys_[kSlots] = {};
  std::atomic<uint16_t> ids_[kSlots] = {};
  char texts_[kMaxStrings][kMaxLen + 1] = {};
  std::atomic<int> count_{0};
  int keys_used_ = 0;  // under mu_
  std::mutex mu_;
};

}  // namespace laggard::nccl
