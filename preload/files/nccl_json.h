// Renders a window's NCCL operations (docs/schema.md, "nccl") for the writer.
#pragma once

#include "json_out.h"
#include "nccl_window.h"

namespace laggard {

// Writes `"nccl": {...}` into the open window object. Times are offsets from window_start_ns.
void render_nccl(JsonOut& j, const NcclWindow& w, int64_t window_start_ns);

}  // namespace laggard
