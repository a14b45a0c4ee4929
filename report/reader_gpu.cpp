#include "reader_gpu.h"

#include <stdexcept>

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
    a.start_ns = window_start + start[i].get<int64_t>();
    a.end_ns = a.start_ns + dur[i].get<int64_t>();
    if (int64_t ad = api_dur[i].get<int64_t>(); ad >= 0) {
      a.api_start_ns = window_start + api_start[i].get<int64_t>();
      a.api_end_ns = a.api_start_ns + ad;
    }
    a.device = device[i].get<int32_t>();
    a.stream = stream[i].get<uint32_t>();
    a.correlation = corr[i].get<uint32_t>();
    out.stream_events.push_back(a);
  }
}

}  // namespace

void read_gpu_window(const json& g, int64_t window_start, StringTable& strings, CaptureWindow& out) {
  out.gpu_sampled = g.value("sampled", false);
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

  read_stream_events(g, window_start, ids, out);
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
    if (api) a.api_name = lookup(ids, (*api)[i]);
    out.gpu.push_back(a);
  }
}

}  // namespace laggard::report
