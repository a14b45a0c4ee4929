// Schema version 5, "binary kernel records" (docs/schema.md): a segment file made of appended,
// self-checking frames, one per window, so each flush writes its window once and a crash
// mid-append leaves only whole windows readable. Also the compact columnar form of a window's
// per-kernel GPU records that a frame carries.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpu_window.h"

namespace laggard {

// The 4 bytes every frame starts with; the reader tells a version 5 file by them.
constexpr char kFrameMagic[4] = {'L', 'G', 'F', '5'};
constexpr uint8_t kFrameRaw = 0, kFrameZstd = 1;

// CRC-32 (ISO-HDLC, zlib's crc32): the frame checksum.
uint32_t crc32_of(std::string_view data);

// The window's GPU records as fixed-width little-endian columns (docs/schema.md, "Version 5").
std::string encode_gpu_records(const GpuRecords& r, int64_t window_start_ns);

// The window's GPU block in a frame: its records (above), then its kernel statistics as columns.
std::string encode_gpu_block(const GpuWindow& g, int64_t window_start_ns);

// One frame: header JSON, window JSON and the records block, zstd-compressed when libzstd.so.1
// can be loaded (dlopen: liblaggard.so gains no library dependency), else stored raw.
std::string encode_frame(std::string_view header_json, std::string_view window_json,
                         std::string_view gpu_records);

// Whether frames are compressed in this process (libzstd.so.1 found), for tests and benchmarks.
bool frames_compressed();

}  // namespace laggard
