#include "import_kineto.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "import_torch_legacy.h"
#include "json_fast_scan.h"
#include "reader_values.h"

namespace laggard::report {
namespace {

using nlohmann::json;

// zlib's gzFile, read in large chunks: gzread inflates .gz input and passes plain files through
// unchanged, so one path reads both.
class GzInput {
 public:
  explicit GzInput(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw std::runtime_error("cannot open file");
    gzbuffer(file_, 1 << 18);
  }
  ~GzInput() {
    if (file_) gzclose(file_);
  }
  GzInput(const GzInput&) = delete;
  GzInput& operator=(const GzInput&) = delete;

  // Up to `n` bytes into `out`; 0 at the end of the data or when reading failed (error() says).
  size_t read(char* out, size_t n) {
    if (!error_.empty()) return 0;
    const int got = gzread(file_, out, static_cast<unsigned>(std::min<size_t>(n, 1u << 30)));
    if (got <= 0) {
      int code = Z_OK;
      const char* msg = gzerror(file_, &code);
      if (got < 0 || (code != Z_OK && code != Z_STREAM_END)) error_ = msg && *msg ? msg : "read error";
      return 0;
    }
    consumed_ += uint64_t(got);
    return size_t(got);
  }
  // zlib's complaint, if reading stopped for any reason but the end of the data.
  const std::string& error() const { return error_; }
  uint64_t consumed() const { return consumed_; }

 private:
  gzFile file_;
  std::string error_;
  uint64_t consumed_ = 0;
};

// The bounds of an event's times, so that adding baseTimeNanoseconds (at most kMaxTimeNs) and the
// duration (at most kMaxDurNs) cannot overflow (seen reviewing the importer for fuzz_kineto).
constexpr int64_t kMaxTsUs = values::kMaxTimeNs / 1000;

// A JSON number as an integer, or `fallback` when it is not finite or does not fit: converting
// such a double to an integer is undefined behaviour ("grid": [1e300]).
int64_t to_i64(double v, int64_t fallback = -1) { return v >= -9.2e18 && v <= 9.2e18 ? int64_t(v) : fallback; }
uint32_t to_u32(double v) { return v >= 0 && v <= 4294967295.0 ? uint32_t(v) : 0; }

// Kineto times are µs, as integers (older: epoch µs) or with three decimals (newer: relative to
// baseTimeNanoseconds). The text is converted exactly: a double cannot hold 4458676983543.183.
// False for a time beyond ±kMaxTsUs (not a time any trace holds).
bool us_text_to_ns(std::string_view text, double value, int64_t* ns_out) {
  if (!(value >= -double(kMaxTsUs) && value <= double(kMaxTsUs))) return false;
  if (text.find_first_of("eE") != std::string_view::npos || text.empty()) {
    *ns_out = int64_t(std::llround(value * 1e3));
    return true;
  }
  size_t i = 0;
  bool negative = text[0] == '-';
  if (negative) ++i;
  int64_t whole = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    whole = whole * 10 + (text[i] - '0');
    if (whole > kMaxTsUs) return false;
  }
  int64_t frac = 0;
  int digits = 0;
  bool round_up = false;
  if (i < text.size() && text[i] == '.')
    for (++i; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i, ++digits) {
      if (digits < 3) frac = frac * 10 + (text[i] - '0');
      else if (digits == 3) round_up = text[i] >= '5';
    }
  for (int d = std::min(digits, 3); d < 3; ++d) frac *= 10;
  int64_t ns = whole * 1000 + frac + (round_up ? 1 : 0);
  *ns_out = negative ? -ns : ns;
  return true;
}

enum class Cat { other, kernel, memcpy, memset, launch, annotation, gpu_annotation, sync };

Cat category(const std::string& c) {
  // Old Kineto spells them Kernel / Memcpy / Memset / Runtime (HTA's idle breakdown accepts both).
  if (c == "kernel" || c == "Kernel") return Cat::kernel;
  if (c == "gpu_memcpy" || c == "Memcpy") return Cat::memcpy;
  if (c == "gpu_memset" || c == "Memset") return Cat::memset;
  if (c == "cuda_runtime" || c == "Runtime" || c == "cuda_driver" || c == "Driver") return Cat::launch;
  if (c == "user_annotation") return Cat::annotation;
  if (c == "gpu_user_annotation") return Cat::gpu_annotation;
  if (c == "cuda_sync") return Cat::sync;
  return Cat::other;
}

// One trace event, the fields laggard uses.
struct Event {
  std::string ph, cat, name;
  bool has_ts = false, has_dur = false;
  bool bad_time = false;  // ts or dur out of bounds: the event is left out
  int64_t ts_ns = 0, dur_ns = 0;
  int64_t pid = -1, tid = -1;
  int64_t correlation = -1, stream = -1, device = -1, bytes = 0;
  int64_t in_nelems = -1, group_size = 0;
  uint32_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0};
  std::string collective, dtype, pg_name, pg_desc;

  // As a new Event, but keeping the strings' memory: one event after another, millions of times,
  // each kernel name would otherwise be a new allocation.
  void reset() {
    Event fresh;
    for (auto [mine, theirs] : {std::pair{&ph, &fresh.ph}, {&cat, &fresh.cat}, {&name, &fresh.name},
                                {&collective, &fresh.collective}, {&dtype, &fresh.dtype},
                                {&pg_name, &fresh.pg_name}, {&pg_desc, &fresh.pg_desc}}) {
      mine->clear();
      mine->swap(*theirs);  // the emptied buffer goes to fresh, and comes back below
    }
    *this = std::move(fresh);
  }
};

uint8_t copy_kind_of(const std::string& name) {
  // CUPTI's CUpti_ActivityMemcpyKind, from Kineto's "Memcpy HtoD (Pinned -> Device)".
  if (name.find("HtoD") != std::string::npos) return 1;
  if (name.find("DtoH") != std::string::npos) return 2;
  if (name.find("HtoA") != std::string::npos) return 3;
  if (name.find("AtoH") != std::string::npos) return 4;
  if (name.find("AtoA") != std::string::npos) return 5;
  if (name.find("AtoD") != std::string::npos) return 6;
  if (name.find("DtoA") != std::string::npos) return 7;
  if (name.find("DtoD") != std::string::npos) return 8;
  if (name.find("HtoH") != std::string::npos) return 9;
  if (name.find("PtoP") != std::string::npos) return 10;
  return 0;
}

// laggard's memcpy names, as capture writes them ("[memcpy HtoD]", "[memset]").
std::string gpu_name(Cat c, const std::string& name) {
  if (c == Cat::memset) return "[memset]";
  if (c != Cat::memcpy) return name;
  static const char* kinds[] = {"", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
  uint8_t k = copy_kind_of(name);
  return k ? fmt::format("[memcpy {}]", kinds[k]) : "[memcpy]";
}

// HTA's CommunicateKernelGroupingPattern, for CUDA: (^nccl.*)|(.*ncclKernel.*). laggard's capture
// flags ncclDev* / ncclKernel*; both agree on every NCCL kernel name.
bool is_nccl_kernel(const std::string& name) {
  return name.rfind("nccl", 0) == 0 || name.find("ncclKernel") != std::string::npos ||
         name.find("ncclDevKernel") != std::string::npos;
}

int dtype_bytes(const std::string& d) {
  std::string l;
  for (char c : d) l += char(std::tolower(static_cast<unsigned char>(c)));
  if (l == "float" || l == "int" || l == "float32" || l == "int32" || l == "uint32") return 4;
  if (l == "half" || l == "bfloat16" || l == "float16" || l == "short") return 2;
  if (l == "double" || l == "long" || l == "int64" || l == "float64" || l == "uint64") return 8;
  if (l == "byte" || l == "char" || l == "bool" || l == "int8" || l == "uint8") return 1;
  return 0;
}

// "allreduce" / "all_gather" / kernel "ncclDevKernel_AllReduce_Sum_f32_RING_LL" -> "AllReduce".
std::string func_name(const std::string& collective, const std::string& kernel, std::string* algo,
                      std::string* proto) {
  std::string k = kernel;
  for (const char* prefix : {"ncclDevKernel_", "ncclKernel_"})
    if (auto p = k.find(prefix); p != std::string::npos) {
      k = k.substr(p + std::strlen(prefix));
      break;
    }
  k = k.substr(0, k.find('('));
  std::vector<std::string> parts;
  for (size_t s = 0, e; s <= k.size(); s = e + 1) {
    e = k.find('_', s);
    if (e == std::string::npos) e = k.size();
    parts.push_back(k.substr(s, e - s));
  }
  for (const std::string& p : parts) {
    if (p == "RING" || p == "TREE" || p == "COLLNET" || p == "NVLS" || p == "PAT") *algo = p;
    if (p == "LL" || p == "LL128" || p == "SIMPLE") *proto = p;
  }
  std::string c;
  for (char ch : collective)
    if (ch != '_') c += char(std::tolower(static_cast<unsigned char>(ch)));
  static const std::map<std::string, std::string> known = {
      {"allreduce", "AllReduce"},       {"allgather", "AllGather"}, {"reducescatter", "ReduceScatter"},
      {"broadcast", "Broadcast"},       {"reduce", "Reduce"},       {"send", "Send"},
      {"recv", "Recv"},                 {"alltoall", "AllToAll"},   {"alltoallbase", "AllToAll"},
      {"allgatherbase", "AllGather"},   {"reducescatterbase", "ReduceScatter"},
      {"gather", "Gather"},             {"scatter", "Scatter"},     {"sendrecv", "SendRecv"},
      {"allgatherintocoalesced", "AllGather"}, {"reducescattertensorcoalesced", "ReduceScatter"}};
  if (auto it = known.find(c); it != known.end()) return it->second;
  if (!parts.empty() && !parts[0].empty() && parts[0] != "nccl") return parts[0];
  return collective.empty() ? "Unknown" : collective;
}

// The keys of an event (depth 3) and of its args (depth 4) that laggard reads, named once per key
// rather than compared as strings at every value (most of the import's time, issue 29).
enum class Field : uint8_t {
  other, ph, cat, name, ts, dur, pid, tid, args,                                   // event
  correlation, stream, device, bytes, in_nelems, group_size, grid, block,          // args: numbers
  collective, dtype, pg_name, pg_desc                                              // args: strings
};

Field field_of(std::string_view k, int depth) {
  static constexpr std::pair<std::string_view, Field> kEvent[] = {
      {"ph", Field::ph},   {"cat", Field::cat}, {"name", Field::name}, {"ts", Field::ts},
      {"dur", Field::dur}, {"pid", Field::pid}, {"tid", Field::tid},   {"args", Field::args}};
  static constexpr std::pair<std::string_view, Field> kArgs[] = {
      {"correlation", Field::correlation},   {"stream", Field::stream},
      {"device", Field::device},             {"bytes", Field::bytes},
      {"In msg nelems", Field::in_nelems},   {"Group size", Field::group_size},
      {"grid", Field::grid},                 {"block", Field::block},
      {"Collective name", Field::collective}, {"dtype", Field::dtype},
      {"Process Group Name", Field::pg_name}, {"Process Group Description", Field::pg_desc}};
  if (depth == 3) {
    for (const auto& [key, f] : kEvent)
      if (k == key) return f;
  } else {
    for (const auto& [key, f] : kArgs)
      if (k == key) return f;
  }
  return Field::other;
}

// The launch calls by correlation id: appended as they are read, sorted once at the end (32 bytes
// each; a hash map's node per call was a third of the memory a 1 GB trace took, issue 29). A
// correlation id given twice finds the call read last, as the map's assignment did.
class LaunchIndex {
 public:
  void add(int64_t correlation, const ImportedLaunch& call) { calls_.push_back({correlation, call}); }
  void reserve(size_t n) { calls_.reserve(n); }
  size_t size() const { return calls_.size(); }
  void seal() {
    std::stable_sort(calls_.begin(), calls_.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  // After seal(): the call of `correlation`, or nullptr.
  const ImportedLaunch* find(int64_t correlation) const {
    auto it = std::upper_bound(calls_.begin(), calls_.end(), correlation,
                               [](int64_t c, const auto& x) { return c < x.first; });
    return it != calls_.begin() && std::prev(it)->first == correlation ? &std::prev(it)->second : nullptr;
  }

 private:
  std::vector<std::pair<int64_t, ImportedLaunch>> calls_;
};

class KinetoSax {
 public:
  explicit KinetoSax(ImportedRank& out) : out_(out) {}

  // Room for as many GPU activities and launch calls as a trace of `text_bytes` can hold (each
  // takes a few hundred bytes of JSON): address space only, the pages are touched as they fill.
  // The lists then never double (and for a moment exist twice) as they grow, which was most of a
  // 1 GB trace's peak memory (issue 29).
  void reserve_for(uint64_t text_bytes) {
    const size_t most = static_cast<size_t>(std::min<uint64_t>(text_bytes / kMinEventBytes, uint64_t{1} << 24));
    out_.gpu.reserve(most);
    gpu_correlation.reserve(most);
    launches.reserve(most);
  }
  static constexpr uint64_t kMinEventBytes = 300;  // a kernel or launch event, as Kineto writes it

  // Results besides the ImportedRank.
  bool saw_top_object = false, saw_trace_events = false;
  bool has_rank = false, has_base = false;
  int64_t base_ns = 0;
  std::string bad_value;  // a header value that cannot be used (the import fails naming it)
  uint64_t bad_times = 0;  // events left out: times out of bounds or a negative duration
  std::string error;
  LaunchIndex launches;                                  // by correlation id
  std::vector<int64_t> gpu_correlation;                  // parallel to out_.gpu
  std::vector<int64_t> stream_event_correlation;         // parallel to out_.stream_events
  std::vector<std::pair<size_t, Event>> nccl_kernels;    // index into out_.gpu, args
  uint64_t events = 0, syncs = 0;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  // nlohmann's SAX calls (json.hpp, json_sax) and JsonFastScan's (json_fast_scan.h), which also
  // give each number's text and strings and keys as views.
  bool number_integer(json::number_integer_t v) { return number(double(v), std::to_string(v), true); }
  bool number_unsigned(json::number_unsigned_t v) { return number(double(v), std::to_string(v), true); }
  bool number_integer(json::number_integer_t v, std::string_view text) { return number(double(v), text, true); }
  bool number_unsigned(json::number_unsigned_t v, std::string_view text) { return number(double(v), text, true); }
  bool number_float(json::number_float_t v, std::string_view text) { return number(v, text, false); }
  bool binary(json::binary_t&) { return true; }
  bool string(std::string& v) { return text_value(v); }
  bool key(std::string& k) { return key_text(k); }

  bool text_value(std::string_view v) {
    if (in_event() && depth_ == 3) {
      switch (field_[3]) {
        case Field::ph: ev_.ph = v; break;
        case Field::cat: ev_.cat = v; break;
        case Field::name: ev_.name = v; break;
        default: break;
      }
    } else if (in_args() && depth_ == 4) {
      switch (field_[4]) {
        case Field::collective: ev_.collective = v; break;
        case Field::dtype: ev_.dtype = v; break;
        case Field::pg_name: ev_.pg_name = v; break;
        case Field::pg_desc: ev_.pg_desc = v; break;
        default: break;
      }
    }
    return true;
  }

  bool start_object(std::size_t) {
    ++depth_;
    if (depth_ == 1) saw_top_object = true;
    if (in_event() && depth_ == 3) ev_.reset();
    return true;
  }
  bool end_object() {
    if (in_event() && depth_ == 3) finish_event();
    --depth_;
    return true;
  }
  bool start_array(std::size_t) {
    ++depth_;
    if (depth_ == 1) return fail("the file is a JSON array, not a Kineto trace object");
    if (depth_ == 2 && trace_events_key_) saw_trace_events = true;
    index_ = 0;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key_text(std::string_view k) {
    if (depth_ <= 2) key_[depth_] = k;
    if (depth_ == 1) trace_events_key_ = k == "traceEvents";
    if (depth_ == 3 || depth_ == 4) field_[depth_] = field_of(k, depth_);
    if (depth_ == 4) index_ = 0;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (error.empty()) error = fmt::format("invalid JSON at byte {}: {}", error_base + position, e.what());
    return false;
  }
  uint64_t error_base = 0;  // where in the whole text the value being parsed starts

  // The nesting the next value is read at (TraceReader hands values over one at a time).
  int depth() const { return depth_; }
  void set_depth(int d) { depth_ = d; }
  bool in_trace_events_key() const { return depth_ == 1 && trace_events_key_; }

 private:
  ImportedRank& out_;
  int depth_ = 0;
  std::string key_[3];                // the current key at depths 1 and 2 (header fields)
  bool trace_events_key_ = false;     // key_[1] == "traceEvents"
  Field field_[5] = {};               // the current key at depths 3 (event) and 4 (args), as named fields
  size_t index_ = 0;
  Event ev_;

  bool fail(const std::string& why) {
    error = why;
    return false;
  }
  bool in_events() const { return depth_ >= 2 && trace_events_key_; }
  bool in_event() const { return in_events() && depth_ >= 3; }
  bool in_args() const { return in_event() && depth_ >= 4 && field_[3] == Field::args; }

  bool number(double v, std::string_view text, bool integral) {
    if (depth_ == 1 && key_[1] == "baseTimeNanoseconds") {
      has_base = true;
      base_ns = -1;
      if (integral) std::from_chars(text.data(), text.data() + text.size(), base_ns);  // exact, unlike a double
      else base_ns = to_i64(v);
      if (base_ns < 0 || base_ns > values::kMaxTimeNs)
        bad_value = fmt::format("baseTimeNanoseconds {} is not a time", text);
    } else if (depth_ == 2 && key_[1] == "distributedInfo") {
      if (key_[2] == "rank" && integral) {
        has_rank = true;
        int64_t rank = to_i64(v);
        if (rank < 0 || rank >= values::kMaxWorldSize) bad_value = fmt::format("distributedInfo.rank {} is not a rank", text);
        out_.rank = int(rank);
        out_.rank_source = "distributedInfo.rank";
      } else if (key_[2] == "world_size" && integral) {
        int64_t size = to_i64(v);
        out_.world_size = size > 0 && size <= values::kMaxWorldSize ? int(size) : -1;
      }
    } else if (in_event() && depth_ == 3) {
      switch (field_[3]) {
        case Field::ts: ev_.has_ts = true, ev_.bad_time |= !us_text_to_ns(text, v, &ev_.ts_ns); break;
        case Field::dur: ev_.has_dur = true, ev_.bad_time |= !us_text_to_ns(text, v, &ev_.dur_ns); break;
        case Field::pid: if (integral) ev_.pid = to_i64(v); break;
        case Field::tid: if (integral) ev_.tid = to_i64(v); break;
        default: break;
      }
    } else if (in_args() && depth_ == 4) {
      switch (field_[4]) {
        case Field::correlation: ev_.correlation = to_i64(v); break;
        case Field::stream: ev_.stream = to_i64(v); break;
        case Field::device: ev_.device = to_i64(v); break;
        case Field::bytes: ev_.bytes = to_i64(v, 0); break;
        case Field::in_nelems: ev_.in_nelems = to_i64(v); break;
        case Field::group_size: ev_.group_size = to_i64(v, 0); break;
        default: break;
      }
    } else if (in_args() && depth_ == 5 && index_ < 3) {
      if (field_[4] == Field::grid) ev_.grid[index_] = to_u32(v);
      else if (field_[4] == Field::block) ev_.block[index_] = to_u32(v);
      ++index_;
    }
    return true;
  }

  void finish_event() {
    ++events;
    // HTA keeps complete events only (ph "X": they have a dur); flows, counters and metadata go.
    if (!ev_.has_ts || !ev_.has_dur || (!ev_.ph.empty() && ev_.ph != "X")) return;
    if (ev_.bad_time || ev_.dur_ns < 0 || ev_.dur_ns > values::kMaxDurNs) {
      ++bad_times;
      return;
    }
    Cat c = category(ev_.cat);
    // Older traces spell steps as cpu_op "ProfilerStep#N" (the prefix test spares the regular
    // expression most events: one per cpu_op was most of the import's time, issue 29).
    if (c == Cat::other && ev_.name.starts_with("ProfilerStep") && profiler_step_number(ev_.name) >= 0)
      c = Cat::annotation;
    switch (c) {
      case Cat::kernel:
      case Cat::memcpy:
      case Cat::memset: add_gpu(c); break;
      case Cat::launch:
        if (ev_.correlation >= 0)
          launches.add(ev_.correlation,
                       {ev_.ts_ns, ev_.ts_ns + ev_.dur_ns, uint32_t(ev_.tid), out_.strings.intern(ev_.name)});
        note_pid();
        break;
      case Cat::annotation:
        out_.ranges.push_back({out_.strings.intern(ev_.name), ev_.ts_ns, ev_.ts_ns + ev_.dur_ns, uint32_t(ev_.tid)});
        note_pid();
        break;
      case Cat::gpu_annotation:
        // The user range projected onto the GPU: kept as a section of the GPU's own "thread"
        // (the stream), named in a "gpu" domain so it never mixes with the host range.
        out_.ranges.push_back({out_.strings.intern("gpu::" + ev_.name), ev_.ts_ns, ev_.ts_ns + ev_.dur_ns,
                               uint32_t(ev_.tid)});
        break;
      case Cat::sync: add_sync(); break;
      case Cat::other:
        if (ev_.cat == "cpu_op") note_pid();
        if (ev_.cat == "cpu_op" && ev_.stream >= 0) add_cpu_op_on_stream();
        break;
    }
  }

  void note_pid() {
    if (!out_.pid && ev_.pid > 0) out_.pid = long(ev_.pid);
  }

  // A cuda_sync event with a stream ("Stream Sync", "Stream Wait Event"; Context Sync may carry
  // stream 4294967295): HTA's temporal breakdown counts it as GPU time, so it is kept apart.
  // Event Sync / Context Sync with stream -1 are not on a stream and not kept.
  void add_sync() {
    if (ev_.stream == -1) return;
    ++syncs;
    add_stream_event();
  }

  // A CPU op with a stream argument (Triton's launcher op has "stream": 0): HTA counts it as a
  // GPU event; laggard does not, but keeps it for --hta-compatible. Its launch is itself.
  void add_cpu_op_on_stream() {
    add_stream_event();
    GpuActivity& a = out_.stream_events.back();
    a.api_start_ns = a.start_ns;
    a.api_end_ns = a.end_ns;
    stream_event_correlation.back() = -1;
  }

  void add_stream_event() {
    GpuActivity a;
    a.name = out_.strings.intern(ev_.name);
    a.start_ns = ev_.ts_ns;
    a.end_ns = ev_.ts_ns + ev_.dur_ns;
    a.correlation = uint32_t(ev_.correlation < 0 ? 0 : ev_.correlation);
    a.device = int32_t(ev_.device);
    a.stream = uint32_t(ev_.stream);
    out_.stream_events.push_back(a);
    stream_event_correlation.push_back(ev_.correlation);
  }

  void add_gpu(Cat c) {
    GpuActivity a;
    a.kind = c == Cat::memcpy ? GpuKind::memcpy : c == Cat::memset ? GpuKind::memset : GpuKind::kernel;
    a.name = out_.strings.intern(gpu_name(c, ev_.name));
    a.start_ns = ev_.ts_ns;
    a.end_ns = ev_.ts_ns + ev_.dur_ns;
    a.correlation = uint32_t(ev_.correlation < 0 ? 0 : ev_.correlation);
    a.device = int32_t(ev_.device >= 0 ? ev_.device : ev_.pid);
    a.stream = uint32_t(ev_.stream >= 0 ? ev_.stream : ev_.tid);
    std::copy(std::begin(ev_.grid), std::end(ev_.grid), a.grid);
    std::copy(std::begin(ev_.block), std::end(ev_.block), a.block);
    a.bytes = uint64_t(std::max<int64_t>(0, ev_.bytes));
    a.copy_kind = c == Cat::memcpy ? copy_kind_of(ev_.name) : 0;
    a.nccl = c == Cat::kernel && is_nccl_kernel(ev_.name);
    if (a.nccl) nccl_kernels.emplace_back(out_.gpu.size(), ev_);
    out_.gpu.push_back(a);
    gpu_correlation.push_back(ev_.correlation);
  }
};

// Reads a trace as a stream (issue 29: a 1 GB trace at 100 MB/s in bounded memory): the top-level
// object member by member and its "traceEvents" array one event at a time, each value's text cut
// out of a buffer that holds little more than the largest single value. Each value goes through
// JsonFastScan (json_fast_scan.h) and, when that declines, nlohmann's SAX parser on the same text
// (the same acceptance and values as parsing the whole file: what nlohmann accepts of a file is
// its values' texts between this structure). The handler sees the calls a SAX parse of the whole
// file makes, in the same order. Stops at the first error, naming its byte (KinetoSax::error).
class TraceReader {
 public:
  TraceReader(GzInput& in, KinetoSax& sax) : in_(in), sax_(sax) { buf_.resize(kChunk); }

  // False when the text is not valid JSON or the handler stopped (sax.error says why).
  bool run() {
    if (peek() == 0xEF && end_ >= 3 && buf_.compare(0, 3, "\xEF\xBB\xBF") == 0) at_ = 3;  // a BOM, as nlohmann skips
    skip_space();
    const int c = peek();
    if (c == '{') return object();
    if (c == '[') return sax_.start_array(std::size_t(-1));  // refused there: not a Kineto trace
    return value() && at_end();  // not an object: nlohmann names what is wrong
  }

 private:
  static constexpr size_t kChunk = size_t{1} << 20;

  // The byte at the read position, reading more when the buffer is used up; -1 at the end.
  int peek() {
    if (at_ == end_ && !more(at_)) return -1;
    return static_cast<unsigned char>(buf_[at_]);
  }
  // Moves buf_[from, end_) to the front (from <= at_), then reads more after it. False at the end.
  bool more(size_t from) {
    if (from > 0) {
      std::memmove(buf_.data(), buf_.data() + from, end_ - from);
      base_ += from;
      at_ -= from;
      end_ -= from;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);  // one value longer than the buffer
    const size_t n = in_.read(buf_.data() + end_, buf_.size() - end_);
    end_ += n;
    return n > 0;
  }
  void skip_space() {
    for (int c = peek(); c == ' ' || c == '\n' || c == '\r' || c == '\t'; c = peek()) ++at_;
  }
  bool expect(char c, const char* what) {
    skip_space();
    if (peek() != c) return fail(what);
    ++at_;
    skip_space();
    return true;
  }
  bool at_end() {
    skip_space();
    return peek() < 0 || fail("syntax error: unexpected text after the end of the trace object");
  }
  bool fail(const char* why) {
    if (sax_.error.empty()) sax_.error = fmt::format("invalid JSON at byte {}: {}", base_ + at_ + 1, why);
    return false;
  }

  // Cuts the value starting at the read position out of the buffer: a string to its closing
  // quote, an object or array to its matching bracket (strings skipped), anything else to the
  // next delimiter. Its text is checked when it is parsed. False when the data ends first.
  bool cut(std::string_view* out) {
    size_t i = at_, depth = 0;
    bool in_string = false, escaped = false;
    const int first = peek();
    const bool scalar = first != '{' && first != '[' && first != '"';
    while (true) {
      if (i == end_) {
        const size_t offset = i - at_;
        const bool got = more(at_);  // keeps the value so far, now from buf_[0]
        i = at_ + offset;
        if (got) continue;
        if (scalar && offset > 0) break;  // a number or literal ending the file
        at_ = end_;
        return fail("unexpected end of input");
      }
      const char c = buf_[i];
      if (in_string) {
        if (escaped) escaped = false;
        else if (c == '\\') escaped = true;
        else if (c == '"') {
          in_string = false;
          if (depth == 0) {
            ++i;
            break;
          }
        }
      } else if (scalar) {
        if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\n' || c == '\r' || c == '\t') break;
      } else if (c == '"') {
        in_string = true;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) {
          ++i;
          break;
        }
      }
      ++i;
    }
    *out = std::string_view(buf_.data() + at_, i - at_);
    at_ = i;
    return true;
  }

  // One value to the handler: the fast scan, or nlohmann's parser from the same nesting.
  bool value() {
    std::string_view text;
    if (!cut(&text)) return false;
    const int depth = sax_.depth();
    if (JsonFastScan<KinetoSax>(text, sax_).run()) return true;
    if (!sax_.error.empty()) return false;  // the handler refused (it names why)
    sax_.set_depth(depth);
    sax_.error_base = base_ + (at_ - text.size());
    return nlohmann::json::sax_parse(text.begin(), text.end(), &sax_, nlohmann::json::input_format_t::json, true);
  }

  // A key: its text as JSON reads it (escapes decoded), handed to the handler.
  bool key() {
    std::string_view text;
    if (peek() != '"') return fail("syntax error: expected a string as an object key");
    if (!cut(&text)) return false;
    if (text.find('\\') == std::string_view::npos) return sax_.key_text(text.substr(1, text.size() - 2));
    std::string decoded;
    try {
      decoded = nlohmann::json::parse(text).get<std::string>();
    } catch (const std::exception&) {
      return fail("syntax error: an object key that is not a valid string");
    }
    return sax_.key_text(decoded);
  }

  // After a member or an event: ',' (more follow) or the closing bracket.
  enum class After { more, closed, bad };
  After comma_or(char close, const char* expected) {
    skip_space();
    const int c = peek();
    if (c == ',') {
      ++at_;
      skip_space();
      return After::more;
    }
    if (c == close) {
      ++at_;
      return After::closed;
    }
    fail(c < 0 ? "unexpected end of input" : expected);
    return After::bad;
  }
  // An empty object or array: its closing bracket right after the opening one.
  bool closes_at_once(char close) {
    skip_space();
    if (peek() != close) return false;
    ++at_;
    return true;
  }

  bool object() {
    ++at_;
    if (!sax_.start_object(std::size_t(-1))) return false;
    if (closes_at_once('}')) return sax_.end_object() && at_end();
    while (true) {
      if (!key() || !expect(':', "syntax error: expected ':' after an object key")) return false;
      const bool events = sax_.in_trace_events_key() && peek() == '[';
      if (!(events ? event_array() : value())) return false;
      switch (comma_or('}', "syntax error: expected ',' or '}' after an object member")) {
        case After::more: continue;
        case After::closed: return sax_.end_object() && at_end();
        case After::bad: return false;
      }
    }
  }

  bool event_array() {
    ++at_;
    if (!sax_.start_array(std::size_t(-1))) return false;
    if (closes_at_once(']')) return sax_.end_array();
    while (true) {
      if (!value()) return false;
      switch (comma_or(']', "syntax error: expected ',' or ']' after an event")) {
        case After::more: continue;
        case After::closed: return sax_.end_array();
        case After::bad: return false;
      }
    }
  }

  GzInput& in_;
  KinetoSax& sax_;
  std::string buf_;
  size_t at_ = 0, end_ = 0;  // read position and end of the bytes held in buf_
  uint64_t base_ = 0;        // the offset in the text of buf_[0]
};

// The size of the JSON text: a gzip file's trailer holds it modulo 2^32 (RFC 1952, ISIZE); a
// larger text, or anything unreadable, is estimated from the file size. Only a capacity hint.
uint64_t text_size(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec || size < 18) return ec ? 0 : size;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return size;
  unsigned char head[2] = {0, 0}, tail[4] = {0, 0, 0, 0};
  const bool gz = std::fread(head, 1, 2, f) == 2 && head[0] == 0x1f && head[1] == 0x8b &&
                  std::fseek(f, -4, SEEK_END) == 0 && std::fread(tail, 1, 4, f) == 4;
  std::fclose(f);
  if (!gz) return size;
  const uint64_t isize = uint64_t{tail[0]} | uint64_t{tail[1]} << 8 | uint64_t{tail[2]} << 16 | uint64_t{tail[3]} << 24;
  return isize >= size ? isize : size * 10;  // smaller than the file: wrapped past 4 GiB
}

// Returns how many activities found no launch call.
uint64_t link_launches(const LaunchIndex& launches, const std::vector<int64_t>& correlation,
                       std::vector<GpuActivity>& acts) {
  uint64_t unmatched = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    const ImportedLaunch* call = correlation[i] >= 0 ? launches.find(correlation[i]) : nullptr;
    if (!call) {
      ++unmatched;
      continue;
    }
    acts[i].api_start_ns = call->start_ns;
    acts[i].api_end_ns = call->end_ns;
    acts[i].api_tid = call->tid;
    acts[i].api_name = call->name;
  }
  return unmatched;
}

void add_collectives(KinetoSax& sax, ImportedRank& r) {
  for (auto& [index, ev] : sax.nccl_kernels) {
    ImportedCollective c;
    c.gpu_index = index;
    std::string algo, proto;
    std::string func = func_name(ev.collective, ev.name, &algo, &proto);
    c.func = r.strings.intern(func);
    c.p2p = func == "Send" || func == "Recv" || func == "SendRecv" || func == "AllToAll";
    c.algo = algo.empty() ? StringTable::kNone : r.strings.intern(algo);
    c.proto = proto.empty() ? StringTable::kNone : r.strings.intern(proto);
    c.comm = r.strings.intern(ev.pg_name.empty() ? "pg:unknown" : "pg:" + ev.pg_name);
    c.comm_name = ev.pg_desc.empty() ? StringTable::kNone : r.strings.intern(ev.pg_desc);
    c.group_size = int(ev.group_size > 0 ? ev.group_size : r.world_size);
    c.datatype = ev.dtype.empty() ? StringTable::kNone : r.strings.intern(ev.dtype);
    c.count = ev.in_nelems > 0 ? uint64_t(ev.in_nelems) : 0;
    c.bytes = c.count * uint64_t(dtype_bytes(ev.dtype));
    r.collectives.push_back(c);
  }
}

void shift_times(ImportedRank& r, int64_t base) {
  for (auto& x : r.ranges) x.start_ns += base, x.end_ns += base;
  for (auto* acts : {&r.gpu, &r.stream_events})
    for (auto& a : *acts) {
      a.start_ns += base, a.end_ns += base;
      if (a.api_end_ns) a.api_start_ns += base, a.api_end_ns += base;
    }
}

}  // namespace

ImportedRank import_kineto(const std::string& file, const KinetoOptions& options) {
  // PyTorch built without Kineto writes a bare array of events instead (issue 25).
  if (is_json_array_file(file)) return import_torch_legacy(file, options);
  ImportedRank r;
  r.source = file;
  r.format = "kineto";
  GzInput in(file);
  KinetoSax sax(r);
  sax.reserve_for(text_size(file));
  bool ok = TraceReader(in, sax).run();
  if (!in.error().empty())
    throw std::runtime_error(fmt::format("corrupt or truncated compressed data after {} bytes ({})",
                                         in.consumed(), in.error()));
  if (!ok || !sax.error.empty()) {
    std::string why = sax.error.empty() ? "invalid JSON" : sax.error;
    if (!sax.saw_top_object) throw std::runtime_error("not a JSON trace: " + why);
    throw std::runtime_error(fmt::format("truncated or invalid JSON: {}", why));
  }
  if (!sax.saw_trace_events)
    throw std::runtime_error("not a Kineto trace: the JSON object has no \"traceEvents\" array");
  if (!sax.bad_value.empty()) throw std::runtime_error(sax.bad_value);
  if (!sax.has_rank) {
    if (options.rank < 0)
      throw std::runtime_error(
          "no rank information (the trace has no distributedInfo.rank); pass --rank N to import it as rank N");
    r.rank = options.rank;
    r.rank_source = "--rank";
  }
  sax.launches.seal();
  r.unmatched_correlation = link_launches(sax.launches, sax.gpu_correlation, r.gpu);
  link_launches(sax.launches, sax.stream_event_correlation, r.stream_events);
  sax.launches = {};  // not needed from here on: given back before the sections are attributed
  std::vector<int64_t>().swap(sax.gpu_correlation);
  add_collectives(sax, r);
  if (sax.has_base) shift_times(r, sax.base_ns);
  r.time_base_ns = sax.has_base ? sax.base_ns : 0;
  attribute_sections(r);
  if (sax.bad_times)
    r.notes.push_back(fmt::format("{} events left out: a time beyond ±{} µs or a duration that is negative or over "
                                  "{} µs", sax.bad_times, kMaxTsUs, values::kMaxDurNs / 1000));
  if (r.unmatched_correlation)
    r.notes.push_back(fmt::format("{} GPU activities without their launch call in the trace", r.unmatched_correlation));
  return r;
}

}  // namespace laggard::report
