#include "json_tape.h"

#include <charconv>
#include <limits>
#include <system_error>

namespace laggard::report {

static_assert(sizeof(JsonTape::Value) == 32, "one tape entry per JSON value: keep it small");

// nlohmann's SAX interface (json.hpp, json_sax<BasicJsonType>): each callback returns false to
// stop the parse.
struct JsonTapeBuilder {
  using json = nlohmann::json;
  using Value = JsonTape::Value;
  using Type = JsonTape::Type;

  JsonTape& tape;
  std::vector<uint32_t> open;  // containers not yet closed
  uint32_t key_at = 0, key_size = 0;

  bool fits(size_t more) const { return tape.values_.size() < std::numeric_limits<uint32_t>::max() - 1 && more < (1u << 31); }

  uint32_t append_text(std::string_view s) {
    auto at = static_cast<uint32_t>(tape.arena_.size());
    tape.arena_.append(s);
    return at;
  }

  Value& push(Type t) {
    if (!open.empty()) {
      Value& parent = tape.values_[open.back()];
      ++parent.children;
      if (parent.type == Type::object) {
        tape.values_.emplace_back();
        Value& v = tape.values_.back();
        v.key_at = key_at;
        v.key_size = key_size;
        v.type = t;
        v.next = static_cast<uint32_t>(tape.values_.size());
        return v;
      }
    }
    tape.values_.emplace_back();
    Value& v = tape.values_.back();
    v.type = t;
    v.next = static_cast<uint32_t>(tape.values_.size());
    return v;
  }

  bool null() { return fits(0) && (push(Type::null), true); }
  bool boolean(bool b) {
    if (!fits(0)) return false;
    push(Type::boolean).boolean = b;
    return true;
  }
  bool number_integer(json::number_integer_t i) {
    if (!fits(0)) return false;
    push(Type::integer).i = i;
    return true;
  }
  bool number_unsigned(json::number_unsigned_t u) {
    if (!fits(0)) return false;
    push(Type::unsigned_integer).u = u;
    return true;
  }
  bool number_float(json::number_float_t d, const json::string_t&) {
    if (!fits(0)) return false;
    push(Type::floating).d = d;
    return true;
  }
  bool string(json::string_t& s) { return text_value(s); }
  bool text_value(std::string_view s) {
    if (!fits(s.size()) || tape.arena_.size() + s.size() > std::numeric_limits<uint32_t>::max()) return false;
    uint32_t at = append_text(s);
    Value& v = push(Type::string);
    v.text.at = at;
    v.text.size = static_cast<uint32_t>(s.size());
    return true;
  }
  bool binary(json::binary_t&) { return false; }  // not in JSON text
  bool start_object(std::size_t) { return start(Type::object); }
  bool start_array(std::size_t) { return start(Type::array); }
  bool start(Type t) {
    if (!fits(0)) return false;
    push(t);
    open.push_back(static_cast<uint32_t>(tape.values_.size() - 1));
    return true;
  }
  bool end_object() { return end(); }
  bool end_array() { return end(); }
  bool end() {
    tape.values_[open.back()].next = static_cast<uint32_t>(tape.values_.size());
    open.pop_back();
    return true;
  }
  bool key(json::string_t& k) { return key_text(k); }
  bool key_text(std::string_view k) {
    if (!fits(k.size()) || tape.arena_.size() + k.size() > std::numeric_limits<uint32_t>::max()) return false;
    key_at = append_text(k);
    key_size = static_cast<uint32_t>(k.size());
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

namespace {

// The common case of the files' JSON, scanned without nlohmann's lexer (about 20 % of reading
// 10,000 ranks of summaries went to it): ASCII strings without escapes, integers that fit in
// 64 bits, numbers with a fraction or exponent (std::from_chars: correctly rounded, as the strtod
// nlohmann uses), true, false, null. Anything else, valid or not, stops the scan as "not mine"
// and the text goes through nlohmann's SAX parser instead, so what is accepted and every value
// read stay exactly json::parse's. The builder sees the same calls in the same order.
class FastScan {
 public:
  FastScan(std::string_view text, JsonTapeBuilder& b) : p_(text.data()), end_(text.data() + text.size()), b_(b) {}

  // True: the whole text was one value, handed to the builder. False: not handled here.
  bool run() {
    skip_space();
    if (!value(0)) return false;
    skip_space();
    return p_ == end_;
  }

 private:
  static constexpr int kMaxDepth = 512;  // deeper texts go to nlohmann

  void skip_space() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
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

  bool number() {
    const char* start = p_;
    const bool negative = p_ < end_ && *p_ == '-';
    if (negative) ++p_;
    const char* digits = p_;
    if (p_ == end_ || *p_ < '0' || *p_ > '9') return false;
    if (*p_ == '0') ++p_;
    else
      while (p_ < end_ && *p_ >= '0' && *p_ <= '9') ++p_;
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
      static const nlohmann::json::string_t unused;
      return b_.number_float(d, unused);
    }
    // What does not fit (nlohmann then reads a float) is left to nlohmann.
    uint64_t u = 0;
    for (const char* q = digits; q < p_; ++q)
      if (__builtin_mul_overflow(u, 10u, &u) || __builtin_add_overflow(u, uint64_t(*q - '0'), &u)) return false;
    if (!negative) return b_.number_unsigned(u);
    constexpr uint64_t kMinMagnitude = uint64_t{1} << 63;  // -INT64_MIN
    if (u > kMinMagnitude) return false;
    return b_.number_integer(u == kMinMagnitude ? std::numeric_limits<int64_t>::min() : -static_cast<int64_t>(u));
  }

  bool digits_after(const char*& q) {
    const char* first = q;
    while (q < end_ && *q >= '0' && *q <= '9') ++q;
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
  JsonTapeBuilder& b_;
};

}  // namespace

bool JsonTape::parse(std::string_view text) {
  values_.clear();
  arena_.clear();
  {
    JsonTapeBuilder fast{*this, {}, 0, 0};
    if (FastScan(text, fast).run() && fast.open.empty() && !values_.empty()) return true;
  }
  values_.clear();  // not handled above: nlohmann's parser decides, from the start
  arena_.clear();
  JsonTapeBuilder b{*this, {}, 0, 0};
  return nlohmann::json::sax_parse(text.begin(), text.end(), &b) && b.open.empty() && !values_.empty();
}

void JsonTape::release_if_large() {
  constexpr size_t kKeep = size_t{16} << 20;  // bytes: a summaries window is a few hundred KiB
  if (values_.capacity() * sizeof(Value) > kKeep) std::vector<Value>().swap(values_);
  if (arena_.capacity() > kKeep) std::string().swap(arena_);
}

size_t JsonTape::only_member(size_t i, std::string_view k) const {
  if (values_[i].type != Type::object) return 0;
  size_t found = 0, n = 0;
  for (size_t c = first_child(i); c < values_[i].next; c = values_[c].next)
    if (key(values_[c]) == k) {
      found = c;
      ++n;
    }
  return n == 1 ? found : 0;
}

nlohmann::json JsonTape::to_json(size_t i, std::string_view skip) const {
  const Value& v = values_[i];
  switch (v.type) {
    case Type::null: return nullptr;
    case Type::boolean: return v.boolean;
    case Type::integer: return v.i;
    case Type::unsigned_integer: return v.u;
    case Type::floating: return v.d;
    case Type::string: return std::string(str(v));
    case Type::array: {
      nlohmann::json a = nlohmann::json::array();
      for (size_t c = first_child(i); c < v.next; c = values_[c].next) a.push_back(to_json(c));
      return a;
    }
    case Type::object: {
      nlohmann::json o = nlohmann::json::object();
      for (size_t c = first_child(i); c < v.next; c = values_[c].next)
        if (skip.empty() || key(values_[c]) != skip) o[std::string(key(values_[c]))] = to_json(c);
      return o;
    }
  }
  return nullptr;
}

}  // namespace laggard::report
