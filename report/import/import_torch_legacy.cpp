#include "import_torch_legacy.h"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "import_nsys.h"  // take_rank_from_option_or_name
#include "reader_values.h"

namespace laggard::report {
namespace torch_legacy_detail {  // named: unity batches share anonymous namespaces

using nlohmann::json;

constexpr uint64_t kMaxFileBytes = uint64_t{4} << 30;  // a CPU trace this large is not a legacy trace

// The whole file, inflated when it is gzip (gzread passes plain text through unchanged).
std::string read_all(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open file");
  gzbuffer(f, 1 << 18);
  std::string text;
  char buf[1 << 16];
  int n = 0;
  while ((n = gzread(f, buf, sizeof buf)) > 0) {
    text.append(buf, size_t(n));
    if (text.size() > kMaxFileBytes) {
      gzclose(f);
      throw std::runtime_error("larger than 4 GiB once inflated: not a legacy PyTorch trace");
    }
  }
  int code = Z_OK;
  const char* msg = gzerror(f, &code);
  std::string error = n < 0 || (code != Z_OK && code != Z_STREAM_END) ? (msg && *msg ? msg : "read error") : "";
  gzclose(f);
  if (!error.empty()) throw std::runtime_error("corrupt or truncated compressed data (" + error + ")");
  return text;
}

struct Event {
  std::string name, ph;
  double ts_us = NAN, dur_us = NAN;
  int64_t tid = 0;
};

// Streams the array's events (objects at depth 2); nested values (args) are skipped.
class LegacySax {
 public:
  explicit LegacySax(std::vector<Event>& out) : out_(out) {}
  std::string error;
  bool top_array = false;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t v) { return number(double(v), v); }
  bool number_unsigned(json::number_unsigned_t v) { return number(double(v), v <= uint64_t(INT64_MAX) ? int64_t(v) : 0); }
  bool number_float(json::number_float_t v, const std::string&) { return number(v, 0); }
  bool binary(json::binary_t&) { return true; }
  bool string(std::string& v) {
    if (depth_ == 2 && key_ == "name") ev_.name = v;
    else if (depth_ == 2 && key_ == "ph") ev_.ph = v;
    return true;
  }
  bool start_object(std::size_t) {
    ++depth_;
    if (depth_ == 1) return fail("a JSON object, not the legacy array of events");
    if (depth_ == 2) ev_ = Event{};
    return true;
  }
  bool end_object() {
    if (depth_ == 2) out_.push_back(std::move(ev_));
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    if (++depth_ == 1) top_array = true;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(std::string& k) {
    if (depth_ == 2) key_ = k;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (error.empty()) error = fmt::format("invalid JSON at byte {}: {}", position, e.what());
    return false;
  }

 private:
  std::vector<Event>& out_;
  int depth_ = 0;
  std::string key_;
  Event ev_;

  bool fail(const std::string& why) {
    error = why;
    return false;
  }
  bool number(double v, int64_t i) {
    if (depth_ != 2) return true;
    if (key_ == "ts") ev_.ts_us = v;
    else if (key_ == "dur") ev_.dur_us = v;
    else if (key_ == "tid") ev_.tid = i;
    return true;
  }
};

// The number after `"key": ` at or after `from`, before `limit`; NAN when absent.
double number_after(const std::string& text, const char* key, size_t from, size_t limit, size_t* end = nullptr) {
  const std::string k = fmt::format("\"{}\": ", key);
  size_t p = text.find(k, from);
  if (p == std::string::npos || p >= limit) return NAN;
  p += k.size();
  const char* begin = text.c_str() + p;
  char* stop = nullptr;
  double v = std::strtod(begin, &stop);
  if (stop == begin) return NAN;
  if (end) *end = p + size_t(stop - begin);
  return v;
}

// The exporter's fixed layout, for files that are not JSON because a name held a quote: each
// event starts with {"name": " and its name ends at the next ", "ph": " (names are not escaped).
std::vector<Event> scan_fixed_layout(const std::string& text, uint64_t* odd_names) {
  static const std::string open = "{\"name\": \"", close = "\", \"ph\": \"";
  std::vector<Event> out;
  for (size_t p = text.find(open); p != std::string::npos;) {
    const size_t name_begin = p + open.size();
    const size_t name_end = text.find(close, name_begin);
    if (name_end == std::string::npos) break;
    size_t next = text.find(open, name_end);
    const size_t limit = next == std::string::npos ? text.size() : next;
    Event e;
    e.name = text.substr(name_begin, name_end - name_begin);
    *odd_names += e.name.find_first_of("\"\\") != std::string::npos;
    const size_t ph_begin = name_end + close.size();
    const size_t ph_end = text.find('"', ph_begin);
    if (ph_end != std::string::npos && ph_end < limit) e.ph = text.substr(ph_begin, ph_end - ph_begin);
    e.ts_us = number_after(text, "ts", name_end, limit);
    e.dur_us = number_after(text, "dur", name_end, limit);
    const double tid = number_after(text, "tid", name_end, limit);
    e.tid = std::isfinite(tid) && tid >= 0 && tid < 4294967296.0 ? int64_t(tid) : 0;
    out.push_back(std::move(e));
    p = next;
  }
  return out;
}

// "AddmmBackward0": [A-Za-z0-9_]+ "Backward" [0-9]*. By hand: std::regex recurses per character,
// and a hostile trace's name can be megabytes long.
bool is_autograd_node(const std::string& name) {
  const size_t at = name.rfind("Backward");
  if (at == std::string::npos || at == 0) return false;
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  return std::all_of(name.begin(), name.begin() + long(at), word) &&
         std::all_of(name.begin() + long(at) + 8, name.end(), digit);
}

// "gloo:all_reduce" -> "all_reduce@gloo" (a host-timed collective, host_collectives.h); else "".
std::string backend_collective(const std::string& name) {
  for (const char* backend : {"gloo", "mpi"}) {
    const std::string prefix = std::string(backend) + ":";
    if (name.rfind(prefix, 0) == 0 && name.size() > prefix.size() && name.find('@') == std::string::npos)
      return name.substr(prefix.size()) + "@" + backend;
  }
  return "";
}

// µs (relative to the trace's start) -> ns; false beyond what a rank file holds.
bool to_ns(double us, int64_t* ns) {
  if (!std::isfinite(us) || std::fabs(us) * 1e3 > double(values::kMaxDurNs)) return false;
  *ns = std::llround(us * 1e3);
  return true;
}

}  // namespace torch_legacy_detail

namespace tl = torch_legacy_detail;

bool is_json_array_file(const std::string& file) {
  gzFile f = gzopen(file.c_str(), "rb");
  if (!f) return false;
  char buf[256];
  int n = gzread(f, buf, sizeof buf);
  gzclose(f);
  for (int i = 0; i < n; ++i) {
    if (std::isspace(static_cast<unsigned char>(buf[i]))) continue;
    return buf[i] == '[';
  }
  return false;
}

ImportedRank import_torch_legacy(const std::string& file, const KinetoOptions& options) {
  ImportedRank r;
  r.source = file;
  r.format = "torch-legacy";
  take_rank_from_option_or_name(r, options.rank, file);
  if (r.rank < 0 || r.rank >= values::kMaxWorldSize)
    throw std::runtime_error(
        "a legacy PyTorch trace (a JSON array of events) holds no rank: name the file with it "
        "(trace_rank3.json) or pass --rank N");

  const std::string text = tl::read_all(file);
  std::vector<tl::Event> events;
  tl::LegacySax sax(events);
  const bool ok = nlohmann::json::sax_parse(text, &sax, nlohmann::json::input_format_t::json, true);
  if (!sax.top_array) throw std::runtime_error("not a legacy PyTorch trace: " + (sax.error.empty() ? "no JSON array" : sax.error));
  if (!ok) {
    uint64_t odd = 0;
    events = tl::scan_fixed_layout(text, &odd);
    // Only the exporter's own flaw is worked around; a cut or damaged file is refused.
    if (events.empty() || !odd) throw std::runtime_error("truncated or invalid JSON: " + sax.error);
    r.notes.push_back(fmt::format("not valid JSON ({}): read by the layout PyTorch's exporter writes, which leaves "
                                  "names unescaped ({} names hold a quote or backslash)",
                                  sax.error, odd));
  }

  if (std::none_of(events.begin(), events.end(), [](const tl::Event& e) { return !e.name.empty() && !e.ph.empty(); }))
    throw std::runtime_error(fmt::format("not a Kineto trace, nor a legacy PyTorch trace: a JSON array of {} values "
                                         "without named events",
                                         events.size()));
  std::set<std::string> aten;  // "aten::detach" makes a bare "detach" an operator too
  for (const tl::Event& e : events)
    if (e.name.rfind("aten::", 0) == 0) aten.insert(e.name.substr(6));
  uint64_t bad_times = 0, collectives = 0;
  for (const tl::Event& e : events) {
    if (e.ph != "X") continue;  // "s": flow arrows toward CUDA kernels
    std::string name = e.name;
    if (std::string c = tl::backend_collective(name); !c.empty()) {
      name = c;
      ++collectives;
    } else if (name.find("::") != std::string::npos || tl::is_autograd_node(name) || aten.count(name)) {
      continue;  // an operator, not a range the program or PyTorch marked
    }
    int64_t ts = 0, dur = 0;
    if (!tl::to_ns(e.ts_us, &ts) || !tl::to_ns(e.dur_us, &dur) || dur < 0) {
      ++bad_times;
      continue;
    }
    r.ranges.push_back({r.strings.intern(name.empty() ? "(unnamed)" : name), ts, ts + dur,
                        uint32_t(e.tid >= 0 && e.tid <= UINT32_MAX ? e.tid : 0)});
  }
  r.time_base_ns = 0;
  r.notes.push_back("the legacy format has no clock: times are relative to each trace's start, so ranks line up "
                    "at the moment their profiler started");
  if (collectives)
    r.notes.push_back(fmt::format("{} gloo/MPI collectives kept as host-timed collectives \"<op>@gloo\" (every call "
                                  "of a backend counts as one process group: the format does not say which)",
                                  collectives));
  if (bad_times) r.notes.push_back(fmt::format("{} events left out: a time or duration that is not a time", bad_times));
  attribute_sections(r);
  return r;
}

}  // namespace laggard::report
