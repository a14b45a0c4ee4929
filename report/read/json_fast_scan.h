// A scanner for the common case of the JSON laggard reads, without nlohmann's lexer: ASCII
// strings without escapes, integers that fit in 64 bits, numbers with a fraction or exponent
// (std::from_chars: correctly rounded, as the strtod nlohmann uses), true, false, null. Anything
// else, valid or not, stops the scan as "not mine", and the caller hands the text to nlohmann's
// SAX parser instead, so what is accepted and every value read stay exactly json::parse's. The
// handler sees the calls nlohmann's SAX parser would make, in the same order, plus each number's
// text (Kineto times are read exactly from it). Used by the reader's tape (json_tape.h, issue 14)
// and the Kineto importer (import_kineto.cpp, issue 29).
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>
#include <system_error>

namespace laggard::report {

// Handler: null(), boolean(b), number_integer(int64_t, text), number_unsigned(uint64_t, text),
// number_float(double, text), text_value(string_view), key_text(string_view), start_object(n),
// end_object(), start_array(n), end_array(); each returns false to stop.
template <class Handler>
class JsonFastScan {
 public:
  JsonFastScan(std::string_view text, Handler& b) : p_(text.data()), end_(text.data() + text.size()), b_(b) {}

  // True: the whole text was one value, handed to the handler. False: not handled here (the
  // handler may have seen part of it).
  bool run() {
    skip_space();
    if (!value(0)) return false;
    skip_space();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 512;  // deeper texts go to nlohmann

  void skip_space() {  // one compare for the usual next byte, which is not white space
    while (p_ < end_ && static_cast<unsigned char>(*p_) <= ' ' &&
           (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t'))
      ++p_;
  }

  bool value(int depth) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '{': return object(depth + 1);
      case '[': return array(depth + 1);
      case '"': {
        std::string_view s;
        return string(s) && b_.text_value(s);
      }
      case 't': return literal("true") && b_.boolean(true);
      case 'f': return literal("false") && b_.boolean(false);
      case 'n': return literal("null") && b_.null();
      default: return number();
    }
  }

  bool literal(std::string_view word) {
    if (size_t(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) return false;
    p_ += word.size();
    return true;
  }

  // A string with no escape, control or non-ASCII byte (those need nlohmann's checks).
  bool string(std::string_view& out) {
    const char* start = ++p_;
    while (p_ < end_) {
      const auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        out = std::string_view(start, size_t(p_ - start));
        ++p_;
        return true;
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return false;
      ++p_;
    }
    return false;
  }

  static bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

  bool number() {
    const char* start = p_;
    const bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    const char* digits = p_;
    if (p_ == end_ || !is_digit(*p_)) return false;
    // The value as the digits are scanned: 19 digits always fit in 64 bits, more are checked below.
    uint64_t u = 0;
    if (*p_ == '0') ++p_;
    else
      while (p_ < end_ && is_digit(*p_)) u = u * 10 + uint64_t(*p_++ - '0');
    bool is_float = false;
    if (p_ < end_ && *p_ == '.') {
      is_float = true;
      if (!digits_after(++p_)) return false;
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      is_float = true;
      ++p_;
      if (p_ < end_ && (*p_ == '+' || *p_ == '-')) ++p_;
      if (!digits_after(p_)) return false;
    }
    if (is_float) {
      double d;
      auto [ptr, ec] = std::from_chars(start, p_, d);
      if (ec != std::errc() || ptr != p_) return false;  // out of range: nlohmann decides
      return b_.number_float(d, std::string_view(start, size_t(p_ - start)));
    }
    // What does not fit (nlohmann then reads a float) is left to nlohmann.
    if (p_ - digits > 19) {
      u = 0;
      for (const char* q = digits; q < p_; ++q)
        if (__builtin_mul_overflow(u, 10u, &u) || __builtin_add_overflow(u, uint64_t(*q - '0'), &u)) return false;
    }
    const std::string_view text(start, size_t(p_ - start));
    if (!negative) return b_.number_unsigned(u, text);
    constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;  // -INT64_MIN
    if (u > kMinMagnitude) return false;
    return b_.number_integer(u == kMinMagnitude ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(u), text);
  }

  bool digits_after(const char*& q) {
    const char* first = q;
    while (q < end_ && is_digit(*q)) ++q;
    return q > first;
  }

  // After a member or an element: ',' (then more follow) or the closing bracket.
  enum class After { more, closed, bad };
  After comma_or(char close) {
    skip_space();
    if (p_ == end_) return After::bad;
    if (*p_ == ',') {
      ++p_;
      skip_space();
      return After::more;
    }
    if (*p_ != close) return After::bad;
    ++p_;
    return After::closed;
  }

  bool object(int depth) {
    if (depth > kMaxDepth || !b_.start_object(std::size_t(-1))) return false;
    ++p_;
    skip_space();
    if (p_ < end_ && *p_ == '}') {
      ++p_;
      return b_.end_object();
    }
    while (true) {
      std::string_view k;
      if (p_ == end_ || *p_ != '"' || !string(k) || !b_.key_text(k)) return false;
      skip_space();
      if (p_ == end_ || *p_ != ':') return false;
      ++p_;
      skip_space();
      if (!value(depth)) return false;
      switch (comma_or('}')) {
        case After::more: continue;
        case After::closed: return b_.end_object();
        case After::bad: return false;
      }
    }
  }

  bool array(int depth) {
    if (depth > kMaxDepth || !b_.start_array(std::size_t(-1))) return false;
    ++p_;
    skip_space();
    if (p_ < end_ && *p_ == ']') {
      ++p_;
      return b_.end_array();
    }
    while (true) {
      if (!value(depth)) return false;
      switch (comma_or(']')) {
        case After::more: continue;
        case After::closed: return b_.end_array();
        case After::bad: return false;
      }
    }
  }

  const char* p_;
  const char* end_;
  Handler& b_;
};

}  // namespace laggard::report
