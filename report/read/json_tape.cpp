#include "json_tape.h"

#include "json_fast_scan.h"

#include <limits>

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
  // The fast scanner's strings are views of the text, kept as offsets from its start; nlohmann's
  // are decoded copies, kept in the arena (text_base null).
  const char* text_base = nullptr;

  bool fits(size_t more) const { return tape.values_.size() < std::numeric_limits<uint32_t>::max() - 1 && more < (1u << 31); }

  // Where s is kept, from the tape's base; false when that does not fit in 32 bits.
  bool place_text(std::string_view s, uint32_t& at) {
    if (text_base) {
      const size_t offset = size_t(s.data() - text_base);
      if (offset + s.size() > std::numeric_limits<uint32_t>::max()) return false;
      at = static_cast<uint32_t>(offset);
      return true;
    }
    if (tape.arena_.size() + s.size() > std::numeric_limits<uint32_t>::max()) return false;
    at = static_cast<uint32_t>(tape.arena_.size());
    tape.arena_.append(s);
    return true;
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
  bool number_integer(json::number_integer_t i, std::string_view = {}) {
    if (!fits(0)) return false;
    push(Type::integer).i = i;
    return true;
  }
  bool number_unsigned(json::number_unsigned_t u, std::string_view = {}) {
    if (!fits(0)) return false;
    push(Type::unsigned_integer).u = u;
    return true;
  }
  bool number_float(json::number_float_t d, std::string_view) {
    if (!fits(0)) return false;
    push(Type::floating).d = d;
    return true;
  }
  bool string(json::string_t& s) { return text_value(s); }
  bool text_value(std::string_view s) {
    uint32_t at;
    if (!fits(s.size()) || !place_text(s, at)) return false;
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
    if (!fits(k.size()) || !place_text(k, key_at)) return false;
    key_size = static_cast<uint32_t>(k.size());
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) { return false; }
};

bool JsonTape::parse(std::string_view text) {
  values_.clear();
  arena_.clear();
  // Sized once from the text (the files' windows hold about one value per 4-5 bytes) rather
  // than doubled from empty: each doubling copies and first-touches the whole tape again.
  if (values_.capacity() < text.size() / 4) values_.reserve(text.size() / 4);
  {
    JsonTapeBuilder fast{*this, {}, 0, 0, text.data()};
    base_ = text.data();
    if (JsonFastScan<JsonTapeBuilder>(text, fast).run() && fast.open.empty() && !values_.empty()) return true;
  }
  values_.clear();  // not handled above: nlohmann's parser decides, from the start
  arena_.clear();
  JsonTapeBuilder b{*this, {}, 0, 0, nullptr};
  const bool ok = nlohmann::json::sax_parse(text.begin(), text.end(), &b) && b.open.empty() && !values_.empty();
  base_ = arena_.data();  // the arena has stopped growing
  return ok;
}

void JsonTape::release_if_large() {
  // Kept for the next file unless it is larger than any file of a real run needs (issue 29): a
  // detailed 3 MB JSON rank file is a 21 MiB tape, and giving that back after every file made the
  // allocator return it to the kernel and every next file fault it in again, page by page
  // (88 % of the page faults of 240 detailed ranks, at ~14 us each on a VM).
  constexpr size_t kKeep = size_t{512} << 20;
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
