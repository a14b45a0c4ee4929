// Reading a window's "gpu" object (schema_version 2, docs/schema.md "GPU") into the run model.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "model.h"

namespace laggard::report {

// Fills out.kernel_stats, out.gpu and out.gpu_sampled; strings are interned in `strings`.
// Throws std::runtime_error (or a json exception) for malformed input; the reader turns that
// into a Problem for the file.
// `binary_records`: schema v5 frames carry the records as columns beside the JSON (reader_frames.h).
void read_gpu_window(const nlohmann::json& gpu, int64_t window_start_ns, StringTable& strings, CaptureWindow& out,
                     std::string_view binary_records = {});

// ReadOptions::compact_gpu: each window's GpuActivity records become GpuSpans (same order) and
// the GpuActivity storage is freed. Called on each file as soon as it is parsed, so at most one
// file per thread holds full records at a time.
void compact_gpu_records(std::vector<CaptureWindow>& windows);

// After a rank's windows are read: starved windows and windows with unreliable GPU times
// become problems, and a cupti status of "on" says it was starved (schema v4).
void finish_gpu_rank(RankData& rank, std::vector<Problem>& problems);

}  // namespace laggard::report
