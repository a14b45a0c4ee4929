// `laggard import`: traces other tools recorded (PyTorch profiler / Kineto JSON, Nsight Systems
// SQLite) turned into laggard rank files (docs/schema.md), so report, trace and diff read them
// unchanged. Each importer fills one ImportedRank per input file; write_rank_file() writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "import_frames.h"
#include "model.h"

namespace laggard::report {

// A host-side range: a Kineto user_annotation / ProfilerStep, an NVTX range of nsys.
struct ImportedRange {
  uint32_t name = StringTable::kNone;
  int64_t start_ns = 0, end_ns = 0;  // epoch ns
  uint32_t tid = 0;
};

// A CUDA runtime / driver call that launched GPU work (the CPU side of a correlation id).
struct ImportedLaunch {
  int64_t start_ns = 0, end_ns = 0;
  uint32_t tid = 0;
  uint32_t name = StringTable::kNone;  // "cudaLaunchKernel", "cuLaunchKernel", ...
};

// An NCCL collective seen as its kernel, with what Kineto's NCCL args tell about it.
struct ImportedCollective {
  size_t gpu_index = 0;                    // into ImportedRank::gpu
  uint32_t func = StringTable::kNone;      // AllReduce, AllGather, ...
  uint32_t comm = StringTable::kNone;      // process group name ("0"), or "nccl" when unknown
  uint32_t comm_name = StringTable::kNone; // process group description ("default_pg")
  uint32_t datatype = StringTable::kNone;
  uint32_t algo = StringTable::kNone, proto = StringTable::kNone;  // from the kernel name
  int group_size = 0;
  uint64_t count = 0, bytes = 0;
  bool p2p = false;
};

struct ImportedRank {
  std::string source;        // the input file
  std::string format;        // "kineto" | "nsys"
  int rank = -1;
  int world_size = -1;
  std::string rank_source;   // where the rank came from: "distributedInfo", "file name", "--rank"
  std::string host;
  long pid = 0;
  StringTable strings;
  std::vector<ImportedRange> ranges;
  std::vector<GpuActivity> gpu;  // section filled by attribute_sections(); api times 0 when unknown
  std::vector<ImportedCollective> collectives;
  // Kineto events on a stream that are not GPU activity: cuda_sync events ("Stream Sync"), CPU ops
  // carrying a stream argument. HTA counts them as GPU time; only --hta-compatible uses them.
  // A CPU op's api times are its own (HTA's last-step rule tests its start).
  std::vector<GpuActivity> stream_events;
  int64_t time_base_ns = 0;  // Kineto baseTimeNanoseconds (0: times were epoch µs)
  std::vector<std::string> notes;  // what the importer skipped or guessed, for the user
  uint64_t unmatched_correlation = 0;  // GPU activities whose launch call is not in the trace
};

// Every GPU activity gets the innermost range open on its launching thread at launch time.
void attribute_sections(ImportedRank& rank);

// Writes RUN_DIR/rank%05d-<pid>-seg%04d.lgr, schema version 5 frames in as many segments as the
// windows need (import_frames.h), and returns their paths in order. Windows: one per profiler step
// when the trace has them (a step's window runs from its start to the next one's), else one.
std::vector<std::string> write_rank_file(const ImportedRank& rank, const std::string& run_dir,
                                         const std::string& run_id,
                                         uint64_t segment_bytes = FrameSegmentWriter::kSegmentBytes);

// "ProfilerStep#12" -> 12; -1 when the name is not a profiler step.
int profiler_step_number(const std::string& name);

}  // namespace laggard::report
