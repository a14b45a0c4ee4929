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

int64_t first_window_start(const RunModel& model) {
  int64_t t0 = INT64_MAX;
  for (const RankData& r : model.ranks)
    for (const CaptureWindow& w : r.windows) t0 = std::min(t0, w.start_ns);
  return t0 == INT64_MAX ? 0 : t0;
}

// Writes the trace one event per line, which keeps a large trace streamable and diff-able.
class TraceWriter {
 public:
  TraceWriter(const RunModel& model, std::ostream& out) : model_(model), out_(out), t0_(first_window_start(model)) {}

  size_t write() {
    out_ << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"run_id\":" << json(model_.run_id).dump()
         << "},\"traceEvents\":[";
    for (const RankData& r : model_.ranks) write_rank(r);
    out_ << "\n]}\n";
    return events_;
  }

 private:
  // The synthetic rows of one rank: (device, stream) and communicator -> thread id.
  struct Rows {
    std::map<std::pair<int32_t, uint32_t>, int64_t> gpu_tids;
    std::map<uint32_t, int64_t> nccl_tids;
    std::map<uint32_t, uint32_t> nccl_names;  // communicator -> commName
  };

  double us(int64_t ns) const { return double(ns - t0_) / 1e3; }
  const std::string& str(uint32_t id) const { return model_.strings.at(id); }

  void emit(const json& e) {
    out_ << (events_ == 0 ? "\n" : ",\n") << e.dump();
    ++events_;
  }

  void write_rank(const RankData& r) {
    emit({{"name", "process_name"}, {"ph", "M"}, {"pid", r.rank},
          {"args", {{"name", "rank " + std::to_string(r.rank) + " (" + r.host + ", pid " + std::to_string(r.pid) + ")"}}}});
    emit({{"name", "process_sort_index"}, {"ph", "M"}, {"pid", r.rank}, {"args", {{"sort_index", r.rank}}}});
    Rows rows;
    for (const CaptureWindow& w : r.windows) {
      for (const SectionWindow& s : w.sections)
        for (const Occurrence& o : s.occurrences) write_range(r.rank, s, o);
      for (const GpuActivity& a : w.gpu) write_gpu_activity(r.rank, a, rows);
      for (const Collective& c : w.collectives) write_collective(r.rank, c, rows);
    }
    name_rows(r.rank, rows);
  }

  void write_range(int pid, const SectionWindow& s, const Occurrence& o) {
    emit({{"name", s.name}, {"cat", "nvtx"}, {"ph", "X"}, {"pid", pid}, {"tid", o.tid},
          {"ts", us(o.start_ns)}, {"dur", double(o.dur_ns) / 1e3}});
  }

  void write_gpu_activity(int pid, const GpuActivity& a, Rows& rows) {
    auto [it, added] = rows.gpu_tids.emplace(std::make_pair(a.device, a.stream), kGpuTid + int64_t(rows.gpu_tids.size()));
    const int64_t tid = it->second;
    json args = {{"correlation", a.correlation},
                 {"section", a.section == StringTable::kNone ? "(no section)" : str(a.section)}};
    if (a.kind == GpuKind::kernel) {
      args["grid"] = {a.grid[0], a.grid[1], a.grid[2]};
      args["block"] = {a.block[0], a.block[1], a.block[2]};
    } else {
      args["bytes"] = a.bytes;
    }
    if (a.api_end_ns) args["launch_delay_us"] = double(a.start_ns - a.api_end_ns) / 1e3;
    emit({{"name", str(a.name)}, {"cat", a.nccl ? "nccl_kernel" : kind_name(a.kind)}, {"ph", "X"},
          {"pid", pid}, {"tid", tid}, {"ts", us(a.start_ns)}, {"dur", double(a.end_ns - a.start_ns) / 1e3},
          {"args", args}});
    if (has_launch(a)) write_launch(pid, a, tid);
  }

  // The launching call on its host thread and the arrow from it to the activity's stream.
  void write_launch(int pid, const GpuActivity& a, int64_t stream_tid) {
    const std::string& api = str(a.api_name);
    emit({{"name", api.empty() ? std::string("CUDA launch") : api}, {"cat", "cuda_runtime"}, {"ph", "X"},
          {"pid", pid}, {"tid", a.api_tid}, {"ts", us(a.api_start_ns)},
          {"dur", double(a.api_end_ns - a.api_start_ns) / 1e3}, {"args", {{"correlation", a.correlation}}}});
    ++flow_id_;
    emit(flow("s", flow_id_, pid, a.api_tid, us(a.api_start_ns)));
    emit(flow("f", flow_id_, pid, stream_tid, us(a.start_ns)));
  }

  void write_collective(int pid, const Collective& c, Rows& rows) {
    auto [row, added] = rows.nccl_tids.emplace(c.comm, kNcclTid + int64_t(rows.nccl_tids.size()));
    if (c.comm_name != StringTable::kNone) rows.nccl_names[c.comm] = c.comm_name;
    const int64_t start = c.gpu_start_ns ? c.gpu_start_ns : c.upload_start_ns;
    const int64_t end = c.gpu_end_ns ? c.gpu_end_ns : c.upload_end_ns;
    emit({{"name", str(c.func)}, {"cat", "nccl"}, {"ph", "X"}, {"pid", pid}, {"tid", row->second},
          {"ts", us(start)}, {"dur", double(std::max<int64_t>(0, end - start)) / 1e3},
          {"args", {{"comm", str(c.comm)}, {"seq", c.seq}, {"bytes", c.bytes},
                    {"algo", str(c.algo)}, {"proto", str(c.proto)}}}});
  }

  // Rows in order: host threads, then GPU streams, then one NCCL row per communicator.
  void name_rows(int pid, const Rows& rows) {
    for (const auto& [key, tid] : rows.gpu_tids)
      name_row(pid, tid, "GPU " + std::to_string(key.first) + " stream " + std::to_string(key.second));
    for (const auto& [comm, tid] : rows.nccl_tids) {
      auto named = rows.nccl_names.find(comm);
      name_row(pid, tid,
               "NCCL " + (named != rows.nccl_names.end() ? str(named->second) + " (" : std::string("(")) + str(comm) + ")");
    }
  }

  void name_row(int pid, int64_t tid, const std::string& name) {
    emit({{"name", "thread_name"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
    emit({{"name", "thread_sort_index"}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"sort_index", tid}}}});
  }

  const RunModel& model_;
  std::ostream& out_;
  const int64_t t0_;
  size_t events_ = 0;
  uint64_t flow_id_ = 0;  // flow ids count up over the whole trace (see flow())
};

}  // namespace

size_t render_trace(const RunModel& model, std::ostream& out) { return TraceWriter(model, out).write(); }

}  // namespace laggard::report
