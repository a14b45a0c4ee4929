#include "name_table.h"

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

NameTable::NameTable(const std::string& filter, size_t max_names) : max_names_(max_names) {
  if (!filter.empty()) {
    try {
      filter_ = std::make_unique<std::regex>(filter, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error&) {
      filter_.reset();  // config already validated and warned
    }
  }
}

const NameEntry* NameTable::add_locked(const void* domain, std::string qualified, std::string message) {
  NameEntry e;
  e.id = static_cast<uint32_t>(entries_.size());
  e.domain = domain;
  e.message = std::move(message);
  e.qualified = std::move(qualified);
  e.kept = !filter_ || std::regex_search(e.qualified, *filter_);
  entries_.push_back(std::move(e));
  return &entries_.back();
}

const NameEntry* NameTable::intern(const void* domain, std::string_view domain_name,
                                   std::string_view message) {
  std::string key;
  key.reserve(domain_name.size() + message.size() + 2);
  if (domain) key.append(domain_name).append("::");
  key.append(message);
  std::lock_guard<std::mutex> lock(mu_);
  // The domain pointer is part of identity (two domains may share a name); keep it in the key.
  std::string map_key = std::to_string(reinterpret_cast<uintptr_t>(domain)) + '\x1f' + key;
  if (auto it = by_key_.find(map_key); it != by_key_.end()) return it->second;
  if (entries_.size() >= max_names_) {
    ++overflowed_;
    if (!other_) other_ = add_locked(nullptr, "(other)", "(other)");
    return other_;
  }
  const NameEntry* e = add_locked(domain, sanitize_utf8(key), std::string(message));
  by_key_.emplace(std::move(map_key), e);
  return e;
}

std::string NameTable::name(uint32_t id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return id < entries_.size() ? entries_[id].qualified : std::string("(unknown)");
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
