#include "gpu_json.h"

namespace laggard {
namespace {

template <class T>
void u32_array(JsonOut& j, const std::vector<T>& xs) {
  j.begin_array();
  for (T x : xs) {
    if (x == static_cast<T>(kNoString)) j.value(-1);
    else j.value(x);
  }
  j.end_array();
}

// uint8_t would print as a number anyway; widen so JsonOut never sees a char type.
void u8_array(JsonOut& j, const std::vector<uint8_t>& xs) {
  j.begin_array();
  for (uint8_t x : xs) j.value(static_cast<unsigned>(x));
  j.end_array();
}

void dims(JsonOut& j, const std::array<uint32_t, 3>& d) {
  j.begin_array().value(d[0]).value(d[1]).value(d[2]).end_array();
}

void kernel_stats(JsonOut& j, const std::vector<GpuKernelStats>& kernels);

}  // namespace

const char* gpu_kind_name(GpuRecordKind kind) {
  switch (kind) {
    case GpuRecordKind::memcpy: return "memcpy";
    case GpuRecordKind::memset: return "memset";
    default: return "kernel";
  }
}

// Schema v5 (docs/schema.md, "Version 5: late GPU records"): statistics of records that belong
// to an earlier window.
void late_stats(JsonOut& j, const GpuWindow& g) {
  if (!g.late.empty()) {
    j.key("late").begin_array();
    for (const GpuLateStats& l : g.late) {
      j.begin_object().field("window", l.window).key("kernels");
      kernel_stats(j, l.kernels);
      j.end_object();
    }
    j.end_array();
  }
  if (g.late_unplaced) j.field("late_unplaced", g.late_unplaced);
}

void render_gpu_window(JsonOut& j, const GpuWindow& g, int64_t window_start_ns, bool with_records) {
  j.begin_object()
      .field("sampled", g.sampled)
      .field("clock_offset_ns", g.clock_offset_ns)
      .field("launches", g.launches);
  if (!g.starved.empty()) j.field("starved", g.starved);
  if (!g.shared.empty()) j.field("shared", g.shared);
  if (g.missed_launches) j.field("missed_launches", g.missed_launches);
  if (g.clock_ticks_per_ns != 1.0) j.field("clock_ticks_per_ns", g.clock_ticks_per_ns);
  if (!g.clock_problem.empty()) j.field("clock_problem", g.clock_problem);
  j.key("strings").array(g.strings);
  if (!with_records) {  // schema v5 frames: statistics and records are binary columns
    late_stats(j, g);   // small, and corrections to other windows: stays JSON in both forms
    j.end_object();
    return;
  }

  j.key("kernels");
  kernel_stats(j, g.kernels);
  late_stats(j, g);

  const GpuRecords& r = g.records;
  std::vector<int64_t> start_off, api_off;
  start_off.reserve(r.size());
  api_off.reserve(r.size());
  for (size_t i = 0; i < r.size(); ++i) {
    start_off.push_back(r.start_ns[i] - window_start_ns);
    api_off.push_back(r.api_dur_ns[i] < 0 ? 0 : r.api_start_ns[i] - window_start_ns);
  }
  j.key("records").begin_object();
  j.key("kind");
  u8_array(j, r.kind);
  j.key("name");
  u32_array(j, r.name);
  j.key("section");
  u32_array(j, r.section);
  j.key("start_offset_ns").array(start_off);
  j.key("dur_ns").array(r.dur_ns);
  j.key("api_start_offset_ns").array(api_off);
  j.key("api_dur_ns").array(r.api_dur_ns);
  j.key("tid").array(r.tid);
  j.key("correlation").array(r.correlation);
  j.key("device").array(r.device);
  j.key("stream").array(r.stream);
  j.key("shape").array(r.shape);
  j.key("bytes").array(r.bytes);
  j.key("copy_kind");
  u8_array(j, r.copy_kind);
  j.key("flags");
  u8_array(j, r.flags);
  j.key("shapes").begin_array();
  for (const auto& s : r.shapes) {
    j.begin_array();
    for (uint32_t v : s) j.value(v);
    j.end_array();
  }
  j.end_array();
  j.end_object();
  j.end_object();
}

namespace {

void kernel_stats(JsonOut& j, const std::vector<GpuKernelStats>& kernels) {
  j.begin_array();
  for (const GpuKernelStats& k : kernels) {
    j.begin_object();
    j.key("section");
    if (k.section == kNoString) j.null(); else j.value(k.section);
    j.field("name", k.name)
        .field("kind", gpu_kind_name(k.kind))
        .field("nccl", k.nccl)
        .field("graph", k.graph);
    j.key("grid");
    dims(j, k.grid);
    j.key("block");
    dims(j, k.block);
    j.field("count", k.count)
        .field("total_ns", k.total_ns)
        .field("min_ns", k.min_ns)
        .field("max_ns", k.max_ns)
        .field("median_ns", k.median_ns)
        .end_object();
  }
  j.end_array();
}

}  // namespace

}  // namespace laggard
