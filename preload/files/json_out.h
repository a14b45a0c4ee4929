// Minimal streaming JSON writer for the flush thread: no DOM, one growing string.
// Strings must already be valid UTF-8 (names are sanitized when interned).
#pragma once

#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace laggard {

class JsonOut {
 public:
  explicit JsonOut(std::string& out) : s_(out) {}

  JsonOut& begin_object() { sep(); s_ += '{'; first_.push_back(true); return *this; }
  JsonOut& end_object() { s_ += '}'; first_.pop_back(); return *this; }
  JsonOut& begin_array() { sep(); s_ += '['; first_.push_back(true); return *this; }
  JsonOut& end_array() { s_ += ']'; first_.pop_back(); return *this; }

  JsonOut& key(std::string_view k) {
    sep();
    quote(k);
    s_ += ':';
    after_key_ = true;
    return *this;
  }

  JsonOut& value(std::string_view v) { sep(); quote(v); return *this; }
  JsonOut& value(const char* v) { return value(std::string_view(v)); }
  JsonOut& value(const std::string& v) { return value(std::string_view(v)); }
  JsonOut& value(bool v) { sep(); s_ += v ? "true" : "false"; return *this; }
  JsonOut& null() { sep(); s_ += "null"; return *this; }

  template <class T, std::enable_if_t<std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, int> = 0>
  JsonOut& value(T v) {
    sep();
    char buf[32];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    s_.append(buf, r.ptr);
    return *this;
  }

  template <class T>
  JsonOut& array(const std::vector<T>& xs) {
    begin_array();
    for (const T& x : xs) value(x);
    return end_array();
  }

  template <class T>
  JsonOut& field(std::string_view k, const T& v) { key(k); return value(v); }

 private:
  void sep() {
    if (after_key_) { after_key_ = false; return; }
    if (first_.empty()) return;
    if (!first_.back()) s_ += ',';
    first_.back() = false;
  }
  void quote(std::string_view v) {
    static const char* hex = "0123456789abcdef";
    s_ += '"';
    for (char c : v) {
      unsigned char u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') { s_ += '\\'; s_ += c; }
      else if (c == '\n') s_ += "\\n";
      else if (c == '\t') s_ += "\\t";
      else if (c == '\r') s_ += "\\r";
      else if (u < 0x20) { s_ += "\\u00"; s_ += hex[u >> 4]; s_ += hex[u & 15]; }
      else s_ += c;
    }
    s_ += '"';
  }

  std::string& s_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace laggard
