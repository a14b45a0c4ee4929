// The GPU part of the report: per-rank kernel totals, data completeness, NVRx GPU scores (rank
// and per section) and the top kernels per section.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "gpu_scores.h"
#include "json_text.h"
#include "model.h"

namespace laggard::report {

// `top` bounds the per-rank and per-section tables of large runs (text_lists.h, rows_shown);
// scores near a threshold show the digits that decide (score_text.h).
void render_gpu_text(const RunModel& model, const GpuScoreReport& gpu, std::ostream& out,
                     size_t top = static_cast<size_t>(-1), const ScoreOptions& thresholds = {});
// The "gpu" object of the JSON report, its per-rank and per-window arrays on every core.
void write_gpu_json(JsonWriter& w, const GpuScoreReport& gpu);
// The same as a DOM (parsed back from the text).
nlohmann::json render_gpu_json(const RunModel& model, const GpuScoreReport& gpu);

}  // namespace laggard::report
