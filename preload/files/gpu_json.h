// JSON for a window's GPU activity (docs/schema.md, "GPU"), written by the segment writer.
#pragma once

#include <cstdint>

#include "gpu_window.h"
#include "json_out.h"

namespace laggard {

// Renders the window's "gpu" object. Times are written relative to window_start_ns.
// `with_records`: false leaves "kernels" and "records" out (schema v5 frames carry them in binary).
void render_gpu_window(JsonOut& j, const GpuWindow& gpu, int64_t window_start_ns, bool with_records = true);

const char* gpu_kind_name(GpuRecordKind kind);

}  // namespace laggard
