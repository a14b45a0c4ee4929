// Interned section names. Interning happens once per distinct (domain, message) per thread
// (threads keep a small cache in front of this table), so the NVTX hot path compares strings
// but never allocates or locks after warm-up.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace laggard {

struct NameEntry {
  uint32_t id;
  bool kept;             // matches LAGGARD_SECTIONS
  const void* domain;    // NVTX domain handle the message belongs to (nullptr: default)
  std::string message;   // as given (for cache verification)
  std::string qualified; // "message" or "domain::message", valid UTF-8
};

class NameTable {
 public:
  // filter: ECMAScript regex searched in the qualified name; empty keeps all.
  NameTable(const std::string& filter, size_t max_names);

  // Thread-safe. Never returns null; past max_names every new name maps to "(other)".
  const NameEntry* intern(const void* domain, std::string_view domain_name,
                          std::string_view message);

  std::string name(uint32_t id) const;
  size_t size() const;
  uint64_t overflowed() const;

 private:
  const NameEntry* add_locked(const void* domain, std::string qualified, std::string message);

  mutable std::mutex mu_;
  std::unique_ptr<std::regex> filter_;
  size_t max_names_;
  std::deque<NameEntry> entries_;  // deque: entries never move, pointers stay valid
  std::unordered_map<std::string, const NameEntry*> by_key_;
  const NameEntry* other_ = nullptr;
  uint64_t overflowed_ = 0;
};

// Replaces invalid UTF-8 sequences with U+FFFD so names are always valid JSON strings.
std::string sanitize_utf8(std::string_view in);

// Encodes a wide string (UTF-32 on Linux) as UTF-8 into buf; returns the length (truncates).
size_t wide_to_utf8(const wchar_t* in, char* buf, size_t cap);

}  // namespace laggard
