// Interned section names. Interning happens once per distinct (domain, message) per thread
// (threads keep a small cache in front of this table), so the NVTX hot path compares strings
// but never allocates or locks after warm-up. LAGGARD_SECTIONS is matched here, once per name.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "section_filter.h"

namespace laggard {

struct NameEntry {
  uint32_t id;
  bool kept;                // matches LAGGARD_SECTIONS
  bool folded;              // the "(other)" catch-all for names past the table's limits
  const void* domain;       // NVTX domain handle (nullptr: the default domain)
  std::string message;      // as given, at most kMaxMessage bytes (for cache verification)
  std::string domain_name;  // valid UTF-8; "" for the default domain
  std::string display;      // as Nsight Systems shows it: "message", or "domain:message"
};

// What the writer needs of a name.
struct NameInfo {
  std::string display, domain;
  bool folded = false;
};

class NameTable {
 public:
  // Defaults: far more names than any program we have seen uses, in bounded memory. Each name
  // costs about 4 x its length + 200 bytes; past either limit new names fold into "(other)".
  static constexpr size_t kDefaultMaxNames = 262144;
  static constexpr size_t kDefaultMaxBytes = 32u << 20;

  // filter: RE2 pattern (see section_filter.h); empty keeps all.
  explicit NameTable(const std::string& filter, size_t max_names = kDefaultMaxNames,
                     size_t max_bytes = kDefaultMaxBytes);
  ~NameTable();
  NameTable(const NameTable&) = delete;
  NameTable& operator=(const NameTable&) = delete;

  // Thread-safe. Never returns null; past the limits every new name maps to "(other)".
  const NameEntry* intern(const void* domain, std::string_view domain_name, std::string_view message);

  // Registered strings (nvtxDomainRegisterString): the handle is an index, so a handle that
  // NVTX did not get from us is recognized instead of dereferenced. 0 = no handle.
  uintptr_t register_string(const NameEntry* entry);
  const NameEntry* registered(uintptr_t handle) const;  // lock-free; null when unknown

  NameInfo info(uint32_t id) const;
  std::string name(uint32_t id) const { return info(id).display; }
  size_t size() const;
  uint64_t overflowed() const;  // distinct names folded into "(other)"
  // Id of "(other)", creating it (for ranges folded elsewhere, e.g. a full thread table).
  uint32_t other_id();

 private:
  const NameEntry* add_locked(const void* domain, std::string domain_name, std::string message);
  const NameEntry* other_locked();

  static constexpr size_t kChunk = 4096, kChunks = 256;  // registered handles: up to 1 M

  mutable std::mutex mu_;
  std::unique_ptr<SectionFilter> filter_;
  size_t max_names_, max_bytes_, bytes_ = 0;
  std::deque<NameEntry> entries_;  // deque: entries never move, pointers stay valid
  // Looked up by a string_view (transparent hash): a name already known is found without building
  // a std::string, i.e. without allocating (docs/host-safety.md, signal handlers).
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::string_view k) const noexcept { return std::hash<std::string_view>{}(k); }
  };
  std::unordered_map<std::string, const NameEntry*, KeyHash, std::equal_to<>> by_key_;  // domain pointer bytes + message
  const NameEntry* other_ = nullptr;
  uint64_t overflowed_ = 0;
  std::unordered_map<const NameEntry*, uintptr_t> handle_of_;
  std::atomic<const NameEntry**> handles_[kChunks] = {};
  std::atomic<uintptr_t> handle_count_{0};
};

// Replaces invalid UTF-8 sequences with U+FFFD so names are always valid JSON strings.
std::string sanitize_utf8(std::string_view in);

// Encodes a wide string (UTF-32 on Linux) as UTF-8 into buf; returns the length (truncates).
size_t wide_to_utf8(const wchar_t* in, char* buf, size_t cap);

// How Nsight Systems names a range (nsys stats nvtx_sum: "domain:message", ":message" in the
// default domain); laggard drops the default domain's leading ':'.
std::string display_name(std::string_view domain_name, std::string_view message);

}  // namespace laggard
