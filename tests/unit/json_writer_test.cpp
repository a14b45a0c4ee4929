// The streaming JSON writer (issue 29) against nlohmann's dump(2): the JSON report is written with
// it and must stay byte for byte what dumping the whole report as a DOM wrote.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "json_text.h"

namespace laggard::report {
namespace json_writer_test {

using nlohmann::json;

// `v` written through the writer's own calls (its scalars never through nlohmann).
void write_by_hand(JsonWriter& w, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      w.begin_object();
      for (auto it = v.begin(); it != v.end(); ++it) write_by_hand(w.key(it.key()), it.value());
      w.end_object();
      break;
    case json::value_t::array:
      w.begin_array();
      for (const json& e : v) write_by_hand(w, e);
      w.end_array();
      break;
    case json::value_t::string: w.value(v.get_ref<const std::string&>()); break;
    case json::value_t::boolean: w.value(v.get<bool>()); break;
    case json::value_t::number_integer: w.value(v.get<int64_t>()); break;
    case json::value_t::number_unsigned: w.value(v.get<uint64_t>()); break;
    case json::value_t::number_float: w.value(v.get<double>()); break;
    default: w.null(); break;
  }
}

std::string by_hand(const json& v) {
  JsonWriter w;
  write_by_hand(w, v);
  return w.text();
}

const double kInf = std::numeric_limits<double>::infinity();

std::vector<double> tricky_doubles() {
  return {0.0, -0.0, 1.0, -1.0, 3.0, 1e-05, 1e-7, 0.1, 0.30000000000000004, -1.5, 1e+20, 1e21, 1e22, 1e300,
          123456789012345680.0, 9007199254740993.0, 4.35, 2.5e-3, 1.0 / 3, DBL_MAX, DBL_MIN, 5e-324, -2e-310,
          std::nan(""), kInf, -kInf, 1e16, 1e15, 0.000123, 100.0, 12345.678};
}

std::vector<std::string> tricky_strings() {
  return {"", "plain", "a\"quote\"", "back\\slash", std::string("nul\0in", 6), "\x01\x02\x1f\x7f",
          "\b\f\n\r\t", "caf\u00e9 \u2713 \U0001D11E", "slash/", "\u2028\u2029", "{\"looks\": [\"json\"]}"};
}

TEST(JsonWriter, ScalarsAreWrittenAsDumpWritesThem) {
  for (double d : tricky_doubles()) EXPECT_EQ(by_hand(json(d)), json(d).dump(2)) << d;
  for (const std::string& s : tricky_strings()) EXPECT_EQ(by_hand(json(s)), json(s).dump(2)) << s;
  for (int64_t i : {int64_t(0), int64_t(-1), int64_t(42), std::numeric_limits<int64_t>::min(),
                    std::numeric_limits<int64_t>::max()})
    EXPECT_EQ(by_hand(json(i)), json(i).dump(2));
  EXPECT_EQ(by_hand(json(std::numeric_limits<uint64_t>::max())), json(std::numeric_limits<uint64_t>::max()).dump(2));
  const std::map<std::string, uint64_t> counts = {{"b", 2}, {"a", 1}, {"B", 0}, {"a\"q", 3}};
  for (const auto& m : {counts, std::map<std::string, uint64_t>()}) {
    JsonWriter w;
    w.value(m);
    EXPECT_EQ(w.text(), json(m).dump(2));
  }
  EXPECT_EQ(by_hand(json(true)), "true");
  EXPECT_EQ(by_hand(json(nullptr)), "null");
}

TEST(JsonWriter, ContainersAreLaidOutAsDumpLaysThemOut) {
  json doubles = json::array(), strings = json::object();
  for (double d : tricky_doubles()) doubles.push_back(d);
  for (const std::string& s : tricky_strings()) strings[s] = s;  // keys escaped as values are
  const json cases[] = {
      json::object(),
      json::array(),
      {{"empty_object", json::object()}, {"empty_array", json::array()}, {"null", nullptr}},
      {{"z", {{"nested", {{"deeper", {1, 2.5, "x\ny", {{"k", true}}}}}}}}, {"a", {json::array(), json::object()}}},
      {{"doubles", doubles}, {"strings", strings}, {"ints", {-1, 0, int64_t(1) << 62, uint64_t(-1)}}},
      json::array({json::array({json::array()}), json::object({{"", json::object()}})}),
  };
  for (const json& v : cases) EXPECT_EQ(by_hand(v), v.dump(2)) << v.dump();
}

// Elements rendered apart on every core and spliced in, DOM parts dumped at their depth, and the
// text sent to a stream in pieces: still dump(2), at every depth.
TEST(JsonWriter, ParallelArraysAndDomPartsKeepTheLayout) {
  json rows = json::array();
  for (int i = 0; i < 5000; ++i)
    rows.push_back({{"rank", i}, {"host", "node" + std::to_string(i)}, {"score", i % 7 ? json(i / 7.0) : json(nullptr)},
                    {"sections", i % 3 ? json::object({{"fwd", {{"ms", 0.1 * i}}}}) : json::object()}});
  const json small = {{"dom", {1, {{"x", "y"}}, json::array()}}};
  // Plain numbers (blocks of many elements each) and elements holding parallel arrays themselves.
  std::vector<double> numbers;
  for (int i = 0; i < 10001; ++i) numbers.push_back(i % 5 ? i / 3.0 : i);
  json lists = json::array();
  for (int i = 0; i < 70; ++i) lists.push_back(json(std::vector<double>(numbers.begin(), numbers.begin() + 64 + i)));
  const json expected = {{"a_dom", small}, {"deep", {{"rows", rows}}}, {"few", {rows[1], rows[2]}},
                         {"lists", lists}, {"numbers", numbers}};
  for (bool to_stream : {false, true}) {
    std::ostringstream sink;
    JsonWriter w = to_stream ? JsonWriter(sink) : JsonWriter();
    JsonObjectParts parts;
    parts.add_written("deep", [&](JsonWriter& d) {
      d.begin_object();
      d.key("rows").parallel_array(rows.size(), [&](size_t i, JsonWriter& e) { write_by_hand(e, rows[i]); });
      d.end_object();
    });
    parts.add_written("few", [&](JsonWriter& d) {
      d.parallel_array(2, [&](size_t i, JsonWriter& e) { e.value(rows[i + 1]); });
    });
    parts.add_written("lists", [&](JsonWriter& d) {
      d.parallel_array(lists.size(), [&](size_t i, JsonWriter& e) {
        e.parallel_array(64 + i, [&](size_t k, JsonWriter& x) { x.value(numbers[k]); });
      });
    });
    parts.add_written("numbers", [&](JsonWriter& d) {
      d.parallel_array(numbers.size(), [&](size_t i, JsonWriter& e) { e.value(numbers[i]); });
    });
    parts.add("a_dom", small);
    parts.write(w);
    w.flush();
    // Where the texts part (gtest's diff of two 10 MB strings would not end).
    const std::string got = to_stream ? sink.str() : w.text(), want = expected.dump(2);
    const size_t at = std::mismatch(got.begin(), got.begin() + std::min(got.size(), want.size()), want.begin()).first -
                      got.begin();
    EXPECT_EQ(got.size(), want.size());
    EXPECT_EQ(got.substr(at, 80), want.substr(at, 80)) << "at byte " << at;
  }
}

TEST(JsonWriter, KeysOutOfOrderOrTwiceAreRefused) {
  JsonWriter w;
  w.begin_object();
  w.field("b", 1);
  EXPECT_THROW(w.key("a"), std::logic_error);
  EXPECT_THROW(w.key("b"), std::logic_error);
  w.field("c", 2);
}

TEST(JsonWriter, InvalidUtf8IsRefusedAsDumpRefusesIt) {
  EXPECT_THROW(json(std::string("\xff")).dump(), json::type_error);
  JsonWriter w;
  EXPECT_THROW(w.value(std::string("bad \xff")), json::type_error);
}

}  // namespace json_writer_test
}  // namespace laggard::report
