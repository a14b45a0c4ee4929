#include "reader_fast.h"

#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <type_traits>

#include "health_analysis.h"
#include "reader_frames.h"
#include "reader_cpu_wait.h"
#include "reader_pause.h"
#include "reader_values.h"

namespace laggard::report {
namespace {

using Type = JsonTape::Type;
using Value = JsonTape::Value;

struct Decline {};  // thrown inside, caught at the entry: the DOM code reads the window instead

[[noreturn]] void decline() { throw Decline{}; }

// One window's reading state: the tape, and the strings seen, interned only once all is read.
struct Ctx {
  const JsonTape& tape;
  int version;

  const Value& at(size_t i) const { return tape.at(i); }
  size_t index_of(const Value& v) const { return static_cast<size_t>(&v - &tape.at(0)); }

  // The members of object `v` named in `names`, into `out` (nullptr: absent). A repeated name
  // declines (the DOM keeps the last); other keys are ignored, as the DOM code does.
  template <size_t N>
  void members(const Value& v, const std::array<std::string_view, N>& names, std::array<const Value*, N>& out) const {
    if (v.type != Type::object) decline();
    out.fill(nullptr);
    size_t next_name = 0;  // writers keep one order: the name after the last match is tried first
    for (size_t c = index_of(v) + 1; c < v.next; c = at(c).next) {
      std::string_view k = tape.key(at(c));
      for (size_t tried = 0, n = next_name; tried < N; ++tried, n = n + 1 == N ? 0 : n + 1)
        if (k == names[n]) {
          if (out[n]) decline();
          out[n] = &at(c);
          next_name = n + 1 == N ? 0 : n + 1;
          break;
        }
    }
  }

  // The elements of array `v`, `n` of them, when each is a single entry (no object or array
  // inside): then they lie one after the other on the tape. Otherwise declines.
  const Value* scalars(const Value& v, size_t n) const {
    if (v.type != Type::array || v.children != n || v.next != index_of(v) + 1 + n) decline();
    return &v + 1;
  }

  template <class F>
  void each(const Value& v, F&& f) const {  // elements of an array
    if (v.type != Type::array) decline();
    for (size_t c = index_of(v) + 1; c < v.next; c = at(c).next) f(at(c));
  }

  std::string_view str(const Value& v) const {
    if (v.type != Type::string) decline();
    return tape.str(v);
  }
};

// values::integer for whole numbers stored as such; a float (which the DOM code may accept as
// 1e3) declines, as does anything out of bounds.
int64_t integer(const Value* v, int64_t lo, int64_t hi) {
  if (!v) decline();
  int64_t x;
  if (v->type == Type::unsigned_integer) {
    if (v->u > static_cast<uint64_t>(INT64_MAX)) decline();
    x = static_cast<int64_t>(v->u);
  } else if (v->type == Type::integer) {
    x = v->i;
  } else {
    decline();
  }
  if (x < lo || x > hi) decline();
  return x;
}
uint64_t count(const Value* v) { return static_cast<uint64_t>(integer(v, 0, static_cast<int64_t>(values::kMaxCount))); }
int64_t dur_ns(const Value* v) { return integer(v, 0, values::kMaxDurNs); }
int64_t offset_ns(const Value* v) { return integer(v, -values::kMaxDurNs, values::kMaxDurNs); }
int64_t time_ns(const Value* v) { return integer(v, 0, values::kMaxTimeNs); }
bool is_int(const Value& v) { return v.type == Type::integer || v.type == Type::unsigned_integer; }

// get_or<bool> / json::value(key, bool): absent gives the fallback; only a bool is accepted.
bool boolean_or(const Value* v, bool fallback, bool null_is_fallback) {
  if (!v || (null_is_fallback && v->type == Type::null)) return fallback;
  if (v->type != Type::boolean) decline();
  return v->boolean;
}
std::string string_or(const Ctx& c, const Value* v, bool null_is_fallback) {
  if (!v || (null_is_fallback && v->type == Type::null)) return {};
  return std::string(c.str(*v));
}
// json::value(key, uint64_t{0}) of a non-negative whole number.
uint64_t unsigned_or_zero(const Value* v) {
  if (!v) return 0;
  if (v->type != Type::unsigned_integer) decline();
  return v->u;
}

// Counts (dropped records), all valid; a bad one (a note in the DOM code) declines. Only the non-zero
// ones go into `out`: a window keeps no zero counts (forget_zero_counts), and a capture writes a dozen
// zeros in every window (issue 29: their map nodes were 3 % of reading 10,000 ranks of summaries). A
// repeated key still declines, zero or not (the DOM code keeps the last).
void read_dropped(const Ctx& c, const Value* d, Counts& out) {
  if (!d) return;
  if (d->type != Type::object) decline();
  thread_local std::vector<std::string_view> keys;
  keys.clear();
  for (size_t i = c.index_of(*d) + 1; i < d->next; i = c.at(i).next) {
    const std::string_view key = c.tape.key(c.at(i));
    keys.push_back(key);
    if (const uint64_t n = count(&c.at(i)); n && !out.emplace(std::string(key), n).second) decline();
  }
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) decline();
}

// Strings of a window part, as window-local indices until interned.
using LocalIds = std::vector<std::string_view>;

// reader_gpu.cpp lookup(): null or -1 is none, an index past the strings is impossible. The
// result is a local index, or kNone.
uint32_t gpu_lookup(const Value* v, size_t strings) {
  if (!v || v->type == Type::null) return StringTable::kNone;
  int64_t i = integer(v, -1, INT32_MAX);
  if (i < 0) return StringTable::kNone;
  if (static_cast<size_t>(i) >= strings) decline();
  return static_cast<uint32_t>(i);
}

uint32_t mapped(const std::vector<uint32_t>& ids, uint32_t local) {
  return local == StringTable::kNone ? local : ids[local];
}

void dims(const Ctx& c, const Value* v, uint32_t (&out)[3]) {
  if (!v || v->type != Type::array) return;
  size_t d = 0;
  c.each(*v, [&](const Value& x) {
    if (d < 3) out[d] = static_cast<uint32_t>(integer(&x, 0, UINT32_MAX));
    ++d;
  });
}

KernelWindowStats kernel_stats(const Ctx& c, const Value& k, size_t strings) {
  static constexpr std::array<std::string_view, 12> kNames = {
      "section", "name", "kind", "nccl", "graph", "grid", "block", "count", "total_ns", "min_ns", "max_ns", "median_ns"};
  std::array<const Value*, 12> f;
  c.members(k, kNames, f);
  KernelWindowStats st;
  st.section = gpu_lookup(f[0], strings);
  if (!f[1]) decline();
  st.name = gpu_lookup(f[1], strings);
  if (f[2]) {
    std::string_view kind = c.str(*f[2]);
    st.kind = kind == "memcpy" ? GpuKind::memcpy : kind == "memset" ? GpuKind::memset : GpuKind::kernel;
  }
  st.nccl = boolean_or(f[3], false, false);
  st.graph = boolean_or(f[4], false, false);
  dims(c, f[5], st.grid);
  dims(c, f[6], st.block);
  st.count = count(f[7]);
  st.total_ns = dur_ns(f[8]);
  st.min_ns = dur_ns(f[9]);
  st.max_ns = dur_ns(f[10]);
  st.median_ns = dur_ns(f[11]);
  return st;
}

// JSON per-record columns (schema versions 2-4, "records"; LAGGARD_FILE_FORMAT=json and imported
// traces): where each column starts on the tape, decoded once the window's strings are interned.
// Each column is an array of n plain values, so record i of a column is tape value first + i.
struct JsonRecords {
  enum Column : size_t {
    kind, name, section, start, dur, api_start, api_dur, tid, correlation, device, stream, shape, bytes,
    copy_kind, flags, api, kColumns
  };
  static constexpr std::array<std::string_view, kColumns + 1> kNames = {
      "kind",   "name",  "section", "start_offset_ns", "dur_ns", "api_start_offset_ns", "api_dur_ns", "tid",
      "correlation", "device", "stream", "shape", "bytes", "copy_kind", "flags", "api", "shapes"};
  size_t n = 0;
  std::array<size_t, kColumns> first{};  // tape index of each column's first value; api: 0 when absent
  std::vector<std::array<uint32_t, 6>> shapes;  // grid x, y, z, block x, y, z
  bool present = false;

  const Value& at(const JsonTape& tape, Column c, size_t i) const { return tape.at(first[c] + i); }
};

// The "gpu" object: what reader_gpu.cpp read_gpu_window() reads, string ids still local.
struct GpuPart {
  LocalIds strings;
  JsonRecords records;
  const Value* records_api = nullptr;  // frames of imported traces (reader_gpu.cpp read_records_api)
};

// Checks the shape of the "records" object as reader_gpu.cpp would read it: every column an array
// of as many plain values as "kind" (the DOM code requires all but "api" and "shapes"), and each
// launch shape six whole numbers. The values themselves are checked as they are decoded.
void read_record_columns(const Ctx& c, const Value& r, JsonRecords& out) {
  std::array<const Value*, JsonRecords::kColumns + 1> cols;
  c.members(r, JsonRecords::kNames, cols);
  if (!cols[JsonRecords::kind] || cols[JsonRecords::kind]->type != Type::array) decline();
  out.n = cols[JsonRecords::kind]->children;
  for (size_t k = 0; k < JsonRecords::kColumns; ++k) {
    const Value* col = cols[k];
    if (!col) {
      if (k == JsonRecords::api) continue;  // version 4, optional
      decline();
    }
    const size_t first = c.index_of(*col) + 1;
    // All n values plain (no array or object inside): value i is then at first + i.
    if (col->type != Type::array || col->children != out.n || col->next != first + out.n) decline();
    out.first[k] = first;
  }
  if (const Value* shapes = cols[JsonRecords::kColumns]) {
    c.each(*shapes, [&](const Value& s) {
      if (s.type != Type::array || s.children < 6) decline();
      std::array<uint32_t, 6> shape;
      size_t d = 0;
      c.each(s, [&](const Value& v) {
        if (d < 6) shape[d] = static_cast<uint32_t>(integer(&v, 0, UINT32_MAX));
        ++d;
      });
      out.shapes.push_back(shape);
    });
  }
  out.present = true;
}

// reader_gpu.cpp lookup() of a record's string, to a run-wide id.
uint32_t record_string(const Value& v, const std::vector<uint32_t>& ids) {
  return mapped(ids, gpu_lookup(&v, ids.size()));
}

// The records, as reader_gpu.cpp read_gpu_window() reads them from the DOM: the same checks on
// every field of every record (declining where it would throw), into GpuActivity or, when the
// report asks for compact records (DecodeGpuAsSpans), straight into GpuSpan.
template <typename Record>
void decode_json_records(const JsonTape& tape, const JsonRecords& r, int64_t window_start,
                         const std::vector<uint32_t>& ids, std::vector<Record>& out) {
  using C = JsonRecords;
  constexpr bool kFull = std::is_same_v<Record, GpuActivity>;
  out.reserve(out.size() + r.n);
  for (size_t i = 0; i < r.n; ++i) {
    Record a;
    const int64_t k = integer(&r.at(tape, C::kind, i), 0, 255);
    a.kind = k == 1 ? GpuKind::memcpy : k == 2 ? GpuKind::memset : GpuKind::kernel;
    a.name = record_string(r.at(tape, C::name, i), ids);
    a.section = record_string(r.at(tape, C::section, i), ids);
    a.start_ns = window_start + offset_ns(&r.at(tape, C::start, i));
    if (a.start_ns < 0) decline();
    a.end_ns = a.start_ns + dur_ns(&r.at(tape, C::dur, i));
    if (const int64_t ad = integer(&r.at(tape, C::api_dur, i), -1, values::kMaxDurNs); ad >= 0) {
      a.api_start_ns = window_start + offset_ns(&r.at(tape, C::api_start, i));
      a.api_end_ns = a.api_start_ns + ad;
    }
    const auto tid = static_cast<uint32_t>(integer(&r.at(tape, C::tid, i), 0, UINT32_MAX));
    const auto correlation = static_cast<uint32_t>(integer(&r.at(tape, C::correlation, i), 0, UINT32_MAX));
    a.device = static_cast<decltype(a.device)>(integer(&r.at(tape, C::device, i), -1, kMaxGpuDevice));
    a.stream = static_cast<uint32_t>(integer(&r.at(tape, C::stream, i), 0, UINT32_MAX));
    const int64_t sh = integer(&r.at(tape, C::shape, i), -1, INT32_MAX);
    if (sh >= 0 && static_cast<size_t>(sh) >= r.shapes.size()) decline();
    const uint64_t bytes = count(&r.at(tape, C::bytes, i));
    const auto copy_kind = static_cast<uint8_t>(integer(&r.at(tape, C::copy_kind, i), 0, 255));
    const int64_t f = integer(&r.at(tape, C::flags, i), 0, UINT32_MAX);
    a.nccl = f & 1u;
    const uint32_t api_name = r.first[C::api] ? record_string(r.at(tape, C::api, i), ids) : StringTable::kNone;
    if constexpr (kFull) {
      a.api_tid = tid;
      a.correlation = correlation;
      if (sh >= 0) {
        const auto& s = r.shapes[static_cast<size_t>(sh)];
        for (size_t d = 0; d < 3; ++d) {
          a.grid[d] = s[d];
          a.block[d] = s[d + 3];
        }
      }
      a.bytes = bytes;
      a.copy_kind = copy_kind;
      a.graph = f & 2u;
      a.api_name = api_name;
    }
    out.push_back(a);
  }
}

void read_gpu(const Ctx& c, const Value& g, CaptureWindow& out, GpuPart& part) {
  static constexpr std::array<std::string_view, 12> kNames = {
      "sampled", "launches", "starved", "clock_problem", "strings", "kernels", "late", "stream_events", "records",
      "shared", "missed_launches", "records_api"};
  std::array<const Value*, 12> f;
  c.members(g, kNames, f);
  out.gpu_sampled = boolean_or(f[0], false, false);
  out.gpu_launches = unsigned_or_zero(f[1]);
  out.gpu_starved = string_or(c, f[2], false);
  out.gpu_clock_problem = string_or(c, f[3], false);
  out.gpu_shared = string_or(c, f[9], false);
  out.gpu_missed_launches = unsigned_or_zero(f[10]);
  if (f[4]) c.each(*f[4], [&](const Value& s) { part.strings.push_back(c.str(s)); });
  const size_t n = part.strings.size();
  if (f[5]) c.each(*f[5], [&](const Value& k) { out.kernel_stats.push_back(kernel_stats(c, k, n)); });
  if (f[6]) {
    c.each(*f[6], [&](const Value& l) {
      static constexpr std::array<std::string_view, 2> kLate = {"window", "kernels"};
      std::array<const Value*, 2> lf;
      c.members(l, kLate, lf);
      uint64_t window = count(lf[0]);
      if (!lf[1]) decline();
      c.each(*lf[1], [&](const Value& k) { out.gpu_late.push_back({window, kernel_stats(c, k, n)}); });
    });
  }
  if (f[7] && f[7]->type == Type::object) decline();  // imported traces: the DOM code reads them
  if (f[8]) read_record_columns(c, *f[8], part.records);
  part.records_api = f[11];
}

// reader_gpu.cpp read_records_api(): a frame's gpu.records_api, one string per record decoded.
void apply_records_api(const Ctx& c, const Value* api, const std::vector<uint32_t>& ids, size_t decoded,
                       GpuActivity* full) {
  if (!api) return;
  if (api->type != Type::array || api->children != decoded) decline();
  size_t i = 0;
  c.each(*api, [&](const Value& v) {
    const uint32_t name = record_string(v, ids);
    if (full) full[i].api_name = name;
    ++i;
  });
}

// The "nccl" object: reader_nccl.cpp read_nccl_window(), comm and string ids still local.
struct NcclPart {
  struct Comm {
    std::string_view id, name;
    int nranks, rank, nnodes, device;
  };
  std::vector<Comm> comms;
  LocalIds strings;
  std::vector<size_t> op_comm, p2p_comm;  // per collective / p2p entry: its comm's index
};

int comm_field(const Value* v, int64_t lo, int64_t hi, int64_t fallback) {
  return static_cast<int>(!v || v->type == Type::null ? fallback : integer(v, lo, hi));
}

void read_comms(const Ctx& c, const Value* comms, NcclPart& part) {
  if (!comms) return;
  c.each(*comms, [&](const Value& v) {
    static constexpr std::array<std::string_view, 6> kNames = {"id", "name", "nranks", "rank", "nnodes", "device"};
    std::array<const Value*, 6> f;
    c.members(v, kNames, f);
    NcclPart::Comm comm;
    if (!f[0]) decline();
    comm.id = c.str(*f[0]);
    comm.name = f[1] && f[1]->type == Type::string ? c.tape.str(*f[1]) : std::string_view();
    comm.nranks = comm_field(f[2], 0, values::kMaxWorldSize, 0);
    comm.rank = comm_field(f[3], -1, std::max(0, comm.nranks - 1), -1);
    comm.nnodes = comm_field(f[4], 0, values::kMaxWorldSize, 0);
    comm.device = comm_field(f[5], -1, 1 << 16, -1);
    part.comms.push_back(comm);
  });
}

// reader_nccl.cpp string_at(): lenient, anything but a whole number in range is none.
uint32_t nccl_lookup(const Value& v, size_t strings) {
  if (!is_int(v)) return StringTable::kNone;
  if (v.type == Type::unsigned_integer) return v.u < strings ? static_cast<uint32_t>(v.u) : StringTable::kNone;
  return v.i >= 0 && static_cast<size_t>(v.i) < strings ? static_cast<uint32_t>(v.i) : StringTable::kNone;
}

// The ops columns, each an array of n values, as tape indices.
struct OpColumns {
  // The last four are optional (channels: version 3; chan_host_*: version 4; group, gpu_shifted:
  // issue 27).
  static constexpr std::array<std::string_view, 21> kNames = {
      "comm",  "p2p",   "func",  "seq",       "count",    "bytes",  "datatype",
      "root",  "peer",  "algo",  "proto",     "nchannels", "host_start_offset_ns", "host_dur_ns",
      "gpu_start_offset_ns", "gpu_dur_ns", "channels", "chan_host_start_offset_ns", "chan_host_stop_offset_ns",
      "group", "gpu_shifted"};
  static constexpr size_t kCount = kNames.size();
};

void read_ops(const Ctx& c, const Value& ops, CaptureWindow& w, NcclPart& part) {
  std::array<const Value*, OpColumns::kCount> f;
  c.members(ops, OpColumns::kNames, f);
  if (!f[0] || f[0]->type != Type::array) decline();
  const size_t n = f[0]->children;
  // Each column's values, one after the other on the tape (no vector of pointers per column and window).
  std::array<const Value*, OpColumns::kCount> col{};
  for (size_t k = 0; k < OpColumns::kCount; ++k) {
    if (!f[k]) {
      if (k < 16) decline();  // required columns
      continue;
    }
    col[k] = c.scalars(*f[k], n);
  }
  const size_t ns = part.strings.size();
  auto offset_at = [&](size_t k, size_t i) -> int64_t {
    return f[k] && is_int(col[k][i]) ? w.start_ns + offset_ns(&col[k][i]) : 0;
  };
  w.collectives.reserve(w.collectives.size() + n);
  for (size_t i = 0; i < n; ++i) {
    size_t ci = static_cast<size_t>(integer(&col[0][i], 0, INT32_MAX));
    if (ci >= part.comms.size()) decline();
    const NcclPart::Comm& cm = part.comms[ci];
    Collective op;
    op.comm_nranks = cm.nranks;
    op.comm_rank = cm.rank;
    op.comm_nnodes = cm.nnodes;
    op.func = nccl_lookup(col[2][i], ns);
    op.p2p = integer(&col[1][i], 0, 1) != 0;
    op.peer = static_cast<int>(integer(&col[8][i], -1, values::kMaxWorldSize));
    op.root = static_cast<int>(integer(&col[7][i], -1, values::kMaxWorldSize));
    op.seq = count(&col[3][i]);
    op.count = count(&col[4][i]);
    op.bytes = count(&col[5][i]);
    op.datatype = nccl_lookup(col[6][i], ns);
    op.algo = nccl_lookup(col[9][i], ns);
    op.proto = nccl_lookup(col[10][i], ns);
    op.nchannels = static_cast<int>(integer(&col[11][i], 0, 1 << 16));
    if (f[16] && is_int(col[16][i])) op.channels = static_cast<int>(integer(&col[16][i], 0, 1 << 16));
    if (f[19] && is_int(col[19][i])) op.group = count(&col[19][i]);
    if (f[20] && is_int(col[20][i])) op.gpu_shifted = integer(&col[20][i], 0, 1) != 0;
    op.device = cm.device;
    op.upload_start_ns = w.start_ns + offset_ns(&col[12][i]);
    if (op.upload_start_ns <= 0) decline();
    op.upload_end_ns = col[13][i].type == Type::null ? 0 : op.upload_start_ns + dur_ns(&col[13][i]);
    op.chan_host_start_ns = offset_at(17, i);
    op.chan_host_stop_ns = offset_at(18, i);
    if (col[14][i].type != Type::null && col[15][i].type != Type::null) {
      op.gpu_start_ns = w.start_ns + integer(&col[14][i], -values::kMaxTimeNs, values::kMaxTimeNs);
      if (op.gpu_start_ns < 0 || op.gpu_start_ns > values::kMaxTimeNs) decline();
      op.gpu_end_ns = op.gpu_start_ns + dur_ns(&col[15][i]);
    }
    w.collectives.push_back(op);
    part.op_comm.push_back(ci);
  }
}

void read_nccl(const Ctx& c, const Value& nccl, CaptureWindow& w, NcclPart& part) {
  static constexpr std::array<std::string_view, 6> kNames = {"comms", "strings", "dropped", "plugin", "p2p", "ops"};
  std::array<const Value*, 6> f;
  c.members(nccl, kNames, f);
  read_comms(c, f[0], part);
  if (f[1]) c.each(*f[1], [&](const Value& s) { part.strings.push_back(c.str(s)); });
  if (f[2]) {
    Counts dropped;  // a repeated key declines: the DOM keeps the last
    read_dropped(c, f[2], dropped);
    for (const auto& [key, value] : dropped) w.dropped["nccl_" + key] += value;
  }
  if (f[3] && f[3]->type == Type::object) {
    static constexpr std::array<std::string_view, 3> kPlugin = {"table", "kernel_events", "displaced"};
    std::array<const Value*, 3> pf;
    c.members(*f[3], kPlugin, pf);
    w.nccl_table = pf[0] ? static_cast<int>(integer(pf[0], INT_MIN, INT_MAX)) : 0;
    w.nccl_kernel_events = string_or(c, pf[1], false);
    if (pf[2] && pf[2]->type == Type::string) w.nccl_displaced = std::string(c.tape.str(*pf[2]));
  }
  if (f[4]) {
    c.each(*f[4], [&](const Value& p) {
      static constexpr std::array<std::string_view, 5> kP2p = {"comm", "sends", "recvs", "send_bytes", "recv_bytes"};
      std::array<const Value*, 5> pf;
      c.members(p, kP2p, pf);
      if (!pf[0] || pf[0]->type != Type::unsigned_integer || pf[0]->u >= part.comms.size()) decline();
      const NcclPart::Comm& cm = part.comms[pf[0]->u];
      CaptureWindow::P2pCounts pc;
      pc.comm_nranks = cm.nranks;
      pc.comm_rank = cm.rank;
      pc.sends = unsigned_or_zero(pf[1]);
      pc.recvs = unsigned_or_zero(pf[2]);
      pc.send_bytes = unsigned_or_zero(pf[3]);
      pc.recv_bytes = unsigned_or_zero(pf[4]);
      w.p2p.push_back(pc);
      part.p2p_comm.push_back(pf[0]->u);
    });
  }
  if (f[5]) read_ops(c, *f[5], w, part);
}

SectionWindow read_section(const Ctx& c, const std::array<const Value*, 11>& f, int64_t window_start) {
  SectionWindow sec;
  if (!f[0]) decline();
  sec.name = std::string(c.str(*f[0]));
  sec.parent = string_or(c, f[1], true);
  sec.count = count(f[2]);
  sec.total_ns = dur_ns(f[3]);
  sec.min_ns = dur_ns(f[4]);
  sec.max_ns = dur_ns(f[5]);
  sec.median_ns = dur_ns(f[6]);
  sec.domain = string_or(c, f[7], true);
  sec.median_from_sample = boolean_or(f[8], false, true);
  if (const Value* occ = f[10]) {
    static constexpr std::array<std::string_view, 3> kNames = {"start_offset_ns", "dur_ns", "tid"};
    std::array<const Value*, 3> o;
    c.members(*occ, kNames, o);
    for (const Value* a : o)
      if (!a || a->type != Type::array || a->children != o[0]->children) decline();
    const size_t n = o[0]->children;
    if (n > sec.count) decline();
    const double weight = n == 0 ? 1.0 : std::max(1.0, double(sec.count) / double(n));
    sec.occurrences.resize(n);
    size_t i = 0;
    c.each(*o[0], [&](const Value& v) {
      sec.occurrences[i].start_ns = window_start + offset_ns(&v);
      if (sec.occurrences[i].start_ns < 0) decline();
      sec.occurrences[i++].weight = weight;
    });
    i = 0;
    c.each(*o[1], [&](const Value& v) { sec.occurrences[i++].dur_ns = dur_ns(&v); });
    i = 0;
    c.each(*o[2], [&](const Value& v) { sec.occurrences[i++].tid = static_cast<uint32_t>(integer(&v, 0, UINT32_MAX)); });
  }
  return sec;
}

void read_sections(const Ctx& c, const Value& sections, CaptureWindow& cw, uint64_t& folded) {
  static constexpr std::array<std::string_view, 11> kNames = {"name",   "parent", "count",  "total_ns",
                                                              "min_ns", "max_ns", "median_ns", "domain",
                                                              "median_from_sample", "folded", "occurrences"};
  c.each(sections, [&](const Value& s) {
    std::array<const Value*, 11> f;
    c.members(s, kNames, f);
    if (!f[0]) decline();
    bool is_folded = boolean_or(f[9], false, true) ||
                     (c.version < 4 && f[0]->type == Type::string && c.tape.str(*f[0]) == "(other)");
    if (is_folded) folded += count(f[2]);
    else cw.sections.push_back(read_section(c, f, cw.start_ns));
  });
}

std::vector<uint32_t> intern_all(const LocalIds& local, StringTable& strings) {
  std::vector<uint32_t> ids;
  ids.reserve(local.size());
  for (std::string_view s : local) ids.push_back(strings.intern(s));
  return ids;
}

// Interns in the DOM code's order (GPU strings; each communicator's id and name; NCCL strings)
// and turns the local indices into ids. The GPU block, whose ids are needed to decode it, last.
void intern_window(const Ctx& c, const GpuPart* gpu, const NcclPart* nccl, StringTable& strings, CaptureWindow& cw,
                   int64_t window_start, std::string_view binary_records) {
  if (gpu) {
    std::vector<uint32_t> ids = intern_all(gpu->strings, strings);
    for (KernelWindowStats& k : cw.kernel_stats) {
      k.section = mapped(ids, k.section);
      k.name = mapped(ids, k.name);
    }
    for (LateKernelStats& l : cw.gpu_late) {
      l.stats.section = mapped(ids, l.stats.section);
      l.stats.name = mapped(ids, l.stats.name);
    }
    if (!binary_records.empty()) {
      const size_t gpu_before = cw.gpu.size();
      const size_t decoded = decode_gpu_block(binary_records, window_start, ids, cw);  // may throw: declines
      const size_t full = cw.gpu.size() - gpu_before;
      apply_records_api(c, gpu->records_api, ids, decoded, full ? cw.gpu.data() + gpu_before : nullptr);
    } else if (gpu->records.present && decoding_gpu_as_spans()) {
      decode_json_records(c.tape, gpu->records, window_start, ids, cw.gpu_spans);
    } else if (gpu->records.present) {
      decode_json_records(c.tape, gpu->records, window_start, ids, cw.gpu);
    }
  }
  if (!nccl) return;
  std::vector<std::pair<uint32_t, uint32_t>> comms;  // id, name
  for (const NcclPart::Comm& comm : nccl->comms) {
    uint32_t id = strings.intern(comm.id);
    comms.push_back({id, comm.name.empty() ? StringTable::kNone : strings.intern(comm.name)});
  }
  std::vector<uint32_t> ids = intern_all(nccl->strings, strings);
  for (size_t i = 0; i < cw.collectives.size(); ++i) {
    Collective& op = cw.collectives[i];
    std::tie(op.comm, op.comm_name) = comms[nccl->op_comm[i]];
    for (uint32_t* s : {&op.func, &op.datatype, &op.algo, &op.proto}) *s = mapped(ids, *s);
  }
  for (size_t i = 0; i < cw.p2p.size(); ++i) cw.p2p[i].comm = comms[nccl->p2p_comm[i]].first;
}

void read_window(const Ctx& c, const Value& w, StringTable& strings, uint64_t& folded, CaptureWindow& cw,
                 std::string_view binary_records) {
  static constexpr std::array<std::string_view, 10> kNames = {
      "index", "start_ns", "end_ns", "dropped", "sections", "gpu", "nccl", "gpu_health", "paused", "cpu_wait"};
  std::array<const Value*, 10> f;
  c.members(w, kNames, f);
  cw.index = count(f[0]);
  cw.start_ns = time_ns(f[1]);
  cw.end_ns = time_ns(f[2]);
  if (cw.end_ns < cw.start_ns) decline();
  read_dropped(c, f[3], cw.dropped);
  if (!f[4]) decline();
  read_sections(c, *f[4], cw, folded);
  GpuPart gpu;
  NcclPart nccl;
  const bool has_gpu = f[5] && f[5]->type == Type::object, has_nccl = f[6] && f[6]->type == Type::object;
  if (f[5] && !has_gpu) decline();
  if (f[6] && !has_nccl) decline();
  if (has_gpu) read_gpu(c, *f[5], cw, gpu);
  if (has_nccl) read_nccl(c, *f[6], cw, nccl);
  // Rare parts, read by the DOM code from their own small DOM.
  if (f[7] && f[7]->type == Type::object) read_gpu_health_window(c.tape.to_json(c.index_of(*f[7])), cw);
  if (f[8]) read_paused_window(c.tape.to_json(c.index_of(*f[8])), cw);
  if (f[9]) read_cpu_wait_window(c.tape.to_json(c.index_of(*f[9])), cw);  // issue 30
  intern_window(c, has_gpu ? &gpu : nullptr, has_nccl ? &nccl : nullptr, strings, cw, cw.start_ns, binary_records);
}

}  // namespace

bool read_window_fast(const JsonTape& tape, size_t at, int version, StringTable& strings, uint64_t& folded_ranges,
                      CaptureWindow& out, std::string_view binary_records) {
  Ctx c{tape, version};
  CaptureWindow cw;
  uint64_t folded = 0;
  try {
    read_window(c, tape.at(at), strings, folded, cw, binary_records);
  } catch (...) {  // Decline, or an error of the decoders it calls: the DOM code says which
    return false;
  }
  out = std::move(cw);
  folded_ranges += folded;
  return true;
}

}  // namespace laggard::report
