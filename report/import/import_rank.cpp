#include "import_rank.h"

#include <algorithm>
#include <climits>
#include <filesystem>
#include <functional>
#include <map>
#include <charconv>
#include <string_view>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace laggard::report {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Version 4 adds the optional fields of imported traces (docs/schema.md, "Version 4: imported traces").
constexpr int kImportSchemaVersion = 4;

struct Window {
  int64_t start_ns, end_ns;
};

// Step windows: [start of step k, start of step k+1); the first opens at the trace's start,
// the last closes at its end. Without steps, one window over the whole trace.
std::vector<Window> windows_of(const ImportedRank& r, const std::vector<int64_t>& step_starts, int64_t lo,
                               int64_t hi) {
  std::vector<Window> out;
  int64_t start = lo;
  for (int64_t s : step_starts)
    if (s > start) {
      out.push_back({start, s});
      start = s;
    }
  out.push_back({start, std::max(hi, start + 1)});
  (void)r;
  return out;
}

size_t window_of(const std::vector<Window>& w, int64_t t) {
  auto it = std::upper_bound(w.begin(), w.end(), t, [](int64_t v, const Window& x) { return v < x.start_ns; });
  return it == w.begin() ? 0 : size_t(it - w.begin()) - 1;
}

int64_t median_of(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + m, v.end());
  return v[m];
}

// Parent of each range: the innermost range of the same thread that encloses it.
std::vector<int> parents_of(const ImportedRank& r, const std::vector<size_t>& order) {
  std::vector<int> parent(r.ranges.size(), -1);
  std::vector<size_t> stack;
  uint32_t tid = UINT32_MAX;
  for (size_t i : order) {
    const ImportedRange& x = r.ranges[i];
    if (x.tid != tid) {
      stack.clear();
      tid = x.tid;
    }
    while (!stack.empty() && r.ranges[stack.back()].end_ns <= x.start_ns) stack.pop_back();
    if (!stack.empty() && r.ranges[stack.back()].end_ns >= x.end_ns) parent[i] = int(stack.back());
    stack.push_back(i);
  }
  return parent;
}

std::vector<size_t> ranges_by_thread(const ImportedRank& r) {
  std::vector<size_t> order(r.ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ImportedRange &x = r.ranges[a], &y = r.ranges[b];
    return std::tie(x.tid, x.start_ns, y.end_ns) < std::tie(y.tid, y.start_ns, x.end_ns);  // outer first
  });
  return order;
}

// Name written for a range: "ProfilerStep#12" becomes "ProfilerStep", so the steps are one section.
std::string section_name(const ImportedRank& r, uint32_t name) {
  const std::string& n = r.strings.at(name);
  return profiler_step_number(n) >= 0 ? "ProfilerStep" : n;
}

json sections_json(const ImportedRank& r, const std::vector<size_t>& members, const std::vector<int>& parent,
                   int64_t window_start) {
  std::map<std::pair<std::string, std::string>, std::vector<size_t>> groups;
  for (size_t i : members) {
    std::string p = parent[i] < 0 ? "" : section_name(r, r.ranges[size_t(parent[i])].name);
    groups[{section_name(r, r.ranges[i].name), p}].push_back(i);
  }
  json out = json::array();
  for (auto& [key, idx] : groups) {
    std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return r.ranges[a].start_ns < r.ranges[b].start_ns; });
    std::vector<int64_t> durs;
    json starts = json::array(), dur = json::array(), tids = json::array();
    int64_t total = 0, mn = INT64_MAX, mx = 0;
    for (size_t i : idx) {
      int64_t d = r.ranges[i].end_ns - r.ranges[i].start_ns;
      durs.push_back(d);
      total += d;
      mn = std::min(mn, d);
      mx = std::max(mx, d);
      starts.push_back(r.ranges[i].start_ns - window_start);
      dur.push_back(d);
      tids.push_back(r.ranges[i].tid);
    }
    out.push_back({{"name", key.first},
                   {"parent", key.second.empty() ? json() : json(key.second)},
                   {"count", idx.size()},
                   {"total_ns", total},
                   {"min_ns", mn},
                   {"max_ns", mx},
                   {"median_ns", median_of(durs)},
                   {"occurrences", {{"start_offset_ns", starts}, {"dur_ns", dur}, {"tid", tids}}}});
  }
  return out;
}

const char* kind_name(GpuKind k) { return k == GpuKind::memcpy ? "memcpy" : k == GpuKind::memset ? "memset" : "kernel"; }

// One window's gpu object: string table, per-kernel statistics and columnar records.
template <class Str>
json stream_events_json(const ImportedRank& r, const std::vector<size_t>& members, int64_t window_start, Str& str) {
  json name = json::array(), start = json::array(), dur = json::array(), device = json::array(),
       stream = json::array(), corr = json::array(), api_start = json::array(), api_dur = json::array();
  for (size_t i : members) {
    const GpuActivity& a = r.stream_events[i];
    name.push_back(str(a.name));
    start.push_back(a.start_ns - window_start);
    dur.push_back(a.end_ns - a.start_ns);
    device.push_back(a.device);
    stream.push_back(a.stream);
    corr.push_back(a.correlation);
    api_start.push_back(a.api_end_ns ? a.api_start_ns - window_start : 0);
    api_dur.push_back(a.api_end_ns ? a.api_end_ns - a.api_start_ns : -1);
  }
  return {{"name", name}, {"start_offset_ns", start}, {"dur_ns", dur}, {"device", device}, {"stream", stream},
          {"correlation", corr}, {"api_start_offset_ns", api_start}, {"api_dur_ns", api_dur}};
}

using Shape = std::array<uint32_t, 6>;  // grid x, y, z, block x, y, z

// Per (section, name, kind, nccl, shape): count, total, min, max and median duration, the
// window's "kernels" list, largest total first.
json kernel_stats_json(const ImportedRank& r, const std::vector<size_t>& members,
                       const std::function<json(uint32_t)>& str) {
  using Key = std::tuple<uint32_t, uint32_t, int, bool, Shape>;
  std::map<Key, std::vector<int64_t>> stats;
  for (size_t i : members) {
    const GpuActivity& a = r.gpu[i];
    Shape sh{a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2]};
    stats[{a.section, a.name, int(a.kind), a.nccl, sh}].push_back(a.end_ns - a.start_ns);
  }
  json kernels = json::array();
  for (auto& [key, durs] : stats) {
    auto& [sec, nm, k, nccl, sh] = key;
    int64_t total = 0;
    for (int64_t d : durs) total += d;
    kernels.push_back({{"section", str(sec)},
                       {"name", str(nm)},
                       {"kind", kind_name(GpuKind(k))},
                       {"nccl", nccl},
                       {"graph", false},
                       {"grid", {sh[0], sh[1], sh[2]}},
                       {"block", {sh[3], sh[4], sh[5]}},
                       {"count", durs.size()},
                       {"total_ns", total},
                       {"min_ns", *std::min_element(durs.begin(), durs.end())},
                       {"max_ns", *std::max_element(durs.begin(), durs.end())},
                       {"median_ns", median_of(durs)}});
  }
  std::sort(kernels.begin(), kernels.end(),
            [](const json& a, const json& b) { return a["total_ns"].get<int64_t>() > b["total_ns"].get<int64_t>(); });
  return kernels;
}

// The window's GPU records as the schema's columns (version 2 "records").
json gpu_records_json(const ImportedRank& r, const std::vector<size_t>& members, int64_t window_start,
                      const std::function<json(uint32_t)>& str) {
  std::map<Shape, int> shapes;
  json shape_list = json::array();
  json kind = json::array(), name = json::array(), section = json::array(), start = json::array(),
       dur = json::array(), api_start = json::array(), api_dur = json::array(), tid = json::array(),
       corr = json::array(), device = json::array(), stream = json::array(), shape = json::array(),
       bytes = json::array(), copy = json::array(), flags = json::array(), api = json::array();
  for (size_t i : members) {
    const GpuActivity& a = r.gpu[i];
    kind.push_back(int(a.kind));
    name.push_back(str(a.name));
    json s = str(a.section);
    section.push_back(s.is_null() ? json(-1) : s);
    start.push_back(a.start_ns - window_start);
    dur.push_back(a.end_ns - a.start_ns);
    bool launch_known = a.api_end_ns != 0;
    api_start.push_back(launch_known ? a.api_start_ns - window_start : 0);
    api_dur.push_back(launch_known ? a.api_end_ns - a.api_start_ns : -1);
    tid.push_back(a.api_tid);
    corr.push_back(a.correlation);
    device.push_back(a.device);
    stream.push_back(a.stream);
    if (a.kind == GpuKind::kernel) {
      Shape sh{a.grid[0], a.grid[1], a.grid[2], a.block[0], a.block[1], a.block[2]};
      auto [it, added] = shapes.emplace(sh, int(shape_list.size()));
      if (added) shape_list.push_back(sh);
      shape.push_back(it->second);
    } else {
      shape.push_back(-1);
    }
    bytes.push_back(a.bytes);
    copy.push_back(a.copy_kind);
    flags.push_back((a.nccl ? 1u : 0u) | (a.graph ? 2u : 0u) | (launch_known ? 0u : 4u));
    json api_name = str(a.api_name);
    api.push_back(api_name.is_null() ? json(-1) : api_name);
  }
  return {{"kind", kind}, {"name", name}, {"section", section}, {"start_offset_ns", start}, {"dur_ns", dur},
          {"api_start_offset_ns", api_start}, {"api_dur_ns", api_dur}, {"tid", tid}, {"correlation", corr},
          {"device", device}, {"stream", stream}, {"shape", shape}, {"bytes", bytes}, {"copy_kind", copy},
          {"flags", flags}, {"api", api}, {"shapes", shape_list}};
}

json gpu_json(const ImportedRank& r, const std::vector<size_t>& members, const std::vector<size_t>& stream_event_members,
              int64_t window_start) {
  std::unordered_map<uint32_t, int> local;  // run string id -> window index
  json strings = json::array();
  const std::function<json(uint32_t)> str = [&](uint32_t id) -> json {
    if (id == StringTable::kNone) return json();
    auto [it, added] = local.emplace(id, int(strings.size()));
    if (added) strings.push_back(r.strings.at(id));
    return it->second;
  };
  // The string table fills as the parts are built: records first, as before, for stable indices.
  json records = gpu_records_json(r, members, window_start, str);
  json stream_events = stream_events_json(r, stream_event_members, window_start, str);
  json kernels = kernel_stats_json(r, members, str);
  return {{"sampled", true},
          {"clock_offset_ns", 0},
          {"strings", strings},
          {"kernels", kernels},
          {"records", records},
          {"stream_events", stream_events}};
}

// The window's NCCL collectives, in the schema's version 3 shape. Communicators are the process
// groups Kineto names; seq counts each (group, func) on this rank, which lines ranks up as long
// as every rank's trace covers the same collectives.
json nccl_json(const ImportedRank& r, const std::vector<size_t>& members, int64_t window_start,
               std::map<std::pair<uint32_t, uint32_t>, uint64_t>& seq) {
  std::map<uint32_t, int> comm_index;
  json comms = json::array(), strings = json::array();
  std::map<uint32_t, int> local;
  auto str = [&](uint32_t id) -> json {
    if (id == StringTable::kNone) return -1;
    auto [it, added] = local.emplace(id, int(strings.size()));
    if (added) strings.push_back(r.strings.at(id));
    return it->second;
  };
  json c_comm = json::array(), c_p2p = json::array(), c_func = json::array(), c_seq = json::array(),
       c_count = json::array(), c_bytes = json::array(), c_dtype = json::array(), c_root = json::array(),
       c_peer = json::array(), c_algo = json::array(), c_proto = json::array(), c_nch = json::array(),
       c_ch = json::array(), c_hs = json::array(), c_hd = json::array(), c_gs = json::array(), c_gd = json::array();
  for (size_t i : members) {
    const ImportedCollective& c = r.collectives[i];
    const GpuActivity& k = r.gpu[c.gpu_index];
    auto [it, added] = comm_index.emplace(c.comm, int(comms.size()));
    if (added) {
      json name = c.comm_name == StringTable::kNone ? json() : json(r.strings.at(c.comm_name));
      comms.push_back({{"id", r.strings.at(c.comm)}, {"name", name}, {"nranks", c.group_size},
                       {"rank", r.rank}, {"nnodes", 0}});
    }
    c_comm.push_back(it->second);
    c_p2p.push_back(c.p2p ? 1 : 0);
    c_func.push_back(str(c.func));
    c_seq.push_back(c.p2p ? 0 : seq[{c.comm, c.func}]++);
    c_count.push_back(c.count);
    c_bytes.push_back(c.bytes);
    c_dtype.push_back(str(c.datatype));
    c_root.push_back(c.p2p ? -1 : 0);
    c_peer.push_back(-1);
    c_algo.push_back(str(c.algo));
    c_proto.push_back(str(c.proto));
    c_nch.push_back(0);
    c_ch.push_back(0);
    bool launch_known = k.api_end_ns != 0;
    c_hs.push_back((launch_known ? k.api_start_ns : k.start_ns) - window_start);
    c_hd.push_back(launch_known ? json(k.api_end_ns - k.api_start_ns) : json());
    c_gs.push_back(k.start_ns - window_start);
    c_gd.push_back(k.end_ns - k.start_ns);
  }
  return {{"gpu_clock", "import"},
          {"comms", comms},
          {"strings", strings},
          {"ops",
           {{"comm", c_comm}, {"p2p", c_p2p}, {"func", c_func}, {"seq", c_seq}, {"count", c_count},
            {"bytes", c_bytes}, {"datatype", c_dtype}, {"root", c_root}, {"peer", c_peer}, {"algo", c_algo},
            {"proto", c_proto}, {"nchannels", c_nch}, {"channels", c_ch}, {"host_start_offset_ns", c_hs},
            {"host_dur_ns", c_hd}, {"gpu_start_offset_ns", c_gs}, {"gpu_dur_ns", c_gd}}},
          {"dropped", json::object()}};
}

json drop_counts(uint64_t unmatched) {
  json d = json::object();
  for (const char* k : {"ring_full", "stack_overflow", "unbalanced_pop", "unmatched_end", "start_end_evicted",
                        "names_overflow", "occurrences_sampled", "unclosed_at_exit", "cupti_records_dropped",
                        "gpu_buffer_full", "unmatched_correlation", "gpu_no_timestamp", "gpu_records_not_stored"})
    d[k] = 0;
  d["unmatched_correlation"] = unmatched;
  return d;
}

}  // namespace

// HTA's ProfilerStepGroupingPattern, ^ProfilerStep\s*#\s*(\d+), in plain code: std::regex
// recursed once per digit and overflowed the stack on a name with 40,000 digits (issue 24).
int profiler_step_number(const std::string& name) {
  constexpr std::string_view kPrefix = "ProfilerStep";
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  size_t i = kPrefix.size();
  while (i < name.size() && is_space(name[i])) ++i;
  if (i >= name.size() || name[i] != '#') return -1;
  ++i;
  while (i < name.size() && is_space(name[i])) ++i;
  int step = -1;
  auto [end, ec] = std::from_chars(name.data() + i, name.data() + name.size(), step);
  return ec == std::errc() && end != name.data() + i && step >= 0 ? step : -1;
}

// As capture does: a launch from a thread with no open range (PyTorch's autograd threads launch
// the backward pass) takes the innermost range open on the main thread, the one that ran the
// profiler steps (else the one with the most ranges).
static void attribute_to_main_thread(ImportedRank& r, const std::vector<size_t>& order) {
  std::map<uint32_t, std::pair<int, size_t>> per_tid;  // tid -> (has steps, ranges)
  for (const auto& x : r.ranges) {
    auto& p = per_tid[x.tid];
    p.first |= profiler_step_number(r.strings.at(x.name)) >= 0;
    ++p.second;
  }
  if (per_tid.empty()) return;
  uint32_t main = std::max_element(per_tid.begin(), per_tid.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
  std::vector<size_t> main_ranges;  // outer first, by start
  for (size_t i : order)
    if (r.ranges[i].tid == main && !r.strings.at(r.ranges[i].name).starts_with("gpu::")) main_ranges.push_back(i);
  for (GpuActivity& a : r.gpu) {
    if (a.section != StringTable::kNone || !a.api_end_ns || a.api_tid == main) continue;
    // Innermost: the latest-starting range that contains the launch.
    auto end = std::upper_bound(main_ranges.begin(), main_ranges.end(), a.api_start_ns,
                                [&](int64_t t, size_t i) { return t < r.ranges[i].start_ns; });
    for (auto it = end; it != main_ranges.begin();) {
      --it;
      if (r.ranges[*it].end_ns > a.api_start_ns) {
        a.section = r.ranges[*it].name;
        break;
      }
    }
  }
}

void attribute_sections(ImportedRank& r) {
  std::vector<size_t> order = ranges_by_thread(r);
  std::vector<size_t> acts;
  for (size_t i = 0; i < r.gpu.size(); ++i)
    if (r.gpu[i].api_end_ns) acts.push_back(i);
  std::sort(acts.begin(), acts.end(), [&](size_t a, size_t b) {
    return std::tie(r.gpu[a].api_tid, r.gpu[a].api_start_ns) < std::tie(r.gpu[b].api_tid, r.gpu[b].api_start_ns);
  });
  // Sweep each thread's ranges (outer first) and launches together, keeping the open ranges.
  size_t ri = 0;
  std::vector<size_t> stack;
  uint32_t tid = UINT32_MAX;
  for (size_t ai : acts) {
    GpuActivity& a = r.gpu[ai];
    if (a.api_tid != tid) {
      tid = a.api_tid;
      stack.clear();
      ri = size_t(std::lower_bound(order.begin(), order.end(), tid,
                                   [&](size_t i, uint32_t t) { return r.ranges[i].tid < t; }) -
                  order.begin());
    }
    while (ri < order.size() && r.ranges[order[ri]].tid == tid && r.ranges[order[ri]].start_ns <= a.api_start_ns) {
      while (!stack.empty() && r.ranges[stack.back()].end_ns <= r.ranges[order[ri]].start_ns) stack.pop_back();
      stack.push_back(order[ri++]);
    }
    while (!stack.empty() && r.ranges[stack.back()].end_ns <= a.api_start_ns) stack.pop_back();
    // The stack may hold a closed range under an open one only if ranges overlap without nesting.
    a.section = StringTable::kNone;
    for (auto it = stack.rbegin(); it != stack.rend(); ++it)
      if (r.ranges[*it].end_ns > a.api_start_ns) {
        a.section = r.strings.at(r.ranges[*it].name).empty() ? StringTable::kNone : r.ranges[*it].name;
        break;
      }
  }
  attribute_to_main_thread(r, order);
}

namespace {

// The earliest and latest time anything of the rank happened (CPU ranges, launches, GPU work).
std::pair<int64_t, int64_t> time_span(const ImportedRank& r) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const auto& x : r.ranges) lo = std::min(lo, x.start_ns), hi = std::max(hi, x.end_ns);
  for (const auto& a : r.gpu) {
    lo = std::min(lo, a.api_end_ns ? std::min(a.api_start_ns, a.start_ns) : a.start_ns);
    hi = std::max(hi, a.end_ns);
  }
  if (lo > hi) throw std::runtime_error("nothing to import: no ranges and no GPU activity");
  return {lo, hi};
}

// Indices into the rank's lists, per window: a range by its end (as capture does), GPU work by its start.
struct WindowMembers {
  std::vector<std::vector<size_t>> ranges, gpu, stream_events, collectives;
};

WindowMembers members_by_window(const ImportedRank& r, const std::vector<Window>& windows) {
  WindowMembers m;
  m.ranges.resize(windows.size());
  m.gpu.resize(windows.size());
  m.stream_events.resize(windows.size());
  m.collectives.resize(windows.size());
  for (size_t i = 0; i < r.ranges.size(); ++i) m.ranges[window_of(windows, r.ranges[i].end_ns - 1)].push_back(i);
  std::vector<size_t> by_start(r.gpu.size());
  for (size_t i = 0; i < by_start.size(); ++i) by_start[i] = i;
  std::stable_sort(by_start.begin(), by_start.end(), [&](size_t a, size_t b) { return r.gpu[a].start_ns < r.gpu[b].start_ns; });
  for (size_t i : by_start) m.gpu[window_of(windows, r.gpu[i].start_ns)].push_back(i);
  for (size_t i = 0; i < r.stream_events.size(); ++i)
    m.stream_events[window_of(windows, r.stream_events[i].start_ns)].push_back(i);
  for (size_t i = 0; i < r.collectives.size(); ++i)
    m.collectives[window_of(windows, r.gpu[r.collectives[i].gpu_index].start_ns)].push_back(i);
  return m;
}

json rank_file_header(const ImportedRank& r, const std::string& run_id, int64_t start_ns, int64_t end_ns) {
  return {{"schema", "laggard-rank"},
          {"schema_version", kImportSchemaVersion},
          {"run_id", run_id},
          {"run_id_source", "laggard import"},
          {"rank", r.rank},
          {"local_rank", json()},
          {"world_size", r.world_size > 0 ? json(r.world_size) : json()},
          {"rank_source", r.rank_source},
          {"host", r.host},
          {"pid", r.pid},
          {"segment", 0},
          {"process_start_ns", start_ns},
          {"data_end_ns", end_ns},
          {"written_ns", end_ns},
          {"final", true},
          {"signal", json()},
          {"clock", {{"source", "imported from " + r.format}, {"epoch_offset_ns", 0}, {"gpu_offset_ns", 0},
                     {"gpu_offset_uncertainty_ns", 0}}},
          {"config", {{"flush_s", 0}, {"sections", ""}, {"cupti", true}, {"profiling_interval", 1}}},
          {"capture", {{"nvtx", "imported"}, {"cupti", r.gpu.empty() ? "off: no GPU activity in the trace" : "on"},
                       {"nccl", r.collectives.empty() ? "off: no NCCL kernels in the trace" : "on"}}},
          {"import", {{"format", r.format}, {"source", r.source}, {"time_base_ns", r.time_base_ns},
                      {"notes", r.notes}}},
          {"dropped", drop_counts(r.unmatched_correlation)}};
}

// The windows one at a time, each a frame (import_frames.h), so only one window is in memory as JSON.
void write_windows(FrameSegmentWriter& out, const ImportedRank& r, const json& head, const std::vector<Window>& windows,
                   const WindowMembers& members) {
  const std::vector<int> parent = parents_of(r, ranges_by_thread(r));
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> seq;
  for (size_t w = 0; w < windows.size(); ++w) {
    json win = {{"index", w},
                {"start_ns", windows[w].start_ns},
                {"end_ns", windows[w].end_ns},
                {"dropped", drop_counts(0)},
                {"sections", sections_json(r, members.ranges[w], parent, windows[w].start_ns)}};
    if (!r.gpu.empty()) win["gpu"] = gpu_json(r, members.gpu[w], members.stream_events[w], windows[w].start_ns);
    if (!r.collectives.empty()) win["nccl"] = nccl_json(r, members.collectives[w], windows[w].start_ns, seq);
    out.append(head, std::move(win));
  }
}

}  // namespace

std::vector<std::string> write_rank_file(const ImportedRank& r, const std::string& run_dir, const std::string& run_id,
                                         uint64_t segment_bytes) {
  const auto [lo, hi] = time_span(r);
  std::vector<int64_t> step_starts;
  for (const auto& x : r.ranges)
    if (profiler_step_number(r.strings.at(x.name)) >= 0) step_starts.push_back(x.start_ns);
  std::sort(step_starts.begin(), step_starts.end());
  const std::vector<Window> windows = windows_of(r, step_starts, lo, hi);

  fs::create_directories(run_dir);
  FrameSegmentWriter out(run_dir, r.rank, r.pid, segment_bytes);
  write_windows(out, r, rank_file_header(r, run_id, lo, windows.back().end_ns), windows, members_by_window(r, windows));
  return out.finish();
}

}  // namespace laggard::report
