// What the file tests build again and again: the header a rank file starts with, a window and its
// sections (preload/flush/window.h), and one GPU record appended to a window's columns
// (preload/flush/gpu_window.h). Each test states only what its case is about; everything else is
// one plain value here.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_window.h"
#include "window.h"
#include "writer.h"

namespace laggard::testing {

// A rank file's header as capture writes it for rank `rank` of `world_size` ranks; a test sets
// whatever else its case needs (local rank, CUPTI, NCCL status, a fixed write time...).
inline FileInfo file_info(std::string run_id, int rank, int world_size, long pid) {
  FileInfo fi;
  fi.run_id = std::move(run_id);
  fi.run_id_source = "test";
  fi.rank = rank;
  fi.world_size = world_size;
  fi.rank_source = "RANK";
  fi.host = "h";
  fi.pid = pid;
  fi.flush_s = 1;
  fi.nvtx_status = "on";
  return fi;
}

// Window `index` of a run whose windows are `window_ns` long, the first starting at first_start_ns.
inline WindowSnapshot window_at(uint64_t index, int64_t first_start_ns = 1'000'000'000,
                                int64_t window_ns = 1'000'000'000) {
  WindowSnapshot w;
  w.index = index;
  w.start_ns = first_start_ns + static_cast<int64_t>(index) * window_ns;
  w.end_ns = w.start_ns + window_ns;
  return w;
}

// A section whose sampled occurrences lasted `durs`, the first starting at first_start_ns and
// each 1 us after the one before, on thread `tid`; its statistics are those of the sample (the
// median is the middle one as given: tests pass them sorted).
inline SectionWindowStats section_of(std::string name, const std::vector<int64_t>& durs, int64_t first_start_ns,
                                     uint32_t tid = 7) {
  SectionWindowStats s;
  s.name = std::move(name);
  for (size_t i = 0; i < durs.size(); ++i) {
    s.start_ns.push_back(first_start_ns + static_cast<int64_t>(i) * 1000);
    s.dur_ns.push_back(durs[i]);
    s.tid.push_back(tid);
    s.total_ns += durs[i];
  }
  s.count = durs.size();
  if (!durs.empty()) {
    s.min_ns = *std::min_element(durs.begin(), durs.end());
    s.max_ns = *std::max_element(durs.begin(), durs.end());
    s.median_ns = durs[durs.size() / 2];
  }
  return s;
}

// A section with statistics only (no sampled occurrences): `count` occurrences whose total,
// minimum, maximum and median are all `ns` (the tests that use it look at counts and names).
inline SectionWindowStats section_totals(std::string name, uint64_t count, int64_t ns) {
  SectionWindowStats s;
  s.name = std::move(name);
  s.count = count;
  s.total_ns = s.min_ns = s.max_ns = s.median_ns = ns;
  return s;
}

// One row of GpuRecords, named field by field so a call reads as what the record is.
struct GpuRecordFields {
  uint8_t kind = 0;  // GpuRecordKind
  uint32_t name = 0;
  uint32_t section = kNoString;
  int64_t start_ns = 0, dur_ns = 0;
  int64_t api_start_ns = 0, api_dur_ns = -1;  // -1: the launch call was not seen
  int32_t shape = -1;                         // index into GpuRecords::shapes; -1 for copies
  uint64_t bytes = 0;
  uint8_t copy_kind = 0;
  uint8_t flags = 0;
  uint32_t tid = 4242;
  uint32_t correlation = 0;
  int32_t device = 0;
  uint32_t stream = 13;
};

inline void add_gpu_record(GpuRecords& r, const GpuRecordFields& f) {
  r.kind.push_back(f.kind);
  r.name.push_back(f.name);
  r.section.push_back(f.section);
  r.start_ns.push_back(f.start_ns);
  r.dur_ns.push_back(f.dur_ns);
  r.api_start_ns.push_back(f.api_start_ns);
  r.api_dur_ns.push_back(f.api_dur_ns);
  r.tid.push_back(f.tid);
  r.correlation.push_back(f.correlation);
  r.device.push_back(f.device);
  r.stream.push_back(f.stream);
  r.shape.push_back(f.shape);
  r.bytes.push_back(f.bytes);
  r.copy_kind.push_back(f.copy_kind);
  r.flags.push_back(f.flags);
}

}  // namespace laggard::testing
