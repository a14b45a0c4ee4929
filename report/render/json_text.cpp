#include "json_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <vector>

namespace laggard::report {

using nlohmann::json;

void JsonWriter::next_element() {
  Frame& f = top();
  out_ += f.count++ ? ",\n" : "\n";
  out_.append(size_t(2 * level()), ' ');
}

void JsonWriter::before_value() {
  if (depth_ == 0) return;
  // In an object, key() wrote the member's start.
  if (!top().object) next_element();
}

JsonWriter& JsonWriter::key(std::string_view k) {
  if (depth_ == 0 || !top().object) throw std::logic_error("JsonWriter: a key outside an object");
  Frame& f = top();
  if (f.count && k <= f.last_key)
    throw std::logic_error("JsonWriter: key \"" + std::string(k) + "\" after \"" + f.last_key + "\"");
  f.last_key.assign(k);
  next_element();
  append_string(k);
  out_ += ": ";
  return *this;
}

void JsonWriter::open(bool object) {
  // Frames stay when closed: the next container at this depth reuses its key's buffer.
  if (depth_ == frames_.size()) frames_.emplace_back();
  Frame& f = frames_[depth_++];
  f.object = object;
  f.count = 0;
  f.last_key.clear();
}

void JsonWriter::begin_object() {
  before_value();
  out_ += '{';
  open(true);
}

void JsonWriter::begin_array() {
  before_value();
  out_ += '[';
  open(false);
}

void JsonWriter::close(char bracket) {
  const bool empty = top().count == 0;
  --depth_;
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
