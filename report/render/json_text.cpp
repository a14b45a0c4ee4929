#include "json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace laggard::report {
namespace {

using nlohmann::json;

// Containers this close to the root are written piece by piece; deeper values are dumped whole,
// each on whichever core is free (at 10,000 ranks the report's big arrays sit two levels down).
constexpr int kSplitLevels = 3;

// The report's text in order: literal glue, or a value to dump at an indentation level.
struct Piece {
  std::string text;
  const json* value = nullptr;
  int level = 0;
};

// The layout of dump(2): "[\n", each element on its own line two spaces further in, ",\n"
// between them, then "\n" and the closing bracket at the container's own indentation.
void plan(const json& v, int level, std::vector<Piece>& out) {
  if (!v.is_structured() || v.empty() || level >= kSplitLevels) {
    out.push_back({{}, &v, level});
    return;
  }
  const bool object = v.is_object();
  out.push_back({object ? "{\n" : "[\n"});
  size_t i = 0;
  for (auto it = v.begin(); it != v.end(); ++it) {
    std::string head(size_t(2 * (level + 1)), ' ');
    if (object) head += json(it.key()).dump() + ": ";
    out.push_back({std::move(head)});
    plan(*it, level + 1, out);
    out.push_back({++i < v.size() ? ",\n" : "\n"});
  }
  out.push_back({std::string(size_t(2 * level), ' ') + (object ? "}" : "]")});
}

// A value's dump(2) as it stands `level` levels down: every line after the first indented by
// two spaces per level (strings never hold a raw newline: dump escapes it).
std::string dumped_at(const json& v, int level) {
  const std::string text = v.dump(2);
  if (level == 0) return text;
  const std::string pad(size_t(2 * level), ' ');
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (char c : text) {
    out.push_back(c);
    if (c == '\n') out += pad;
  }
  return out;
}

}  // namespace

void write_json_indented(const json& value, std::ostream& out) {
  std::vector<Piece> pieces;
  plan(value, 0, pieces);
  std::vector<size_t> dumps;
  for (size_t i = 0; i < pieces.size(); ++i)
    if (pieces[i].value) dumps.push_back(i);
  // A batch of values at a time, written out and freed before the next (issue 29: at 100,000
  // ranks the whole text, half a gigabyte, was held until the end, in memory first touched for it).
  constexpr size_t kBatch = 4096;  // values per batch: a few MB of text, one thread start per batch
  size_t written = 0;
  for (size_t first = 0; first < dumps.size(); first += kBatch) {
    const size_t n = std::min(kBatch, dumps.size() - first);
    parallel_for(n, [&](size_t k) {
      Piece& p = pieces[dumps[first + k]];
      p.text = dumped_at(*p.value, p.level);
    });
    const size_t upto = first + n < dumps.size() ? dumps[first + n] : pieces.size();
    for (; written < upto; ++written) {
      out << pieces[written].text;
      std::string().swap(pieces[written].text);
    }
  }
  for (; written < pieces.size(); ++written) out << pieces[written].text;
}

void JsonWriter::next_element() {
  Frame& f = frames_.back();
  out_ += f.count++ ? ",\n" : "\n";
  out_.append(size_t(2 * level()), ' ');
}

void JsonWriter::before_value() {
  if (frames_.empty()) return;
  // In an object, key() wrote the member's start.
  if (!frames_.back().object) next_element();
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (frames_.empty() || !frames_.back().object) throw std::logic_error("JsonWriter: a key outside an object");
  Frame& f = frames_.back();
  if (f.count && k <= f.last_key)
    throw std::logic_error("JsonWriter: key \"" + std::string(k) + "\" after \"" + f.last_key + "\"");
  f.last_key.assign(k);
  next_element();
  append_string(k);
  out_ += ": ";
  return *this;
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  frames_.push_back({true});
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  frames_.push_back({false});
}

void JsonWriter::close(char bracket) {
  const bool empty = frames_.back().count == 0;
  frames_.pop_back();
  if (!empty) {
    out_ += '\n';
    out_.append(size_t(2 * level()), ' ');
  }
  out_ += bracket;
  flush_if_big();
}

void JsonWriter::end_object() { close('}'); }
void JsonWriter::end_array() { close(']'); }

void JsonWriter::null() {
  before_value();
  out_ += "null";
}

void JsonWriter::value(bool b) {
  before_value();
  out_ += b ? "true" : "false";
}

void JsonWriter::value(double d) {
  before_value();
  if (!std::isfinite(d)) {
    out_ += "null";
    return;
  }
  // nlohmann's own shortest round-trip digits (Grisu2, "1.0" for whole numbers, "1e-05"), which
  // neither fmt nor std::to_chars spell the same way.
  char buf[64];
  out_.append(buf, nlohmann::detail::to_chars(buf, buf + sizeof buf, d));
}

void JsonWriter::value(const std::optional<double>& d) {
  if (d)
    value(*d);
  else
    null();
}

void JsonWriter::value(std::string_view s) {
  before_value();
  append_string(s);
}

void JsonWriter::value(const json& v) {
  before_value();
  // The serializer dump(2) itself uses, started at this depth.
  nlohmann::detail::serializer<json> s(nlohmann::detail::output_adapter<char, std::string>(out_), ' ');
  s.dump(v, true, false, 2, unsigned(2 * level()));
}

void JsonWriter::append_string(std::string_view s) {
  // Plain ASCII without quotes, backslashes or control characters is written as it is; anything
  // else goes through nlohmann's escaping (which also rejects invalid UTF-8 as dump does).
  const bool plain = std::all_of(s.begin(), s.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x20 && u < 0x80 && c != '"' && c != '\\';
  });
  if (!plain) {
    out_ += json(std::string(s)).dump();
    return;
  }
  out_ += '"';
  out_.append(s);
  out_ += '"';
}

void JsonWriter::append_integer(int64_t v) {
  char buf[24];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void JsonWriter::append_integer(uint64_t v) {
  char buf[24];
  out_.append(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

void JsonWriter::spliced(const std::string& rendered) {
  before_value();
  if (!sink_) {
    out_ += rendered;
    return;
  }
  // Straight to the stream, not copied once more (a 30,000-rank report is 160 MB of elements).
  flush();
  sink_->write(rendered.data(), std::streamsize(rendered.size()));
}

void JsonWriter::flush_if_big() {
  constexpr size_t kFlushBytes = size_t(1) << 20;
  if (sink_ && out_.size() >= kFlushBytes) flush();
}

void JsonWriter::flush() {
  if (!sink_) return;
  sink_->write(out_.data(), std::streamsize(out_.size()));
  out_.clear();
}

void JsonObjectParts::add(const std::string& key, json value) { parts_[key] = {std::move(value), nullptr}; }

void JsonObjectParts::add_written(const std::string& key, Writer write) { parts_[key] = {json(), std::move(write)}; }

void JsonObjectParts::merge(JsonObjectParts&& other) {
  for (auto& [key, part] : other.parts_) parts_[key] = std::move(part);
}

void JsonObjectParts::write(JsonWriter& w) const {
  w.begin_object();
  for (const auto& [key, part] : parts_) {
    w.key(key);
    if (part.write)
      part.write(w);
    else
      w.value(part.dom);
  }
  w.end_object();
}

json parsed(const std::function<void(JsonWriter&)>& write) {
  JsonWriter w;
  write(w);
  return json::parse(w.text());
}

}  // namespace laggard::report
