// The GPU part of the report: per-rank kernel totals, data completeness, NVRx GPU scores (rank
// and per section) and the top kernels per section.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "gpu_scores.h"
#include "model.h"

namespace laggard::report {

void render_gpu_text(const RunModel& model, const GpuScoreReport& gpu, std::ostream& out);
nlohmann::json render_gpu_json(const RunModel& model, const GpuScoreReport& gpu);

}  // namespace laggard::report
