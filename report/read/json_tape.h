// A flat, allocation-light form of one JSON text for the reader's fast path (issue 14): the
// text goes through nlohmann's own SAX parser (the same lexer and acceptance as json::parse),
// and each value becomes one fixed-size entry of a vector, reused from one text to the next,
// instead of a node tree of std::map and std::string allocations. The fast readers
// (reader_fast.h) read the model from it; anything they do not handle is turned back into the
// nlohmann::json the DOM parse would have built (to_json) and read by the original code.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

namespace laggard::report {

class JsonTape {
 public:
  enum class Type : uint8_t { null, boolean, integer, unsigned_integer, floating, string, object, array };
  struct Value {
    Type type = Type::null;
    bool boolean = false;
    uint32_t next = 0;      // index of the value after this one and everything inside it
    uint32_t children = 0;  // object members or array elements
    uint32_t key_at = 0, key_size = 0;  // member of an object: its key, in the string arena
    union {
      int64_t i;
      uint64_t u;
      double d;
      struct {
        uint32_t at, size;  // string: its text, in the string arena
      } text;
    };
    Value() : u(0) {}
  };

  // Parses `text`; false when it is not one valid JSON value (json::parse would throw) or is
  // too large for 32-bit indices. Value 0 is the root. Keys and strings may point into `text`:
  // it must outlive the tape's reads (until the next parse), so a temporary string is refused.
  bool parse(std::string_view text);
  template <class S>
    requires std::same_as<std::remove_cvref_t<S>, std::string> && (!std::is_lvalue_reference_v<S>)
  bool parse(S&&) = delete;

  const Value& at(size_t i) const { return values_[i]; }
  size_t size() const { return values_.size(); }
  std::string_view key(const Value& v) const { return {base_ + v.key_at, v.key_size}; }
  std::string_view str(const Value& v) const { return {base_ + v.text.at, v.text.size}; }
  // The first child of container i (its end is at(i).next).
  static size_t first_child(size_t i) { return i + 1; }

  // Gives back the memory of a huge text's tape (a thread keeps its tape for the next file).
  void release_if_large();

  // Value i as the DOM parse builds it (numbers keep their kind; a repeated key keeps the last),
  // leaving out the object member `skip` of value i when given.
  nlohmann::json to_json(size_t i, std::string_view skip = {}) const;
  // The index of the member `key` of object i, or 0 when it has none or more than one.
  size_t only_member(size_t i, std::string_view key) const;

 private:
  friend struct JsonTapeBuilder;
  std::vector<Value> values_;
  // Where keys and strings are: the parsed text itself when the fast scanner took it (its strings
  // have no escapes, so they are their own text: no copy, issue 29), else arena_, where nlohmann's
  // parser handed them over decoded.
  const char* base_ = nullptr;
  std::string arena_;
};

}  // namespace laggard::report
