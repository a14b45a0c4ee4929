// Renderers of the analyses (verdict, steps, jitter, HTA breakdowns, diff).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "analyses.h"
#include "diff.h"
#include "json_text.h"

namespace laggard::report {

void render_verdict_text(const Analyses& a, std::ostream& out);
// `thresholds`: the score thresholds, so that scores near one show the digits that decide.
void render_analyses_text(const RunModel& model, const Analyses& a, size_t top, std::ostream& out,
                          const ScoreOptions* thresholds = nullptr);
// The analyses' members of the JSON report; they refer to `a`, which must outlive them.
JsonObjectParts render_analyses_json_parts(const RunModel& model, const Analyses& a);
// The same as a DOM (parsed back from the text).
nlohmann::json render_analyses_json(const RunModel& model, const Analyses& a);

void render_diff_text(const RunDiff& d, size_t top, std::ostream& out);
nlohmann::json render_diff_json(const RunDiff& d);

}  // namespace laggard::report
