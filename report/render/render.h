// Renderers of a scored run: plain text for people, JSON for tools and tests.
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

#include "analyses.h"
#include "json_text.h"
#include "model.h"
#include "scores.h"

namespace laggard::report {

// With analyses, the verdict comes right after the problems and the analyses at the end;
// `top` bounds the rows of per-rank, per-step and per-kernel tables.
void render_text(const RunModel& model, const ScoreReport& scores, std::ostream& out,
                 const Analyses* analyses = nullptr, size_t top = 5);
// The report's own members, the big per-rank arrays written straight to text (issue 29); they
// refer to `model` and `scores`, which must outlive them.
JsonObjectParts render_json_parts(const RunModel& model, const ScoreReport& scores);
// The same as a DOM (parsed back from the text).
nlohmann::json render_json(const RunModel& model, const ScoreReport& scores);

}  // namespace laggard::report
