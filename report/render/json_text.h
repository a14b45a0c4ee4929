// The JSON report's text: nlohmann's dump(2), written without building the report as a DOM.
// At 10,000 ranks the DOM took a fifth of the report's time and, at 30,000, 350 MB of memory
// (issue 29); the big per-rank arrays now go straight to text, element by element on every core.
#pragma once

#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "parallel.h"

namespace laggard::report {

// Writes one value in exactly the layout of nlohmann's dump(2): two spaces per level, ": " after
// keys, ",\n" between members, empty containers as {} and [], nlohmann's escaping and numbers.
// An object's keys must come in sorted order, as nlohmann's std::map gives them: a key out of
// order (or twice) throws std::logic_error, so a misordered renderer fails every report it writes.
class JsonWriter {
 public:
  // `level`: the indentation of the value written (a part rendered apart and spliced in there).
  explicit JsonWriter(int level = 0) : base_(level) {}
  // Text goes to `sink` in pieces of about a megabyte, never held whole.
  explicit JsonWriter(std::ostream& sink, int level = 0) : base_(level), sink_(&sink) {}

  JsonWriter& key(std::string_view k);
  void begin_object();
  void end_object();
  void begin_array();
  void end_array();

  void null();
  void value(bool b);
  void value(double d);  // NaN and infinities as null, as nlohmann writes them
  void value(std::string_view s);
  void value(const char* s) { value(std::string_view(s)); }  // not the bool overload
  void value(const std::string& s) { value(std::string_view(s)); }
  void value(const std::optional<double>& d);  // absent: null
  void value(const nlohmann::json& v);         // a small part kept as DOM, dumped at this depth
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  void value(T v) {
    before_value();
    append_integer(static_cast<std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>(v));
  }
  template <class T>
  void value(const std::vector<T>& v) {
    begin_array();
    for (const T& e : v) value(e);
    end_array();
  }

  // Sorted by std::less as nlohmann's own std::map is, so written in its order.
  template <class T>
  void value(const std::map<std::string, T>& m) {
    begin_object();
    for (const auto& [k, v] : m) key(k).value(v);
    end_object();
  }

  template <class T>
  JsonWriter& field(std::string_view k, const T& v) {
    key(k).value(v);
    return *this;
  }

  // An array of n elements, render(i, writer) writing element i: in batches, each batch's
  // elements rendered on every core and written out while the next batch is rendered. Fewer
  // than `serial_below` elements are written here, on this thread: small ones are not worth a
  // thread start (big ones, such as a step of every rank's divergences, set it to 2).
  static constexpr size_t kSerialBelow = 64;
  template <class Render>
  void parallel_array(size_t n, Render&& render, size_t serial_below = kSerialBelow);

  // The text written so far (a writer without a sink holds all of it).
  std::string& text() { return out_; }
  void flush();

 private:
  struct Frame {
    bool object = false;
    size_t count = 0;
    std::string last_key;
  };
  int level() const { return base_ + int(depth_); }
  Frame& top() { return frames_[depth_ - 1]; }
  void open(bool object);
  void before_value();
  void next_element();
  void close(char bracket);
  void append_string(std::string_view s);
  void append_integer(int64_t v);
  void append_integer(uint64_t v);
  void spliced(const std::string& rendered);
  void flush_if_big();

  int base_;
  std::ostream* sink_ = nullptr;
  std::string out_;
  std::vector<Frame> frames_;  // [0, depth_) are open
  size_t depth_ = 0;
};

// An object's members, some DOM values and some written by functions, written in key order (that
// of nlohmann's std::map); a key added twice keeps its last value, as j[key] = v would.
class JsonObjectParts {
 public:
  using Writer = std::function<void(JsonWriter&)>;
  void add(const std::string& key, nlohmann::json value);
  void add_written(const std::string& key, Writer write);
  void merge(JsonObjectParts&& other);
  void write(JsonWriter& w) const;

 private:
  struct Part {
    nlohmann::json dom;
    Writer write;
  };
  std::map<std::string, Part> parts_;
};

// A part's text parsed back: the DOM form, for callers (and tests) that look inside.
nlohmann::json parsed(const std::function<void(JsonWriter&)>& write);

template <class Render>
void JsonWriter::parallel_array(size_t n, Render&& render, size_t serial_below) {
  begin_array();
  if (n < serial_below) {
    for (size_t i = 0; i < n; ++i) render(i, *this);
    end_array();
    return;
  }
  // A few MB of text per batch, one thread start per batch (json_text.cpp: issue 29's memory).
  // Within a batch, elements are rendered in blocks, each block's text one string, not one per
  // element: fewer blocks to allocate, grow and splice, and a block of small elements (a number
  // each: a worst wait's 10,000 arrivals) is worth a thread where one alone is not. At 10,000
  // ranks of summaries the JSON text took 70 ms instead of 86.
  // A batch goes out to the sink on a thread of its own while the next one is rendered: writing it
  // (the kernel copying a few MB into the page cache) used to leave the other cores idle. The
  // batches go out in order, and only that thread touches this writer meanwhile.
  constexpr size_t kBatch = 4096;
  const int indent = level();
  const std::string separator = ",\n" + std::string(size_t(2 * indent), ' ');  // next_element's
  std::vector<std::string> texts, going_out;
  auto send = [this](std::vector<std::string>& batch) {
    for (std::string& t : batch) {
      spliced(t);
      std::string().swap(t);
    }
  };
  std::future<void> sent;  // after what it sends: its destructor waits for it
  for (size_t first = 0; first < n; first += kBatch) {
    const size_t m = std::min(kBatch, n - first);
    const size_t per_block = std::max<size_t>(1, m / (size_t(analysis_threads()) * 16));
    texts.assign((m + per_block - 1) / per_block, std::string());
    parallel_for(texts.size(), [&](size_t b) {
      JsonWriter w(indent);
      for (size_t k = b * per_block, end = std::min(m, k + per_block); k < end; ++k) {
        if (k != b * per_block) w.out_ += separator;
        render(first + k, w);
      }
      texts[b] = std::move(w.out_);
    });
    if (sent.valid()) sent.get();
    going_out.swap(texts);
    if (first + kBatch >= n) {
      send(going_out);  // the last batch: nothing left to render beside it
      break;
    }
    try {
      sent = std::async(std::launch::async, [&] { send(going_out); });
    } catch (const std::system_error&) {
      send(going_out);  // no thread to be had: out from here, as before
    }
  }
  end_array();
}

}  // namespace laggard::report
