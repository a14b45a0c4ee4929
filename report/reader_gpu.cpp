#include "reader_gpu.h"

#include <stdexcept>

#include <fmt/format.h>

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
  for (size_t i = 0; i < 3 && i < j.size(); ++i) out[i] = j[i].get<uint32_t>();
}

// Window-local string index -> run-wide id (kNone for null / -1).
uint32_t lookup(const std::vector<uint32_t>& ids, const json& v) {
  if (v.is_null()) return StringTable::kNone;
  int64_t i = v.get<int64_t>();
  if (i < 0) return StringTable::kNone;
  if (static_cast<size_t>(i) >= ids.size()) throw std::runtime_error("GPU string index out of range");
  return ids[static_cast<size_t>(i)];
}

}  // namespace

void read_gpu_window(const json& g, int64_t window_start, StringTable& strings, CaptureWindow& out) {
  out.gpu_sampled = g.value("sampled", false);
  out.gpu_launches = g.value("launches", uint64_t{0});
  out.gpu_starved = g.value("starved", std::string());
  out.gpu_clock_problem = g.value("clock_problem", std::string());
  std::vector<uint32_t> ids;
  for (const json& s : g.value("strings", json::array())) ids.push_back(strings.intern(s.get<std::string>()));

  for (const json& k : g.value("kernels", json::array())) {
    KernelWindowStats st;
    st.section = lookup(ids, k.value("section", json()));
    st.name = lookup(ids, k.at("name"));
    st.kind = kind_from(k.value("kind", std::string("kernel")));
    st.nccl = k.value("nccl", false);
    st.graph = k.value("graph", false);
    dims(k.value("grid", json()), st.grid);
    dims(k.value("block", json()), st.block);
    st.count = k.at("count").get<uint64_t>();
    st.total_ns = k.at("total_ns").get<int64_t>();
    st.min_ns = k.at("min_ns").get<int64_t>();
    st.max_ns = k.at("max_ns").get<int64_t>();
    st.median_ns = k.at("median_ns").get<int64_t>();
    out.kernel_stats.push_back(st);
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
  out.gpu.reserve(out.gpu.size() + n);
  for (size_t i = 0; i < n; ++i) {
    GpuActivity a;
    int k = kind[i].get<int>();
    a.kind = k == 1 ? GpuKind::memcpy : k == 2 ? GpuKind::memset : GpuKind::kernel;
    a.name = lookup(ids, name[i]);
    a.section = lookup(ids, section[i]);
    a.start_ns = window_start + start[i].get<int64_t>();
    a.end_ns = a.start_ns + dur[i].get<int64_t>();
    int64_t ad = api_dur[i].get<int64_t>();
    if (ad >= 0) {
      a.api_start_ns = window_start + api_start[i].get<int64_t>();
      a.api_end_ns = a.api_start_ns + ad;
    }
    a.api_tid = tid[i].get<uint32_t>();
    a.correlation = corr[i].get<uint32_t>();
    a.device = device[i].get<int32_t>();
    a.stream = stream[i].get<uint32_t>();
    int64_t sh = shape[i].get<int64_t>();
    if (sh >= 0) {
      if (static_cast<size_t>(sh) >= shapes.size()) throw std::runtime_error("GPU shape index out of range");
      const json& s = shapes[static_cast<size_t>(sh)];
      for (size_t d = 0; d < 3; ++d) {
        a.grid[d] = s.at(d).get<uint32_t>();
        a.block[d] = s.at(d + 3).get<uint32_t>();
      }
    }
    a.bytes = bytes[i].get<uint64_t>();
    a.copy_kind = static_cast<uint8_t>(copy[i].get<unsigned>());
    unsigned f = flags[i].get<unsigned>();
    a.nccl = f & 1u;
    a.graph = f & 2u;
    out.gpu.push_back(a);
  }
}

void finish_gpu_rank(RankData& r, std::vector<Problem>& problems) {
  size_t starved = 0, unreliable = 0, gpu_windows = 0;
  std::string reason, clock_reason;
  for (const CaptureWindow& w : r.windows) {
    if (w.gpu_sampled || !w.kernel_stats.empty()) ++gpu_windows;
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
  if (unreliable)
    problems.push_back({"gpu_clock", r.rank, "",
                        fmt::format("rank {}: GPU times unreliable in {} window(s): {}", r.rank, unreliable,
                                    clock_reason)});
}

}  // namespace laggard::report
