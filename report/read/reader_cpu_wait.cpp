#include "reader_cpu_wait.h"

#include <algorithm>
#include <stdexcept>

#include "reader_values.h"

namespace laggard::report {
namespace {

// "nvtx": {"threads": N, "end_offset_ns": [...], "wait_ns": [...]}: in time order, each wait no
// longer than its tick times its threads.
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
    if (double(wait) > (double(end - prev) + 1e9) * std::max<uint32_t>(1, c.nvtx_threads))
      throw std::runtime_error("cpu_wait nvtx: a tick waits longer than it lasted");
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
  // A thread cannot wait longer than the window lasted (the first window may start a tick late).
  const double span = double(cw.end_ns - cw.start_ns) + 1e9;
  if (double(c.max_thread_wait_ns) > span || double(c.wait_ns) > span * double(c.threads) ||
      c.max_thread_wait_ns > c.wait_ns)
    throw std::runtime_error("cpu_wait waits longer than its window");
  if (auto it = v.find("nvtx"); it != v.end()) read_nvtx_ticks(*it, cw, c);
  cw.cpu_wait = std::make_shared<const CpuWait>(std::move(c));
}

}  // namespace laggard::report
