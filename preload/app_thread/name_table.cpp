#include "name_table.h"

#include <cstring>

namespace laggard {

std::string sanitize_utf8(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  size_t i = 0;
  while (i < in.size()) {
    unsigned char c = static_cast<unsigned char>(in[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    bool ok = len > 0 && i + len <= in.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(in[i + k]) & 0xc0) == 0x80;
    if (ok && len > 1) {
      // Reject overlong forms and surrogates so the result is strictly valid.
      uint32_t cp = c & (0xff >> (len + 1));
      for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(in[i + k]) & 0x3f);
      static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
      ok = cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    }
    if (ok) {
      out.append(in.substr(i, len));
      i += len;
    } else {
      out += "\xef\xbf\xbd";
      ++i;
    }
  }
  return out;
}

size_t wide_to_utf8(const wchar_t* in, char* buf, size_t cap) {
  size_t n = 0;
  for (; in && *in; ++in) {
    uint32_t cp = static_cast<uint32_t>(*in);
    if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) cp = 0xfffd;
    char tmp[4];
    size_t len;
    if (cp < 0x80) { tmp[0] = static_cast<char>(cp); len = 1; }
    else if (cp < 0x800) { tmp[0] = static_cast<char>(0xc0 | (cp >> 6)); tmp[1] = static_cast<char>(0x80 | (cp & 0x3f)); len = 2; }
    else if (cp < 0x10000) { tmp[0] = static_cast<char>(0xe0 | (cp >> 12)); tmp[1] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f)); tmp[2] = static_cast<char>(0x80 | (cp & 0x3f)); len = 3; }
    else { tmp[0] = static_cast<char>(0xf0 | (cp >> 18)); tmp[1] = static_cast<char>(0x80 | ((cp >> 12) & 0x3f)); tmp[2] = static_cast<char>(0x80 | ((cp >> 6) & 0x3f)); tmp[3] = static_cast<char>(0x80 | (cp & 0x3f)); len = 4; }
    if (n + len >= cap) break;
    for (size_t k = 0; k < len; ++k) buf[n++] = tmp[k];
  }
  if (cap) buf[n < cap ? n : cap - 1] = '\0';
  return n;
}

std::string display_name(std::string_view domain_name, std::string_view message) {
  if (domain_name.empty()) return std::string(message);
  std::string out;
  out.reserve(domain_name.size() + 1 + message.size());
  out.append(domain_name).append(":").append(message);
  return out;
}

NameTable::NameTable(const std::string& filter, size_t max_names, size_t max_bytes)
    : max_names_(max_names), max_bytes_(max_bytes) {
  if (!filter.empty()) filter_ = SectionFilter::compile(filter, nullptr);  // config warned already
}

NameTable::~NameTable() {
  for (auto& chunk : handles_) delete[] chunk.load(std::memory_order_relaxed);
}

const NameEntry* NameTable::add_locked(const void* domain, std::string domain_name, std::string message) {
  NameEntry e;
  e.id = static_cast<uint32_t>(entries_.size());
  e.domain = domain;
  e.folded = false;
  e.display = display_name(domain_name, sanitize_utf8(message));
  // Matched once here, never per range. A filter copied from nsys' table (":forward" in the
  // default domain) matches too.
  e.kept = !filter_ || filter_->matches(e.display) ||
           (domain_name.empty() && filter_->matches(":" + e.display));
  e.message = std::move(message);
  e.domain_name = std::move(domain_name);
  bytes_ += 4 * (e.message.size() + e.domain_name.size()) + 200;
  entries_.push_back(std::move(e));
  return &entries_.back();
}

const NameEntry* NameTable::other_locked() {
  if (!other_) {
    NameEntry e;
    e.id = static_cast<uint32_t>(entries_.size());
    e.kept = true;  // counted and reported as folded, never scored
    e.folded = true;
    e.domain = nullptr;
    e.message = e.display = "(other)";
    entries_.push_back(std::move(e));
    other_ = &entries_.back();
  }
  return other_;
}

const NameEntry* NameTable::intern(const void* domain, std::string_view domain_name,
                                   std::string_view message) {
  // The domain pointer is part of identity (two domains may share a name); it leads the key.
  // Built on the stack first: a known name (NVTX's are at most 512 bytes) is found without allocating.
  constexpr size_t kProbeBytes = 1024;
  if (message.size() <= kProbeBytes) {
    char known[sizeof domain + kProbeBytes];
    std::memcpy(known, &domain, sizeof domain);
    std::memcpy(known + sizeof domain, message.data(), message.size());
    const std::string_view probe(known, sizeof domain + message.size());
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = by_key_.find(probe); it != by_key_.end()) return it->second;
  }
  std::string key(reinterpret_cast<const char*>(&domain), sizeof domain);
  key.append(message);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = by_key_.find(key); it != by_key_.end()) return it->second;
  if (entries_.size() >= max_names_ || bytes_ >= max_bytes_) {
    ++overflowed_;
    return other_locked();
  }
  const NameEntry* e = add_locked(domain, sanitize_utf8(domain_name), std::string(message));
  by_key_.emplace(std::move(key), e);
  return e;
}

uintptr_t NameTable::register_string(const NameEntry* entry) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = handle_of_.find(entry); it != handle_of_.end()) return it->second;
  uintptr_t n = handle_count_.load(std::memory_order_relaxed);
  if (n >= kChunk * kChunks) return 0;
  std::atomic<const NameEntry**>& chunk = handles_[n / kChunk];
  if (!chunk.load(std::memory_order_relaxed)) chunk.store(new const NameEntry*[kChunk](), std::memory_order_release);
  chunk.load(std::memory_order_relaxed)[n % kChunk] = entry;
  handle_count_.store(n + 1, std::memory_order_release);  // publishes the slot written above
  handle_of_.emplace(entry, n + 1);
  return n + 1;
}

const NameEntry* NameTable::registered(uintptr_t handle) const {
  if (handle == 0 || handle > handle_count_.load(std::memory_order_acquire)) return nullptr;
  uintptr_t i = handle - 1;
  return handles_[i / kChunk].load(std::memory_order_acquire)[i % kChunk];
}

NameInfo NameTable::info(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (id >= entries_.size()) return {"(unknown)", "", false};
  const NameEntry& e = entries_[id];
  return {e.display, e.domain_name, e.folded};
}

uint32_t NameTable::other_id() {
  std::lock_guard<std::mutex> lock(mu_);
  return other_locked()->id;
}

size_t NameTable::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

uint64_t NameTable::overflowed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return overflowed_;
}

}  // namespace laggard
