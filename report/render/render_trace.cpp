#include "render_trace.h"

#include <climits>
#include <map>

#include <nlohmann/json.hpp>

namespace laggard::report {
namespace {

using nlohmann::json;

// Thread ids of the synthetic rows; far above real OS thread ids.
constexpr int64_t kGpuTid = 1'000'000'000;  // + row index of (device, stream)
constexpr int64_t kNcclTid = 2'000'000'000; // + row index of the communicator

// CPU launch -> GPU activity arrows, in the form Kineto writes them (PyTorch profiler traces,
// e.g. HTA's test data tests/data/ns_resolution_trace/rank-0.*.pt.trace.json.gz): a flow start
// {"ph":"s","cat":"ac2g","name":"ac2g","id":N} at the launch call's start on the launching
// thread, and a flow end {"ph":"f",...,"bp":"e"} at the kernel's start on its stream, so the end
// binds to the enclosing kernel slice. Kineto's id is the CUPTI correlation id, unique in one
// process; ids here count up over the whole trace, as several ranks' correlation ids collide.
json flow(const char* ph, uint64_t id, int pid, int64_t tid, double ts) {
  json e = {{"ph", ph}, {"id", id}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"cat", "ac2g"}, {"name", "ac2g"}};
  if (ph[0] == 'f') e["bp"] = "e";
  return e;
}

bool has_launch(const GpuActivity& a) { return a.api_tid != 0 && a.api_start_ns > 0 && a.api_end_ns >= a.api_start_ns; }

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
  uint64_t flow_id = 0;
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
    std::map<uint32_t, int64_t> nccl_tids;  // communicator -> its own row
    std::map<uint32_t, uint32_t> nccl_names;  // communicator -> commName
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
        if (!has_launch(a)) continue;
        const std::string& api = model.strings.at(a.api_name);
        emit({{"name", api.empty() ? std::string("CUDA launch") : api}, {"cat", "cuda_runtime"}, {"ph", "X"},
              {"pid", r.rank}, {"tid", a.api_tid}, {"ts", us(a.api_start_ns)},
              {"dur", double(a.api_end_ns - a.api_start_ns) / 1e3}, {"args", {{"correlation", a.correlation}}}});
        ++flow_id;
        emit(flow("s", flow_id, r.rank, a.api_tid, us(a.api_start_ns)));
        emit(flow("f", flow_id, r.rank, tid, us(a.start_ns)));
      }
      for (const Collective& c : w.collectives) {
        auto [row, added] = nccl_tids.emplace(c.comm, kNcclTid + int64_t(nccl_tids.size()));
        if (c.comm_name != StringTable::kNone) nccl_names[c.comm] = c.comm_name;
        int64_t start = c.gpu_start_ns ? c.gpu_start_ns : c.upload_start_ns;
        int64_t end = c.gpu_end_ns ? c.gpu_end_ns : c.upload_end_ns;
        emit({{"name", model.strings.at(c.func)}, {"cat", "nccl"}, {"ph", "X"}, {"pid", r.rank}, {"tid", row->second},
              {"ts", us(start)}, {"dur", double(std::max<int64_t>(0, end - start)) / 1e3},
              {"args", {{"comm", model.strings.at(c.comm)}, {"seq", c.seq}, {"bytes", c.bytes},
                        {"algo", model.strings.at(c.algo)}, {"proto", model.strings.at(c.proto)}}}});
      }
    }
    // Rows in order: host threads, then GPU streams, then one NCCL row per communicator.
    auto name_row = [&](int64_t tid, const std::string& name) {
      emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", r.rank}, {"tid", tid}, {"args", {{"name", name}}}});
      emit({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", r.rank}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
    };
    for (const auto& [key, tid] : gpu_tids)
      name_row(tid, "GPU " + std::to_string(key.first) + " stream " + std::to_string(key.second));
    for (const auto& [comm, tid] : nccl_tids) {
      auto named = nccl_names.find(comm);
      name_row(tid, "NCCL " + (named != nccl_names.end() ? model.strings.at(named->second) + " (" : std::string("(")) +
                        model.strings.at(comm) + ")");
    }
  }
  out << "\n]}\n";
  return events;
}

}  // namespace laggard::report
