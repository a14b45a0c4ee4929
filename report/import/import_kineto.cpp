#include "import_kineto.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <cstring>
#include <istream>
#include <map>
#include <stdexcept>
#include <streambuf>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "import_torch_legacy.h"
#include "reader_values.h"

namespace laggard::report {
namespace {

using nlohmann::json;

// A read-only streambuf over zlib's gzFile: gzread inflates .gz input and passes plain files
// through unchanged, so one path reads both, 256 KiB at a time.
class GzStreamBuf : public std::streambuf {
 public:
  explicit GzStreamBuf(const std::string& path) : file_(gzopen(path.c_str(), "rb")) {
    if (!file_) throw std::runtime_error("cannot open file");
    gzbuffer(file_, 1 << 18);
  }
  ~GzStreamBuf() override {
    if (file_) gzclose(file_);
  }
  GzStreamBuf(const GzStreamBuf&) = delete;
  GzStreamBuf& operator=(const GzStreamBuf&) = delete;

  // zlib's complaint, if reading stopped for any reason but the end of the data.
  const std::string& error() const { return error_; }
  uint64_t consumed() const { return consumed_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    if (!error_.empty()) return traits_type::eof();
    int n = gzread(file_, buf_, sizeof buf_);
    if (n <= 0) {
      int code = Z_OK;
      const char* msg = gzerror(file_, &code);
      if (n < 0 || (code != Z_OK && code != Z_STREAM_END)) error_ = msg && *msg ? msg : "read error";
      return traits_type::eof();
    }
    consumed_ += uint64_t(n);
    setg(buf_, buf_, buf_ + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  gzFile file_;
  char buf_[1 << 16];
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
bool us_text_to_ns(const std::string& text, double value, int64_t* ns_out) {
  if (!(value >= -double(kMaxTsUs) && value <= double(kMaxTsUs))) return false;
  if (text.find_first_of("eE") != std::string::npos || text.empty()) {
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

class KinetoSax {
 public:
  explicit KinetoSax(ImportedRank& out) : out_(out) {}

  // Results besides the ImportedRank.
  bool saw_top_object = false, saw_trace_events = false;
  bool has_rank = false, has_base = false;
  int64_t base_ns = 0;
  std::string bad_value;  // a header value that cannot be used (the import fails naming it)
  uint64_t bad_times = 0;  // events left out: times out of bounds or a negative duration
  std::string error;
  std::unordered_map<int64_t, ImportedLaunch> launches;  // by correlation id
  std::vector<int64_t> gpu_correlation;                  // parallel to out_.gpu
  std::vector<int64_t> stream_event_correlation;         // parallel to out_.stream_events
  std::vector<std::pair<size_t, Event>> nccl_kernels;    // index into out_.gpu, args
  uint64_t events = 0, syncs = 0;

  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t v) { return number(double(v), std::to_string(v), true); }
  bool number_unsigned(json::number_unsigned_t v) { return number(double(v), std::to_string(v), true); }
  bool number_float(json::number_float_t v, const std::string& s) { return number(v, s, false); }
  bool binary(json::binary_t&) { return true; }

  bool string(std::string& v) {
    if (in_event() && depth_ == 3) {
      if (key_[3] == "ph") ev_.ph = v;
      else if (key_[3] == "cat") ev_.cat = v;
      else if (key_[3] == "name") ev_.name = v;
    } else if (in_args() && depth_ == 4) {
      const std::string& k = key_[4];
      if (k == "Collective name") ev_.collective = v;
      else if (k == "dtype") ev_.dtype = v;
      else if (k == "Process Group Name") ev_.pg_name = v;
      else if (k == "Process Group Description") ev_.pg_desc = v;
    }
    return true;
  }

  bool start_object(std::size_t) {
    ++depth_;
    if (depth_ == 1) saw_top_object = true;
    if (in_event() && depth_ == 3) ev_ = Event{};
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
    if (depth_ == 2 && key_[1] == "traceEvents") saw_trace_events = true;
    index_ = 0;
    return true;
  }
  bool end_array() {
    --depth_;
    return true;
  }
  bool key(std::string& k) {
    if (depth_ < int(std::size(key_))) key_[depth_] = k;
    if (depth_ == 4) index_ = 0;
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    if (error.empty()) error = fmt::format("invalid JSON at byte {}: {}", position, e.what());
    return false;
  }

 private:
  ImportedRank& out_;
  int depth_ = 0;
  std::string key_[6];
  size_t index_ = 0;
  Event ev_;

  bool fail(const std::string& why) {
    error = why;
    return false;
  }
  bool in_events() const { return depth_ >= 2 && key_[1] == "traceEvents"; }
  bool in_event() const { return in_events() && depth_ >= 3; }
  bool in_args() const { return in_event() && depth_ >= 4 && key_[3] == "args"; }

  bool number(double v, const std::string& text, bool integral) {
    if (depth_ == 1 && key_[1] == "baseTimeNanoseconds") {
      has_base = true;
      base_ns = -1;
      if (integral) std::from_chars(text.data(), text.data() + text.size(), base_ns);  // exact, unlike a double
      else base_ns = to_i64(v);
      if (base_ns < 0 || base_ns > values::kMaxTimeNs) bad_value = "baseTimeNanoseconds " + text + " is not a time";
    } else if (depth_ == 2 && key_[1] == "distributedInfo") {
      if (key_[2] == "rank" && integral) {
        has_rank = true;
        int64_t rank = to_i64(v);
        if (rank < 0 || rank >= values::kMaxWorldSize) bad_value = "distributedInfo.rank " + text + " is not a rank";
        out_.rank = int(rank);
        out_.rank_source = "distributedInfo.rank";
      } else if (key_[2] == "world_size" && integral) {
        int64_t size = to_i64(v);
        out_.world_size = size > 0 && size <= values::kMaxWorldSize ? int(size) : -1;
      }
    } else if (in_event() && depth_ == 3) {
      const std::string& k = key_[3];
      if (k == "ts") ev_.has_ts = true, ev_.bad_time |= !us_text_to_ns(text, v, &ev_.ts_ns);
      else if (k == "dur") ev_.has_dur = true, ev_.bad_time |= !us_text_to_ns(text, v, &ev_.dur_ns);
      else if (k == "pid" && integral) ev_.pid = to_i64(v);
      else if (k == "tid" && integral) ev_.tid = to_i64(v);
    } else if (in_args() && depth_ == 4) {
      const std::string& k = key_[4];
      if (k == "correlation") ev_.correlation = to_i64(v);
      else if (k == "stream") ev_.stream = to_i64(v);
      else if (k == "device") ev_.device = to_i64(v);
      else if (k == "bytes") ev_.bytes = to_i64(v, 0);
      else if (k == "In msg nelems") ev_.in_nelems = to_i64(v);
      else if (k == "Group size") ev_.group_size = to_i64(v, 0);
    } else if (in_args() && depth_ == 5 && index_ < 3) {
      if (key_[4] == "grid") ev_.grid[index_] = to_u32(v);
      else if (key_[4] == "block") ev_.block[index_] = to_u32(v);
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
    if (c == Cat::other && profiler_step_number(ev_.name) >= 0) c = Cat::annotation;  // older cpu_op steps
    switch (c) {
      case Cat::kernel:
      case Cat::memcpy:
      case Cat::memset: add_gpu(c); break;
      case Cat::launch:
        if (ev_.correlation >= 0)
          launches[ev_.correlation] = {ev_.ts_ns, ev_.ts_ns + ev_.dur_ns, uint32_t(ev_.tid), out_.strings.intern(ev_.name)};
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

// Returns how many activities found no launch call.
uint64_t link_launches(const std::unordered_map<int64_t, ImportedLaunch>& launches,
                       const std::vector<int64_t>& correlation, std::vector<GpuActivity>& acts) {
  uint64_t unmatched = 0;
  for (size_t i = 0; i < acts.size(); ++i) {
    auto it = correlation[i] >= 0 ? launches.find(correlation[i]) : launches.end();
    if (it == launches.end()) {
      ++unmatched;
      continue;
    }
    acts[i].api_start_ns = it->second.start_ns;
    acts[i].api_end_ns = it->second.end_ns;
    acts[i].api_tid = it->second.tid;
    acts[i].api_name = it->second.name;
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
  GzStreamBuf buf(file);
  std::istream in(&buf);
  KinetoSax sax(r);
  bool ok = json::sax_parse(in, &sax, json::input_format_t::json, true);
  if (!buf.error().empty())
    throw std::runtime_error(fmt::format("corrupt or truncated compressed data after {} bytes ({})",
                                         buf.consumed(), buf.error()));
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
  r.unmatched_correlation = link_launches(sax.launches, sax.gpu_correlation, r.gpu);
  link_launches(sax.launches, sax.stream_event_correlation, r.stream_events);
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
