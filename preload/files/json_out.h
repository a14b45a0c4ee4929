// Minimal streaming JSON writer for the flush thread: no DOM, one growing string.
// Every string comes out valid UTF-8 whatever it held (issue 24: a host name, run id, path or
// thread name from the system need not be UTF-8, and one invalid byte made a whole rank file
// unreadable): a byte that does not start a valid sequence is written as the four characters
// \xNN, so distinct inputs stay distinct and readable. Section names are sanitized earlier.
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
    for (size_t i = 0; i < v.size(); ++i) {
      char c = v[i];
      unsigned char u = static_cast<unsigned char>(c);
      if (c == '"' || c == '\\') { s_ += '\\'; s_ += c; }
      else if (c == '\n') s_ += "\\n";
      else if (c == '\t') s_ += "\\t";
      else if (c == '\r') s_ += "\\r";
      else if (u < 0x20) { s_ += "\\u00"; s_ += hex[u >> 4]; s_ += hex[u & 15]; }
      else if (u < 0x80) s_ += c;
      else if (size_t len = utf8_sequence_length(v, i)) { s_.append(v.substr(i, len)); i += len - 1; }
      else { s_ += "\\\\x"; s_ += hex[u >> 4]; s_ += hex[u & 15]; }
    }
    s_ += '"';
  }

  // Bytes of the valid UTF-8 sequence starting at v[i] (no overlong forms, surrogates or
  // code points past U+10FFFF), or 0.
  static size_t utf8_sequence_length(std::string_view v, size_t i) {
    unsigned char c = static_cast<unsigned char>(v[i]);
    size_t len = (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > v.size()) return 0;
    uint32_t cp = c & (0xff >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      unsigned char b = static_cast<unsigned char>(v[i + k]);
      if ((b & 0xc0) != 0x80) return 0;
      cp = (cp << 6) | (b & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    return cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff) ? len : 0;
  }

  std::string& s_;
  std::vector<bool> first_;
  bool after_key_ = false;
};

}  // namespace laggard
