#include "reader_cpu_wait.h"

#include <stdexcept>

#include "reader_values.h"

namespace laggard::report {
namespace {

// "nvtx": {"threads": N, "end_offset_ns": [...], "wait_ns": [...]}: in time order. A tick may end
// after its window (the last one is read just after the window closed) and its wait may exceed its
// length (several threads waiting at once).
void read_nvtx_ticks(const nlohmann::json& v, const CaptureWindow& cw, CpuWait& c) {
  if (!v.is_object()) throw std::runtime_error("cpu_wait nvtx is not an object");
  c.nvtx_threads = static_cast<uint32_t>(values::integer(v.at("threads"), 0, 1 << 20, "cpu_wait nvtx threads"));
  const nlohmann::json& ends = v.at("end_offset_ns");
  const nlohmann::json& waits = v.at("wait_ns");
  if (!ends.is_array() || !waits.is_array() || ends.size() != waits.size())
    throw std::runtime_error("cpu_wait nvtx: end_offset_ns and wait_ns are not arrays of one length");
  int64_t prev = cw.start_ns;
  for (size_t i = 0; i < ends.size(); ++i) {
    const int64_t end = cw.start_ns + values::offset_ns(ends[i], "cpu_wait nvtx end_offset_ns");
    const int64_t wait = values::dur_ns(waits[i], "cpu_wait nvtx wait_ns");
    if (end < prev) throw std::runtime_error("cpu_wait nvtx ticks are not in time order");
    c.nvtx_ticks.emplace_back(end, wait);
    prev = end;
  }
}

}  // namespace

void read_cpu_wait_window(const nlohmann::json& v, CaptureWindow& cw) {
  if (!v.is_object()) throw std::runtime_error("cpu_wait is not an object");
  CpuWait c;
  c.threads = static_cast<uint32_t>(values::integer(v.at("threads"), 0, 1 << 30, "cpu_wait threads"));
  c.run_ns = values::dur_ns(v.at("run_ns"), "cpu_wait run_ns");
  c.wait_ns = values::dur_ns(v.at("wait_ns"), "cpu_wait wait_ns");
  if (auto it = v.find("max_thread_wait_ns"); it != v.end())
    c.max_thread_wait_ns = values::dur_ns(*it, "cpu_wait max_thread_wait_ns");
  if (auto it = v.find("timeslices"); it != v.end()) c.timeslices = values::count(*it, "cpu_wait timeslices");
  // No bound by the window's length: the counters are read when the flush thread gets to it just
  // after the window closed, which on a starved machine (or under ThreadSanitizer) can be seconds later.
  if (c.max_thread_wait_ns > c.wait_ns) throw std::runtime_error("cpu_wait: one thread waited more than all");
  if (auto it = v.find("nvtx"); it != v.end()) read_nvtx_ticks(*it, cw, c);
  cw.cpu_wait = std::make_shared<const CpuWait>(std::move(c));
}

}  // namespace laggard::report
