// The reader's two halves, apart so they can be tested and fuzzed without files: one rank file's
// text into a Segment, then a run's segments into the run model (docs/schema.md).
#pragma once

#include <string>
#include <vector>

#include "model.h"
#include "reader.h"

namespace laggard::report {

// One parsed segment file.
struct Segment {
  std::string path;
  std::string run_id;
  int rank = -1, local_rank = -1, world_size = -1, segment = 0;
  std::string host, nvtx_status, nccl_status;
  long pid = 0, ppid = 0;
  std::string image;           // issue 24: which image of the process (files are grouped by it)
  uint64_t started_ticks = 0;
  uint64_t windows_lost = 0;
  int64_t process_start_ns = 0, data_end_ns = 0;
  bool final = false;
  int signal = 0;
  double flush_s = 0;
  Counts dropped;
  std::vector<CaptureWindow> windows;
  // The windows' compact GPU spans in one array, in the file's order, packed, once
  // consolidate_gpu_spans has moved them here (each window keeps its range; CaptureWindow::gpu_spans).
  SpanChunk gpu_spans;
  int64_t gpu_clock_offset_ns = 0;
  std::string cupti_status;
  int64_t import_time_base_ns = -1;  // imported traces: the trace's own time base (docs/schema.md)
  uint64_t folded_ranges = 0;  // in "(other)", left out of the windows' sections
  std::string sections_filter;
  std::vector<std::string> notes;  // values ignored and windows left out as impossible
  std::string torn_tail;  // schema v5: what was cut off the end of the file (a problem entry)
};

// Moves the windows' compact GPU spans into s.gpu_spans, one packed array sized once, each window
// keeping its range (CaptureWindow::gpu_spans_first/count). Done as each file is read, the windows' own
// arrays are freed before the next file's are made and reused for them: the run's spans are never
// held twice (issue 29).
void consolidate_gpu_spans(Segment& s);

// Throws std::runtime_error (or a json exception) when the file cannot be used at all; values
// or windows that are impossible are left out and described in Segment::notes. Reads JSON files
// (versions 1-5) and version 5 frame files (reader_frames.h).
Segment parse_segment_text(const std::string& text, const std::string& path, StringTable& strings);

// Tests only: false makes parse_segment_text read every window, and every frame file's header,
// with the DOM code, the reference the fast paths (reader_fast.h, the header's tape reader in
// reader.cpp) are held to. On by default.
void use_fast_reader(bool on);

// The strings of one file (`local`) into the run's table, and every id its segment holds
// renumbered to match: files parsed apart on several threads end up with the ids one thread
// would have given. In two parts so that the renumbering (every record of the file) can run on
// any core: the run's ids of `local`'s strings (interned in file order, one thread), empty when
// they are the same ids, then the renumbering with them.
std::vector<uint32_t> run_ids_of(StringTable& run, const StringTable& local);
void renumber_strings(const std::vector<uint32_t>& run_ids, Segment& s);

// Fills model.ranks, world_size, run_id and problems from the parsed segments.
void assemble_run(RunModel& model, std::vector<Segment>& segments, const ReadOptions& opts);

}  // namespace laggard::report
