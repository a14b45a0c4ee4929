// `laggard import` writes what capture writes by default and `laggard report` reads fastest:
// schema version 5 frame files (docs/schema.md, "Version 5: binary kernel records"), one frame per
// window, cut into segments (issue 29, issue 24 item 9: a 290 MB trace had become one 273 MB JSON
// rank file, over the reader's 256 MiB limit, so report read none of it). The importers keep
// building each window as the JSON object a JSON segment holds; this file moves its per-kernel
// records and kernel statistics into the frame's binary GPU block and appends the frame, so only
// one window is ever in memory as JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace laggard::report {

// The GPU block of a frame from a window's JSON `gpu.records` columns (with `shapes`; offsets are
// from the window's start either way) and `gpu.kernels` list, as a JSON segment holds them
// (docs/schema.md, "gpu"). Throws std::invalid_argument when a column is not what the schema says.
std::string encode_gpu_block(const nlohmann::json& records, const nlohmann::json& kernels);

// A whole frame: magic, zstd-compressed payload (raw when compression would not shrink it), CRC-32.
std::string encode_frame(std::string_view header_json, std::string_view window_json, std::string_view gpu_block);

// Writes one rank's windows as frames into RUN_DIR/rank<NNNNN>-<pid>-seg<NNNN>.lgr, starting the
// next segment once one holds `segment_bytes` of frame data (as capture does at 4 MiB: a segment
// is read whole by one thread, and never nears the reader's --max-file-mb). Each segment is
// written under a hidden temporary name and renamed when it is complete, so a reader never sees
// half a segment and an import that fails leaves no rank file behind.
class FrameSegmentWriter {
 public:
  static constexpr uint64_t kSegmentBytes = uint64_t{32} << 20;

  FrameSegmentWriter(std::string run_dir, int rank, long pid, uint64_t segment_bytes = kSegmentBytes);
  ~FrameSegmentWriter();  // removes an unfinished segment
  FrameSegmentWriter(const FrameSegmentWriter&) = delete;
  FrameSegmentWriter& operator=(const FrameSegmentWriter&) = delete;

  // `header`: the File object without `windows` (its `segment` is set here); `window`: a Window
  // object whose `gpu`, if any, holds `kernels` and `records` as in a JSON segment. Throws
  // std::runtime_error when the file cannot be written.
  void append(nlohmann::json header, nlohmann::json window);
  // Renames the last segment into place. Returns every segment's path, in order.
  std::vector<std::string> finish();

 private:
  void start_segment();
  void end_segment();

  std::string run_dir_;
  int rank_;
  long pid_;
  uint64_t segment_bytes_;
  int segment_ = -1;
  int fd_ = -1;
  uint64_t written_ = 0;
  std::string tmp_path_, path_;
  std::vector<std::string> done_;
};

}  // namespace laggard::report
