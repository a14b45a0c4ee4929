#include "reader_parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "model.h"
#include "reader_segment.h"

namespace laggard::report {

void parallel_for(size_t n, unsigned threads, const std::function<void(size_t)>& f) {
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) f(i);
  };
  std::vector<std::thread> helpers;
  for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
}

unsigned reader_threads(unsigned requested, size_t files) {
  unsigned cores = requested ? requested : std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(std::clamp<size_t>(files, 1, cores));
}

namespace {

// Local string id -> run-wide id.
class IdMap {
 public:
  explicit IdMap(const std::vector<uint32_t>& ids) : ids_(ids) {}
  void operator()(uint32_t& id) const {
    if (id != StringTable::kNone) id = id < ids_.size() ? ids_[id] : StringTable::kNone;
  }

 private:
  const std::vector<uint32_t>& ids_;
};

void remap(const IdMap& map, GpuActivity& a) {
  map(a.name);
  map(a.section);
  map(a.api_name);
}

template <class Span>
void remap(const IdMap& map, std::vector<Span>& spans) {
  for (Span& a : spans) {
    map(a.name);
    map(a.section);
  }
}

void remap(const IdMap& map, SpanChunk& chunk) {
  remap(map, chunk.labels);  // the records' names and sections are their labels'
  remap(map, chunk.escaped);
  chunk.drop_label_lookups();
}

void remap(const IdMap& map, Collective& c) {
  for (uint32_t* id : {&c.comm, &c.func, &c.datatype, &c.algo, &c.proto, &c.comm_name}) map(*id);
}

// Every model field that holds a StringTable id (model.h): a new one must be added here.
void remap(const IdMap& map, CaptureWindow& w) {
  for (KernelWindowStats& k : w.kernel_stats) {
    map(k.section);
    map(k.name);
  }
  for (GpuActivity& a : w.gpu) remap(map, a);
  remap(map, w.gpu_spans);
  for (GpuActivity& a : w.stream_events) remap(map, a);
  for (Collective& c : w.collectives) remap(map, c);
  for (CaptureWindow::P2pCounts& p : w.p2p) map(p.comm);
}

}  // namespace

std::vector<uint32_t> run_ids_of(StringTable& run, const StringTable& local) {
  std::vector<uint32_t> ids;
  ids.reserve(local.size());
  bool same = true;
  for (uint32_t i = 0; i < local.size(); ++i) {
    ids.push_back(run.intern(local.at(i)));
    same &= ids.back() == i;
  }
  if (same) ids.clear();  // ranks that met their strings in the same order: nothing to renumber
  return ids;
}

void renumber_strings(const std::vector<uint32_t>& run_ids, Segment& s) {
  if (run_ids.empty()) return;
  const IdMap map(run_ids);
  for (CaptureWindow& w : s.windows) remap(map, w);
  remap(map, s.gpu_spans);
}

}  // namespace laggard::report
