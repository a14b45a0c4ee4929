#include "reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <stdexcept>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dir_listing.h"
#include "json_tape.h"
#include "reader_checks.h"
#include "reader_fast.h"
#include "reader_frames.h"
#include "reader_gpu.h"
#include "reader_integrity.h"
#include "reader_parallel.h"
#include "reader_cpu_wait.h"
#include "span_chunks.h"
#include "reader_pause.h"
#include "reader_nccl.h"
#include "health_analysis.h"
#include "reader_segment.h"
#include "reader_values.h"
#include "signals.h"

namespace laggard::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMinSchema = 1, kMaxSchema = 5;
constexpr int kFirstFrameSchema = 5;  // frame files (reader_frames.h) start at version 5

fs::file_time_type newest(const std::vector<std::string>& files) {
  fs::file_time_type t = fs::file_time_type::min();  // its epoch is not 1970: {} is not "oldest"
  std::error_code ec;
  for (const auto& f : files) t = std::max(t, fs::last_write_time(f, ec));
  return t;
}

// Counts (dropped records): each a whole number >= 0; a bad one is left out and noted.
Counts read_counts(const json& j, const char* where, std::vector<std::string>& notes) {
  Counts c;
  if (j.is_object())
    for (auto& [k, v] : j.items()) {
      try {
        c[k] = values::count(v, k.c_str());
      } catch (const std::exception& e) {
        notes.push_back(fmt::format("{}{}; left out", where, e.what()));
      }
    }
  return c;
}

template <class T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

// "(other)" holds ranges whose names did not fit the capture's name table: a catch-all, not a
// section, so it is counted and never scored. Before schema 4 it was recognized by name only.
bool is_folded(const json& s, int version) {
  if (get_or<bool>(s, "folded", false)) return true;
  return version < 4 && s.at("name").is_string() && s.at("name").get<std::string>() == "(other)";
}

// A checked whole number, or `fallback` when the key is absent or null.
int64_t int_or(const json& j, const char* key, int64_t lo, int64_t hi, int64_t fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return values::integer(*it, lo, hi, key);
}

// Runs `read`; a bad value becomes a note and the field keeps its default.
template <class F>
void soft(std::vector<std::string>& notes, F&& read) {
  try {
    read();
  } catch (const std::exception& e) {
    notes.push_back(std::string(e.what()) + "; ignored");
  }
}

SectionWindow read_section(const json& s, int64_t window_start) {
  SectionWindow sec;
  sec.name = s.at("name").get<std::string>();
  sec.parent = get_or<std::string>(s, "parent", "");
  sec.count = values::count(s.at("count"), "count");
  sec.total_ns = values::dur_ns(s.at("total_ns"), "total_ns");
  sec.min_ns = values::dur_ns(s.at("min_ns"), "min_ns");
  sec.max_ns = values::dur_ns(s.at("max_ns"), "max_ns");
  sec.median_ns = values::dur_ns(s.at("median_ns"), "median_ns");
  sec.domain = get_or<std::string>(s, "domain", "");
  sec.median_from_sample = get_or<bool>(s, "median_from_sample", false);
  if (auto it = s.find("occurrences"); it != s.end()) {
    const auto& starts = it->at("start_offset_ns");
    const auto& durs = it->at("dur_ns");
    const auto& tids = it->at("tid");
    if (!starts.is_array() || !durs.is_array() || !tids.is_array() || starts.size() != durs.size() ||
        starts.size() != tids.size())
      throw std::runtime_error("occurrence arrays of section '" + sec.name + "' differ in length");
    if (starts.size() > sec.count)
      throw std::runtime_error(fmt::format("section '{}' stores {} occurrences but counts {}", sec.name,
                                           starts.size(), sec.count));
    double weight = starts.empty() ? 1.0 : std::max(1.0, double(sec.count) / double(starts.size()));
    sec.occurrences.reserve(starts.size());
    for (size_t i = 0; i < starts.size(); ++i) {
      int64_t start = window_start + values::offset_ns(starts[i], "start_offset_ns");
      if (start < 0) throw std::runtime_error(fmt::format("section '{}' has an occurrence before 1970", sec.name));
      sec.occurrences.push_back({start, values::dur_ns(durs[i], "dur_ns"),
                                 static_cast<uint32_t>(values::integer(tids[i], 0, UINT32_MAX, "tid")), weight});
    }
  }
  return sec;
}

// A window's own drop counts are read only for what they hold (the NCCL drops of
// finish_nccl_rank, NVRx's stored-records check); the rank's cumulative ones, from its header, are
// the ones reported. Most are 0: a map node each was 1 KB a window (issue 29: 200 MB at 100,000
// ranks of summaries).
void forget_zero_counts(CaptureWindow& cw) {
  std::erase_if(cw.dropped, [](const auto& kv) { return kv.second == 0; });
}

CaptureWindow read_window(const json& w, int version, StringTable& strings, uint64_t& folded_ranges,
                          std::vector<std::string>& notes, std::string_view binary_records = {}) {
  CaptureWindow cw;
  cw.index = values::count(w.at("index"), "index");
  try {
    cw.start_ns = values::time_ns(w.at("start_ns"), "start_ns");
    cw.end_ns = values::time_ns(w.at("end_ns"), "end_ns");
    if (cw.end_ns < cw.start_ns) throw std::runtime_error("end_ns is before start_ns");
    cw.dropped = read_counts(w.value("dropped", json::object()), "window dropped.", notes);
    for (const json& sec : w.at("sections")) {
      if (is_folded(sec, version)) folded_ranges += values::count(sec.at("count"), "count");
      else cw.sections.push_back(read_section(sec, cw.start_ns));
    }
    if (auto g = w.find("gpu"); g != w.end() && g->is_object())
      read_gpu_window(*g, cw.start_ns, strings, cw, binary_records);
    if (auto it = w.find("nccl"); it != w.end() && it->is_object()) read_nccl_window(*it, strings, cw);
    if (auto it = w.find("gpu_health"); it != w.end() && it->is_object()) read_gpu_health_window(*it, cw);
    if (auto it = w.find("paused"); it != w.end()) read_paused_window(*it, cw);
    if (auto it = w.find("cpu_wait"); it != w.end()) read_cpu_wait_window(*it, cw);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("window {}: {}", cw.index, e.what()));
  }
  forget_zero_counts(cw);
  return cw;
}

// The file's text into `text` (a thread's buffer, kept from file to file), refusing files larger
// than `max_bytes` before reading them (a sparse or runaway file is never read whole). Sized once
// from the file's size and read with read(2) straight into place: growing it 64 KiB at a time
// copied and first-touched it again at every doubling.
void read_text(const std::string& path, uint64_t max_bytes, std::string& text) {
  text.clear();
  // O_NONBLOCK: a FIFO put in a rank file's place after the directory was listed must not hang us.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw std::runtime_error("cannot open file");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) throw std::runtime_error("not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    throw std::runtime_error(fmt::format("file is {} bytes, more than the {} bytes a rank file may have "
                                         "(--max-file-mb)", static_cast<uint64_t>(st.st_size), max_bytes));
  // One byte more than the size, so that a file growing while it is read is seen growing.
  size_t want = st.st_size > 0 ? static_cast<size_t>(st.st_size) + 1 : size_t{1} << 16;
  size_t have = 0;
  while (true) {
    // At least the size (and one byte) for a regular file: resize() zero-fills, and a 64 KiB floor
    // zeroed 56 KiB too many for each 8 KiB rank file of summaries.
    if (text.size() < have + 1) text.resize(std::max(want, have + (size_t{1} << 12)));
    const ssize_t n = ::read(fd, text.data() + have, text.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::runtime_error(fmt::format("cannot read file ({})", std::strerror(errno)));
    if (n == 0) break;
    have += static_cast<size_t>(n);
    if (have > max_bytes)  // grew while being read
      throw std::runtime_error(fmt::format("file is more than the {} bytes a rank file may have (--max-file-mb)",
                                           max_bytes));
    want = have * 2;
  }
  text.resize(have);
}

}  // namespace

namespace {

// The schema version, after checking this is a laggard rank file this reader knows.
int checked_version(const json& j) {
  if (!j.is_object() || get_or<std::string>(j, "schema", "") != "laggard-rank")
    throw std::runtime_error("not a laggard rank file");
  int version = static_cast<int>(int_or(j, "schema_version", INT_MIN, INT_MAX, 0));
  if (version < kMinSchema || version > kMaxSchema)
    throw std::runtime_error(fmt::format("unsupported schema_version {} (this laggard reads {}..{})",
                                         version, kMinSchema, kMaxSchema));
  return version;
}

// The file header's fields (everything but "windows").
void read_header(const json& j, Segment& s) {
  s.run_id = j.at("run_id").get<std::string>();
  s.rank = static_cast<int>(values::integer(j.at("rank"), 0, values::kMaxWorldSize - 1, "rank"));
  auto& notes = s.notes;
  soft(notes, [&] { s.world_size = static_cast<int>(int_or(j, "world_size", 1, values::kMaxWorldSize, -1)); });
  soft(notes, [&] { s.local_rank = static_cast<int>(int_or(j, "local_rank", 0, values::kMaxWorldSize - 1, -1)); });
  s.segment = static_cast<int>(int_or(j, "segment", 0, INT_MAX, 0));
  s.host = get_or<std::string>(j, "host", "");
  s.pid = static_cast<long>(int_or(j, "pid", 0, INT64_MAX, 0));
  soft(notes, [&] { s.process_start_ns = int_or(j, "process_start_ns", 0, values::kMaxTimeNs, 0); });
  soft(notes, [&] { s.data_end_ns = int_or(j, "data_end_ns", 0, values::kMaxTimeNs, 0); });
  s.ppid = static_cast<long>(int_or(j, "ppid", 0, INT64_MAX, 0));
  s.image = get_or<std::string>(j, "image", "");
  soft(notes, [&] { s.started_ticks = static_cast<uint64_t>(int_or(j, "started_ticks", 0, INT64_MAX, 0)); });
  soft(notes, [&] { s.windows_lost = values::count(j.value("windows_lost", json(0)), "windows_lost"); });
  s.final = get_or<bool>(j, "final", false);
  soft(notes, [&] { s.signal = static_cast<int>(int_or(j, "signal", 0, 128, 0)); });
  if (auto it = j.find("config"); it != j.end() && it->is_object())
    if (auto f = it->find("flush_s"); f != it->end() && !f->is_null())
      soft(notes, [&] { s.flush_s = values::seconds(*f, 1e7, "config.flush_s"); });
  if (auto it = j.find("config"); it != j.end() && it->is_object())
    s.sections_filter = get_or<std::string>(*it, "sections", "");
  if (auto it = j.find("capture"); it != j.end()) {
    s.nvtx_status = get_or<std::string>(*it, "nvtx", "");
    s.nccl_status = get_or<std::string>(*it, "nccl", "");
    s.cupti_status = get_or<std::string>(*it, "cupti", "");
  }
  if (auto it = j.find("import"); it != j.end() && it->is_object())
    soft(notes, [&] { s.import_time_base_ns = int_or(*it, "time_base_ns", 0, values::kMaxTimeNs, 0); });
  if (auto it = j.find("clock"); it != j.end() && it->is_object())
    soft(notes, [&] {
      s.gpu_clock_offset_ns = int_or(*it, "gpu_offset_ns", -values::kMaxTimeNs, values::kMaxTimeNs, 0);
    });
  s.dropped = read_counts(j.value("dropped", json::object()), "dropped.", notes);
}

// Counts the windows left out as impossible, keeping the first reason.
struct BadWindows {
  size_t bad = 0, total = 0;
  std::string first_error;
  void add_to(std::vector<std::string>& notes) const {
    if (bad)
      notes.push_back(fmt::format("{} of {} window(s) left out as impossible ({}{})", bad, total, first_error,
                                  bad > 1 ? "; ..." : ""));
  }
};

template <class F>
void try_window(BadWindows& bad, F&& read) {
  ++bad.total;
  try {
    read();
  } catch (const std::exception& e) {
    if (!bad.bad++) bad.first_error = e.what();
  }
}

json parse_json(std::string_view text, const char* what) {
  try {
    return json::parse(text);
  } catch (const json::parse_error& e) {
    throw std::runtime_error(fmt::format("truncated or invalid JSON{} (at byte {} of {})", what, e.byte, text.size()));
  }
}

std::atomic<bool> fast_reader{true};

// One window: the fast path when it accepts (reader_fast.h), else the DOM code.
void read_tape_window(const JsonTape& tape, size_t at, int version, StringTable& strings, Segment& s,
                      std::string_view binary_records = {}) {
  CaptureWindow cw;
  const SpanChunk::Mark before = s.gpu_spans.mark();
  if (fast_reader.load(std::memory_order_relaxed) && read_window_fast(tape, at, version, strings, s.folded_ranges, cw, binary_records)) {
    forget_zero_counts(cw);
    s.windows.push_back(std::move(cw));
    return;
  }
  s.gpu_spans.truncate(before);  // what the declined fast path packed (DecodeSpansInto): the DOM code decodes again
  s.windows.push_back(read_window(tape.to_json(at), version, strings, s.folded_ranges, s.notes, binary_records));
}

// The parse of each file reuses its thread's tape.
JsonTape& thread_tape() {
  thread_local JsonTape tape;
  return tape;
}

// The common case without a DOM of the windows: valid JSON with one "windows" array. nullopt
// when the file is not that (the DOM code then says what is wrong with it).
std::optional<Segment> parse_json_segment_fast(const std::string& text, const std::string& path, StringTable& strings) {
  JsonTape& tape = thread_tape();
  if (!tape.parse(text)) return std::nullopt;
  size_t windows = tape.only_member(0, "windows");
  if (!windows || tape.at(windows).type != JsonTape::Type::array) return std::nullopt;
  json j = tape.to_json(0, "windows");
  int version = checked_version(j);
  Segment s;
  s.path = path;
  read_header(j, s);
  BadWindows bad;
  for (size_t w = JsonTape::first_child(windows); w < tape.at(windows).next; w = tape.at(w).next)
    try_window(bad, [&] { read_tape_window(tape, w, version, strings, s); });
  bad.add_to(s.notes);
  return s;
}

Segment parse_json_segment(const std::string& text, const std::string& path, StringTable& strings) {
  std::optional<Segment> fast;
  try {
    fast = parse_json_segment_fast(text, path, strings);
  } catch (...) {
    thread_tape().release_if_large();
    throw;
  }
  thread_tape().release_if_large();
  if (fast) return std::move(*fast);
  json j = parse_json(text, "");
  int version = checked_version(j);
  Segment s;
  s.path = path;
  read_header(j, s);
  const json& windows = j.at("windows");
  if (!windows.is_array()) throw std::runtime_error("windows is not an array");
  BadWindows bad;
  for (const json& w : windows)
    try_window(bad, [&] { s.windows.push_back(read_window(w, version, strings, s.folded_ranges, s.notes)); });
  bad.add_to(s.notes);
  return s;
}

// Version 5 frames: each frame one window plus the header as of that window; the last whole
// frame's header is the file's.
// The frame header read from the tape (issue 29: an nlohmann DOM per file was ~15 us of each
// file's reading at 10,000 ranks). Only plain headers: every field of the type and range
// read_header accepts without a note, no key twice; anything else declines (false, `s` untouched)
// and the DOM code reads it, notes and errors as ever.
class HeaderTape {
 public:
  using Type = JsonTape::Type;
  using Value = JsonTape::Value;
  explicit HeaderTape(const JsonTape& t) : t_(t) {}

  // Members of object i by key; false when i is no object or a key is there twice.
  template <size_t N>
  bool members(size_t i, const std::array<std::string_view, N>& names, std::array<const Value*, N>& out) const {
    out.fill(nullptr);
    const Value& o = t_.at(i);
    if (o.type != Type::object) return false;
    for (size_t c = JsonTape::first_child(i); c < o.next; c = t_.at(c).next) {
      const std::string_view k = t_.key(t_.at(c));
      for (size_t n = 0; n < N; ++n)
        if (k == names[n]) {
          if (out[n]) return false;
          out[n] = &t_.at(c);
        }
    }
    return true;
  }
  size_t index_of(const Value* v) const { return static_cast<size_t>(v - &t_.at(0)); }
  static bool absent(const Value* v) { return !v || v->type == Type::null; }
  // int_or: absent or null is the fallback; integers in [lo, hi] (whole floats go to the DOM code).
  static bool integer(const Value* v, int64_t lo, int64_t hi, int64_t fallback, int64_t& out) {
    if (absent(v)) return out = fallback, true;
    int64_t x;
    if (v->type == Type::unsigned_integer) {
      if (v->u > static_cast<uint64_t>(INT64_MAX)) return false;
      x = static_cast<int64_t>(v->u);
    } else if (v->type == Type::integer) {
      x = v->i;
    } else {
      return false;
    }
    if (x < lo || x > hi) return false;
    out = x;
    return true;
  }
  bool string(const Value* v, std::string& out) const {  // get_or<std::string>(..., "")
    if (absent(v)) return out.clear(), true;
    if (v->type != Type::string) return false;
    out.assign(t_.str(*v));
    return true;
  }

 private:
  const JsonTape& t_;
};

bool read_header_fast(const JsonTape& t, Segment& s) {
  HeaderTape h(t);
  using Type = JsonTape::Type;
  static constexpr std::array<std::string_view, 23> kNames = {
      "schema", "schema_version", "run_id", "rank", "world_size", "local_rank", "segment", "host",
      "pid", "process_start_ns", "data_end_ns", "ppid", "image", "started_ticks", "windows_lost", "final",
      "signal", "config", "capture", "import", "clock", "dropped", "windows"};
  std::array<const JsonTape::Value*, 23> f;
  if (t.size() == 0 || !h.members(0, kNames, f) || f[22]) return false;
  if (!f[0] || f[0]->type != Type::string || t.str(*f[0]) != "laggard-rank") return false;
  int64_t version = 0;
  if (!h.integer(f[1], kFirstFrameSchema, kMaxSchema, 0, version) || HeaderTape::absent(f[1])) return false;
  Segment r;  // filled apart: a decline leaves `s` as it was
  int64_t v = 0;
  if (!f[2] || f[2]->type != Type::string) return false;
  r.run_id.assign(t.str(*f[2]));
  if (!f[3] || !h.integer(f[3], 0, values::kMaxWorldSize - 1, 0, v) || HeaderTape::absent(f[3])) return false;
  r.rank = static_cast<int>(v);
  if (!h.integer(f[4], 1, values::kMaxWorldSize, -1, v)) return false;
  r.world_size = static_cast<int>(v);
  if (!h.integer(f[5], 0, values::kMaxWorldSize - 1, -1, v)) return false;
  r.local_rank = static_cast<int>(v);
  if (!h.integer(f[6], 0, INT_MAX, 0, v)) return false;
  r.segment = static_cast<int>(v);
  if (!h.string(f[7], r.host)) return false;
  if (!h.integer(f[8], 0, INT64_MAX, 0, v)) return false;
  r.pid = static_cast<long>(v);
  if (!h.integer(f[9], 0, values::kMaxTimeNs, 0, r.process_start_ns)) return false;
  if (!h.integer(f[10], 0, values::kMaxTimeNs, 0, r.data_end_ns)) return false;
  if (!h.integer(f[11], 0, INT64_MAX, 0, v)) return false;
  r.ppid = static_cast<long>(v);
  if (!h.string(f[12], r.image)) return false;
  if (!h.integer(f[13], 0, INT64_MAX, 0, v)) return false;
  r.started_ticks = static_cast<uint64_t>(v);
  // windows_lost: j.value(key, 0) reads a null too (and notes it): only absent is 0 here.
  if (f[14] && (f[14]->type == Type::null || !h.integer(f[14], 0, static_cast<int64_t>(values::kMaxCount), 0, v)))
    return false;
  r.windows_lost = f[14] ? static_cast<uint64_t>(v) : 0;
  if (HeaderTape::absent(f[15])) r.final = false;
  else if (f[15]->type == Type::boolean) r.final = f[15]->boolean;
  else return false;
  if (!h.integer(f[16], 0, 128, 0, v)) return false;
  r.signal = static_cast<int>(v);
  if (f[17]) {  // config: only an object is read
    if (f[17]->type != Type::object) return false;
    static constexpr std::array<std::string_view, 2> kConfig = {"flush_s", "sections"};
    std::array<const JsonTape::Value*, 2> c;
    if (!h.members(h.index_of(f[17]), kConfig, c)) return false;
    if (!HeaderTape::absent(c[0])) {
      const auto* x = c[0];
      double d;
      if (x->type == Type::unsigned_integer) d = double(x->u);
      else if (x->type == Type::integer) d = double(x->i);
      else if (x->type == Type::floating) d = x->d;
      else return false;
      if (!std::isfinite(d) || d < 0 || d > 1e7) return false;
      r.flush_s = d;
    }
    if (!h.string(c[1], r.sections_filter)) return false;
  }
  if (f[18]) {  // capture
    if (f[18]->type != Type::object) return false;
    static constexpr std::array<std::string_view, 3> kCapture = {"nvtx", "nccl", "cupti"};
    std::array<const JsonTape::Value*, 3> c;
    if (!h.members(h.index_of(f[18]), kCapture, c) || !h.string(c[0], r.nvtx_status) ||
        !h.string(c[1], r.nccl_status) || !h.string(c[2], r.cupti_status))
      return false;
  }
  if (f[19]) {  // import
    if (f[19]->type != Type::object) return false;
    static constexpr std::array<std::string_view, 1> kImport = {"time_base_ns"};
    std::array<const JsonTape::Value*, 1> c;
    if (!h.members(h.index_of(f[19]), kImport, c) ||
        !h.integer(c[0], 0, values::kMaxTimeNs, 0, r.import_time_base_ns))
      return false;
  }
  if (f[20]) {  // clock
    if (f[20]->type != Type::object) return false;
    static constexpr std::array<std::string_view, 1> kClock = {"gpu_offset_ns"};
    std::array<const JsonTape::Value*, 1> c;
    if (!h.members(h.index_of(f[20]), kClock, c) ||
        !h.integer(c[0], -values::kMaxTimeNs, values::kMaxTimeNs, 0, r.gpu_clock_offset_ns))
      return false;
  }
  if (f[21]) {  // dropped: an object of counts (a repeated key goes to the DOM code)
    if (f[21]->type != Type::object) return false;
    const size_t o = h.index_of(f[21]);
    for (size_t c = JsonTape::first_child(o); c < t.at(o).next; c = t.at(c).next) {
      if (!h.integer(&t.at(c), 0, static_cast<int64_t>(values::kMaxCount), 0, v) || t.at(c).type == Type::null)
        return false;
      if (!r.dropped.emplace(std::string(t.key(t.at(c))), static_cast<uint64_t>(v)).second) return false;
    }
  }
  s.run_id = std::move(r.run_id);
  s.rank = r.rank;
  s.world_size = r.world_size;
  s.local_rank = r.local_rank;
  s.segment = r.segment;
  s.host = std::move(r.host);
  s.pid = r.pid;
  s.process_start_ns = r.process_start_ns;
  s.data_end_ns = r.data_end_ns;
  s.ppid = r.ppid;
  s.image = std::move(r.image);
  s.started_ticks = r.started_ticks;
  s.windows_lost = r.windows_lost;
  s.final = r.final;
  s.signal = r.signal;
  if (f[17]) {
    s.flush_s = r.flush_s;
    s.sections_filter = std::move(r.sections_filter);
  }
  if (f[18]) {
    s.nvtx_status = std::move(r.nvtx_status);
    s.nccl_status = std::move(r.nccl_status);
    s.cupti_status = std::move(r.cupti_status);
  }
  if (f[19]) s.import_time_base_ns = r.import_time_base_ns;
  if (f[20]) s.gpu_clock_offset_ns = r.gpu_clock_offset_ns;
  s.dropped = std::move(r.dropped);
  return true;
}

Segment parse_frame_segment(const std::string& text, const std::string& path, StringTable& strings) {
  Segment s;
  s.path = path;
  std::string header;
  BadWindows bad;
  DecodeSpansInto records_into(s.gpu_spans, most_gpu_records(text));  // one packed array per file, consolidate_gpu_spans' result
  FrameScan scan = scan_frames(text, [&](const FrameParts& f) {
    header.assign(f.header_json);
    const size_t windows_before = s.windows.size();
    const SpanChunk::Mark records_before = s.gpu_spans.mark();
    try_window(bad, [&] {
      JsonTape& tape = thread_tape();
      if (tape.parse(f.window_json)) return read_tape_window(tape, 0, kFirstFrameSchema, strings, s, f.gpu_records);
      json w = parse_json(f.window_json, " in a window");  // throws, saying where, unless the tape was too large
      s.windows.push_back(read_window(w, kFirstFrameSchema, strings, s.folded_ranges, s.notes, f.gpu_records));
    });
    if (s.windows.size() == windows_before) s.gpu_spans.truncate(records_before);  // refused: its records too
  });
  if (!scan.frames) throw std::runtime_error("no whole window: " + scan.torn_tail);
  JsonTape& tape = thread_tape();
  const bool fast = fast_reader.load(std::memory_order_relaxed);
  if (!fast || !tape.parse(header) || !read_header_fast(tape, s)) {
    json j = parse_json(header, " in the header");
    if (checked_version(j) < kFirstFrameSchema) throw std::runtime_error("frame file with a schema_version below 5");
    read_header(j, s);
  }
  bad.add_to(s.notes);
  s.torn_tail = scan.torn_tail;
  return s;
}

}  // namespace

void use_fast_reader(bool on) { fast_reader = on; }

void consolidate_gpu_spans(Segment& s) {
  size_t n = s.gpu_spans.size();
  for (const CaptureWindow& w : s.windows) n += w.gpu_spans.size();
  if (n == s.gpu_spans.size() || n > UINT32_MAX) return;  // positions are 32-bit: such a file keeps its windows' arrays
  s.gpu_spans.reserve(n);
  for (CaptureWindow& w : s.windows) {
    if (w.gpu_spans.empty()) continue;
    w.gpu_spans_first = static_cast<uint32_t>(s.gpu_spans.size());
    w.gpu_spans_count = static_cast<uint32_t>(w.gpu_spans.size());
    for (const GpuSpan& a : w.gpu_spans) s.gpu_spans.push_back(a);
    std::vector<GpuSpan>().swap(w.gpu_spans);
  }
}

Segment parse_segment_text(const std::string& text, const std::string& path, StringTable& strings) {
  if (text.empty()) throw std::runtime_error("empty file");
  if (is_frame_file(text)) return parse_frame_segment(text, path, strings);
  return parse_json_segment(text, path, strings);
}

namespace {

// Counters that are not records lost: samples left unstored (statistics stay exact), the
// app's own NVTX misuse (said apart, below: an nvtxRangeEnd of an evicted range is counted as
// evicted already), ranges the filter left out and ranges folded into "(other)" (said apart),
// and ranges still open when their thread or process ended (issue 25): a range has no length
// until it ends, so nothing was captured and lost (laggard's automatic PyTorch step is always
// open at exit; so is any program's outermost range when it exits from inside it).
const std::set<std::string> kNotLost = {"occurrences_sampled", "gpu_records_not_stored", "unbalanced_pop",
                                        "unmatched_end", "sections_filtered", "names_overflow",
                                        "unclosed_at_exit"};

uint64_t counter(const Counts& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() ? 0 : it->second;
}

void add_nvtx_problems(const RankData& r, std::vector<Problem>& problems) {
  if (r.folded_ranges)
    problems.push_back({"folded_names", r.rank, "",
                        fmt::format("rank {}: {} ranges had names past the capture's name table limit and were "
                                    "counted as \"(other)\", which is never scored",
                                    r.rank, r.folded_ranges)});
  uint64_t pops = counter(r.dropped, "unbalanced_pop"), ends = counter(r.dropped, "unmatched_end");
  if (pops || ends)
    problems.push_back({"nvtx_unbalanced", r.rank, "",
                        fmt::format("rank {}'s program popped {} ranges it had not pushed and ended {} ranges "
                                    "that were not open (its own NVTX calls; nothing was lost)",
                                    r.rank, pops, ends)});
  uint64_t filtered = counter(r.dropped, "sections_filtered");
  if (filtered && !occurrence_count(r))  // counted only when it matters (every window, at 100,000 ranks)
    problems.push_back({"sections_filter_matched_nothing", r.rank, "",
                        fmt::format("rank {}: LAGGARD_SECTIONS='{}' kept none of its {} NVTX ranges", r.rank,
                                    r.sections_filter, filtered)});
}

// A thread keeps its file buffer for the next file unless a file was larger than this.
constexpr size_t kKeepText = size_t{64} << 20;

std::string fmt_seconds(int64_t ns) { return fmt::format("{:.1f} s", double(ns) / 1e9); }

// One file parsed on its own (any thread): its segment and strings, or why not.
struct ParsedFile {
  std::optional<Segment> segment;
  StringTable strings;            // the file's own, until interned into the run's (InOrderStrings)
  std::vector<uint32_t> run_ids;  // its ids in the run's table (run_ids_of)
  std::string error;
};

ParsedFile parse_file(const std::string& f, uint64_t max_bytes) {
  ParsedFile p;
  thread_local std::string text;  // each thread's file buffer, reused (see read_text)
  try {  // whatever one file holds, it costs at most that file
    read_text(f, max_bytes, text);
    p.segment = parse_segment_text(text, f, p.strings);
  } catch (const std::exception& e) {
    p.error = e.what();
  } catch (...) {
    p.error = "unreadable";
  }
  if (text.capacity() > kKeepText) std::string().swap(text);
  return p;
}

// Reports progress in files and bytes as files finish, one call at a time.
class ProgressCounter {
 public:
  ProgressCounter(const ReadOptions& opts, const std::vector<std::string>& files) : opts_(opts), sizes_(files.size()) {
    if (!opts_.on_progress) return;
    std::error_code ec;
    for (size_t i = 0; i < files.size(); ++i) {
      uint64_t size = fs::file_size(files[i], ec);
      sizes_[i] = ec ? 0 : size;
      total_bytes_ += sizes_[i];
    }
  }
  void file_done(size_t i) {
    if (!opts_.on_progress) return;
    std::lock_guard lock(mutex_);
    done_bytes_ += sizes_[i];
    opts_.on_progress(++done_files_, sizes_.size(), done_bytes_, total_bytes_);
  }

 private:
  const ReadOptions& opts_;
  std::vector<uint64_t> sizes_;
  uint64_t total_bytes_ = 0, done_bytes_ = 0;
  size_t done_files_ = 0;
  std::mutex mutex_;
};

// The parse results, one per file, in one block constructed element by element by the threads
// that parse them. A std::vector's would be value-initialised up front: 77 MB at 100,000 files,
// whose pages one thread cleared before reading began (issue 29: reading used one core for its
// first 0.35 s, 0.11 s since). One block all the same, freed whole at the end: a result
// allocated by each parsing thread left holes in the reading threads' arenas (80-100 MB more
// peak memory).
class ParsedFiles {
 public:
  explicit ParsedFiles(size_t n)
      : n_(n), made_(n, 0), data_(static_cast<ParsedFile*>(::operator new(n * sizeof(ParsedFile)))) {}
  static_assert(alignof(ParsedFile) <= __STDCPP_DEFAULT_NEW_ALIGNMENT__);
  ParsedFiles(const ParsedFiles&) = delete;
  ParsedFiles& operator=(const ParsedFiles&) = delete;
  ~ParsedFiles() {
    for (size_t i = 0; i < n_; ++i)
      if (made_[i]) data_[i].~ParsedFile();
    ::operator delete(data_);
  }
  // Once per index, by one thread; [] reads only indices made.
  void make(size_t i, ParsedFile&& p) {
    new (data_ + i) ParsedFile(std::move(p));
    made_[i] = 1;
  }
  ParsedFile& operator[](size_t i) { return data_[i]; }
  size_t size() const { return n_; }

 private:
  size_t n_;
  std::vector<char> made_;
  ParsedFile* data_;
};

// Interns each file's strings into the run's table in file order (the ids one thread would give)
// as soon as the files before it are done, then frees the file's own table and renumbers its
// records while they are still in cache: the files' tables are not all held at once (issue 29:
// 80 MB of 10,000 ranks' peak of summaries, 10x that at 100,000).
class InOrderStrings {
 public:
  InOrderStrings(ParsedFiles& parsed, StringTable& run) : parsed_(parsed), run_(run), done_(parsed.size()) {}
  void file_done(size_t i) {
    size_t first, last;
    {
      std::lock_guard lock(mutex_);
      done_[i] = true;
      first = next_;
      for (; next_ < parsed_.size() && done_[next_]; ++next_) {
        ParsedFile& p = parsed_[next_];
        if (p.segment) p.run_ids = run_ids_of(run_, p.strings);
        p.strings = StringTable{};
      }
      last = next_;
    }
    for (size_t k = first; k < last; ++k) {  // done and interned: no other thread touches them
      ParsedFile& p = parsed_[k];
      if (p.segment) renumber_strings(p.run_ids, *p.segment);
      std::vector<uint32_t>().swap(p.run_ids);
    }
  }

 private:
  ParsedFiles& parsed_;
  StringTable& run_;
  std::vector<char> done_;
  size_t next_ = 0;
  std::mutex mutex_;
};

// Parses every file, in parallel, then takes them in file order: the same model as one thread.
std::vector<Segment> parse_files(const std::vector<std::string>& files, const ReadOptions& opts, RunModel& model) {
  ParsedFiles parsed(files.size());
  ProgressCounter progress(opts, files);
  InOrderStrings strings(parsed, model.strings);
  parallel_for(files.size(), reader_threads(opts.threads, files.size()), [&](size_t i) {
    DecodeGpuAsSpans binary_records_as_spans(opts.compact_gpu);
    parsed.make(i, parse_file(files[i], opts.max_file_bytes));
    if (opts.compact_gpu && parsed[i].segment) {
      compact_gpu_records(parsed[i].segment->windows);  // JSON records
      consolidate_gpu_spans(*parsed[i].segment);
      parsed[i].segment->gpu_spans.drop_label_lookups();
    }
    strings.file_done(i);
    progress.file_done(i);
  });
  std::vector<Segment> segments;
  segments.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    if (!parsed[i].segment) {
      model.problems.push_back({"unreadable_file", -1, files[i], parsed[i].error});
      continue;
    }
    segments.push_back(std::move(*parsed[i].segment));
    parsed[i] = ParsedFile{};  // free as we go
  }
  return segments;
}

}  // namespace

RunModel read_run(const std::string& dir_arg, const ReadOptions& opts) {
  fs::path dir(dir_arg);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::runtime_error("'" + dir_arg + "' is not a directory");

  RunModel model;
  // DIR is a run directory itself, or a LAGGARD_OUT holding one directory per run.
  RunDirFiles listed = run_dir_files(dir.string());
  if (listed.ranks.empty()) {
    std::vector<std::pair<fs::path, RunDirFiles>> runs;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->is_directory(ec))
        if (RunDirFiles f = run_dir_files(it->path().string()); !f.ranks.empty()) runs.emplace_back(it->path(), std::move(f));
    if (runs.empty()) throw std::runtime_error("no laggard rank files (rank*.json, rank*.lgr) in '" + dir_arg + "' or its run directories");
    std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return newest(a.second.ranks) > newest(b.second.ranks); });
    size_t pick = 0;
    if (!opts.run_id.empty()) {
      auto it = std::find_if(runs.begin(), runs.end(),
                             [&](const auto& r) { return r.first.filename() == opts.run_id; });
      if (it == runs.end()) throw std::runtime_error("no run '" + opts.run_id + "' in '" + dir_arg + "'");
      pick = static_cast<size_t>(it - runs.begin());
    }
    for (size_t i = 0; i < runs.size(); ++i)
      if (i != pick) model.other_runs.push_back(runs[i].first.filename().string());
    dir = runs[pick].first;
    listed = std::move(runs[pick].second);
  }
  model.dir = dir.string();
  model.hang_reports = std::move(listed.hang_reports);

  std::vector<Segment> segments = parse_files(listed.ranks, opts, model);
  if (segments.empty()) {
    if (model.problems.empty()) throw std::runtime_error("no readable rank files in '" + model.dir + "'");
    return model;  // every file is listed as a problem; the report says so
  }
  assemble_run(model, segments, opts);
  return model;
}

namespace {

void list_segment_notes(const std::vector<Segment>& segments, std::vector<Problem>& problems) {
  for (const Segment& s : segments) {
    for (const std::string& note : s.notes) problems.push_back({"invalid_value", s.rank, s.path, note});
    if (!s.torn_tail.empty()) problems.push_back({"torn_tail", s.rank, s.path, s.torn_tail});
  }
}

// Which process image wrote a segment: a rank's pid is not enough (an exec keeps it, another
// PID namespace reuses it), so the image (issue 24) is part of the key; older files have none.
struct ImageKey {
  int rank;
  long pid;
  std::string image;
  bool operator<(const ImageKey& o) const { return std::tie(rank, pid, image) < std::tie(o.rank, o.pid, o.image); }
};

// One run per directory: the run most files belong to (or the one asked for); files of another
// run are set aside, never mixed in. Returns the run's segments by process image.
std::map<ImageKey, std::vector<Segment*>> choose_run(RunModel& model, std::vector<Segment>& segments,
                                                     const ReadOptions& opts) {
  std::map<std::string, int> run_votes;
  for (const auto& s : segments) ++run_votes[s.run_id];
  model.run_id = opts.run_id.empty() || !run_votes.count(opts.run_id)
                     ? std::max_element(run_votes.begin(), run_votes.end(),
                                        [](auto& a, auto& b) { return a.second < b.second; })->first
                     : opts.run_id;
  std::map<ImageKey, std::vector<Segment*>> by_process;
  for (auto& s : segments) {
    if (s.run_id != model.run_id) {
      model.problems.push_back({"foreign_run", s.rank, s.path,
                                "belongs to run '" + s.run_id + "', not '" + model.run_id + "'; ignored"});
      continue;
    }
    by_process[{s.rank, s.pid, s.image}].push_back(&s);
  }
  return by_process;
}

// The records of a rank's files, when they go into one array (span_chunks.h): they fit its 32-bit
// positions. 0: one array per file.
size_t spans_in_one_array(const std::vector<Segment*>& segs) {
  uint64_t records = 0, labels = 0;
  for (const Segment* s : segs) {
    records += s->gpu_spans.size();
    labels += s->gpu_spans.labels.size();
  }
  return spans_fit_one_array(records, labels) ? size_t(records) : 0;
}

// Where a file's records went: the rank's array `chunk`, from `first`.
struct SpansAt {
  uint32_t chunk, first;
};
SpansAt add_spans(RankData& r, SpanChunk&& spans, size_t one_array_records) {
  const auto next = static_cast<uint32_t>(r.span_chunks.size());
  if (spans.empty()) return {next, 0};  // its windows have no records in an array
  if (!one_array_records || r.span_chunks.empty()) {
    r.span_chunks.push_back(std::move(spans));
    if (one_array_records) r.span_chunks.back().packed.reserve(one_array_records);  // the rank's sum: each file copied once
    return {next, 0};
  }
  return {0, r.span_chunks.front().append(std::move(spans))};
}

// One process image's segment files as one RankData: the newest file's header, every window once;
// their records in one array where they fit (span_chunks.h).
RankData join_segments(const ImageKey& key, std::vector<Segment*>& segs) {
  std::sort(segs.begin(), segs.end(), [](Segment* a, Segment* b) { return a->segment < b->segment; });
  RankData r;
  Segment& last = *segs.back();  // its header's counts are moved out: the segments are dropped after joining
  r.rank = key.rank;
  r.pid = key.pid;
  r.image = key.image;
  r.started_ticks = last.started_ticks;
  r.ppid = last.ppid;
  r.run_id = last.run_id;
  r.local_rank = last.local_rank;
  r.world_size = last.world_size;
  r.host = last.host;
  r.process_start_ns = last.process_start_ns;
  r.final = last.final;
  r.signal = last.signal;
  r.flush_s = last.flush_s;
  r.nvtx_status = last.nvtx_status;
  r.nccl_status = last.nccl_status;
  r.cupti_status = last.cupti_status;
  r.gpu_clock_offset_ns = last.gpu_clock_offset_ns;
  r.import_time_base_ns = last.import_time_base_ns;
  r.dropped = std::move(last.dropped);  // cumulative in every file; the last one is the newest
  r.sections_filter = last.sections_filter;
  std::set<uint64_t> seen;
  const size_t one_array_records = spans_in_one_array(segs);
  for (Segment* s : segs) {
    r.files.push_back(s->path);
    r.folded_ranges += s->folded_ranges;
    r.data_end_ns = std::max(r.data_end_ns, s->data_end_ns);
    r.windows_lost = std::max(r.windows_lost, s->windows_lost);  // cumulative, like dropped
    const SpansAt at = add_spans(r, std::move(s->gpu_spans), one_array_records);
    for (auto& w : s->windows)
      if (seen.insert(w.index).second) {
        w.gpu_spans_chunk = at.chunk;  // a window left out here leaves its spans unreferenced
        w.gpu_spans_first += at.first;
        r.windows.push_back(std::move(w));
      }
  }
  std::sort(r.windows.begin(), r.windows.end(), [](auto& a, auto& b) { return a.index < b.index; });
  return r;
}

// Each rank's process images joined into model.ranks, in rank order, on every core: one image is
// the rank (the usual case, moved straight into place); of several, choose_rank_process picks one,
// its problems appended in rank order as one thread would have. The images are in key order, so a
// rank's images are next to each other.
void join_ranks(RunModel& model, std::map<ImageKey, std::vector<Segment*>>& images, const ReadOptions& opts) {
  std::vector<std::pair<const ImageKey*, std::vector<Segment*>*>> each;
  each.reserve(images.size());
  std::vector<size_t> rank_starts;  // into `each`, one per rank, then each.size()
  for (auto& [key, segs] : images) {
    if (each.empty() || each.back().first->rank != key.rank) rank_starts.push_back(each.size());
    each.emplace_back(&key, &segs);
  }
  rank_starts.push_back(each.size());
  const size_t first = model.ranks.size(), n = rank_starts.size() - 1;
  model.ranks.resize(first + n);
  std::vector<std::vector<Problem>> duplicates(n);
  parallel_for(n, reader_threads(opts.threads, n), [&](size_t g) {
    const size_t lo = rank_starts[g], hi = rank_starts[g + 1];
    if (hi - lo == 1) {
      model.ranks[first + g] = join_segments(*each[lo].first, *each[lo].second);
      return;
    }
    std::vector<RankData> procs;
    for (size_t i = lo; i < hi; ++i) procs.push_back(join_segments(*each[i].first, *each[i].second));
    choose_rank_process(procs, duplicates[g]);
    model.ranks[first + g] = std::move(procs.front());
  });
  for (std::vector<Problem>& v : duplicates)
    for (Problem& p : v) model.problems.push_back(std::move(p));
}

// World size: what the ranks say (they should agree), or what the user says.
void settle_world_size(RunModel& model, const ReadOptions& opts) {
  std::set<int> sizes;
  for (const auto& r : model.ranks)
    if (r.world_size > 0) sizes.insert(r.world_size);
  if (sizes.size() > 1)
    model.problems.push_back({"inconsistent_world_size", -1, "",
                              fmt::format("ranks disagree on the world size ({} to {}); using the largest",
                                          *sizes.begin(), *sizes.rbegin())});
  model.world_size = opts.expect_world_size > 0 ? opts.expect_world_size
                     : sizes.empty()            ? model.ranks.back().rank + 1
                                                : *sizes.rbegin();
  list_missing_ranks(model);
  // A communicator larger than the stated world is impossible, but the world size may describe
  // only part of the job: small communicators always pass.
  const bool stated = !sizes.empty() || opts.expect_world_size > 0;
  check_comm_sizes(model, stated ? std::max(model.world_size, 1024) : values::kMaxWorldSize, opts.threads);
}

void list_incomplete_ranks(RunModel& model) {
  int64_t run_start = INT64_MAX;
  for (const auto& r : model.ranks) run_start = std::min(run_start, r.process_start_ns);
  for (const auto& r : model.ranks) {
    if (r.final) continue;
    std::string when = fmt_seconds(r.data_end_ns - run_start);
    if (r.signal)
      model.problems.push_back({"incomplete_rank", r.rank, "",
                                fmt::format("rank {} (pid {}, {}) received {} and flushed; data ends at {}",
                                            r.rank, r.pid, r.host, signal_name(r.signal), when)});
    else
      model.problems.push_back({"incomplete_rank", r.rank, "",
                                fmt::format("rank {} (pid {}, {}) has no final flush (killed, crashed or still "
                                            "running); data ends at {}, its last flush",
                                            r.rank, r.pid, r.host, when)});
  }
}

void list_lost_records(RunModel& model) {
  for (const auto& r : model.ranks) {
    add_nvtx_problems(r, model.problems);
    uint64_t lost = 0;
    for (const auto& [k, v] : r.dropped)
      if (!kNotLost.count(k)) lost += v;
    if (lost)
      model.problems.push_back({"dropped_records", r.rank, "",
                                fmt::format("rank {} lost or could not match {} records (see dropped counts)",
                                            r.rank, lost)});
  }
}

}  // namespace

void assemble_run(RunModel& model, std::vector<Segment>& segments, const ReadOptions& opts) {
  list_segment_notes(segments, model.problems);
  std::map<ImageKey, std::vector<Segment*>> images = choose_run(model, segments, opts);
  join_ranks(model, images, opts);
  // Per rank and independent (each touches only its own rank): on every core, each rank's
  // problems kept apart and appended in rank order afterwards, as one thread would have added
  // them. finish_nccl_rank's checks cost ~15 us a rank: 0.15 s of one core at 10,000 ranks.
  std::vector<std::vector<Problem>> rank_problems(model.ranks.size()), continuity(model.ranks.size());
  parallel_for(model.ranks.size(), reader_threads(opts.threads, model.ranks.size()), [&](size_t i) {
    RankData& r = model.ranks[i];
    drop_window_time_outliers(r, rank_problems[i]);
    finish_nccl_rank(r, rank_problems[i]);
    finish_gpu_rank(r, rank_problems[i]);
    check_window_continuity(r, continuity[i]);
  });
  for (auto* part : {&rank_problems, &continuity})
    for (std::vector<Problem>& v : *part)
      for (Problem& p : v) model.problems.push_back(std::move(p));
  align_rank_clocks(model);
  for (RankData& r : model.ranks) join_paused_periods(r);
  settle_world_size(model, opts);
  list_incomplete_ranks(model);
  list_lost_records(model);
}

}  // namespace laggard::report
