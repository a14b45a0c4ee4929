// What the file tests build again and again: the header a rank file starts with and one GPU
// record appended to a window's columns (preload/gpu_window.h). Each test states only what its
// case is about; everything else is one plain value here.
#pragma once

#include <cstdint>
#include <string>

#include "gpu_window.h"
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
