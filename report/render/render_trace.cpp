#include "render_trace.h"

#include <climits>
#include <map>

#include <nlohmann/json.hpp>

namespace laggard::report {
namespace {

using nlohmann::json;

// Thread ids of the synthetic rows; far above real OS thread ids.
constexpr int64_t kGpuTid = 1'000'000'000;  // + row index of (device, stream)
constexpr int64_t kNcclTid = 2'000'000'000;

const char* kind_name(GpuKind k) { return k == GpuKind::kernel ? "kernel" : k == GpuKind::memcpy ? "memcpy" : "memset"; }

}  // namespace

size_t render_trace(const RunModel& model, std::ostream& out) {
  int64_t t0 = INT64_MAX;
  for (const RankData& r : model.ranks)
    for (const CaptureWindow& w : r.windows) t0 = std::min(t0, w.start_ns);
  if (t0 == INT64_MAX) t0 = 0;
  auto us = [t0](int64_t ns) { return double(ns - t0) / 1e3; };

  // One event per line keeps a large trace streamable and diff-able.
  size_t events = 0;
  bool first = true;
  auto emit = [&](const json& e) {
    out << (first ? "\n" : ",\n") << e.dump();
    first = false;
    ++events;
  };
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run_id\":" << json(model.run_id).dump()
      << "},\"traceEvents\":[";
  for (const RankData& r : model.ranks) {
    emit({{"name", "process_name"}, {"ph", "M"}, {"pid", r.rank},
          {"args", {{"name", "rank " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) + ")"}}}});
    emit({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r.rank}, {"args", {{"sort_index", r.rank}}}});
    std::map<std::pair<int32_t, uint32_t>, int64_t> gpu_tids;
    bool nccl = false;
    for (const CaptureWindow& w : r.windows) {
      for (const SectionWindow& s : w.sections)
        for (const Occurrence& o : s.occurrences)
          emit({{"name", s.name}, {"cat", "nvtx"}, {"ph", "X"}, {"pid", r.rank}, {"tid", o.tid},
                {"ts", us(o.start_ns)}, {"dur", double(o.dur_ns) / 1e3}});
      for (const GpuActivity& a : w.gpu) {
        auto [it, added] = gpu_tids.emplace(std::make_pair(a.device, a.stream), kGpuTid + int64_t(gpu_tids.size()));
        int64_t tid = it->second;
        json args = {{"correlation", a.correlation},
                     {"section", a.section == StringTable::kNone ? "(no section)" : model.strings.at(a.section)}};
        if (a.kind == GpuKind::kernel) {
          args["grid"] = {a.grid[0], a.grid[1], a.grid[2]};
          args["block"] = {a.block[0], a.block[1], a.block[2]};
        } else {
          args["bytes"] = a.bytes;
        }
        if (a.api_end_ns) args["launch_delay_us"] = double(a.start_ns - a.api_end_ns) / 1e3;
        emit({{"name", model.strings.at(a.name)}, {"cat", a.nccl ? "nccl_kernel" : kind_name(a.kind)}, {"ph", "X"},
              {"pid", r.rank}, {"tid", tid}, {"ts", us(a.start_ns)}, {"dur", double(a.end_ns - a.start_ns) / 1e3},
              {"args", args}});
      }
      for (const Collective& c : w.collectives) {
        nccl = true;
        int64_t start = c.gpu_start_ns ? c.gpu_start_ns : c.upload_start_ns;
        int64_t end = c.gpu_end_ns ? c.gpu_end_ns : c.upload_end_ns;
        emit({{"name", model.strings.at(c.func)}, {"cat", "nccl"}, {"ph", "X"}, {"pid", r.rank}, {"tid", kNcclTid},
              {"ts", us(start)}, {"dur", double(std::max<int64_t>(0, end - start)) / 1e3},
              {"args", {{"comm", model.strings.at(c.comm)}, {"seq", c.seq}, {"bytes", c.bytes},
                        {"algo", model.strings.at(c.algo)}, {"proto", model.strings.at(c.proto)}}}});
      }
    }
    for (const auto& [key, tid] : gpu_tids)
      emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", tid},
            {"args", {{"name", "GPU " + std::to_string(key.first) + " stream " + std::to_string(key.second)}}}});
    if (nccl)
      emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", kNcclTid}, {"args", {{"name", "NCCL"}}}});
  }
  out << "\n]}\n";
  return events;
}

}  // namespace laggard::report
