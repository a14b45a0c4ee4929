#include "reader_gpu.h"

#include <climits>
#include <stdexcept>

#include <fmt/format.h>
#include "reader_frames.h"
#include "reader_gpu_late.h"
#include "reader_values.h"

namespace laggard::report {
namespace {

using nlohmann::json;

GpuKind kind_from(const std::string& s) {
  if (s == "memcpy") return GpuKind::memcpy;
  if (s == "memset") return GpuKind::memset;
  return GpuKind::kernel;
}

void dims(const json& j, uint32_t (&out)[3]) {
  if (!j.is_array()) return;
  for (size_t i = 0; i < 3 && i < j.size(); ++i) out[i] = static_cast<uint32_t>(values::integer(j[i], 0, UINT32_MAX, "grid/block"));
}

// Window-local string index -> run-wide id (kNone for null / -1).
uint32_t lookup(const std::vector<uint32_t>& ids, const json& v) {
  if (v.is_null()) return StringTable::kNone;
  int64_t i = values::integer(v, -1, INT32_MAX, "string index");
  if (i < 0) return StringTable::kNone;
  if (static_cast<size_t>(i) >= ids.size()) throw std::runtime_error("GPU string index out of range");
  return ids[static_cast<size_t>(i)];
}

// Version 4 (imported traces): gpu.stream_events, events on a stream that are not GPU activity, columnar.
void read_stream_events(const json& g, int64_t window_start, const std::vector<uint32_t>& ids, CaptureWindow& out) {
  auto it = g.find("stream_events");
  if (it == g.end() || !it->is_object()) return;
  const json& s = *it;
  const size_t n = s.value("name", json::array()).size();
  auto col = [&](const char* name) -> const json& {
    const json& c = s.at(name);
    if (!c.is_array() || c.size() != n)
      throw std::runtime_error(std::string("GPU stream event column '") + name + "' differs in length");
    return c;
  };
  const json &name = col("name"), &start = col("start_offset_ns"), &dur = col("dur_ns"), &device = col("device"),
             &stream = col("stream"), &corr = col("correlation"), &api_start = col("api_start_offset_ns"),
             &api_dur = col("api_dur_ns");
  for (size_t i = 0; i < n; ++i) {
    GpuActivity a;
    a.name = lookup(ids, name[i]);
    // Checked like the records below: an unchecked get<int32_t>() of -2e91 was undefined
    // behaviour (fuzz_reader, tests/fuzz).
    a.start_ns = window_start + values::offset_ns(start[i], "gpu.stream_events.start_offset_ns");
    a.end_ns = a.start_ns + values::dur_ns(dur[i], "gpu.stream_events.dur_ns");
    if (int64_t ad = values::integer(api_dur[i], -1, values::kMaxDurNs, "gpu.stream_events.api_dur_ns"); ad >= 0) {
      a.api_start_ns = window_start + values::offset_ns(api_start[i], "gpu.stream_events.api_start_offset_ns");
      a.api_end_ns = a.api_start_ns + ad;
    }
    a.device = static_cast<int32_t>(values::integer(device[i], INT32_MIN, INT32_MAX, "gpu.stream_events.device"));
    a.stream = static_cast<uint32_t>(values::integer(stream[i], 0, UINT32_MAX, "gpu.stream_events.stream"));
    a.correlation = static_cast<uint32_t>(values::integer(corr[i], 0, UINT32_MAX, "gpu.stream_events.correlation"));
    out.stream_events.push_back(a);
  }
}

KernelWindowStats kernel_stats(const json& k, const std::vector<uint32_t>& ids) {
  KernelWindowStats st;
  st.section = lookup(ids, k.value("section", json()));
  st.name = lookup(ids, k.at("name"));
  st.kind = kind_from(k.value("kind", std::string("kernel")));
  st.nccl = k.value("nccl", false);
  st.graph = k.value("graph", false);
  dims(k.value("grid", json()), st.grid);
  dims(k.value("block", json()), st.block);
  st.count = values::count(k.at("count"), "gpu.kernels.count");
  st.total_ns = values::dur_ns(k.at("total_ns"), "gpu.kernels.total_ns");
  st.min_ns = values::dur_ns(k.at("min_ns"), "gpu.kernels.min_ns");
  st.max_ns = values::dur_ns(k.at("max_ns"), "gpu.kernels.max_ns");
  st.median_ns = values::dur_ns(k.at("median_ns"), "gpu.kernels.median_ns");
  return st;
}

// Version 5: gpu.late, statistics of records that belong to an earlier window.
void read_late(const json& g, const std::vector<uint32_t>& ids, CaptureWindow& out) {
  auto it = g.find("late");
  if (it == g.end()) return;
  if (!it->is_array()) throw std::runtime_error("gpu.late is not an array");
  for (const json& l : *it) {
    uint64_t window = values::count(l.at("window"), "gpu.late.window");
    for (const json& k : l.at("kernels")) out.gpu_late.push_back({window, kernel_stats(k, ids)});
  }
}

// Frames of imported traces: gpu.records_api, the launching call of each record of the GPU block
// (which has no column for it), as records.api does in JSON. `full`: the records decoded into
// out.gpu from `first` on; as spans (which do not keep it) it is checked alike, then dropped.
void read_records_api(const json& g, const std::vector<uint32_t>& ids, size_t decoded, GpuActivity* full) {
  auto it = g.find("records_api");
  if (it == g.end()) return;
  if (!it->is_array() || it->size() != decoded)
    throw std::runtime_error("gpu.records_api differs in length from the records");
  for (size_t i = 0; i < decoded; ++i) {
    const uint32_t name = lookup(ids, (*it)[i]);
    if (full) full[i].api_name = name;
  }
}

}  // namespace

void read_gpu_window(const json& g, int64_t window_start, StringTable& strings, CaptureWindow& out,
                     std::string_view binary_records) {
  out.gpu_sampled = g.value("sampled", false);
  out.gpu_launches = values::unsigned_or_zero(g, "launches", "gpu.launches");
  out.gpu_starved = g.value("starved", std::string());
  out.gpu_clock_problem = g.value("clock_problem", std::string());
  out.gpu_shared = g.value("shared", std::string());
  out.gpu_missed_launches = values::unsigned_or_zero(g, "missed_launches", "gpu.missed_launches");
  std::vector<uint32_t> ids;
  for (const json& s : g.value("strings", json::array())) ids.push_back(strings.intern(s.get<std::string>()));

  for (const json& k : g.value("kernels", json::array())) out.kernel_stats.push_back(kernel_stats(k, ids));
  read_late(g, ids, out);

  read_stream_events(g, window_start, ids, out);
  if (!binary_records.empty()) {
    const size_t gpu_before = out.gpu.size();
    const size_t decoded = decode_gpu_block(binary_records, window_start, ids, out);
    const size_t full = out.gpu.size() - gpu_before;
    return read_records_api(g, ids, decoded, full ? out.gpu.data() + gpu_before : nullptr);
  }
  auto it = g.find("records");
  if (it == g.end()) return;
  const json& r = *it;
  const json& kind = r.at("kind");
  const size_t n = kind.size();
  auto col = [&](const char* name) -> const json& {
    const json& c = r.at(name);
    if (!c.is_array() || c.size() != n)
      throw std::runtime_error(std::string("GPU record column '") + name + "' differs in length");
    return c;
  };
  const json &name = col("name"), &section = col("section"), &start = col("start_offset_ns"), &dur = col("dur_ns"),
             &api_start = col("api_start_offset_ns"), &api_dur = col("api_dur_ns"), &tid = col("tid"),
             &corr = col("correlation"), &device = col("device"), &stream = col("stream"), &shape = col("shape"),
             &bytes = col("bytes"), &copy = col("copy_kind"), &flags = col("flags");
  const json& shapes = r.value("shapes", json::array());
  const json* api = r.contains("api") ? &col("api") : nullptr;  // version 4, optional
  out.gpu.reserve(out.gpu.size() + n);
  for (size_t i = 0; i < n; ++i) {
    GpuActivity a;
    int64_t k = values::integer(kind[i], 0, 255, "gpu.records.kind");
    a.kind = k == 1 ? GpuKind::memcpy : k == 2 ? GpuKind::memset : GpuKind::kernel;
    a.name = lookup(ids, name[i]);
    a.section = lookup(ids, section[i]);
    a.start_ns = window_start + values::offset_ns(start[i], "gpu.records.start_offset_ns");
    if (a.start_ns < 0) throw std::runtime_error("GPU record before 1970");
    a.end_ns = a.start_ns + values::dur_ns(dur[i], "gpu.records.dur_ns");
    int64_t ad = values::integer(api_dur[i], -1, values::kMaxDurNs, "gpu.records.api_dur_ns");
    if (ad >= 0) {
      a.api_start_ns = window_start + values::offset_ns(api_start[i], "gpu.records.api_start_offset_ns");
      a.api_end_ns = a.api_start_ns + ad;
    }
    a.api_tid = static_cast<uint32_t>(values::integer(tid[i], 0, UINT32_MAX, "gpu.records.tid"));
    a.correlation = static_cast<uint32_t>(values::integer(corr[i], 0, UINT32_MAX, "gpu.records.correlation"));
    a.device = static_cast<int32_t>(values::integer(device[i], -1, kMaxGpuDevice, "gpu.records.device"));
    a.stream = static_cast<uint32_t>(values::integer(stream[i], 0, UINT32_MAX, "gpu.records.stream"));
    int64_t sh = values::integer(shape[i], -1, INT32_MAX, "gpu.records.shape");
    if (sh >= 0) {
      if (static_cast<size_t>(sh) >= shapes.size()) throw std::runtime_error("GPU shape index out of range");
      const json& s = shapes[static_cast<size_t>(sh)];
      for (size_t d = 0; d < 3; ++d) {
        a.grid[d] = static_cast<uint32_t>(values::integer(s.at(d), 0, UINT32_MAX, "gpu.records.shapes"));
        a.block[d] = static_cast<uint32_t>(values::integer(s.at(d + 3), 0, UINT32_MAX, "gpu.records.shapes"));
      }
    }
    a.bytes = values::count(bytes[i], "gpu.records.bytes");
    a.copy_kind = static_cast<uint8_t>(values::integer(copy[i], 0, 255, "gpu.records.copy_kind"));
    int64_t f = values::integer(flags[i], 0, UINT32_MAX, "gpu.records.flags");
    a.nccl = f & 1u;
    a.graph = f & 2u;
    if (api) a.api_name = lookup(ids, (*api)[i]);
    out.gpu.push_back(a);
  }
}

void compact_gpu_records(std::vector<CaptureWindow>& windows) {
  for (CaptureWindow& w : windows) {
    if (w.gpu.empty()) continue;
    w.gpu_spans.reserve(w.gpu_spans.size() + w.gpu.size());
    for (const GpuActivity& a : w.gpu) w.gpu_spans.push_back(span_of(a));
    std::vector<GpuActivity>().swap(w.gpu);
  }
}

void finish_gpu_rank(RankData& r, std::vector<Problem>& problems) {
  merge_late_gpu_stats(r);
  size_t starved = 0, unreliable = 0, gpu_windows = 0, shared = 0;
  uint64_t missed = 0;
  std::string reason, clock_reason, shared_reason;
  for (const CaptureWindow& w : r.windows) {
    if (w.gpu_sampled || !w.kernel_stats.empty()) ++gpu_windows;
    missed += w.gpu_missed_launches;
    if (!w.gpu_shared.empty()) {
      ++shared;
      // The latest note naming a cost says most; else the latest.
      if (w.gpu_missed_launches || shared_reason.empty() || shared_reason.find("not recorded") == std::string::npos)
        shared_reason = w.gpu_shared;
    }
    if (!w.gpu_starved.empty()) {
      ++starved;
      reason = w.gpu_starved;  // the latest says most
    }
    if (!w.gpu_clock_problem.empty()) {
      ++unreliable;
      clock_reason = w.gpu_clock_problem;
    }
  }
  if (starved) {
    problems.push_back({"gpu_starved", r.rank, "",
                        fmt::format("rank {}: no GPU records in {} of {} windows although kernels were launched: {}",
                                    r.rank, starved, gpu_windows, reason)});
    if (r.cupti_status == "on")
      r.cupti_status = fmt::format("starved in {} of {} windows: {}", starved, gpu_windows, reason);
  }
  // Issue 26: another CUPTI client (torch.profiler) in the process; laggard stepped aside and
  // counted what that cost it.
  if (shared) {
    problems.push_back({"gpu_shared", r.rank, "",
                        fmt::format("rank {}: CUPTI shared with another client in {} of {} windows ({} launches not "
                                    "recorded): {}",
                                    r.rank, shared, gpu_windows, missed, shared_reason)});
    if (r.cupti_status == "on")
      r.cupti_status = fmt::format("shared in {} of {} windows, {} launches not recorded: {}", shared, gpu_windows,
                                   missed, shared_reason);
  }
  if (unreliable)
    problems.push_back({"gpu_clock", r.rank, "",
                        fmt::format("rank {}: GPU times unreliable in {} window(s): {}", r.rank, unreliable,
                                    clock_reason)});
}

}  // namespace laggard::report
