// Schema version 5 segment files (docs/schema.md, "Version 5: binary kernel records"): a
// sequence of appended frames, each one window with the file header as of that window, checked
// by length and CRC-32. A process killed mid-append leaves a torn tail: the whole frames before
// it are read, and the tail is described.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model.h"

namespace laggard::report {

// One frame's parts, pointing into its decompressed payload.
struct FrameParts {
  std::string_view header_json, window_json, gpu_records;
};

struct FrameScan {
  size_t frames = 0;      // whole frames read
  std::string torn_tail;  // empty, or what was wrong with the rest of the file and how much it was
};

bool is_frame_file(std::string_view text);

// Calls on_frame for each whole frame, in file order; stops at the first one that is cut off
// or does not check out, and says so in the result. Never throws itself.
FrameScan scan_frames(std::string_view text, const std::function<void(const FrameParts&)>& on_frame);

// While alive, decode_gpu_block on this thread decodes per-kernel records straight into
// CaptureWindow::gpu_spans instead of gpu (ReadOptions::compact_gpu: the report's analyses read
// spans, so full records need never exist). Checks and errors stay the same.
class DecodeGpuAsSpans {
 public:
  explicit DecodeGpuAsSpans(bool on);
  ~DecodeGpuAsSpans();
  DecodeGpuAsSpans(const DecodeGpuAsSpans&) = delete;
  DecodeGpuAsSpans& operator=(const DecodeGpuAsSpans&) = delete;

 private:
  bool previous_;
};

// Whether a DecodeGpuAsSpans is on for this thread (the JSON records' fast path reads it too).
bool decoding_gpu_as_spans();

// While alive (and a DecodeGpuAsSpans is on), decode_gpu_block on this thread packs the records into
// `chunk`, the file's array (Segment::gpu_spans), and gives the window their place there
// (CaptureWindow::gpu_spans_first/count) instead of an array of its own. A window refused after its
// block was decoded must take its records back out (SpanChunk::truncate). most_records: how many the
// file can hold at most (most_gpu_records), reserved at its first block; 0: grown as blocks come.
class DecodeSpansInto {
 public:
  explicit DecodeSpansInto(SpanChunk& chunk, size_t most_records = 0);
  ~DecodeSpansInto();
  DecodeSpansInto(const DecodeSpansInto&) = delete;
  DecodeSpansInto& operator=(const DecodeSpansInto&) = delete;

 private:
  SpanChunk* previous_;
  size_t previous_most_;
};

// An upper bound on the GPU records in a frame file (from its frames' sizes, without decompressing).
size_t most_gpu_records(std::string_view text);

// Decodes a frame's GPU block (records, then kernel statistics, as fixed-width columns) into
// out.gpu (or out.gpu_spans, or DecodeSpansInto's chunk, see above) and out.kernel_stats; returns the
// number of records. `ids` maps the window's string indices to run-wide ids. Throws
// std::runtime_error naming what is impossible.
size_t decode_gpu_block(std::string_view block, int64_t window_start_ns, const std::vector<uint32_t>& ids,
                        CaptureWindow& out);

}  // namespace laggard::report
