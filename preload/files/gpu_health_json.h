// A window's "gpu_health" object (docs/schema.md, "Version 4: GPU health").
#pragma once

#include "gpu_health_window.h"
#include "json_out.h"

namespace laggard {
void render_gpu_health(JsonOut& j, const GpuHealthWindow& w);
}  // namespace laggard
